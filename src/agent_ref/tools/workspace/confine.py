"""Confinement of the workspace tools: every path reached from the root's descriptor, no link followed.

Owns: ``Workspace`` (the root, opened once), ``WorkspaceError`` (the message a tool
returns as its ``is_error`` result), and the ways in: ``names`` (a model's path as names
below the root, spec [WS1-a]), ``open_dir`` (each component opened with ``O_NOFOLLOW |
O_DIRECTORY`` relative to the one before, [WS1-b]), ``read_file`` (a regular file only,
checked with ``fstatat`` before the open and ``fstat`` after, [WS1-c]), ``write_file``
(a temporary file in the same directory renamed over the name, refusing a hard-linked
target, [WS1-d]) and ``walk`` (the tree below a directory by descriptors, links not
entered). Does not own: what the tools do with the bytes (``files.py``, ``search.py``).

Why descriptors and not a resolved-path check: a check on a path string and the later
open are two lookups, and a directory swapped for a link between them sends the open
elsewhere. Walking by descriptors makes the check and the use the same lookup (no TOCTOU):
a link anywhere on the way fails the open with ``ELOOP`` or ``ENOTDIR``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["MAX_WALK_ENTRIES", "Workspace", "WorkspaceError"]

#: Flags that open a directory and refuse a link (``ELOOP``) or a non-directory (``ENOTDIR``).
_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Flags that open a file to read: no link followed, no blocking on a FIFO that slipped past the check.
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: Flags that make the temporary file of a write (never an existing name, never through a link).
_TEMP_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: Longest path string a tool accepts (Linux's PATH_MAX).
MAX_PATH_CHARS: Final = 4096
#: Most entries one walk visits (Glob, Grep); more is said in the result, not hung on.
MAX_WALK_ENTRIES: Final = 200_000


class WorkspaceError(Exception):
    """A path or file a workspace tool refuses; the message names the path and why (an ``is_error`` result)."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


