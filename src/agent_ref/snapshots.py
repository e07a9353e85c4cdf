"""Snapshots of what file-changing tools changed, per step, and ``restore_files`` (undo).

Owns: ``FileChange`` (one path's entry before and after a call), ``capture`` and
``changes`` (what a call changed under the paths it touches), ``record_changes`` (into
the store, under the agent's step), ``restore_files`` with its all-or-nothing check
(``UndoConflict``) and ``RestoreReport`` (spec ``spec/agent-ref.md`` §22).
Does not own: the tools (``memory.py`` and ``tools.tool(writes=...)`` call in here), nor
the rows (each store keeps them: ``record_snapshot``, ``snapshots``, ``drop_snapshots``).

What is kept (spec RU1-a): the whole before- and after-content of every file and
directory a call changed (not a patch): restoring is then a plain write, the conflict
check a plain comparison, and a recorded step can be undone without replaying any other.
Files are bounded (``MAX_SNAPSHOT_FILE_BYTES``), so a record is too.

What a step is (spec RU1-b): the agent's own counter of file-changing steps. The first
record of a new (run id, step of the run) pair takes the agent's last step plus one; more
records of the same pair (several calls of one step) share it. ``to_step=N`` gives the
files as they were when step ``N`` ended (``0``: before any recorded change); undoing
drops the records after ``N``, so the next change is step ``N + 1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from .errors import AgentRefError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Sequence

    from .tool_context import ToolContext
    from .tools import Tool

__all__ = [
    "MAX_SNAPSHOT_FILE_BYTES",
    "FileChange",
    "RestoreReport",
    "SnapshotError",
    "SnapshotStore",
    "UndoConflict",
    "capture",
    "changes",
    "record_changes",
    "recorded_call",
    "restore_files",
]

#: Largest file a snapshot keeps, in bytes; a call that would change a larger one is refused before it runs.
MAX_SNAPSHOT_FILE_BYTES: Final = 10_000_000
#: Most entries one capture walks below one path.
MAX_SNAPSHOT_ENTRIES: Final = 10_000

Kind = Literal["file", "dir"]


class SnapshotError(AgentRefError):
    """A snapshot cannot be taken or the store keeps none; the message says which path or store."""


class UndoConflict(AgentRefError):
    """A file changed since the recorded after-content: nothing was restored; the message names it."""


class Entry(msgspec.Struct, frozen=True):
    """A path's state: a directory, or a file with its bytes."""

    kind: Kind
    content: bytes = b""


class FileChange(msgspec.Struct, frozen=True):
    """One path changed by one call: its entry before and after (``None``: absent).

    Attributes:
        path: the absolute path.
        before: what was there before the call.
        after: what the call left.
    """

    path: str
    before: Entry | None
    after: Entry | None


@dataclass(frozen=True, slots=True)
class RestoreReport:
    """What ``restore_files`` did.

    Attributes:
        to_step: the step the files are as of now.
        undone_steps: the steps undone, in order.
        restored: the paths written back (files and directories made).
        removed: the paths removed (made after the step).
    """

    to_step: int
    undone_steps: tuple[int, ...]
    restored: tuple[str, ...]
    removed: tuple[str, ...]


@runtime_checkable
class SnapshotStore(Protocol):
    """The part of a store that keeps snapshots (``MemoryStore``, ``SQLiteStore``, ``PostgresStore``)."""

    async def record_snapshot(self, agent_uuid: str, run_id: str, run_step: int, data: bytes) -> int:
        """Keep one call's changes; return the agent's step they belong to (spec RU1-b)."""
        ...

    async def snapshots(self, agent_uuid: str, after_step: int) -> list[tuple[int, bytes]]:
        """The records of steps after ``after_step`` as ``(step, data)``, in the order recorded."""
        ...

    async def drop_snapshots(self, agent_uuid: str, after_step: int) -> None:
        """Forget the records of steps after ``after_step``."""
        ...


_CHANGES: Final = msgspec.json.Decoder(list[FileChange])


