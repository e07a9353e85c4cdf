"""What ``agent-ref run``, ``resume`` and ``serve`` share: the agent's options, the model, the database.

Owns: the command-line options that configure an agent (the model: ``--model``,
``--replay``; the agent: ``--max-steps`` … ``--loop-limit``, ``--subagents``; the store:
``--db``, ``-v``), written once and added to each command that runs an agent, and their
reading back into ``Agent`` arguments (``agent_config``) and a model factory
(``model_factory``); the error type of the command lines and their one-line argument
errors (spec ``spec/cli-agent-ref.md`` RC2-a, RC9). Does not own: the commands
(``cli/commands.py`` for run/resume/log/runs/abandon, ``cli/serve.py`` for serve).

Imports nothing heavy at module level: the parser is built for ``--help`` and
``--version``, which must not wait for the ``anthropic`` SDK or the web server (RC1-b).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

from ..defaults import DEFAULT_CLAUDE_MODEL, DEFAULT_DB
from ..errors import AgentRefError, ConfigError
from ..policy.permissions import PERMISSION_MODES
from ..run.loop_guard import DEFAULT_LOOP_LIMIT
from ..tools.result_bound import DEFAULT_MAX_TOOL_RESULT_BYTES, MIN_TOOL_RESULT_BYTES

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from ..models.core import Model

__all__ = [
    "SUBAGENT_SETS",
    "CliError",
    "OneLineParser",
    "add_agent_options",
    "add_store_options",
    "agent_config",
    "check_db",
    "formatter",
    "mcp_tools",
    "model_factory",
    "workspace_config",
]

#: ``--subagents`` values: the children registered with each agent (spec RC9-b).
SUBAGENT_SETS: Final = ("demo", "none")
#: The first bytes of every SQLite 3 database file (sqlite.org/fileformat.html §1.3).
SQLITE_HEADER: Final = b"SQLite format 3\x00"

MODEL_HELP: Final = (
    "Which model answers. By default the embedded offline model (scripted: deterministic, no network, no key). "
    f"--model alone uses Claude ({DEFAULT_CLAUDE_MODEL}); --model NAME uses that Claude model; both need "
    "ANTHROPIC_API_KEY in the environment. --replay FILE serves recorded API calls instead."
)


class CliError(AgentRefError):
    """An error of the command line, shown as ``WHERE: error: WHAT; WHAT TO DO`` (spec RC2-a)."""

    def __init__(self, where: str, what: str, todo: str = "") -> None:
        """Say where (a file, a run, a command, a flag), what went wrong, and what to do."""
        super().__init__(f"{where}: error: {what}" + (f"; {todo}" if todo else ""))


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line in the RC2 style, exit 2 (spec RC2-a).

    argparse's own error prints the usage, then the error: two or more lines, neither
    saying where help is. Here: ``agent-ref serve: error: argument --port: ...; see
    `agent-ref serve --help```. Subcommands inherit the class (``add_subparsers`` uses it).
    """

    def error(self, message: str) -> NoReturn:
        """Print one line and exit 2."""
        sys.stderr.write(f"{self.prog}: error: {message}; see `{self.prog} --help`\n")
        sys.exit(2)


def formatter(prog: str) -> argparse.HelpFormatter:
    """The help layout of every ``agent-ref`` command: descriptions and examples as written."""
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def add_store_options(p: argparse.ArgumentParser) -> None:
    """``--db`` and ``-v``, which every command has."""
    p.add_argument("--db", default=DEFAULT_DB, help=f"the SQLite file or a postgresql:// URL (default: {DEFAULT_DB})")
    p.add_argument("-v", "--verbose", action="store_true", help="log retries and details to stderr")


