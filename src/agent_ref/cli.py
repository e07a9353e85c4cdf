"""``agent-ref``: run the reference agent from a shell, streaming SSE envelopes to stdout.

Owns: argument parsing, choosing the model (offline scripted by default, Claude with
``--model``, a recording with ``--replay``), the SQLite file, writing framed lines to
stdout (or a human view with ``--pretty``), and the pause message on stderr with the
exact command to resume (spec ``spec/agent-ref.md`` §9).
Does not own: the agent (``agent.py``). Stdout carries only the stream; logs and human
messages go to stderr. No traceback is ever printed: errors are one line, exit 2 for
unusable input or arguments, 3 for a lost concurrent resume, 1 for a run that ended
in an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any, Final, TextIO

from envelope import EnvelopeError, Reconstructor, frame

from . import __version__
from .agent import DONE_LINE, Agent, AgentResult
from .demo_tools import default_tools
from .errors import AgentRefError, ConflictError
from .models import DEFAULT_CLAUDE_MODEL, AnthropicModel, Model, ReplayModel
from .replay import ReplayError
from .scripted import ScriptedModel
from .store import AgentSummary, SQLiteStore

__all__ = ["PrettyPrinter", "main"]

DEFAULT_DB: Final = "agent-ref.db"
log = logging.getLogger("agent_ref")


class PrettyPrinter:
    """A live human view of envelope lines: thinking dimmed, text, tool calls and results, per agent."""

    def __init__(self, out: TextIO, *, color: bool) -> None:
        """Write to ``out``; ANSI styles when ``color``."""
        self.out = out
        self.color = color
        self.rebuilder = Reconstructor()
        self.current: tuple[str, str] | None = None
        self.agents: list[str] = []

    def _style(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def _prefix(self, agent: str) -> str:
        if agent not in self.agents:
            self.agents.append(agent)
        return f"[{agent[:8]}] " if len(self.agents) > 1 else ""

    def __call__(self, line: bytes) -> None:
        """Show one line."""
        self.rebuilder.feed(line)
        if line == DONE_LINE:
            self._break()
            # The end of one response; a run log may hold the next one after it (spec §9.2-a).
            self.rebuilder = Reconstructor()
            return
        env: dict[str, Any] = json.loads(line)
        kind, agent, delta = env["type"], env["agent"], env.get("delta", "")
        prefix = self._prefix(agent)
        if kind in ("text", "thinking"):
            if self.current != (agent, kind):
                self._break()
                label = "thinking: " if kind == "thinking" else ""
                self.out.write(prefix + self._style("2", label))
                self.current = (agent, kind)
            self.out.write(self._style("2", delta) if kind == "thinking" else delta)
            if env["final"]:
                self._break()
        elif env["final"] or kind == "tool_result_image":
            self._break()
            self._block(prefix, kind, env)
        self.out.flush()

    def _break(self) -> None:
        if self.current is not None:
            self.out.write("\n")
            self.current = None

    def _block(self, prefix: str, kind: str, env: dict[str, Any]) -> None:
        """Print a completed buffered block, read back from the reconstructor."""
        if kind == "tool_result_image":
            self.out.write(prefix + self._style("36", f"  [image {env.get('media_type')}]") + "\n")
            return
        blocks = self.rebuilder.transcript().agents.get(env["agent"], ())
        block = blocks[-1].to_dict() if blocks else {}
        if kind == "citation":
            for c in blocks_citations(blocks):
                self.out.write(
                    prefix + self._style("36", f"  [cites {c.get('document_title', '?')}: {c['cited_text']!r}]") + "\n"
                )
        elif kind in ("tool_call", "server_tool_call"):
            arguments = json.dumps(block.get("input"), ensure_ascii=False)
            self.out.write(prefix + self._style("33", f"→ {block.get('name')}({arguments})") + "\n")
        elif kind in ("tool_result", "server_tool_result"):
            self.out.write(prefix + self._style("32", f"← {block.get('name')}: {block.get('content')}") + "\n")
        elif kind == "error":
            self.out.write(
                prefix + self._style("31", f"error: {json.dumps(block.get('data'), ensure_ascii=False)}") + "\n"
            )
        elif kind == "awaiting_frontend_tools":
            self.out.write(prefix + self._style("35", "⏸ waiting for frontend tools") + "\n")
        elif kind == "meta_init":
            data = block.get("data") or {}
            resumed = " (resumed)" if isinstance(data, dict) and "resume" in data else ""
            self.out.write(
                prefix + self._style("2", f"agent {env['agent']} · model {data.get('model')}{resumed}") + "\n"
            )
        elif kind == "meta_final":
            data = block.get("data") or {}
            cost = (data.get("cost") or {}).get("total_usd")
            summary = (
                f"done: {data.get('stop_reason')} · {data.get('total_steps')} steps"
                f" · usage {data.get('cumulative_usage')}"
            )
            self.out.write(prefix + self._style("2", summary + (f" · ${cost}" if cost is not None else "")) + "\n")
        elif kind == "meta_files":
            self.out.write(
                prefix + self._style("36", f"files: {json.dumps(block.get('data'), ensure_ascii=False)}") + "\n"
            )


def blocks_citations(blocks: Any) -> list[dict[str, Any]]:
    """The citations of the last text block among ``blocks``."""
    for block in reversed(blocks):
        if block.type == "text":
            return [dict(c) for c in block.citations]
    return []


class _SSEOut:
    def __init__(self) -> None:
        self.buffer = sys.stdout.buffer

    def __call__(self, line: bytes) -> None:
        self.buffer.write(frame(line))
        self.buffer.flush()


def _model(args: argparse.Namespace) -> Model:
    if args.replay:
        return ReplayModel.from_file(args.replay)
    if args.model:
        return AnthropicModel(args.model)
    return ScriptedModel()


def _agent_config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {"tools": default_tools(), "max_steps": args.max_steps, "max_bytes": args.max_bytes}
    if args.max_budget_usd is not None:
        config["max_budget_usd"] = args.max_budget_usd
    if args.thinking:
        config["thinking_budget"] = args.thinking
        config["max_tokens"] = max(args.max_tokens, args.thinking + 1024)
    else:
        config["max_tokens"] = args.max_tokens
    return config


def _sink(args: argparse.Namespace) -> Any:
    if args.pretty:
        return PrettyPrinter(sys.stdout, color=sys.stdout.isatty())
    return _SSEOut()


async def _with_abort(agent: Agent, coro: Any) -> AgentResult:
    """Run ``coro``; Ctrl-C aborts the agent cleanly (the stream still ends properly)."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):  # platforms without signal handlers
        loop.add_signal_handler(signal.SIGINT, agent.abort)
    try:
        result: AgentResult = await coro
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    return result