def _read(path: str) -> Entry | Literal["other"] | None:
    """The entry at ``path`` without following a link; ``"other"`` for a link or special file."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None
    if stat.S_ISDIR(info.st_mode):
        return Entry("dir")
    if not stat.S_ISREG(info.st_mode):
        return "other"
    if info.st_size > MAX_SNAPSHOT_FILE_BYTES:
        raise SnapshotError(
            f"{path}: is {info.st_size:,} bytes; snapshots keep files up to {MAX_SNAPSHOT_FILE_BYTES:,}"
        )
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        return Entry("file", f.read(MAX_SNAPSHOT_FILE_BYTES + 1))


def capture(paths: Iterable[str]) -> dict[str, Entry | None]:
    """The state of each path, of everything below it, and of each of its parent directories.

    Links and special files are not followed nor kept (a call changing one is not recorded).

    Raises:
        SnapshotError: a file over ``MAX_SNAPSHOT_FILE_BYTES`` or more than
            ``MAX_SNAPSHOT_ENTRIES`` entries below a path.
    """
    out: dict[str, Entry | None] = {}
    for raw in paths:
        path = os.path.abspath(raw)
        parent = os.path.dirname(path)
        while parent != os.path.dirname(parent):
            found = _read(parent)
            if found != "other":
                out[parent] = found
            parent = os.path.dirname(parent)
        stack = [path]
        seen = 0
        while stack:
            here = stack.pop()
            found = _read(here)
            seen += 1
            if seen > MAX_SNAPSHOT_ENTRIES:
                raise SnapshotError(f"{path}: has more than {MAX_SNAPSHOT_ENTRIES:,} entries; too many to snapshot")
            if found == "other":
                continue
            out[here] = found
            if found is not None and found.kind == "dir":
                with os.scandir(here) as listing:
                    stack.extend(os.path.join(here, e.name) for e in listing)
    return out


def changes(before: dict[str, Entry | None], after: dict[str, Entry | None]) -> list[FileChange]:
    """The paths whose entry differs between two captures, sorted by path."""
    return [
        FileChange(path, before.get(path), after.get(path))
        for path in sorted(before.keys() | after.keys())
        if before.get(path) != after.get(path)
    ]


async def record_changes(
    store: object, agent_uuid: str, run_id: str, run_step: int, found: Sequence[FileChange]
) -> int | None:
    """Keep ``found`` in ``store`` under the agent's step (spec RU1-b); ``None`` if nothing to keep.

    Nothing is kept when there is no change, no agent id (a call outside an agent run),
    or a store without snapshots.
    """
    if not found or not agent_uuid or not isinstance(store, SnapshotStore):
        return None
    return await store.record_snapshot(agent_uuid, run_id, run_step, msgspec.json.encode(list(found)))


async def recorded_call(
    tool: Tool,
    kwargs: dict[str, Any],
    context: ToolContext,
    call: Callable[[Callable[..., Any], dict[str, Any]], Awaitable[object]],
) -> object:
    """Call a tool declaring ``writes``; record what changed below the paths it was given (spec RU1-f).

    The paths are the values of the ``writes`` parameters (relative ones against the current
    directory). What changed is recorded even when the tool then raised: it changed it.
    """
    assert tool.fn is not None
    paths = [os.fspath(kwargs[p]) for p in tool.writes if isinstance(kwargs.get(p), str | os.PathLike)]
    if not paths or not context.agent_uuid or not isinstance(context.store, SnapshotStore):
        return await call(tool.fn, kwargs)
    before = await asyncio.to_thread(capture, paths)
    try:
        return await call(tool.fn, kwargs)
    finally:
        found = changes(before, await asyncio.to_thread(capture, paths))
        await record_changes(context.store, context.agent_uuid, context.run_id, context.step, found)


def _store(store: object) -> SnapshotStore:
    if not isinstance(store, SnapshotStore):
        raise SnapshotError(f"the store {type(store).__name__} keeps no snapshots")
    return store


async def restore_files(store: object, agent_uuid: str, *, to_step: int) -> RestoreReport:
    """Put every recorded path back as it was when step ``to_step`` ended, then forget the later steps.

    All or nothing (spec RU1-c): every path is checked first; a path whose entry is neither
    what the last record left nor already the target refuses the whole undo. Each file is
    then written to a temporary name and renamed over (never half written).

    Raises:
        UndoConflict: a path changed since it was recorded (the message names it); nothing written.
        SnapshotError: the store keeps no snapshots, or ``to_step`` is negative.
    """
    if isinstance(to_step, bool) or not isinstance(to_step, int) or to_step < 0:
        raise SnapshotError(f"to_step must be an integer from 0, not {to_step!r}")
    kept = _store(store)
    rows = await kept.snapshots(agent_uuid, to_step)
    target: dict[str, Entry | None] = {}
    expected: dict[str, Entry | None] = {}
    for _, data in rows:
        for change in _CHANGES.decode(data):
            target.setdefault(change.path, change.before)
            expected[change.path] = change.after
    _check_restorable(target, expected, to_step)
    restored, removed = _apply(target)
    await kept.drop_snapshots(agent_uuid, to_step)
    steps = tuple(sorted({step for step, _ in rows}))
    return RestoreReport(to_step, steps, tuple(restored), tuple(removed))


def _check_restorable(target: dict[str, Entry | None], expected: dict[str, Entry | None], to_step: int) -> None:
    """Refuse the undo (``UndoConflict``) if any path changed since it was recorded (spec RU1-c)."""
    for path in sorted(target):
        now = _read(path)
        if now == target[path]:
            continue
        if now != expected[path]:
            what = "is now a link or special file" if now == "other" else "changed since it was recorded"
            raise UndoConflict(f"{path}: {what}; nothing was restored (undo to step {to_step} refused)")
        if isinstance(now, Entry) and now.kind == "dir" and (target[path] is None or target[path] != now):
            for name in sorted(os.listdir(path)):
                inside = os.path.join(path, name)
                if inside not in target or target[inside] is not None:
                    raise UndoConflict(
                        f"{inside}: was not recorded but is inside {path}, which the undo removes; "
                        f"nothing was restored (undo to step {to_step} refused)"
                    )


def _apply(target: dict[str, Entry | None]) -> tuple[list[str], list[str]]:
    """Write the checked target: what is removed deepest first, then what is made shallowest first."""
    restored: list[str] = []
    removed: list[str] = []
    # Files and directories to remove, deepest first; then directories to make and files to write, shallowest first.
    for path in sorted(target, key=lambda p: (-p.count(os.sep), p)):
        now = _read(path)
        if target[path] is None and now is not None:
            if isinstance(now, Entry) and now.kind == "dir":
                os.rmdir(path)
            else:
                os.unlink(path)
            removed.append(path)
    for path in sorted(target, key=lambda p: (p.count(os.sep), p)):
        want, now = target[path], _read(path)
        if want is None or want == now:
            continue
        if isinstance(now, Entry) and now.kind != want.kind:
            if now.kind == "dir":
                os.rmdir(path)
            else:
                os.unlink(path)
        if want.kind == "dir":
            os.mkdir(path, 0o700)
        else:
            _write(path, want.content)
        restored.append(path)
    return restored, removed


def _write(path: str, content: bytes) -> None:
    """Write ``content`` to ``path`` through a temporary file renamed over it."""
    fd, tmp = tempfile.mkstemp(prefix=".undo-tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
