"""``agent-ref tools``: the agent's tools as JSON, and one call run as the agent runs it (issue 41 §8).

Owns: the ``tools`` subcommand (``add_tools_command``, ``tools_main``): ``agent-ref tools
[--workspace DIR [--unsandboxed-bash]]`` prints the tools' definitions (name, description, input_schema) as a
JSON array; ``agent-ref tools call NAME --workspace DIR --input JSON`` runs one call through
``run_tools`` (the agent's executor: its timeout, its result bound, permissions as
``full``) and prints its ``tool_result`` envelopes as SSE lines, in a whole stream
(``meta_init``, the ``tool_call``, its results, ``[DONE]``) so it is strictly valid (spec
``spec/cli-agent-ref.md`` RCT1). Does not own: the tools (``tools/demo.py``,
``tools/workspace/``), nor the executor (``tools/core.py``).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from .flags import CliError, formatter

if TYPE_CHECKING:
    import argparse

    from ..tools.core import Tool

__all__ = ["add_tools_command", "tools_main"]


def add_tools_command(sub: Any) -> None:
    """Register ``agent-ref tools`` on the subcommands ``sub``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "tools",
        formatter_class=formatter,
        help="list the agent's tools as JSON, or run one call",
        description=(
            "Print the agent's tools (name, description, input_schema) as a JSON array, or with\n"
            "`call NAME --input JSON` run one call as the agent would (its timeout and result bound,\n"
            "permissions as --permission-mode full) and print its tool_result envelopes as SSE."
        ),
        epilog=(
            "examples:\n"
            "  agent-ref tools --workspace .\n"
            '  agent-ref tools call Bash --workspace . --input \'{"command": "ls"}\'\n'
            '  agent-ref tools call Read --workspace . --input \'{"file_path": "README.md", "limit": 5}\''
        ),
    )
    p.add_argument("action", nargs="?", choices=("call",), help="call: run one call of the tool NAME")
    p.add_argument("name", nargs="?", metavar="NAME", help="the tool to call")
    p.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help="add the workspace tools over DIR, and Bash, BashOutput and KillShell in the sandbox",
    )
    p.add_argument(
        "--unsandboxed-bash",
        action="store_true",
        help="with --workspace, run Bash on the host without bubblewrap (spec RCW2-b)",
    )
    p.add_argument("--input", default="{}", metavar="JSON", help="the call's input, a JSON object (default: {})")
    p.add_argument("--max-bytes", type=int, default=2048, help="bound on each envelope line (default: 2048)")
    p.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")


def _tools(args: argparse.Namespace) -> list[Tool]:
    """The tools an agent built with these flags has, as ``AgentOptions`` builds them (spec [WM1-c]).

    The default ones, and with ``--workspace`` the five file tools and ``Bash``,
    ``BashOutput``, ``KillShell`` over it (``--unsandboxed-bash`` as ``run`` takes it).
    """
    from ..errors import ConfigError
    from ..run.options import AgentOptions
    from ..tools.demo import default_tools
    from .flags import workspace_config

    config = workspace_config(args)  # the same checks as run and serve (spec RCW2-b)
    try:
        return list(AgentOptions(tools=default_tools(), **config).tools)
    except ConfigError as exc:
        raise CliError(str(args.workspace), str(exc).split(": ", 1)[-1], "pass --workspace a directory") from None


def _input(text: str) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        raise CliError(
            "--input", f"is not JSON ({exc})", 'pass a JSON object such as \'{"file_path": "a.txt"}\''
        ) from None
    if not isinstance(value, dict):
        raise CliError("--input", f"is a JSON {type(value).__name__}, not an object", "pass a JSON object")
    return value


async def _call(tools: list[Tool], name: str, tool_input: dict[str, Any], max_bytes: int) -> tuple[list[bytes], bool]:
    from envelope import Emitter

    from ..run.options import DEFAULT_TOOL_TIMEOUT
    from ..run.response import DONE_LINE
    from ..tools.core import ToolCallRequest, run_tools
    from ..tools.result_bound import DEFAULT_MAX_TOOL_RESULT_BYTES

    lines: list[bytes] = []
    failed: list[bool] = []

    async def send(group: list[bytes]) -> None:
        lines.extend(group)

    call = ToolCallRequest(id=f"toolu_cli_{uuid.uuid4().hex[:12]}", name=name, input=tool_input)
    agent = str(uuid.uuid4())
    emitter = Emitter(agent, max_bytes)
    meta = {"format": "json", "user_query": f"agent-ref tools call {name}", "agent_uuid": agent, "model": "none"}
    meta["run_id"] = str(uuid.uuid4())
    lines += emitter.buffered("meta_init", msgspec.json.encode(meta).decode())  # a whole, valid stream
    lines += emitter.buffered("tool_call", msgspec.json.encode(tool_input).decode(), id=call.id, name=name)
    await run_tools(
        [call],
        {t.name: t for t in tools},
        emitter,
        send,
        timeout=DEFAULT_TOOL_TIMEOUT,
        max_result_bytes=DEFAULT_MAX_TOOL_RESULT_BYTES,
        on_result=lambda _call, done: failed.append(done.is_error),
    )
    return [*lines, DONE_LINE], any(failed)


async def tools_main(args: argparse.Namespace) -> int:
    """Run ``agent-ref tools``; the exit status (0 listed or called, 1 the call's result is an error).

    Raises:
        CliError: a missing NAME, an unknown tool, an input that is not a JSON object, a bad workspace.
    """
    tools = _tools(args)
    if args.action is None:
        if args.name is not None:
            raise CliError("agent-ref tools", f"unexpected {args.name!r}", "use `agent-ref tools call NAME`")
        sys.stdout.write(msgspec.json.format(msgspec.json.encode([t.definition() for t in tools])).decode() + "\n")
        return 0
    if args.name is None:
        raise CliError("agent-ref tools call", "needs the tool's NAME", "e.g. `agent-ref tools call Read --input '{}'`")
    known = {t.name for t in tools if t.executor == "backend"}
    if args.name not in known:
        raise CliError(args.name, "is not a backend tool of this agent", f"pick one of: {', '.join(sorted(known))}")
    lines, failed = await _call(tools, args.name, _input(args.input), args.max_bytes)
    from envelope import frame

    sys.stdout.buffer.write(b"".join(frame(line) for line in lines))
    sys.stdout.flush()
    return 1 if failed else 0