def _resume_command(args: argparse.Namespace, agent_uuid: str) -> str:
    parts = ["agent-ref", "resume", agent_uuid, "--db", str(args.db)]
    if args.model:
        parts += ["--model", args.model]
    if args.replay:
        parts += ["--replay", str(args.replay)]
    if args.pretty:
        parts.append("--pretty")
    parts += ["--results", "-"]
    return shlex.join(parts)


def _report(args: argparse.Namespace, result: AgentResult) -> int:
    err = sys.stderr
    if result.stop_reason == "awaiting_frontend_tools":
        calls = result.pending_frontend_tools
        err.write(f"agent-ref: paused: agent {result.agent_uuid} waits for {len(calls)} frontend tool call(s):\n")
        for call in calls:
            err.write(f"  {call.tool_use_id}  {call.name}({json.dumps(call.input, ensure_ascii=False)})\n")
        example = [{"tool_use_id": c.tool_use_id, "content": "yes"} for c in calls]
        err.write('agent-ref: answer with a JSON array of {"tool_use_id", "content", "is_error"?}, for example:\n')
        err.write(f"  echo {shlex.quote(json.dumps(example))} | {_resume_command(args, result.agent_uuid)}\n")
        return 0
    cost = f", ${result.cost_usd}" if result.cost_usd is not None else ""
    err.write(f"agent-ref: {result.stop_reason} after {result.steps} step(s){cost}; agent {result.agent_uuid}\n")
    if result.stop_reason in ("error", "aborted"):
        if result.error:
            err.write(f"agent-ref: error: {result.error}\n")
        return 1
    return 0


class _Announce:
    """Passes lines on; before the first, says on stderr which run and agent this is (spec §9.1-b)."""

    def __init__(self, agent: Agent, sink: Any, verb: str) -> None:
        self.agent = agent
        self.sink = sink
        self.verb = verb
        self.announced = False

    def __call__(self, line: bytes) -> Any:
        if not self.announced:
            self.announced = True
            run = self.agent.state.run
            run_id = run.run_id if run is not None else "?"
            sys.stderr.write(f"agent-ref: {self.verb} run {run_id} (agent {self.agent.agent_uuid})\n")
            sys.stderr.flush()
        return self.sink(line)


async def _run(args: argparse.Namespace) -> int:
    store = SQLiteStore(args.db)
    agent = Agent(_model(args), store=store, **_agent_config(args))
    result = await _with_abort(agent, agent.run(args.prompt, _Announce(agent, _sink(args), "started")))
    return _report(args, result)


