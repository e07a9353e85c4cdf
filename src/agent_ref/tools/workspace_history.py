"""A snapshot of the whole workspace at each step, recorded as the step's file changes (undo).

Owns: ``scan`` (the workspace's entries, read without following a link), ``BlobCache``
(the content-addressed copy of what the workspace held at the last snapshot, outside the
workspace), ``begin_step`` and ``StepBaseline.finish`` (one step's before and after, the
difference recorded in the store under the agent's step) and ``StepSummary`` (what the
stream says of it). Spec ``spec/agent-ref.md`` §WU1.
Does not own: the records' format, their step numbers, undo and its conflict check
(``tools/snapshots.py``), nor where a step begins and ends (``run/tool_step.py``).

How it works (spec [WU1-a]): at a step's start every entry under the workspace is listed
(``os.scandir`` on directories opened with ``O_NOFOLLOW``); a file whose size, mtime, ctime
and inode match the last snapshot's is taken as unchanged, any other is read and its bytes
put in the cache under their sha256. At the step's end the same walk again; each entry that
differs becomes a ``FileChange`` with its whole before (from the cache) and after, and the
list is kept with ``record_changes`` like the memory tool's, so ``restore_files``,
``agent-ref undo``, rewind and ``agent-ref diff`` read one kind of record.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import stat
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import msgspec

from .snapshots import MAX_SNAPSHOT_FILE_BYTES, Entry, FileChange, SnapshotError, SnapshotStore, record_changes

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "MAX_SUMMARY_PATHS",
    "MAX_WORKSPACE_ENTRIES",
    "BlobCache",
    "Seen",
    "StepBaseline",
    "StepSummary",
    "begin_step",
    "history_dir",
    "scan",
    "step_changes",
]

#: Most entries a workspace snapshot lists; a larger workspace is not snapshotted (spec [WU1-d]).
MAX_WORKSPACE_ENTRIES: Final = 100_000
#: Most paths a step's summary names; the rest are counted (spec [WU1-f]).
MAX_SUMMARY_PATHS: Final = 20

log = logging.getLogger("agent_ref")

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Seen(msgspec.Struct, frozen=True, array_like=True):
    """One entry of a workspace snapshot.

    Attributes:
        kind: ``"file"``, ``"dir"`` or ``"link"``.
        mode: the permission bits (``0o777``; 0 for a link).
        ref: a file's sha256 (``""``: over ``MAX_SNAPSHOT_FILE_BYTES``, not kept); a link's target.
        key: a file's size, mtime, ctime and inode when it was read (unchanged if all four are).
    """

    kind: str
    mode: int
    ref: str = ""
    key: tuple[int, int, int, int] = (0, 0, 0, 0)


Manifest = dict[str, Seen]
_MANIFEST: Final = msgspec.json.Decoder(dict[str, Seen])


def history_dir(agent_uuid: str) -> str:
    """Where an agent's workspace cache lives: ``$XDG_CACHE_HOME/agent-ref/workspace-history/<key>``.

    The key is a digest of the agent's uuid (any string is then a safe name). Outside every
    workspace, so no tool the agent runs there sees or changes it (spec [WU1-b]).
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(agent_uuid.encode()).hexdigest()[:32]
    return os.path.join(base, "agent-ref", "workspace-history", key)


class BlobCache:
    """Content-addressed bytes (``objects/ab/cdef…``, named by sha256) and the last manifest."""

    def __init__(self, root: str) -> None:
        """Use (and make, mode ``0o700``) the directory ``root``."""
        self.root = root
        os.makedirs(os.path.join(root, "objects"), mode=0o700, exist_ok=True)

    def _path(self, digest: str) -> str:
        return os.path.join(self.root, "objects", digest[:2], digest[2:])

    def has(self, digest: str) -> bool:
        """Whether the bytes named ``digest`` are kept."""
        return os.path.isfile(self._path(digest))

    def put(self, digest: str, data: bytes) -> None:
        """Keep ``data`` under ``digest`` (written to a temporary name and renamed: never half there)."""
        path = self._path(digest)
        if os.path.isfile(path):
            return
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        _atomic_write(path, data)

    def get(self, digest: str) -> bytes:
        """The bytes named ``digest``, checked against it.

        Raises:
            SnapshotError: missing or damaged (the message names the cache).
        """
        try:
            with open(self._path(digest), "rb") as f:
                data = f.read()
        except OSError as exc:
            raise SnapshotError(f"{self.root}: the workspace cache lost {digest[:12]} ({exc.strerror})") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise SnapshotError(f"{self.root}: the workspace cache holds damaged bytes for {digest[:12]}")
        return data

    def load_manifest(self) -> Manifest:
        """The last snapshot's manifest (empty when none or unreadable: every file is then read)."""
        try:
            with open(os.path.join(self.root, "manifest.json"), "rb") as f:
                return _MANIFEST.decode(f.read())
        except (OSError, msgspec.DecodeError):
            return {}

    def save_manifest(self, manifest: Manifest) -> None:
        """Keep ``manifest`` as the last snapshot's."""
        _atomic_write(os.path.join(self.root, "manifest.json"), msgspec.json.encode(manifest))


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{secrets.token_hex(6)}"
    try:
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _open_dir(root_fd: int, rel: str) -> int | None:
    """``rel`` under ``root_fd``, opened one name at a time without following links (None: gone or a link)."""
    fd = os.dup(root_fd)
    for name in rel.split("/") if rel else ():
        try:
            inner = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            os.close(fd)
            return None
        os.close(fd)
        fd = inner
    return fd


