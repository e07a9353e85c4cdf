"""``agent-ref diff AGENT --step N``: the unified diff of what one file step changed (spec [WU1-g]).

Owns: the ``diff`` subcommand (``add_diff_command``, ``diff_command``) and ``render_step``
(the records of one step as text: unified diffs for text files, one line for a binary
file, a directory or a link, mode changes as ``old mode``/``new mode``). Does not own the
records (``tools/snapshots.py``, ``tools/workspace_history.py``) nor the store.
"""

from __future__ import annotations

import difflib
import json
import sys
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..tools.snapshots import Entry, FileChange, SnapshotError, SnapshotStore
from .flags import add_store_options, check_db, formatter

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from ..store.core import Store

__all__ = ["add_diff_command", "diff_command", "render_step"]

_CHANGES: Final = msgspec.json.Decoder(list[FileChange])
_NO_NEWLINE: Final = "\\ No newline at end of file\n"


def _shown(path: str) -> str:
    """``path`` as printed: as it is when printable, else JSON-quoted (no control character reaches the terminal)."""
    return path if path.isprintable() else json.dumps(path)


def _text(content: bytes) -> list[str] | None:
    """A file's lines when it reads as UTF-8 text without NUL bytes; ``None`` for a binary file."""
    if b"\0" in content:
        return None
    try:
        return content.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def _mode(entry: Entry | None) -> str:
    return "" if entry is None or entry.mode is None else f"{entry.mode:04o}"


def _file_diff(path: str, before: Entry | None, after: Entry | None) -> list[str]:
    old = before.content if before is not None and before.kind == "file" else None
    new = after.content if after is not None and after.kind == "file" else None
    name = _shown(path)
    out: list[str] = []
    if old is not None and new is not None and _mode(before) != _mode(after):
        out += [f"old mode {_mode(before)}\n", f"new mode {_mode(after)}\n"]
    elif old is None and new is not None:
        out.append(f"new file mode {_mode(after) or '?'}\n")
    elif new is None and old is not None:
        out.append(f"deleted file mode {_mode(before) or '?'}\n")
    if old == new:
        return out
    a, b = _text(old or b""), _text(new or b"")
    if a is None or b is None:
        sizes = f"{len(old or b'')} -> {len(new or b'')} bytes"
        return [*out, f"Binary files a{name} and b{name} differ ({sizes})\n"]
    fromfile = f"a{name}" if old is not None else "/dev/null"
    tofile = f"b{name}" if new is not None else "/dev/null"
    for line in difflib.unified_diff(a, b, fromfile, tofile):
        out.append(line if line.endswith("\n") else f"{line}\n{_NO_NEWLINE}")
    return out


def _describe(entry: Entry | None) -> str:
    if entry is None:
        return "absent"
    if entry.kind == "link":
        return f"symbolic link to {_shown(entry.content.decode('utf-8', 'replace'))}"
    if entry.kind == "dir":
        return f"directory{' mode ' + _mode(entry) if _mode(entry) else ''}"
    return f"file{' mode ' + _mode(entry) if _mode(entry) else ''}"


def render_step(records: list[bytes]) -> str:
    """The diff of one step's records: each path from its first before to its last after, by path.

    A path a directory or link on either side is one ``diff`` line saying what it was and
    became; files get a unified diff (binary ones one line with the sizes).
    """
    first: dict[str, Entry | None] = {}
    last: dict[str, Entry | None] = {}
    for data in records:
        for change in _CHANGES.decode(data):
            first.setdefault(change.path, change.before)
            last[change.path] = change.after
    out: list[str] = []
    for path in sorted(first):
        before, after = first[path], last[path]
        if before == after:
            continue
        out.append(f"diff {_shown(path)}\n")
        kinds = {e.kind for e in (before, after) if e is not None}
        if kinds <= {"file"}:
            out += _file_diff(path, before, after)
        else:
            out.append(f"{_describe(before)} -> {_describe(after)}\n")
    return "".join(out)


async def diff_command(args: argparse.Namespace, open_store: Callable[[str], Store]) -> int:
    """Print the diff of the agent's file step ``args.step`` (in the store ``open_store(args.db)`` opens) to stdout.

    Raises:
        SnapshotError: the store keeps no snapshots, or no record has that step (the
            message lists the steps there are).
    """
    check_db(args.db, must_exist=True)
    store = open_store(args.db)
    if not isinstance(store, SnapshotStore):
        raise SnapshotError(f"the store {type(store).__name__} keeps no snapshots")
    if args.step < 1:
        raise SnapshotError(f"--step must be 1 or more (file steps count from 1), not {args.step}")
    rows = await store.snapshots(args.agent_uuid, 0)
    records = [data for step, data in rows if step == args.step]
    if not records:
        steps = ", ".join(str(s) for s in sorted({s for s, _ in rows})) or "none"
        raise SnapshotError(
            f"agent {args.agent_uuid} has no recorded file change at step {args.step} (steps recorded: {steps})"
        )
    sys.stdout.write(render_step(records))
    return 0


def add_diff_command(sub: Any) -> None:
    """Add ``agent-ref diff`` to the subcommands ``sub``."""
    diff = sub.add_parser(
        "diff",
        formatter_class=formatter,
        help="print what the agent changed in one file step, as a unified diff",
        description=(
            "Print the unified diff of what the agent's step N changed: every file a tool, an MCP\n"
            "server or a subprocess changed in its workspace (with --workspace), and what the memory\n"
            "tool and tools declaring writes= changed. Binary files, directories, links and modes are\n"
            "one line each. N is a file step as `agent-ref undo --to-step` counts them."
        ),
        epilog="example:\n  agent-ref diff AGENT_UUID --step 2",
    )
    diff.add_argument("agent_uuid", help="the agent (printed by `run`, listed by `runs`)")
    diff.add_argument("--step", type=int, required=True, metavar="N", help="the file step to show (1 or more)")
    add_store_options(diff)
