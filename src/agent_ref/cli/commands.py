"""``agent-ref``: run the reference agent from a shell, streaming SSE envelopes to stdout.

Owns: argument parsing, choosing the model (offline scripted by default, Claude with
``--model``, a recording with ``--replay``), the SQLite file, writing framed lines to
stdout (or a human view with ``--pretty``), and the pause message on stderr with the
exact command to resume (spec ``spec/agent-ref.md`` §9); the ``log``, ``runs`` and
``abandon`` subcommands; exit statuses, the error style and the quiet exit on a closed
pipe (spec ``spec/cli-agent-ref.md``).
Does not own: the agent (``agent.py``), the options shared with ``serve``
(``cli/flags.py``), the ``serve`` command (``cli/serve.py``). Stdout carries only the stream (or ``runs``'
listing); logs and human messages go to stderr. No traceback is ever printed: errors are
one line ``WHERE: error: WHAT; WHAT TO DO``, exit 2 for unusable input, arguments or
state, 3 for a lost concurrent resume, 1 for a run that ended in an error, 141 when the
reader of stdout went away.

The agent, its models and the store are imported by the commands that use them, not at
import: ``--version`` and ``--help`` answer without loading the ``anthropic`` SDK (RC1-b).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shlex
import shutil
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from envelope import EnvelopeError, Reconstructor, frame
from envelope._extras import missing, needs

from .. import __version__
from ..defaults import DEFAULT_CLAUDE_MODEL
from ..errors import AgentRefError, ConflictError
from ..models.replay import ReplayError
from ..run.response import DONE_LINE
from ..tools.context import PROGRESS_TYPE, progress_note
from .diff import add_diff_command, diff_command
from .flags import (
    CliError,
    OneLineParser,
    add_agent_options,
    add_store_options,
    agent_config,
    check_db,
    formatter,
    mcp_tools,
    model_factory,
)
from .serve import add_serve_command
from .tasks_cmd import add_tasks_command, tasks_main
from .tools_cmd import add_tools_command, tools_main

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from ..agent import Agent, AgentResult
    from ..store.core import AgentSummary, Store
    from ..store.state import PendingCall

__all__ = ["CliError", "PrettyPrinter", "main"]

#: Exit statuses (spec ``spec/cli-agent-ref.md`` RC1).
EXIT_RUN_FAILED: Final = 1
EXIT_UNUSABLE: Final = 2
EXIT_CONFLICT: Final = 3
EXIT_INTERRUPTED: Final = 130
EXIT_BROKEN_PIPE: Final = 141
log = logging.getLogger("agent_ref")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _awaited(calls: Sequence[object]) -> str:
    """What a pause waits for, said as the person answering it reads it: approvals, frontend tools or both."""
    approvals = sum(1 for c in calls if isinstance(c, dict) and c.get("approval") is not None)
    said = []
    if len(calls) > approvals or not calls:
        said.append("frontend tools")
    if approvals:
        said.append("approval")
    return " and ".join(said)


def _usage_text(usage: Any) -> str:
    """Token counts as a person reads them: ``1,234 tokens in, 56 out (+ 10 cache read)``."""
    if not isinstance(usage, dict):
        return ""
    text = f"{usage.get('input_tokens', 0):,} tokens in, {usage.get('output_tokens', 0):,} out"
    extra = [
        f"{usage[key]:,} {label}"
        for key, label in (
            ("cache_creation_input_tokens", "cache written"),
            ("cache_read_input_tokens", "cache read"),
            ("web_search_requests", "web searches"),
        )
        if usage.get(key)
    ]
    return text + (f" (+ {', '.join(extra)})" if extra else "")


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
            self._error(prefix, block.get("data"))
        elif kind == "awaiting_frontend_tools":
            data = block.get("data")
            calls: list[object] = data if isinstance(data, list) else []
            self.out.write(prefix + self._style("35", f"⏸ waiting for {_awaited(calls)}") + "\n")
        elif kind == "meta_init":
            data = block.get("data") or {}
            resumed = " (resumed)" if isinstance(data, dict) and "resume" in data else ""
            self.out.write(
                prefix + self._style("2", f"agent {env['agent']} · model {data.get('model')}{resumed}") + "\n"
            )
        elif kind == "meta_final":
            data = block.get("data") or {}
            cost = (data.get("cost") or {}).get("total_usd")
            steps = data.get("total_steps")
            parts = [f"done ({data.get('stop_reason')})"]
            if isinstance(steps, int):
                parts.append(_plural(steps, "model call"))
            usage = _usage_text(data.get("cumulative_usage"))
            if usage:
                parts.append(usage)
            if isinstance(cost, int | float):
                parts.append(f"${cost:.4f}")
            self.out.write(prefix + self._style("2", " · ".join(parts)) + "\n")
        elif kind == "meta_files":
            data = block.get("data")
            files = data.get("files") if isinstance(data, dict) else None
            names = [str(f.get("filename")) for f in files if isinstance(f, dict)] if isinstance(files, list) else []
            self.out.write(prefix + self._style("36", f"files: {', '.join(names) or '(none)'}") + "\n")
        elif kind == "meta_status":
            self._status(prefix, block.get("data"))
        elif kind == "meta_compaction":  # agent-ref spec §15.2-c: the boundary, never dropped (issue 24 §7)
            data = block.get("data")
            data = data if isinstance(data, dict) else {}
            text = f"context compacted ({data.get('trigger', '?')}, {data.get('strategy', '?')})"
            if isinstance(data.get("messages_before"), int) and isinstance(data.get("messages_after"), int):
                text += f": {data['messages_before']} → {data['messages_after']} messages"
            if isinstance(data.get("pre_tokens"), int):
                text += f", {data['pre_tokens']:,} tokens before"
            self.out.write(prefix + self._style("2", f"── {text} ──") + "\n")

    def _status(self, prefix: str, data: object) -> None:
        """A ``meta_status`` block (envelope-v1 §4.16): a dim status line, never shown as an error."""
        data = data if isinstance(data, dict) else {}
        kind = data.get("kind")
        if kind == PROGRESS_TYPE:
            text = f"  … {progress_note(data)}"
        elif kind in ("step_start", "step_finish"):
            return  # the run's rhythm: the closing summary line already gives its usage and cost
        else:
            detail = data.get("message") or data.get("phase") or data.get("state") or data.get("outcome") or ""
            text = f"  {kind or 'status'}: {detail}"
        self.out.write(prefix + self._style("2", text) + "\n")

    def _error(self, prefix: str, data: object) -> None:
        """An ``error`` block: a dim note for tool progress (spec R2.6-b), red otherwise."""
        if isinstance(data, dict) and data.get("type") == PROGRESS_TYPE:
            self.out.write(prefix + self._style("2", f"  … {progress_note(data)}") + "\n")
            return
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            text = f"{data.get('type', 'error')}: {data['message']}"
        else:
            text = json.dumps(data, ensure_ascii=False)
        self.out.write(prefix + self._style("31", f"error: {text}") + "\n")


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


def _program(argv0: str | None = None) -> list[str]:
    """How the user's shell starts this ``agent-ref`` again, for a printed command (spec RC11-d).

    ``agent-ref`` when that name finds this very program on ``PATH`` (an activated venv, an
    installed tool); else the running entry point by its absolute path (``.venv/bin/agent-ref``
    as ``./scripts/demo`` starts it, from a shell that did not activate the venv); for
    ``python -m agent_ref``, this interpreter with ``-m agent_ref``.
    """
    argv0 = sys.argv[0] if argv0 is None else argv0
    if os.path.basename(argv0) == "__main__.py":
        return [sys.executable, "-m", "agent_ref"]
    if not argv0 or not os.path.isfile(argv0):
        return ["agent-ref"]
    found = shutil.which("agent-ref")
    if found is not None and os.path.samefile(found, argv0):
        return ["agent-ref"]
    return [os.path.abspath(argv0)]


def _resume_command(args: argparse.Namespace, agent_uuid: str) -> str:
    """The ``resume`` command that goes on with this run, every agent option it had carried (spec [WM1-b]).

    Each option ``resume`` shares with ``run`` whose value is not its default is written
    again (the rules under their ``resume`` spelling, ``--allow-tool``), so the resumed run
    rebuilds the same tools (``--workspace``, ``--unsandboxed-bash``, ``--mcp-config``,
    ``--memory``, ``--subagents``), limits and permissions.
    """
    parts = [*_program(), "resume", agent_uuid, "--db", str(args.db)]
    for dest, default in _resume_agent_defaults().items():
        value = getattr(args, dest, default)
        if value == default or value is None:
            continue
        flag = f"--{dest.removesuffix('_rules')}-tool" if dest.endswith("_rules") else f"--{dest.replace('_', '-')}"
        if isinstance(value, bool):
            parts.append(flag)
        elif isinstance(value, list):
            for item in value:
                parts += [flag, str(item)]
        else:
            parts += [flag, str(value)]
    if args.pretty:
        parts.append("--pretty")
    parts += ["--results", "-"]
    return shlex.join(parts)


def _resume_agent_defaults() -> dict[str, Any]:
    """The agent and permission options of ``resume`` by dest, with their defaults (``add_agent_options``).

    Each is spelled ``--DEST`` with dashes, the rules ``--allow-tool`` and the like.
    """
    probe = argparse.ArgumentParser(add_help=False)
    add_agent_options(probe, resume=True)
    return vars(probe.parse_args([]))


def _counted(calls: Sequence[PendingCall]) -> str:
    """``1 frontend tool call``, ``2 calls awaiting approval``, or both joined by ``and``."""
    approvals = sum(1 for c in calls if c.approval is not None)
    said = [_plural(len(calls) - approvals, "frontend tool call")] if len(calls) > approvals else []
    if approvals:
        said.append(_plural(approvals, "call") + " awaiting approval")
    return " and ".join(said)


def _report(args: argparse.Namespace, result: AgentResult) -> int:
    err = sys.stderr
    if result.stop_reason == "awaiting_frontend_tools":
        calls = result.pending_frontend_tools
        err.write(f"agent-ref: paused: agent {result.agent_uuid} waits for {_counted(calls)}:\n")
        for call in calls:
            err.write(f"  {call.tool_use_id}  {call.name}({json.dumps(call.input, ensure_ascii=False)})\n")
            if call.approval is not None:
                err.write(f"    needs approval: {call.approval}\n")
        if all(c.approval is not None for c in calls):
            _report_approvals(args, result)
            return 0
        example = [{"tool_use_id": c.tool_use_id, "content": "yes"} for c in calls]
        err.write('agent-ref: answer with a JSON array of {"tool_use_id", "content", "is_error"?}, for example:\n')
        err.write(f"  echo {shlex.quote(json.dumps(example))} | {_resume_command(args, result.agent_uuid)}\n")
        return 0
    cost = f", ${result.cost_usd:.4f}" if result.cost_usd is not None else ""
    err.write(
        f"agent-ref: {result.stop_reason} after {_plural(result.steps, 'model call')}{cost}; "
        f"run {result.run_id}, agent {result.agent_uuid}\n"
    )
    if result.stop_reason in ("error", "aborted"):
        if result.error:
            err.write(f"agent-ref {args.command}: error: {result.error}\n")
        return EXIT_RUN_FAILED
    return 0


def _report_approvals(args: argparse.Namespace, result: AgentResult) -> None:
    """The resume commands that approve, or deny, every call the run waits on (spec RC11-c)."""
    base = _resume_command(args, result.agent_uuid).removesuffix(" --results -")
    ids = [c.tool_use_id for c in result.pending_frontend_tools]
    approve = " ".join(f"--approve {shlex.quote(i)}" for i in ids)
    deny = " ".join(f"--deny {shlex.quote(i)}" for i in ids)
    sys.stderr.write("agent-ref: approve with (--input JSON to change the input of one call):\n")
    sys.stderr.write(f"  {base} {approve}\n")
    sys.stderr.write("agent-ref: or deny with (--message TEXT to tell the model why):\n")
    sys.stderr.write(f"  {base} {deny}\n")


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


async def _stream(
    args: argparse.Namespace,
    verb: str,
    open_agent: Callable[[Any, dict[str, Any]], Awaitable[Agent]],
    drive: Callable[[Agent, _Announce], Awaitable[AgentResult]],
) -> int:
    """The body of ``run`` and ``resume``: open the agent, stream its answer to stdout, report on stderr."""
    config = agent_config(args)
    model = model_factory(args)()
    async with mcp_tools(args, config):  # spec/agent-ref.md R19.6-b: the MCP servers live as long as the run
        agent = await open_agent(model, config)
        result = await _with_abort(agent, drive(agent, _Announce(agent, _sink(args), verb)))
    return _report(args, result)


async def _run(args: argparse.Namespace) -> int:
    check_db(args.db, must_exist=False)
    return await _stream(
        args,
        "started",
        lambda model, config: _session_agent(args, model, config),
        lambda agent, sink: agent.run(args.prompt, sink),
    )


async def _session_agent(args: argparse.Namespace, model: Any, config: dict[str, Any]) -> Agent:
    """A new agent, or ``--agent``'s stored one continued, forked first with ``--fork`` (spec RCSE1-a)."""
    from ..agent import Agent

    store = _store(args.db)
    if args.agent is None:
        if args.fork:
            raise CliError("agent-ref run", "--fork needs --agent AGENT_UUID (the agent to fork)")
        return Agent(model, store=store, **config)
    if await store.load(args.agent) is None:
        raise _not_stored(args.agent, args.db)
    config = {k: v for k, v in config.items() if k != "agent_uuid"}
    agent = await Agent.load(args.agent, store, model, **config)
    if args.fork:
        agent = await agent.fork()
        sys.stderr.write(f"agent-ref: forked agent {agent.agent_uuid} from {args.agent}\n")
    return agent