def add_agent_options(p: argparse.ArgumentParser, *, resume: bool = False) -> None:
    """The options of the agent a command runs: ``run``, ``resume`` and ``serve`` take the same (spec RC9-a)."""
    models = p.add_argument_group("model", MODEL_HELP)
    models.add_argument(
        "--model",
        nargs="?",
        const=DEFAULT_CLAUDE_MODEL,
        metavar="NAME",
        help=f"use Claude; NAME defaults to {DEFAULT_CLAUDE_MODEL}",
    )
    models.add_argument("--replay", type=Path, metavar="FILE", help="serve recorded API calls (JSON array of events)")
    agent = p.add_argument_group("agent")
    agent.add_argument("--max-steps", type=int, default=8, help="model calls with tools per run (default: 8)")
    agent.add_argument("--max-tokens", type=int, default=2048, help="max_tokens per call (default: 2048)")
    agent.add_argument("--max-budget-usd", type=float, default=None, help="stop the run at this cost (default: none)")
    agent.add_argument("--max-bytes", type=int, default=2048, help="bound on each envelope line (default: 2048)")
    agent.add_argument(
        "--profile",
        choices=("default", "seed"),
        default="default",
        help="seed: send control envelopes whole, for clients written to the seed (envelope-v1 §10; default: default)",
    )
    agent.add_argument(
        "--thinking", type=int, default=0, metavar="TOKENS", help="extended thinking budget (default: off)"
    )
    agent.add_argument(
        "--subagents",
        choices=SUBAGENT_SETS,
        default="demo",
        help="children the model may spawn: demo, a researcher with the confirm tool; none (default: demo)",
    )
    _add_memory_and_tools(agent)
    _add_workspace_and_files(agent)
    agent.add_argument(
        "--checkpoints",
        action="store_true",
        help="save each step so a run whose process died is continued (agent-ref recover), not lost",
    )
    add_permission_options(p, resume=resume)


def _add_workspace_and_files(agent: argparse._ArgumentGroup) -> None:
    """The agent options about the workspace the tools work in and where produced files are kept."""
    agent.add_argument(
        "--workspace",
        type=Path,
        default=None,
        metavar="DIR",
        help="give the model Read, Write, Edit, Glob and Grep confined to DIR, and Bash, BashOutput and "
        "KillShell in a bubblewrap sandbox over DIR (spec RCW1-a, RCW2-a; default: none)",
    )
    agent.add_argument(
        "--unsandboxed-bash",
        action="store_true",
        help="with --workspace, run Bash on the host without bubblewrap: the host's files and network are "
        "reachable (said in the stream; spec RCW2-b)",
    )
    agent.add_argument(
        "--files-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the files a run produces in DIR (seed 000's file backend; serve answers them at "
        "/files/ID with their filename, to their owner; spec RCF1-a; default: none)",
    )


def _add_memory_and_tools(agent: argparse._ArgumentGroup) -> None:
    """The agent options about memory, the context's size, repeated calls and MCP servers."""
    agent.add_argument(
        "--memory",
        type=Path,
        default=None,
        metavar="DIR",
        help="give the model a memory tool over DIR, seen as /memories (made when missing; default: none)",
    )
    agent.add_argument(
        "--memory-store",
        type=Path,
        default=None,
        metavar="DIR",
        help="long-term memory in DIR (FileMemory): notes recalled into the system prompt before each run, "
        "'remember that ...' kept after it (made when missing; default: none)",
    )
    agent.add_argument(
        "--compact-threshold",
        type=int,
        default=None,
        metavar="N",
        help="summarise the context once it reaches N tokens (seed 001's compactor; default: off)",
    )
    agent.add_argument(
        "--loop-limit",
        type=int,
        default=DEFAULT_LOOP_LIMIT,
        metavar="N",
        help=f"refuse the same tool call N times in a row; 0 turns it off (default: {DEFAULT_LOOP_LIMIT})",
    )
    agent.add_argument(
        "--max-tool-result-bytes",
        type=int,
        default=DEFAULT_MAX_TOOL_RESULT_BYTES,
        metavar="N",
        help="keep the head and tail of a tool result over N bytes, with a note the model reads; "
        f"0 turns the bound off (default: {DEFAULT_MAX_TOOL_RESULT_BYTES})",
    )
    agent.add_argument(
        "--mcp-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="give the model the tools of the MCP servers FILE lists (.mcp.json: mcpServers; run, resume and serve)",
    )