async def _resume(args: argparse.Namespace) -> int:
    if not Path(args.db).exists():
        raise AgentRefError(f"{args.db}: no such database (pass the --db the paused run used)")
    text = sys.stdin.read() if args.results == "-" else Path(args.results).read_text(encoding="utf-8")
    try:
        results = json.loads(text)
    except json.JSONDecodeError as exc:
        where = "<stdin>" if args.results == "-" else args.results
        raise AgentRefError(f"{where}:{exc.lineno}:{exc.colno}: results are not JSON: {exc.msg}") from None
    store = SQLiteStore(args.db)
    agent = await Agent.load(args.agent_uuid, store, _model(args), **_agent_config(args))
    result = await _with_abort(
        agent, agent.continue_with_tool_results(results, _Announce(agent, _sink(args), "resumed"))
    )
    return _report(args, result)


async def _log(args: argparse.Namespace) -> int:
    if not Path(args.db).exists():
        raise AgentRefError(f"{args.db}: no such database")
    responses = await SQLiteStore(args.db).run_responses(args.run_id)
    if not responses:
        raise AgentRefError(f"no envelope log for run {args.run_id} in {args.db}")
    if args.response is not None:
        # spec §9.2-a: one response, counted from 1 as people count.
        if not 1 <= args.response <= len(responses):
            raise AgentRefError(
                f"run {args.run_id} has {len(responses)} response(s); --response takes 1 to {len(responses)}"
            )
        responses = [responses[args.response - 1]]
    sink = _sink(args)
    for response in responses:
        for line in response:
            sink(line)
    return 0


def _need_db(args: argparse.Namespace) -> None:
    if not Path(args.db).is_file():
        raise AgentRefError(f"{args.db}: no such database (pass --db, the file `agent-ref run` used)")


def _owner_alive(agent: AgentSummary, now: float) -> bool | None:
    return agent.lease_alive(now) if agent.status == "running" else None


def _describe(agent: AgentSummary, now: float) -> str:
    """One agent as a person reads it."""
    if agent.status == "running":
        if agent.lease_alive(now):
            state = f"running (owner alive, lease renewed, {agent.lease_expires_at - now:.0f} s left)"
        else:
            state = (
                f"running, but its process is gone (lease ran out {now - agent.lease_expires_at:.0f} s ago): "
                f"the next run closes it, or `agent-ref abandon {agent.agent_uuid}`"
            )
    elif agent.status == "awaiting_frontend_tools":
        state = (
            f"paused for frontend tools: `agent-ref resume {agent.agent_uuid}` "
            f"or `agent-ref abandon {agent.agent_uuid}`"
        )
    else:
        state = "idle"
    query = f' "{agent.user_query[:60]}"' if agent.user_query else ""
    run = f" run {agent.run_id}" if agent.run_id else ""
    return f"{agent.agent_uuid}  {state}{run}{query}"


async def _runs(args: argparse.Namespace) -> int:
    _need_db(args)
    agents = await SQLiteStore(args.db).agents()
    now = time.time()
    if args.format == "json":
        rows = [
            {
                "agent_uuid": a.agent_uuid,
                "status": a.status,
                "run_id": a.run_id,
                "user_query": a.user_query,
                "owner": a.lease_owner,
                "owner_alive": _owner_alive(a, now),
                "lease_expires_at": a.lease_expires_at or None,
                "updated_at": a.updated_at,
            }
            for a in agents
        ]
        sys.stdout.write(json.dumps({"agents": rows}, ensure_ascii=False, indent=2) + "\n")
        return 0
    if not agents:
        sys.stdout.write(f"no agents in {args.db}\n")
    for agent in agents:
        sys.stdout.write(_describe(agent, now) + "\n")
    return 0


async def _abandon(args: argparse.Namespace) -> int:
    _need_db(args)
    store = SQLiteStore(args.db)
    stored = await store.load(args.agent_uuid)
    if stored is None:
        raise AgentRefError(f"no agent {args.agent_uuid} in {args.db} (`agent-ref runs --db {args.db}` lists them)")
    # No model call happens: the stored model's name only prices the closed run.
    agent = await Agent.load(args.agent_uuid, store, ScriptedModel(name=stored.model))
    result = await agent.abandon(reason=args.reason)
    sys.stderr.write(
        f"agent-ref: closed run {result.run_id} of agent {result.agent_uuid} ({result.stop_reason}); "
        "the agent can run again\n"
    )
    return 0