def _not_stored(agent_uuid: str, db: str) -> CliError:
    """The error for an agent ``--db`` does not hold."""
    return CliError(f"agent {agent_uuid}", f"not in {db}", f"`agent-ref runs --db {db}` lists them")


async def _stored_agent(args: argparse.Namespace) -> Agent:
    """The stored agent ``agent_uuid`` names, for a command that calls no model (``abandon``, ``rewind``).

    Its stored model's name only prices what the command closes (a paused run's abandon).
    """
    from ..agent import Agent
    from ..models.scripted import ScriptedModel

    check_db(args.db, must_exist=True)
    store = _store(args.db)
    stored = await store.load(args.agent_uuid)
    if stored is None:
        raise _not_stored(args.agent_uuid, args.db)
    return await Agent.load(args.agent_uuid, store, ScriptedModel(name=stored.model))


async def _rewind(args: argparse.Namespace) -> int:
    agent = await _stored_agent(args)
    done = await agent.rewind(step=args.to_step, run=args.to_run)
    abandoned = f"; abandoned the paused run {done.abandoned_run}" if done.abandoned_run else ""
    dropped = ", ".join(done.dropped_runs) or "none"
    report = done.files  # spec [IN4-a]: the files put back with the history
    files = (
        f"; files as of step {report.to_step} (file steps undone: {', '.join(map(str, report.undone_steps))}; "
        f"{len(report.restored)} restored, {len(report.removed)} removed)"
        if report is not None
        else "; no recorded file change to revert"
    )
    sys.stderr.write(
        f"agent-ref: rewound agent {agent.agent_uuid} to step {done.step} ({done.kept_messages} messages kept; "
        f"runs dropped from the context: {dropped}{abandoned}{files})\n"
    )
    return 0