def add_permission_options(p: argparse.ArgumentParser, *, resume: bool = False) -> None:
    """``--permission-mode`` and the rule flags (spec RC11-a).

    ``resume`` spells the rules ``--allow-tool``, ``--deny-tool``, ``--ask-tool`` only: its
    ``--deny ID`` answers a call (spec RC11-b).
    """
    perms = p.add_argument_group("permissions", "which tool calls run, and which wait for a person's approval")
    perms.add_argument(
        "--permission-mode",
        choices=PERMISSION_MODES,
        default=None,
        help="full: every call runs; auto: calls no --allow covers wait for approval; ask: every call waits",
    )
    for behavior in ("allow", "deny", "ask"):
        flags = [f"--{behavior}-tool"] if resume else [f"--{behavior}", f"--{behavior}-tool"]
        perms.add_argument(
            *flags,
            dest=f"{behavior}_rules",
            action="append",
            default=[],
            metavar="TOOL",
            help=f"{behavior} the calls of the tools matching this name glob (repeatable)",
        )


def permission_config(args: argparse.Namespace) -> dict[str, Any]:
    """``permission_mode`` and ``permission_rules`` from the flags (spec RC11-a).

    Raises:
        CliError: a rule whose tool glob no rule takes, named by its flag.
    """
    from ..policy.permissions import PermissionRule, PermissionRuleError, parse_rule

    config: dict[str, Any] = {}
    if getattr(args, "permission_mode", None) is not None:
        config["permission_mode"] = args.permission_mode
    workspace = getattr(args, "workspace", None)
    root = os.path.realpath(workspace) if workspace is not None else None
    rules: list[PermissionRule] = []
    for behavior in ("deny", "ask", "allow"):
        for glob in getattr(args, f"{behavior}_rules", []) or []:
            try:  # spec RCW1-b: the SDK's text forms, Bash(git status:*) and Write(src/**), beside a name glob
                rules.append(parse_rule(glob, behavior, root=root))
            except PermissionRuleError as exc:
                raise CliError(
                    f"--{behavior} {glob}", str(exc), "pass a tool-name glob such as 'mcp__*' or 'Write(src/**)'"
                ) from None
    if rules:
        config["permission_rules"] = rules
    return config