@dataclass(frozen=True, slots=True)
class Workspace:
    """The directory the workspace tools work in.

    Attributes:
        root: the root as resolved once when the tools were made (a link in the path the
            user gave is the user's choice; nothing below it is followed).
    """

    root: Path

    @classmethod
    def at(cls, root: Path | str) -> Workspace:
        """The workspace at ``root``.

        Raises:
            WorkspaceError: ``root`` is not an existing directory.
        """
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise WorkspaceError(f"{root}: the workspace must be an existing directory")
        return cls(real)

    def names(self, path: str) -> list[str]:
        """``path`` (absolute inside the root, or relative to it) as the names below the root ([WS1-a]).

        Raises:
            WorkspaceError: a NUL, a ``..`` component, an absolute path outside the root, or an overlong path.
        """
        if not isinstance(path, str):
            raise WorkspaceError(f"a path must be a string, not {type(path).__name__}")
        if "\x00" in path:
            raise WorkspaceError(f"{path!r}: a path may not hold a NUL character")
        if len(path) > MAX_PATH_CHARS:
            raise WorkspaceError(f"{path[:60]!r}...: a path has at most {MAX_PATH_CHARS} characters")
        rest = path
        if path.startswith("/"):
            root = str(self.root)
            if path != root and not path.startswith(root.rstrip("/") + "/"):
                raise WorkspaceError(f"{path}: outside the workspace {root}")
            rest = path[len(root) :]
        parts = [p for p in rest.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise WorkspaceError(f"{path}: '..' is not allowed in a workspace path")
        for part in parts:
            if len(part.encode("utf-8", "surrogateescape")) > 255:
                raise WorkspaceError(f"{path}: the name {part[:40]!r}... is longer than 255 bytes")
        return parts

    def shown(self, names: list[str]) -> str:
        """The absolute path of ``names`` as the tools report it."""
        return str(self.root.joinpath(*names)) if names else str(self.root)

    def open_dir(self, names: list[str], *, create: bool = False) -> int:
        """A descriptor of the directory ``names``, each component opened without following a link ([WS1-b]).

        Args:
            names: the directory's names below the root.
            create: make missing directories on the way (for a write).

        Raises:
            WorkspaceError: a component is a link, not a directory, or absent (when not ``create``).
        """
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for index, name in enumerate(names):
                inner = self._step(fd, name, names[: index + 1], create)
                os.close(fd)
                fd = inner
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        return fd

    def _step(self, fd: int, name: str, so_far: list[str], create: bool) -> int:
        where = self.shown(so_far)
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            if not create:
                raise WorkspaceError(f"{where}: no such directory") from None
        except OSError as exc:
            raise self._refusal(fd, name, where, exc) from None
        try:
            os.mkdir(name, 0o777, dir_fd=fd)
        except FileExistsError:
            pass
        except OSError as exc:
            raise WorkspaceError(f"{where}: cannot make the directory ({exc.strerror})") from None
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            raise self._refusal(fd, name, where, exc) from None

    @staticmethod
    def _refusal(fd: int, name: str, where: str, exc: OSError) -> WorkspaceError:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
            except OSError:
                return WorkspaceError(f"{where}: changed while it was opened")
            if stat.S_ISREG(mode):
                return WorkspaceError(f"{where}: is a file, not a directory")
            return WorkspaceError(f"{where}: is {_kind(mode)}; workspace tools do not follow links or enter it")
        return WorkspaceError(f"{where}: cannot open ({exc.strerror})")

    def parent(self, path: str, *, create: bool = False) -> tuple[int, str, list[str]]:
        """The descriptor of ``path``'s directory, its last name and all its names.

        Raises:
            WorkspaceError: ``path`` is the root itself, or its directory cannot be reached.
        """
        names = self.names(path)
        if not names:
            raise WorkspaceError(f"{path}: is the workspace directory, not a file")
        return self.open_dir(names[:-1], create=create), names[-1], names

    def open_file(self, path: str) -> tuple[int, str]:
        """A read descriptor of the regular file ``path`` and its shown path ([WS1-c]); the caller closes it.

        Raises:
            WorkspaceError: not a regular file (a link, FIFO, socket, device or directory), or absent.
        """
        fd, name, names = self.parent(path)
        shown = self.shown(names)
        try:
            return _open_regular(fd, name, shown, _READ_FLAGS), shown
        finally:
            os.close(fd)

    def read_file(self, path: str, max_bytes: int) -> tuple[bytes, int, str]:
        """The first ``max_bytes`` bytes of the regular file ``path``, its size and its shown path ([WS1-c]).

        Raises:
            WorkspaceError: not a regular file (a link, FIFO, socket, device or directory), or absent.
        """
        fd, name, names = self.parent(path)
        shown = self.shown(names)
        try:
            file_fd = _open_regular(fd, name, shown, _READ_FLAGS)
        finally:
            os.close(fd)
        with os.fdopen(file_fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return f.read(max_bytes), size, shown

    def stat_for_write(self, path: str) -> tuple[int, str, str, os.stat_result | None]:
        """The parent's descriptor, the last name, the shown path, and the target's stat (``None``: absent).

        Raises:
            WorkspaceError: the target is not a regular file, or is hard-linked ([WS1-d]).
        """
        fd, name, names = self.parent(path, create=True)
        shown = self.shown(names)
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return fd, name, shown, None
        except OSError as exc:
            os.close(fd)
            raise WorkspaceError(f"{shown}: cannot stat ({exc.strerror})") from None
        try:
            _check_writable(info, shown)
        except WorkspaceError:
            os.close(fd)
            raise
        return fd, name, shown, info

    def write_file(self, path: str, data: bytes, *, expect: os.stat_result | None = None) -> tuple[str, bool]:
        """Write ``data`` to ``path`` (a temporary file renamed over it); its shown path and whether it is new.

        ``expect``: the stat the caller read the file with (Edit); a file changed since is refused.

        Raises:
            WorkspaceError: the target or a directory on the way is refused, or it changed since ``expect``.
        """
        fd, name, shown, info = self.stat_for_write(path)
        try:
            if expect is not None and (
                info is None
                or (info.st_ino, info.st_mtime_ns)
                != (
                    expect.st_ino,
                    expect.st_mtime_ns,
                )
            ):
                raise WorkspaceError(f"{shown}: changed while it was edited; read it again")
            mode = stat.S_IMODE(info.st_mode) if info is not None else 0o666
            _replace(fd, name, data, mode, shown)
        finally:
            os.close(fd)
        return shown, info is None

    def walk(self, names: list[str]) -> Iterator[tuple[list[str], os.stat_result, int]]:
        """Every regular file below the directory ``names`` in path order: its names, stat and parent's descriptor.

        Directories are entered by descriptor without following links; links, special
        files and ``.git`` directories are skipped; at most ``MAX_WALK_ENTRIES`` entries.
        The parent descriptor is valid only until the next item.
        """
        top = self.open_dir(names)
        seen = 0
        stack: list[tuple[int, list[str], Iterator[str]]] = [(top, names, iter(sorted(os.listdir(top))))]
        try:
            while stack:
                fd, where, entries = stack[-1]
                entry = next(entries, None)
                if entry is None:
                    os.close(fd)
                    stack.pop()
                    continue
                seen += 1
                if seen > MAX_WALK_ENTRIES:
                    return
                try:
                    info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(info.st_mode) and entry != ".git":
                    with contextlib.suppress(OSError):
                        inner = os.open(entry, _DIR_FLAGS, dir_fd=fd)
                        stack.append((inner, [*where, entry], iter(sorted(os.listdir(inner)))))
                elif stat.S_ISREG(info.st_mode):
                    yield [*where, entry], info, fd
        finally:
            for fd, _, _ in stack:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def open_in(self, fd: int, name: str, shown: str) -> int:
        """A read descriptor of the regular file ``name`` in the directory ``fd`` ([WS1-c])."""
        return _open_regular(fd, name, shown, _READ_FLAGS)


def _open_regular(fd: int, name: str, shown: str, flags: int) -> int:
    """``name`` in ``fd`` opened when it is a regular file: stat before (no open of a device), fstat after."""
    try:
        before = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        raise WorkspaceError(f"{shown}: no such file") from None
    except OSError as exc:
        raise WorkspaceError(f"{shown}: cannot stat ({exc.strerror})") from None
    if not stat.S_ISREG(before.st_mode):
        raise WorkspaceError(f"{shown}: is {_kind(before.st_mode)}; workspace tools read regular files only")
    try:
        file_fd = os.open(name, flags, dir_fd=fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise WorkspaceError(f"{shown}: is a symbolic link; workspace tools do not follow links") from None
        raise WorkspaceError(f"{shown}: cannot open ({exc.strerror})") from None
    after = os.fstat(file_fd)
    if not stat.S_ISREG(after.st_mode) or after.st_ino != before.st_ino:
        os.close(file_fd)
        raise WorkspaceError(f"{shown}: changed while it was opened")
    return file_fd


def _check_writable(info: os.stat_result, shown: str) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise WorkspaceError(f"{shown}: is {_kind(info.st_mode)}; workspace tools write regular files only")
    if info.st_nlink > 1:
        raise WorkspaceError(
            f"{shown}: has {info.st_nlink} hard links; writing it could change a file outside the workspace"
        )


def _replace(fd: int, name: str, data: bytes, mode: int, shown: str) -> None:
    """Write ``data`` to a temporary name in ``fd`` and rename it over ``name`` (a reader sees old or new)."""
    temp = f".{name[:200]}.agent-ref-{secrets.token_hex(6)}.tmp"
    try:
        out = os.open(temp, _TEMP_FLAGS, mode, dir_fd=fd)
    except OSError as exc:
        raise WorkspaceError(f"{shown}: cannot write ({exc.strerror})") from None
    try:
        with os.fdopen(out, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.rename(temp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp, dir_fd=fd)
        if exc.errno in (errno.EISDIR, errno.ENOTEMPTY):
            raise WorkspaceError(f"{shown}: is a directory; workspace tools write regular files only") from None
        raise WorkspaceError(f"{shown}: cannot write ({exc.strerror})") from None