def _read_results(source: str) -> Any:
    where = "<stdin>" if source == "-" else source
    try:
        if source == "-":
            if sys.stdin is None:
                raise CliError(where, "standard input is closed", "pipe the results in, or pass --results FILE")
            text = sys.stdin.read()
        else:
            text = Path(source).read_text(encoding="utf-8")
    except IsADirectoryError:
        raise CliError(where, "is a directory, not a results file", "pass a JSON file, or - for stdin") from None
    except FileNotFoundError:
        raise CliError(where, "no such file", "pass the JSON file with the results, or - for stdin") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(where, f"cannot read it ({_reason(exc)})", "check the file and its permissions") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{where}:{exc.lineno}:{exc.colno}",
            f"results are not JSON: {exc.msg}",
            'give a JSON array of {"tool_use_id", "content", "is_error"?}',
        ) from None


def _approval_answers(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The answers ``--approve ID [--input JSON]`` and ``--deny ID [--message TEXT]`` build (spec RC11-b).

    Raises:
        CliError: neither --results nor an answer, an --input that is not a JSON object, or
            an --input / --message that does not say which call it is for.
    """
    if not args.approve and not args.deny:
        raise CliError("resume", "nothing to answer with", "pass --results FILE|-, or --approve ID / --deny ID")
    if args.input is not None and len(args.approve) != 1:
        raise CliError("--input", "applies to exactly one --approve", "approve the other calls in another resume")
    answers: list[dict[str, Any]] = []
    for call in args.approve:
        answer: dict[str, Any] = {"tool_use_id": call, "decision": "approve"}
        if args.input is not None:
            try:
                answer["updated_input"] = json.loads(args.input)
            except json.JSONDecodeError as exc:
                raise CliError(
                    "--input", f"is not JSON: {exc.msg}", 'pass a JSON object, e.g. \'{"path": "x"}\''
                ) from None
            if not isinstance(answer["updated_input"], dict):
                raise CliError("--input", "is not a JSON object", 'pass a JSON object, e.g. \'{"path": "x"}\'')
        answers.append(answer)
    for call in args.deny:
        denial: dict[str, Any] = {"tool_use_id": call, "decision": "deny"}
        if args.message is not None:
            denial["message"] = args.message
        answers.append(denial)
    return answers


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


async def _resume(args: argparse.Namespace) -> int:
    from ..agent import Agent

    check_db(args.db, must_exist=True)
    results = _approval_answers(args) if args.results is None else _read_results(args.results)
    return await _stream(
        args,
        "resumed",
        lambda model, config: Agent.load(args.agent_uuid, _store(args.db), model, **config),
        lambda agent, sink: agent.continue_with_tool_results(results, sink),
    )


async def _recover(args: argparse.Namespace) -> int:
    """Continue (or close) a run whose process died, streaming the continuation (spec/agent-ref.md [CK1.4-a])."""
    from ..agent import Agent

    check_db(args.db, must_exist=True)
    config = agent_config(args)
    model = model_factory(args)()
    async with mcp_tools(args, config):
        agent = await Agent.load(args.agent_uuid, _store(args.db), model, **config)
        deadline = time.monotonic() + args.wait
        while agent.lease_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)  # --wait: the dead owner's lease runs out
            await agent.reload()
        if agent.state.status != "running":
            raise CliError(f"agent {args.agent_uuid}", f"is {agent.state.status}, not running", "nothing to recover")
        result = await _with_abort(agent, agent.recover(_Announce(agent, _sink(args), "continued")))
    if result is None:
        sys.stderr.write(f"agent-ref: agent {args.agent_uuid} is {agent.state.status} again\n")
        return 0
    return _report(args, result)


async def _log(args: argparse.Namespace) -> int:
    check_db(args.db, must_exist=True)
    responses = await _store(args.db).run_responses(args.run_id)
    if not responses:
        raise CliError(
            f"run {args.run_id}",
            f"no envelope log in {args.db}",
            "`agent-ref run` prints the run id on stderr when it starts; `agent-ref runs` lists agents",
        )
    if args.response is not None:
        # spec RC5-b: the wire's response index (X-Response-Index, the event ids), 0 the first.
        if not 0 <= args.response < len(responses):
            raise CliError(
                f"run {args.run_id}",
                f"it has {_plural(len(responses), 'response')}",
                f"--response takes 0 to {len(responses) - 1} (the wire's response index, 0 the first)",
            )
        responses = [responses[args.response]]
    sink = _sink(args)
    for response in responses:
        for line in response:
            sink(line)
    return 0


def _owner_alive(agent: AgentSummary, now: float) -> bool | None:
    return agent.lease_alive(now) if agent.status == "running" else None


def _describe(agent: AgentSummary, now: float, db: str, pending: list[PendingCall]) -> str:
    """One agent as a person reads it; the commands it suggests run as printed (spec RC5-c)."""
    abandon = shlex.join(["agent-ref", "abandon", agent.agent_uuid, "--db", db])
    if agent.status == "running":
        if agent.lease_alive(now):
            state = f"running (owner alive, lease renewed, {agent.lease_expires_at - now:.0f} s left)"
        else:
            state = (
                f"running, but its process is gone (lease ran out {now - agent.lease_expires_at:.0f} s ago): "
                f"the next run closes it, or `{abandon}`"
            )
    elif agent.status == "awaiting_frontend_tools":
        answers = json.dumps([{"tool_use_id": c.tool_use_id, "content": "yes"} for c in pending])
        resume = shlex.join(["agent-ref", "resume", agent.agent_uuid, "--db", db, "--results", "-"])
        calls = ", ".join(f"{c.name} {c.tool_use_id}" for c in pending)
        state = (
            f"paused for frontend tools ({calls}): `echo {shlex.quote(answers)} | {resume}` "
            f"(with the run's --model, --replay, --memory, if any), or `{abandon}`"
        )
    else:
        state = "idle"
    query = f' "{agent.user_query[:60]}"' if agent.user_query else ""
    run = f" run {agent.run_id}" if agent.run_id else ""
    return f"{agent.agent_uuid}  {state}{run}{query}"


async def _runs(args: argparse.Namespace) -> int:
    check_db(args.db, must_exist=True)
    store = _store(args.db)
    agents = await store.agents()
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
        state = await store.load(agent.agent_uuid) if agent.status == "awaiting_frontend_tools" else None
        pending = state.pending_frontend if state is not None else []
        sys.stdout.write(_describe(agent, now, args.db, pending) + "\n")
    return 0


async def _abandon(args: argparse.Namespace) -> int:
    agent = await _stored_agent(args)
    result = await agent.abandon(reason=args.reason)
    sys.stderr.write(
        f"agent-ref: closed run {result.run_id} of agent {result.agent_uuid} ({result.stop_reason}); "
        "the agent can run again\n"
    )
    return 0


async def _undo(args: argparse.Namespace) -> int:
    from ..tools.snapshots import restore_files

    check_db(args.db, must_exist=True)
    report = await restore_files(_store(args.db), args.agent_uuid, to_step=args.to_step)
    undone = ", ".join(map(str, report.undone_steps)) or "none"
    sys.stderr.write(
        f"agent-ref: agent {args.agent_uuid} files are as of step {report.to_step} (steps undone: {undone}; "
        f"{len(report.restored)} restored, {len(report.removed)} removed)\n"
    )
    return 0


async def _diff(args: argparse.Namespace) -> int:
    return await diff_command(args, _store)  # spec [WU1-g]


def _add_undo(sub: Any) -> None:
    undo = _subcommand(
        sub,
        "undo",
        help="put back the files the agent's tools changed after step N",
        description=(
            "Restore every file the agent's file-changing tools (the memory tool, tools declaring\n"
            "writes=) changed after its step N, and with a workspace everything any tool, MCP server\n"
            "or subprocess changed in it, as it was when step N ended (0: before any change): bytes,\n"
            "modes, links, directories. A file changed since by someone else refuses the whole undo;\n"
            "nothing is written then. `agent-ref diff AGENT --step N` shows what a step changed."
        ),
        epilog="example:\n  agent-ref undo AGENT_UUID --to-step 2",
    )
    _add_agent_uuid(undo)
    undo.add_argument("--to-step", type=int, required=True, metavar="N", help="the step to go back to (0 or more)")
    add_store_options(undo)


class _Formatter(logging.Formatter):
    """One line per record; the traceback only with ``--verbose``."""

    def __init__(self, *, verbose: bool) -> None:
        super().__init__("agent-ref: %(message)s")
        self.verbose = verbose

    def format(self, record: logging.LogRecord) -> str:
        if not self.verbose and (record.exc_info or record.exc_text):
            record = logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None})
        return super().format(record)


def _store(db: str | Path) -> Store:
    """The store ``--db`` names: a ``postgresql://`` URL (spec/scaleout.md) or a SQLite file."""
    # As store_pg.is_postgres_url, without importing psycopg for a SQLite file.
    if isinstance(db, str) and db.startswith(("postgresql://", "postgres://")):
        from ..store.postgres import PostgresStore

        return PostgresStore(db)
    from ..store.core import SQLiteStore

    return SQLiteStore(db)


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="agent-ref",
        formatter_class=formatter,
        description=(
            "The reference agent of the JSON envelope protocol. `run` sends a prompt to a model, runs its\n"
            "tools, and streams the answer to stdout as SSE envelope lines (`--pretty`: a human view).\n"
            "Runs are stored in an SQLite file (default ./agent-ref.db) so they can be paused, resumed,\n"
            "listed, replayed and abandoned; `serve` runs the same agent behind a web page. It uses the\n"
            "embedded offline model unless you ask for Claude with --model (needs ANTHROPIC_API_KEY)."
        ),
        epilog=(
            "examples:\n"
            '  agent-ref run "What is 5 + (10 * 2)?"            # offline, SSE lines on stdout\n'
            '  agent-ref run --pretty "Cite a source"          # a human view\n'
            '  agent-ref run "Hello" --model                   # Claude (ANTHROPIC_API_KEY)\n'
            "  agent-ref log RUN_ID --response 0 | envelope validate --strict -\n"
            "  agent-ref runs\n"
            "  agent-ref serve --subagents demo               # the page on http://127.0.0.1:8000/\n\n"
            "exit status: 0 done or paused; 1 the run ended with an error or was aborted; 2 unusable input,\n"
            "arguments or state; 3 another process resumed the agent first; 130 interrupted; 141 the reader\n"
            "of stdout went away."
        ),
    )
    parser.add_argument("--version", action="version", version=f"agent-ref {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(sub)
    _add_resume(sub)
    _add_recover(sub)
    _add_log(sub)
    _add_runs(sub)
    _add_abandon(sub)
    _add_rewind(sub)
    _add_undo(sub)
    add_diff_command(sub)
    add_serve_command(sub)
    from ..fleet.worker import add_worker_command  # issue 30 §5: `agent-ref worker` (spec cli-agent-ref, worker)

    add_worker_command(sub)
    add_tools_command(sub)  # issue 41 §8: `agent-ref tools` (spec cli-agent-ref RCT1)
    add_tasks_command(sub)  # issue 41 §6: `agent-ref tasks AGENT` (spec agent-ref [BJ1-a])
    return parser


def _subcommand(sub: Any, name: str, **texts: str) -> argparse.ArgumentParser:
    """A subcommand's parser: ``texts`` are its help, description and epilog."""
    parser: argparse.ArgumentParser = sub.add_parser(name, formatter_class=formatter, **texts)
    return parser


def _add_agent_uuid(p: argparse.ArgumentParser) -> None:
    p.add_argument("agent_uuid", help="the agent (printed by `run`, listed by `runs`)")


def _add_pretty(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pretty", action="store_true", help="a live human view instead of raw SSE lines")


def _add_run(sub: Any) -> None:
    run = _subcommand(
        sub,
        "run",
        help="run one prompt and stream the answer",
        description="Run one prompt: SSE envelope lines on stdout; the run id, summary and pauses on stderr.",
        epilog=(
            "examples:\n"
            '  agent-ref run "What is 5 + (10 * 2)?"\n'
            '  agent-ref run --pretty "Please confirm, then tell me what is 6 * 7"   # pauses for a frontend tool\n'
            '  agent-ref run --memory ./memories "Remember that I prefer tea."   # a memory tool over ./memories\n'
            '  agent-ref run --pretty "Research tides and volcanoes in parallel"   # two researcher subagents\n'
            f'  agent-ref run "Hello" --model                  # Claude, {DEFAULT_CLAUDE_MODEL} (ANTHROPIC_API_KEY)\n'
            '  agent-ref run --model claude-opus-4-5 "Hello"   # that Claude model'
        ),
    )
    run.add_argument("prompt", help="the user's message")
    run.add_argument("--agent", metavar="AGENT_UUID", help="continue this stored agent instead of a new one")
    run.add_argument("--fork", action="store_true", help="with --agent: fork it first and run the fork (a new agent)")
    _add_pretty(run)
    add_agent_options(run)
    add_store_options(run)


def _add_resume(sub: Any) -> None:
    resume = _subcommand(
        sub,
        "resume",
        help="continue a run paused for frontend tools",
        description=(
            "Continue a paused run with the frontend tool results (`run` prints the exact command). Give it\n"
            "the agent options the run had (--model, --replay, --memory, ...): they are not stored."
        ),
        epilog=(
            "example:\n"
            '  echo \'[{"tool_use_id": "toolu_...", "content": "yes"}]\' | agent-ref resume AGENT_UUID --results -'
        ),
    )
    resume.add_argument("agent_uuid", help="the paused agent (printed by `run`)")
    resume.add_argument("--results", metavar="FILE|-", help='JSON array of {"tool_use_id", "content", "is_error"?}')
    answers = resume.add_argument_group("approvals", "answer calls that wait for approval (instead of --results)")
    answers.add_argument("--approve", action="append", default=[], metavar="ID", help="run this call (repeatable)")
    answers.add_argument("--input", metavar="JSON", help="with one --approve: run the call with this input instead")
    answers.add_argument("--deny", action="append", default=[], metavar="ID", help="do not run this call (repeatable)")
    answers.add_argument(
        "--message", metavar="TEXT", help="with --deny: what the model is told (default: not approved)"
    )
    _add_pretty(resume)
    add_agent_options(resume, resume=True)
    add_store_options(resume)


def _add_recover(sub: Any) -> None:
    recover = sub.add_parser(
        "recover",
        formatter_class=formatter,
        help="continue a run whose process died from its last checkpoint",
        description=(
            "Recover an agent whose process died (its lease ran out): a run saved with --checkpoints is\n"
            "continued from its last step, streamed to stdout; one without is closed as lost. Give it the\n"
            "agent options the run had (--model, --memory, ...): they are not stored."
        ),
        epilog="example:\n  agent-ref recover AGENT_UUID --wait 30 --checkpoints",
    )
    recover.add_argument("agent_uuid", help="the agent (printed by `run`, listed by `runs`)")
    recover.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait for the lease to run out (default: 0)",
    )
    _add_pretty(recover)
    add_agent_options(recover, resume=True)
    add_store_options(recover)


def _add_log(sub: Any) -> None:
    show = _subcommand(
        sub,
        "log",
        help="print the stored envelope lines of a run",
        description=(
            "Print every response of a run as it was sent, in order: each a complete stream ending with\n"
            "[DONE], the next starting with its own meta_init (a paused and resumed run has two)."
        ),
        epilog=(
            "examples:\n  agent-ref log RUN_ID\n"
            "  agent-ref log RUN_ID --response 1 --pretty   # the second response (after a resume)"
        ),
    )
    show.add_argument("run_id", help="the run (printed by `run` on stderr; also in meta_init and meta_final)")
    _add_pretty(show)
    show.add_argument(
        "--response",
        type=int,
        metavar="N",
        help="print only response N: the wire's index, 0 the first, as in X-Response-Index and event ids "
        "(default: all)",
    )
    add_store_options(show)


def _add_runs(sub: Any) -> None:
    runs = _subcommand(
        sub,
        "runs",
        help="list stored agents: idle, paused, running (owner alive or dead)",
        description=(
            "List the agents in the database, newest first, with their state. A running agent whose\n"
            "process died (its lease ran out) is shown as such; the next run closes it, or abandon it."
        ),
        epilog=(
            '--format json prints {"agents": [{"agent_uuid", "status", "run_id", "user_query", "owner",\n'
            '  "owner_alive" (true/false for running agents, else null), "lease_expires_at", "updated_at"}]}\n\n'
            "examples:\n  agent-ref runs\n  agent-ref runs --db other.db --format json"
        ),
    )
    runs.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    add_store_options(runs)


def _add_abandon(sub: Any) -> None:
    abandon = _subcommand(
        sub,
        "abandon",
        help="close a paused (or dead) run without its frontend tool results",
        description=(
            "Close a run paused for frontend tools: each pending call is answered as an error, the run\n"
            "ends as `abandoned`, and the agent can run again. A run whose process died is closed too."
        ),
        epilog='example:\n  agent-ref abandon AGENT_UUID --reason "the user closed the page"',
    )
    _add_agent_uuid(abandon)
    abandon.add_argument(
        "--reason", default="abandoned by the user", help="what the model is told (default: abandoned by the user)"
    )
    add_store_options(abandon)


def _add_rewind(sub: Any) -> None:
    rewind = _subcommand(
        sub,
        "rewind",
        help="drop an agent's history after a step (or from a run on)",
        description=(
            "Rewind an agent's context: keep its first N steps (assistant turns), or what it was before a\n"
            "run. Run records and logs are kept. A paused agent is rewound only to before its paused run,\n"
            "which is abandoned. The files the agent changed after that point are put back first (what the\n"
            "memory tool and tools declaring writes= changed, and everything in its workspace); a file\n"
            "changed since by someone else refuses the whole rewind, and nothing changes then."
        ),
        epilog="examples:\n  agent-ref rewind AGENT_UUID --to-step 2\n  agent-ref rewind AGENT_UUID --to-run RUN_ID",
    )
    _add_agent_uuid(rewind)
    where = rewind.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-step", type=int, metavar="N", help="keep the first N steps of the context")
    where.add_argument("--to-run", metavar="RUN_ID", help="return to the context before this run")
    add_store_options(rewind)


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null, so the interpreter's last flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):
        pass


def _needs(what: str, extra: str) -> int:
    """Say in one line that ``what`` needs ``extra`` (no traceback); the exit status of unusable input."""
    with contextlib.suppress(OSError, AttributeError, ValueError):  # no stderr: the status still says it
        sys.stderr.write(f"agent-ref: error: {needs(what, extra)}\n")
    return EXIT_UNUSABLE


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``agent-ref`` (spec ``spec/cli-agent-ref.md``).

    Args:
        argv: the arguments (``sys.argv[1:]`` when ``None``).

    Returns:
        The exit status: 0 done or paused, 1 the run ended in an error or was aborted,
        2 unusable input, arguments or state, 3 a lost concurrent resume, 130
        interrupted, 141 the reader of stdout went away.
    """
    # issue 28: `pip install envelope-stream` is the codec alone; say which extra is missing, in one line.
    if missing("agent"):  # before parsing: --version and --help too
        return _needs("the agent", "agent")
    args = _parser().parse_args(argv)
    refused = _missing_extra(args)
    if refused is not None:
        return refused
    if args.command == "worker":  # its own event loop and logging (spec scaleout §6.4)
        from ..fleet.worker import worker_main

        return worker_main(args)
    if args.command == "serve":  # uvicorn runs its own event loop, outside asyncio.run
        from .serve import serve_main

        return serve_main(args)
    _log_to_stderr(verbose=args.verbose)
    return _run_command(args)


def _missing_extra(args: argparse.Namespace) -> int | None:
    """The exit status of a command whose extra is not installed (said in one line), or ``None``."""
    if args.command == "serve" and missing("server"):
        return _needs("agent-ref serve", "server")
    if str(getattr(args, "db", "")).startswith(("postgresql://", "postgres://")) and missing("postgres"):
        return _needs("a PostgreSQL --db", "postgres")
    return None


def _log_to_stderr(*, verbose: bool) -> None:
    """Warnings (and, with ``--verbose``, the agent's info) to stderr, one line each."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(verbose=verbose))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("agent_ref").setLevel(logging.INFO if verbose else logging.WARNING)


def _run_command(args: argparse.Namespace) -> int:
    """Run a command other than ``serve``; every failure is one line on stderr and its exit status."""
    command = {
        "run": _run,
        "resume": _resume,
        "recover": _recover,
        "log": _log,
        "runs": _runs,
        "abandon": _abandon,
        "rewind": _rewind,
        "undo": _undo,
        "tools": tools_main,
        "tasks": tasks_main,
        "diff": _diff,
    }[args.command]
    where = f"agent-ref {args.command}"
    try:
        return asyncio.run(command(args))
    except BrokenPipeError:  # spec RC3-a: the reader stopped reading; the run is stored closed
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except ConflictError as exc:
        runs = shlex.join(["agent-ref", "runs", "--db", str(args.db)])
        sys.stderr.write(f"{where}: error: {exc}; look at it with `{runs}`\n")
        return EXIT_CONFLICT
    except CliError as exc:
        sys.stderr.write(f"{exc}\n")
        return EXIT_UNUSABLE
    except sqlite3.DatabaseError as exc:  # a file that passed check_db's header test but is damaged
        sys.stderr.write(
            f"{args.db}: error: not a usable agent database ({exc}); pass --db the file `agent-ref run` used\n"
        )
        return EXIT_UNUSABLE
    except (AgentRefError, EnvelopeError, ReplayError) as exc:
        sys.stderr.write(f"{where}: error: {exc}\n")
        return EXIT_UNUSABLE
    except OSError as exc:
        place = exc.filename if isinstance(exc.filename, str) else where
        sys.stderr.write(f"{place}: error: {_reason(exc)}\n")
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        sys.stderr.write(f"{where}: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:  # never a traceback on the terminal
        sys.stderr.write(f"{where}: error: internal error ({type(exc).__name__}); rerun with -v for details\n")
        if getattr(args, "verbose", False):
            logging.getLogger("agent_ref").exception("internal error")
        return EXIT_RUN_FAILED