def agent_config(args: argparse.Namespace) -> dict[str, Any]:
    """The ``Agent`` keyword arguments the options ask for, ``tools`` included.

    Raises:
        CliError: a value no agent takes, named by its flag (spec RC7-a, RC8-c).
    """
    from ..run.compaction import SummarizingCompactor
    from ..run.subagents import demo_subagents
    from ..tools.demo import default_tools
    from ..tools.memory import memory_tool

    config: dict[str, Any] = {"tools": default_tools(), "max_steps": args.max_steps, "max_bytes": args.max_bytes}
    if getattr(args, "mcp_config", None) is not None and getattr(args, "command", None) == "serve":
        # spec/agent-ref.md R19.7-c: serve gives the servers to every agent's options; each response opens them.
        config["mcp_servers"] = _mcp_servers(args.mcp_config)
    if args.memory is not None:
        # spec RC7-a: the memory tool over the directory given (made when missing).
        try:
            config["tools"].append(memory_tool(args.memory))
        except ConfigError as exc:
            what = str(exc).removeprefix(f"{args.memory}: ")
            raise CliError(str(args.memory), what, "pass --memory a directory (it is made when missing)") from None
    if getattr(args, "memory_store", None) is not None:
        config["memory"] = _memory_store(args.memory_store)
    config["profile"] = args.profile
    if args.compact_threshold is not None:
        # spec RC8-a: seed 001's summarising compactor once the context reaches N tokens.
        if args.compact_threshold < 1:
            raise CliError("--compact-threshold", f"{args.compact_threshold} is not a token count", "pass N >= 1")
        config["compactor"] = SummarizingCompactor(threshold=args.compact_threshold)
    # spec RC8-b: the loop guard's limit; 0 turns it off.
    if args.loop_limit == 1 or args.loop_limit < 0:
        raise CliError("--loop-limit", f"{args.loop_limit} is not a limit", "pass N >= 2, or 0 to turn it off")
    config["loop_limit"] = args.loop_limit or None
    # spec R2.4-e: the bound on one tool result; 0 turns it off.
    bound = args.max_tool_result_bytes
    if bound < 0 or 0 < bound < MIN_TOOL_RESULT_BYTES:
        raise CliError(
            "--max-tool-result-bytes", f"{bound} is not a bound", f"pass N >= {MIN_TOOL_RESULT_BYTES}, or 0 for none"
        )
    config["max_tool_result_bytes"] = bound or None
    if args.max_budget_usd is not None:
        config["max_budget_usd"] = args.max_budget_usd
    if args.thinking:
        config["thinking_budget"] = args.thinking
        config["max_tokens"] = max(args.max_tokens, args.thinking + 1024)
    else:
        config["max_tokens"] = args.max_tokens
    # spec §13 and RC9-b: the model may spawn researchers; the embedded model does for "... in
    # parallel" prompts. run, resume and serve register the same children (§13.5-c).
    if args.subagents == "demo":
        config["subagents"] = demo_subagents()
    config.update(permission_config(args))
    config.update(workspace_config(args))
    if getattr(args, "files_dir", None) is not None:
        config["file_backend"] = _files_dir(args.files_dir)
    if getattr(args, "checkpoints", False):
        config["checkpoints"] = True  # spec/agent-ref.md [CK1.1-a]
    return config


def workspace_config(args: argparse.Namespace) -> dict[str, Any]:
    """``--workspace DIR``: the workspace tools and Bash over DIR; ``--unsandboxed-bash`` (spec RCW1-a, RCW2)."""
    workspace = getattr(args, "workspace", None)
    unsandboxed = bool(getattr(args, "unsandboxed_bash", False))
    if workspace is None:
        if unsandboxed:  # spec RCW2-b: the opt-in names a mode of the workspace's Bash, which there is none of
            raise CliError("--unsandboxed-bash", "there is no Bash without --workspace", "pass --workspace DIR too")
        return {}
    if not workspace.is_dir():
        raise CliError(str(workspace), "is not a directory", "pass --workspace an existing directory")
    return {"workspace": workspace, "unsandboxed_bash": unsandboxed}


def _files_dir(root: Path) -> Any:
    """``--files-dir DIR``: a ``DirectoryFiles`` over DIR (spec RCF1-a); a path that is not a directory is refused."""
    from ..store.files import DirectoryFiles

    if root.exists() and not root.is_dir():
        raise CliError(str(root), "is not a directory", "pass --files-dir a directory (it is made when missing)")
    return DirectoryFiles(root)


def _memory_store(root: Path) -> Any:
    """``--memory-store DIR``: a ``FileMemory`` over DIR (spec RC12-a)."""
    from ..tools.memory_store import FileMemory

    try:
        return FileMemory(root)
    except ConfigError as exc:
        what = str(exc).removeprefix("FileMemory: ").removeprefix(f"{root} ")
        raise CliError(str(root), what, "pass --memory-store a directory (it is made when missing)") from None
    except OSError as exc:
        raise CliError(str(root), f"cannot make it ({exc.strerror or exc})", "pass a directory you can write") from None