def _read_file(dir_fd: int, name: str, info: os.stat_result, blobs: BlobCache) -> str:
    """Read ``name`` (not following a link) into ``blobs``; its sha256, or ``""`` if too large or not a file now."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ""
        data = f.read(MAX_SNAPSHOT_FILE_BYTES + 1)
    if len(data) > MAX_SNAPSHOT_FILE_BYTES or info.st_size > MAX_SNAPSHOT_FILE_BYTES:
        return ""
    digest = hashlib.sha256(data).hexdigest()
    blobs.put(digest, data)
    return digest


def _seen(dir_fd: int, entry: os.DirEntry[str], rel: str, blobs: BlobCache, previous: Manifest) -> Seen | None:
    """The snapshot entry for ``entry`` (``None``: a special file, never opened nor kept)."""
    info = entry.stat(follow_symlinks=False)
    mode = stat.S_IMODE(info.st_mode) & 0o777
    if stat.S_ISDIR(info.st_mode):
        return Seen("dir", mode)
    if stat.S_ISLNK(info.st_mode):
        return Seen("link", 0, os.readlink(entry.name, dir_fd=dir_fd))
    if not stat.S_ISREG(info.st_mode):
        return None
    key = (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
    before = previous.get(rel)
    if before is not None and before.kind == "file" and before.key == key and before.ref:
        return Seen("file", mode, before.ref, key)  # its bytes are checked when a record needs them
    ref = "" if info.st_size > MAX_SNAPSHOT_FILE_BYTES else _read_file(dir_fd, entry.name, info, blobs)
    return Seen("file", mode, ref, key)


def scan(root: str, blobs: BlobCache, previous: Manifest) -> Manifest:
    """Every entry under ``root`` by relative path (``/``-joined); links and mount points not followed.

    Files unchanged since ``previous`` (same size, mtime, ctime, inode) are not read again.

    Raises:
        SnapshotError: ``root`` is not a directory reached without a link, or it holds more
            than ``MAX_WORKSPACE_ENTRIES`` entries.
    """
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except OSError as exc:
        raise SnapshotError(f"{root}: the workspace is not a directory ({exc.strerror})") from None
    out: Manifest = {}
    try:
        stack = [""]
        while stack:
            rel = stack.pop()
            dir_fd = _open_dir(root_fd, rel)
            if dir_fd is None:
                continue  # removed, or swapped for a link, while we walked: not followed
            try:
                with os.scandir(dir_fd) as found:
                    entries = list(found)
                for entry in entries:
                    path = f"{rel}/{entry.name}" if rel else entry.name
                    seen = _seen(dir_fd, entry, path, blobs, previous)
                    if seen is None:
                        continue
                    out[path] = seen
                    if len(out) > MAX_WORKSPACE_ENTRIES:
                        raise SnapshotError(
                            f"{root}: holds more than {MAX_WORKSPACE_ENTRIES:,} entries; too many to snapshot"
                        )
                    if seen.kind == "dir":
                        stack.append(path)
            finally:
                os.close(dir_fd)
    finally:
        os.close(root_fd)
    return out


def _entry(seen: Seen, blobs: BlobCache) -> Entry:
    if seen.kind == "file":
        return Entry("file", blobs.get(seen.ref), seen.mode)
    if seen.kind == "link":
        return Entry("link", os.fsencode(seen.ref))
    return Entry("dir", mode=seen.mode)


def _same(a: Seen | None, b: Seen | None) -> bool:
    if a is None or b is None:
        return a is b
    if a.kind == b.kind == "file" and not (a.ref and b.ref):
        return a.key == b.key and a.mode == b.mode  # a file too large to keep: compared by its stat
    return (a.kind, a.mode, a.ref) == (b.kind, b.mode, b.ref)


def step_changes(root: str, before: Manifest, after: Manifest, blobs: BlobCache) -> tuple[list[FileChange], list[str]]:
    """The changes between two snapshots as absolute-path ``FileChange``s, and the changed paths not kept.

    A file over ``MAX_SNAPSHOT_FILE_BYTES`` on either side is not kept (spec [WU1-d]): it is
    named in the second list and undo leaves it as it is.
    """
    found: list[FileChange] = []
    not_kept: list[str] = []
    for rel in sorted(before.keys() | after.keys()):
        old, new = before.get(rel), after.get(rel)
        if _same(old, new):
            continue
        if any(s is not None and s.kind == "file" and not s.ref for s in (old, new)):
            not_kept.append(rel)
            continue
        found.append(
            FileChange(
                os.path.join(root, rel),
                None if old is None else _entry(old, blobs),
                None if new is None else _entry(new, blobs),
            )
        )
    return found, not_kept


class StepSummary(msgspec.Struct, frozen=True):
    """What one step changed in the workspace, as ``meta_final.workspace_steps`` carries it (spec [WU1-f]).

    Attributes:
        step: the agent's file step the change was recorded as (``agent-ref diff --step``).
        run_step: the run's step (model call) whose tools made it.
        added: how many entries appeared.
        modified: how many changed content, mode or link target.
        removed: how many disappeared.
        paths: up to ``MAX_SUMMARY_PATHS`` of them, relative, each after ``+ ``, ``~ `` or ``- ``.
        not_kept: changed files over the size bound, which undo leaves as they are.
        error: why the step could not be snapshotted (``step`` is then 0 and nothing was
            recorded); ``None`` when it was.
    """

    step: int
    run_step: int
    added: int
    modified: int
    removed: int
    paths: list[str]
    not_kept: list[str]
    error: str | None = None


def _summary(root: str, step: int, run_step: int, found: list[FileChange], not_kept: list[str]) -> StepSummary:
    counts = {"+": 0, "~": 0, "-": 0}
    paths: list[str] = []
    for change in found:
        mark = "+" if change.before is None else "-" if change.after is None else "~"
        counts[mark] += 1
        if len(paths) < MAX_SUMMARY_PATHS:
            paths.append(f"{mark} {os.path.relpath(change.path, root)}")
    return StepSummary(step, run_step, counts["+"], counts["~"], counts["-"], paths, not_kept[:MAX_SUMMARY_PATHS])


@dataclass(slots=True)
class StepBaseline:
    """The workspace as one step found it at its start; ``finish`` records what the step changed."""

    root: str
    blobs: BlobCache | None
    before: Manifest
    failed: str | None = None

    async def finish(self, store: object, agent_uuid: str, run_id: str, run_step: int) -> StepSummary | None:
        """Snapshot again, record the difference under the agent's step; its summary (``None``: no change).

        A snapshot that cannot be taken (the workspace grew past ``MAX_WORKSPACE_ENTRIES``,
        the cache is damaged) records nothing and says why in the summary (spec [WU1-d]).
        """
        blobs = self.blobs
        if self.failed is not None or blobs is None:
            return StepSummary(0, run_step, 0, 0, 0, [], [], self.failed)
        try:
            after = await asyncio.to_thread(scan, self.root, blobs, self.before)
            found, not_kept = await asyncio.to_thread(step_changes, self.root, self.before, after, blobs)
            await asyncio.to_thread(blobs.save_manifest, after)
        except (SnapshotError, OSError) as exc:
            log.warning("workspace snapshot of step %s not recorded: %s", run_step, exc)
            return StepSummary(0, run_step, 0, 0, 0, [], [], f"not recorded: {exc}")
        step = await record_changes(store, agent_uuid, run_id, run_step, found)
        if step is None:
            return None
        return _summary(self.root, step, run_step, found, not_kept)


async def begin_step(workspace: Path | str | None, store: object, agent_uuid: str) -> StepBaseline | None:
    """The workspace's snapshot at a step's start; ``None`` when there is nothing to record into.

    Nothing is recorded without a workspace, an agent id, or a store keeping snapshots. A
    snapshot that cannot be taken (not a directory, too many entries, the cache not
    writable) does not stop the step: its ``finish`` says why (spec [WU1-d]).
    """
    if workspace is None or not agent_uuid or not isinstance(store, SnapshotStore):
        return None
    root = os.path.realpath(os.fspath(workspace))
    try:
        blobs = await asyncio.to_thread(BlobCache, history_dir(agent_uuid))
        previous = await asyncio.to_thread(blobs.load_manifest)
        before = await asyncio.to_thread(scan, root, blobs, previous)
    except (SnapshotError, OSError) as exc:
        log.warning("workspace snapshot before step not taken: %s", exc)
        return StepBaseline(root, None, {}, f"not recorded: {exc}")
    return StepBaseline(root, blobs, before)