class _Formatter(logging.Formatter):
    """One line per record; the traceback only with ``--verbose``."""

    def __init__(self, *, verbose: bool) -> None:
        super().__init__("agent-ref: %(message)s")
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        if not self.verbose and (record.exc_info or record.exc_text):
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        return super().format(record)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-ref",
        description="The reference agent of the JSON envelope protocol: streams SSE envelopes to stdout.",
    )
    parser.add_argument("--version", action="version", version=f"agent-ref {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--pretty", action="store_true", help="a live human view instead of raw SSE lines")
        p.add_argument(
            "--model",
            nargs="?",
            const=DEFAULT_CLAUDE_MODEL,
            help=f"use Claude (needs ANTHROPIC_API_KEY); default name {DEFAULT_CLAUDE_MODEL}",
        )
        p.add_argument(
            "--replay", type=Path, metavar="FILE", help="serve recorded API calls from FILE (JSON array of events)"
        )
        p.add_argument("--db", type=Path, default=Path(DEFAULT_DB), help=f"the SQLite file (default {DEFAULT_DB})")
        p.add_argument("--max-steps", type=int, default=8, help="model calls with tools per run (default 8)")
        p.add_argument("--max-tokens", type=int, default=2048, help="max_tokens per call (default 2048)")
        p.add_argument("--max-budget-usd", type=float, default=None, help="stop the run at this cost")
        p.add_argument("--max-bytes", type=int, default=2048, help="bound on each envelope line (default 2048)")
        p.add_argument("--thinking", type=int, default=0, metavar="TOKENS", help="enable extended thinking (Claude)")
        p.add_argument("-v", "--verbose", action="store_true", help="log retries and details to stderr")

    run = sub.add_parser("run", help="run one prompt")
    run.add_argument("prompt", help="the user's message")
    common(run)
    resume = sub.add_parser("resume", help="continue a run paused for frontend tools")
    resume.add_argument("agent_uuid", help="the paused agent (printed by `run`)")
    resume.add_argument("--results", required=True, metavar="FILE|-", help="JSON array of tool results, or - for stdin")
    common(resume)
    show = sub.add_parser("log", help="print the envelope log of a run (every line sent, in order)")
    show.add_argument("run_id", help="the run (from meta_init or meta_final)")
    show.add_argument("--db", type=Path, default=Path(DEFAULT_DB), help=f"the SQLite file (default {DEFAULT_DB})")
    show.add_argument("--pretty", action="store_true", help="a human view instead of raw SSE lines")
    show.add_argument(
        "--response", type=int, metavar="N", help="print only the run's N-th response (from 1); all by default"
    )
    show.add_argument("-v", "--verbose", action="store_true", help=argparse.SUPPRESS)
    runs = sub.add_parser("runs", help="list the stored agents: idle, paused, running (owner alive or dead)")
    runs.add_argument("--db", type=Path, default=Path(DEFAULT_DB), help=f"the SQLite file (default {DEFAULT_DB})")
    runs.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    runs.add_argument("-v", "--verbose", action="store_true", help=argparse.SUPPRESS)
    abandon = sub.add_parser("abandon", help="close a paused (or dead) run without its frontend tool results")
    abandon.add_argument("agent_uuid", help="the agent (printed by `run`, listed by `runs`)")
    abandon.add_argument("--db", type=Path, default=Path(DEFAULT_DB), help=f"the SQLite file (default {DEFAULT_DB})")
    abandon.add_argument("--reason", default="abandoned by the user", help="what the model is told")
    abandon.add_argument("-v", "--verbose", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``agent-ref``.

    Args:
        argv: the arguments (``sys.argv[1:]`` when ``None``).

    Returns:
        The exit status.
    """
    args = _parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(verbose=args.verbose))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("agent_ref").setLevel(logging.INFO if args.verbose else logging.WARNING)
    command = {"run": _run, "resume": _resume, "log": _log, "runs": _runs, "abandon": _abandon}[args.command]
    try:
        return asyncio.run(command(args))
    except ConflictError as exc:
        sys.stderr.write(f"agent-ref: conflict: {exc}\n")
        return 3
    except (AgentRefError, EnvelopeError, ReplayError, OSError) as exc:
        sys.stderr.write(f"agent-ref: {exc}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("agent-ref: interrupted\n")
        return 130
    except Exception as exc:  # never a traceback on the terminal
        sys.stderr.write(f"agent-ref: internal error ({type(exc).__name__}); rerun with -v for details\n")
        if getattr(args, "verbose", False):
            logging.getLogger("agent_ref").exception("internal error")
        return 1