def _mcp_servers(path: str) -> dict[str, Any]:
    """The servers ``--mcp-config`` lists, or a ``CliError`` naming the file and the key."""
    from envelope._extras import missing, needs

    from ..tools.mcp import load_mcp_config

    if missing("mcp"):
        raise CliError("--mcp-config", needs("MCP servers", "mcp"))
    try:
        return dict(load_mcp_config(path))
    except ConfigError as exc:
        where, _, what = str(exc).partition(": ")
        raise CliError(where, what, 'pass --mcp-config a .mcp.json file: {"mcpServers": {NAME: SERVER}}') from None


@contextlib.asynccontextmanager
async def mcp_tools(args: argparse.Namespace, config: dict[str, Any]) -> AsyncIterator[None]:
    """Around a run: start the servers ``--mcp-config`` lists and add their tools to ``config["tools"]``.

    Nothing happens without the option. The servers are closed when the block ends,
    however it ends (spec/agent-ref.md R19.6-b). A server that does not start is said on
    stderr (the log) and its tools are left out; the run goes on with the others.

    Raises:
        CliError: the file cannot be read or is not an MCP configuration (naming the file
            and the key), or the ``mcp`` extra is not installed.
    """
    path = getattr(args, "mcp_config", None)
    if path is None:
        yield
        return

    from ..tools.mcp import McpToolset

    servers = _mcp_servers(path)
    async with McpToolset(servers, errlog=sys.stderr) as toolset:
        config["tools"] = [*config["tools"], *toolset.tools]
        yield


def model_factory(args: argparse.Namespace) -> Callable[[], Model]:
    """What makes each run's model: the recording, Claude, or the embedded offline model.

    A recording is read here, once, so that a file that is not one is an error before
    anything runs; each model made then replays it from its first call.

    Raises:
        CliError: ``--replay`` names a file that cannot be read or is not a recording.
    """
    if args.replay:
        from ..models.core import ReplayModel
        from ..models.replay import ReplayError, load_events, split_calls

        path = str(args.replay)
        todo = "pass --replay a recording: a JSON array of Messages API stream events"
        try:
            calls = split_calls(load_events(path))
        except ReplayError as exc:
            raise CliError(exc.where or path, exc.what, todo) from None
        except IsADirectoryError:
            raise CliError(path, "is a directory, not a recording", todo) from None
        except FileNotFoundError:
            raise CliError(path, "no such file", todo) from None
        except OSError as exc:
            raise CliError(
                path, f"cannot read it ({exc.strerror or exc})", "check the file and its permissions"
            ) from None
        if not calls:
            raise CliError(path, "the recording holds no events", todo)
        return lambda: ReplayModel(calls)
    if args.model:
        from ..models.core import AnthropicModel

        name: str = args.model
        return lambda: AnthropicModel(name)
    from ..models.scripted import ScriptedModel

    return ScriptedModel


def check_db(db: str, *, must_exist: bool) -> None:
    """Refuse a ``--db`` that cannot be an agent database, before anything is stored (spec RC2-a).

    A PostgreSQL URL is left to the store. A file must not be a directory, must exist
    when ``must_exist``, and, when it has bytes, must start with SQLite's header: a
    file of another kind is named as such, never "internal error". An empty file is
    fine (SQLite makes its database in it).

    Raises:
        CliError: naming the file.
    """
    if db.startswith(("postgresql://", "postgres://")):
        return
    path = Path(db)
    todo = "pass --db the file `agent-ref run` used"
    if path.is_dir():
        raise CliError(db, "is a directory, not an agent database", todo)
    if not path.exists():
        if must_exist:
            raise CliError(db, "no such database", todo)
        return
    try:
        with path.open("rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise CliError(db, f"cannot read it ({exc.strerror or exc})", "check the file and its permissions") from None
    if head and head != SQLITE_HEADER:
        raise CliError(
            db, "is not an SQLite database (it does not start with SQLite's header)", todo + ", or a new file name"
        )
