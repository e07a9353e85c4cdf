"""Snapshots of what file-changing tools changed, per step, and ``restore_files`` (undo).

Owns: ``FileChange`` (one path's entry before and after a call), ``capture`` and
``changes`` (what a call changed under the paths it touches), ``record_changes`` (into
the store, under the agent's step), ``restore_files`` with its all-or-nothing check
(``UndoConflict``) and ``RestoreReport`` (spec ``spec/agent-ref.md`` §22).
Does not own: the tools (``tools/memory.py`` and ``tools.tool(writes=...)`` call in here), nor
the rows (each store keeps them: ``record_snapshot``, ``snapshots``, ``drop_snapshots``).

How paths are reached (spec RU1-g): from ``/`` one name at a time, each directory opened
with ``O_NOFOLLOW`` relative to the one before, and the last name read, written and removed
relative to its parent's descriptor; a link on the way refuses the undo instead of being
followed. A capture resolves the parents of the paths it is given once (``realpath``).

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
import errno
import os
import secrets
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from ..errors import AgentRefError

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence

    from .context import ToolContext
    from .core import Tool

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

Kind = Literal["file", "dir", "link"]


class SnapshotError(AgentRefError):
    """A snapshot cannot be taken or the store keeps none; the message says which path or store."""


class UndoConflict(AgentRefError):
    """A file changed since the recorded after-content: nothing was restored; the message names it."""


class Entry(msgspec.Struct, frozen=True, omit_defaults=True):
    """A path's state: a directory, a file with its bytes, or a symbolic link with its target.

    ``mode`` is the permission bits (``0o777``) when the record keeps them (a workspace step,
    spec [WU1-c]); ``None`` (the memory tool's and ``writes=`` records) matches any mode.
    """

    kind: Kind
    content: bytes = b""
    mode: int | None = None


def _matches(now: object, recorded: Entry | None) -> bool:
    """Whether the entry found ``now`` is the ``recorded`` one (its mode only when it was kept)."""
    if recorded is None or not isinstance(now, Entry):
        return now == recorded
    if recorded.mode is None:
        return now.kind == recorded.kind and now.content == recorded.content
    return now == recorded


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


#: Flags that open a directory and refuse a link (``ELOOP``) or anything else (``ENOTDIR``).
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

#: ``_read``'s answer for a path with a symbolic link among its parent directories.
LINKED: Final = "linked"


class _Linked(Exception):
    """A directory on the way to a path is (now) a symbolic link; nothing there is touched."""


def _open_parent(path: str) -> tuple[int, str] | None:
    """A descriptor of ``path``'s parent directory and its last name, or None if a parent is absent.

    Opened one name at a time from ``/`` with ``O_NOFOLLOW | O_DIRECTORY`` (spec RU1-g): a
    link anywhere on the way, even one swapped in after a check, fails the open instead of
    being followed. The caller closes the descriptor.

    Raises:
        _Linked: a parent directory is a symbolic link.
    """
    names = [n for n in path.split(os.sep) if n]
    if not names:
        raise SnapshotError(f"{path}: the root directory is not a path snapshots restore")
    fd = os.open(os.sep, _DIR_FLAGS)
    try:
        for name in names[:-1]:
            try:
                inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except (FileNotFoundError, NotADirectoryError):
                    os.close(fd)
                    return None
                if stat.S_ISLNK(info.st_mode):
                    raise _Linked(name) from None
                if not stat.S_ISDIR(info.st_mode):
                    os.close(fd)
                    return None  # a file where a directory was: the path is absent
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    return fd, names[-1]


def _read(path: str) -> Entry | Literal["other", "linked"] | None:
    """The entry at ``path`` without following a link on the way or at the end.

    ``"other"``: the path is a special file (a link is an entry of kind ``"link"``, its
    target read, never followed); ``"linked"``: a directory on the way to it is a link (spec RU1-g).
    """
    try:
        found = _open_parent(path)
    except _Linked:
        return LINKED
    if found is None:
        return None
    fd, name = found
    try:
        return _read_at(fd, name, path)
    finally:
        os.close(fd)


def _read_at(fd: int, name: str, path: str) -> Entry | Literal["other"] | None:
    """The entry ``name`` in the directory ``fd`` (``path`` names it in messages)."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISDIR(info.st_mode):
        return Entry("dir", mode=stat.S_IMODE(info.st_mode) & 0o777)
    if stat.S_ISLNK(info.st_mode):
        return Entry("link", os.fsencode(os.readlink(name, dir_fd=fd)))
    if not stat.S_ISREG(info.st_mode):
        return "other"
    if info.st_size > MAX_SNAPSHOT_FILE_BYTES:
        raise SnapshotError(
            f"{path}: is {info.st_size:,} bytes; snapshots keep files up to {MAX_SNAPSHOT_FILE_BYTES:,}"
        )
    try:
        file_fd = os.open(name, _READ_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        return None
    except OSError:
        return "other"  # swapped for a link or a special file since the stat
    with os.fdopen(file_fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return "other"
        mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode) & 0o777
        return Entry("file", f.read(MAX_SNAPSHOT_FILE_BYTES + 1), mode)


def _names_in(path: str) -> list[str]:
    """The names in the directory ``path``, opened without following a link (``_Linked`` if one is on the way)."""
    found = _open_parent(path)
    if found is None:
        return []
    fd, name = found
    try:
        try:
            inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _Linked(name) from None
            raise
        try:
            return sorted(os.listdir(inner))
        finally:
            os.close(inner)
    finally:
        os.close(fd)


def _real(raw: str) -> str:
    """``raw`` as an absolute path whose parent directories are resolved once (spec RU1-g).

    Links in the path a caller gives are the caller's choice, as the memory tool's root is;
    recording the resolved path means a link found on the way at undo time was swapped in
    since, and is refused rather than followed.
    """
    path = os.path.abspath(raw)
    parent, name = os.path.split(path)
    return os.path.join(os.path.realpath(parent), name) if name else os.path.realpath(path)


def capture(paths: Iterable[str]) -> dict[str, Entry | None]:
    """The state of each path, of everything below it, and of each of its parent directories.

    Links and special files are not followed nor kept (a call changing one is not recorded).

    Raises:
        SnapshotError: a file over ``MAX_SNAPSHOT_FILE_BYTES`` or more than
            ``MAX_SNAPSHOT_ENTRIES`` entries below a path.
    """
    out: dict[str, Entry | None] = {}
    for raw in paths:
        path = _real(raw)
        parent = os.path.dirname(path)
        while parent != os.path.dirname(parent):
            found = _read(parent)
            if found is None or (isinstance(found, Entry) and found.kind != "link"):
                out[parent] = None if found is None else Entry(found.kind, found.content)
            parent = os.path.dirname(parent)
        stack = [path]
        seen = 0
        while stack:
            here = stack.pop()
            found = _read(here)
            seen += 1
            if seen > MAX_SNAPSHOT_ENTRIES:
                raise SnapshotError(f"{path}: has more than {MAX_SNAPSHOT_ENTRIES:,} entries; too many to snapshot")
            if not (isinstance(found, Entry) or found is None) or (found is not None and found.kind == "link"):
                continue  # a link or special file, or one on the way: neither followed nor kept
            found = None if found is None else Entry(found.kind, found.content)  # RU1-a: no modes kept
            out[here] = found
            if found is not None and found.kind == "dir":
                try:
                    names = _names_in(here)
                except _Linked:
                    continue  # swapped for a link since it was read
                stack.extend(os.path.join(here, name) for name in names)
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
        if _matches(now, target[path]):
            continue
        if not _matches(now, expected[path]):
            if now == LINKED:
                what = "a directory on its way is now a symbolic link, which undo never follows"
            elif now == "other" or (isinstance(now, Entry) and now.kind == "link"):
                what = "is now a link or special file"
            else:
                what = "changed since it was recorded"
            raise UndoConflict(f"{path}: {what}; nothing was restored (undo to step {to_step} refused)")
        if isinstance(now, Entry) and now.kind == "dir" and not _matches(now, target[path]):
            try:
                names = _names_in(path)
            except _Linked:
                raise UndoConflict(
                    f"{path}: became a symbolic link during the check; nothing was restored "
                    f"(undo to step {to_step} refused)"
                ) from None
            for name in names:
                inside = os.path.join(path, name)
                if inside not in target or target[inside] is not None:
                    raise UndoConflict(
                        f"{inside}: was not recorded but is inside {path}, which the undo removes; "
                        f"nothing was restored (undo to step {to_step} refused)"
                    )


def _apply(target: dict[str, Entry | None]) -> tuple[list[str], list[str]]:
    """Write the checked target: what is removed deepest first, then what is made shallowest first.

    Each change acts on a name in a descriptor of its parent opened without following
    links (spec RU1-g); a link swapped in since the check stops the undo there.
    """
    restored: list[str] = []
    removed: list[str] = []
    # Files and directories to remove, deepest first; then directories to make and files to write, shallowest first.
    for path in sorted(target, key=lambda p: (-p.count(os.sep), p)):
        if target[path] is None and _read(path) is not None:  # an absent parent: the path is absent too
            with _parent_of(path) as (fd, name, now):
                if _remove(fd, name, now):
                    removed.append(path)
    for path in sorted(target, key=lambda p: (p.count(os.sep), p)):
        want = target[path]
        if want is not None:
            with _parent_of(path) as (fd, name, now):
                if _make(fd, name, now, want):
                    restored.append(path)
    return restored, removed


@contextlib.contextmanager
def _parent_of(path: str) -> Iterator[tuple[int, str, Entry | Literal["other"] | None]]:
    """``path``'s parent as a descriptor opened without following links, its last name, and its entry now."""
    try:
        found = _open_parent(path)
    except _Linked:
        raise UndoConflict(
            f"{path}: a directory on its way became a symbolic link during the undo, which never follows one; "
            "the paths before it were restored"
        ) from None
    if found is None:
        raise UndoConflict(f"{path}: its directory vanished during the undo; the paths before it were restored")
    fd, name = found
    try:
        yield fd, name, _read_at(fd, name, path)
    finally:
        os.close(fd)


def _remove(fd: int, name: str, now: Entry | Literal["other"] | None) -> bool:
    """Remove ``name`` from the directory ``fd`` (a link itself, never what it points to); whether there was one."""
    if now is None:
        return False
    if isinstance(now, Entry) and now.kind == "dir":
        os.rmdir(name, dir_fd=fd)
    else:
        os.unlink(name, dir_fd=fd)
    return True


def _make(fd: int, name: str, now: Entry | Literal["other"] | None, want: Entry) -> bool:
    """Make ``name`` in the directory ``fd`` what ``want`` says; whether anything was written."""
    if _matches(now, want):
        return False
    if now is not None and not (isinstance(now, Entry) and now.kind == want.kind != "link"):
        _remove(fd, name, now)  # another kind, a link to point elsewhere, or a special file
        now = None
    if want.kind == "dir":
        if now is None:
            os.mkdir(name, 0o700, dir_fd=fd)
        if want.mode is not None:
            inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
            try:
                os.fchmod(inner, want.mode)
            finally:
                os.close(inner)
    elif want.kind == "link":
        os.symlink(os.fsdecode(want.content), name, dir_fd=fd)  # made, never followed
    else:
        _write(fd, name, want.content, want.mode)
    return True


def _write(fd: int, name: str, content: bytes, mode: int | None = None) -> None:
    """Write ``content`` to ``name`` in the directory ``fd`` through a temporary name renamed over it."""
    tmp = f".undo-tmp-{secrets.token_hex(8)}"
    file_fd = os.open(tmp, _CREATE_FLAGS, 0o600, dir_fd=fd)
    try:
        with os.fdopen(file_fd, "wb") as f:
            f.write(content)
            if mode is not None:
                os.fchmod(f.fileno(), mode)
        os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=fd)
        raise
