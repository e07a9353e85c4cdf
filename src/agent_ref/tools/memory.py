"""The memory tool: ``view``, ``create``, ``str_replace``, ``insert``, ``delete``, ``rename`` in a directory.

Owns: ``memory_tool(root)``, a backend ``Tool`` named ``memory`` with the command shapes of
seed 001 §1.6 and Anthropic's memory tool, over a directory the caller chooses; the
mapping of the model's paths (``/memories/...``) onto that directory; the refusal of every
path that could leave it; and the bounds on what it stores and shows (spec
``spec/agent-ref.md`` §18).
Does not own: running the call (``tools.run_tools`` turns a ``MemoryToolError`` into an
``is_error`` result the model reads), nor the root directory itself: the caller chose it,
and a root swapped for something else while the agent runs is the caller's affair.

How a path stays inside the root (spec §18.2):

1. ``parse_path`` is pure: a path is ``/memories`` or ``/memories/NAME[/NAME...]``; it refuses
   NUL and control characters, backslashes, empty names (``//``), ``.`` and ``..``, names
   over ``MAX_NAME_BYTES`` bytes or not encodable as UTF-8, more than ``MAX_DEPTH`` names,
   and more than ``MAX_PATH_CHARS`` characters. What it accepts is a tuple of plain names.
2. The file system is walked one name at a time from a descriptor of the root, each step
   ``openat(..., O_NOFOLLOW | O_DIRECTORY)``: a symbolic link anywhere on the way, even one
   swapped in by another process after a check, makes the open fail instead of being
   followed. The last name is opened with ``O_NOFOLLOW`` too (``O_CREAT | O_EXCL`` for a new
   file, which never follows a link), so no check-then-use window leads outside.
3. Deletes and renames act on names relative to a directory descriptor
   (``unlinkat``/``renameat``, ``shutil.rmtree(dir_fd=)``), which never follow links either.

POSIX only: ``memory_tool`` refuses a platform whose ``os.open`` takes no ``dir_fd``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import secrets
import shutil
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..errors import AgentRefError, ConfigError
from . import snapshots
from .core import Tool

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .context import ToolContext

__all__ = [
    "COMMANDS",
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "MAX_FILE_BYTES",
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "MAX_TOTAL_BYTES",
    "MAX_VIEW_CHARS",
    "MEMORY_ROOT",
    "MemoryFiles",
    "MemoryToolError",
    "memory_tool",
    "parse_path",
]

#: The path the model sees for the root directory (Anthropic's memory tool uses it too).
MEMORY_ROOT: Final = "/memories"
#: Longest path the tool reads, in characters: longer is refused before any work.
MAX_PATH_CHARS: Final = 1_024
#: Longest single name, in UTF-8 bytes: the common file-system limit (ext4, APFS, NTFS).
MAX_NAME_BYTES: Final = 255
#: Most names in one path below ``/memories``.
MAX_DEPTH: Final = 16
#: Largest memory file, in UTF-8 bytes; also the most the tool reads of any file.
MAX_FILE_BYTES: Final = 100_000
#: Most files and directories under the root together.
MAX_ENTRIES: Final = 1_000
#: Most bytes of all files under the root together.
MAX_TOTAL_BYTES: Final = 10_000_000
#: Longest text one ``view`` returns, in characters; longer output is cut and says so.
MAX_VIEW_CHARS: Final = 20_000
#: The commands, with the arguments each takes (required, optional).
COMMANDS: Final[dict[str, tuple[frozenset[str], frozenset[str]]]] = {
    "view": (frozenset({"path"}), frozenset({"view_range"})),
    "create": (frozenset({"path", "file_text"}), frozenset()),
    "str_replace": (frozenset({"path", "old_str", "new_str"}), frozenset()),
    # Anthropic's memory tool names the inserted text insert_text; seed 001 §1.6 names it new_str.
    "insert": (frozenset({"path", "insert_line"}), frozenset({"insert_text", "new_str"})),
    "delete": (frozenset({"path"}), frozenset()),
    "rename": (frozenset({"old_path", "new_path"}), frozenset()),
}

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_TMP_PREFIX: Final = ".memory-tmp-"
_SHOWN_CHARS: Final = 120


class MemoryToolError(AgentRefError):
    """A memory command was refused or failed; the message names the path and why.

    The tool executor turns it into an ``is_error`` result (spec §2.4-b), so the model
    reads the message and the run goes on.
    """


def show(path: str, *, whole: bool = False) -> str:
    """A path as a message shows it: control characters escaped, at most ``_SHOWN_CHARS`` characters.

    ``whole``: not shortened (a listing, where the model needs the exact names).
    """
    if whole:
        return "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in path[: _SHOWN_CHARS + 1])
    if len(path) > _SHOWN_CHARS or len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS] + "…"
    return text


def parse_path(path: object, field: str = "path") -> tuple[str, ...]:
    """The names below the root that ``path`` means, or a refusal (spec §18.2-a).

    Pure: it touches no file. ``"/memories"`` (or ``"/memories/"``) is ``()``.

    Args:
        path: what the model sent.
        field: the argument's name, for the message.

    Returns:
        The names, each a plain name (no ``/``, ``\\``, NUL, ``.``, ``..``, nor empty).

    Raises:
        MemoryToolError: the path is refused; the message says which rule it breaks.
    """
    if not isinstance(path, str):
        raise MemoryToolError(f"{field} must be a string, got {type(path).__name__}")
    where = f"{field} '{show(path)}'"
    if len(path) > MAX_PATH_CHARS:
        raise MemoryToolError(f"{where}: is {len(path):,} characters long; the limit is {MAX_PATH_CHARS:,}")
    if "\x00" in path:
        raise MemoryToolError(f"{where}: contains a NUL byte at character {path.index(chr(0))}")
    for i, c in enumerate(path):
        if ord(c) < 0x20 or ord(c) == 0x7F:
            raise MemoryToolError(f"{where}: contains the control character U+{ord(c):04X} at character {i}")
    if "\\" in path:
        raise MemoryToolError(f"{where}: contains a backslash; separate names with '/' (paths start with /memories)")
    if path != MEMORY_ROOT and not path.startswith(MEMORY_ROOT + "/"):
        raise MemoryToolError(f"{where}: is outside the memory directory; every path starts with {MEMORY_ROOT}/")
    if path in (MEMORY_ROOT, MEMORY_ROOT + "/"):
        return ()
    rest = path[len(MEMORY_ROOT) + 1 :]
    if rest.endswith("/"):
        rest = rest[:-1]  # one trailing slash names the same directory ("/memories//" keeps an empty name)
    names = tuple(rest.split("/"))
    if len(names) > MAX_DEPTH:
        raise MemoryToolError(f"{where}: is {len(names)} names deep; the limit is {MAX_DEPTH}")
    for name in names:
        if name == "":
            raise MemoryToolError(f"{where}: has an empty name ('//')")
        if name in (".", ".."):
            raise MemoryToolError(f"{where}: has a {name!r} name; paths cannot use '.' or '..'")
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            raise MemoryToolError(f"{where}: has a name that is not valid Unicode text (a lone surrogate)") from None
        if size > MAX_NAME_BYTES:
            raise MemoryToolError(f"{where}: has a name of {size:,} bytes; the limit is {MAX_NAME_BYTES}")
    return names


def _display(names: tuple[str, ...]) -> str:
    return show("/".join((MEMORY_ROOT, *names)))


@dataclass(frozen=True, slots=True)
class _Usage:
    entries: int
    total_bytes: int


class MemoryFiles:
    """The memory commands over one root directory; each call runs alone (one lock per root).

    Args:
        root: the directory the model's ``/memories`` stands for; created (mode 0700) if missing.

    Raises:
        ConfigError: ``root`` is not a directory and cannot be made one, or the platform
            cannot open files relative to a directory descriptor.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        """Make (if needed) and remember the root directory."""
        if os.open not in os.supports_dir_fd or os.stat not in os.supports_follow_symlinks:
            raise ConfigError("the memory tool needs a platform that opens files relative to a directory (POSIX)")
        path = Path(root)
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except FileExistsError:
            raise ConfigError(f"{path}: is not a directory; the memory tool needs a directory") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot make the memory directory ({exc.strerror or exc})") from None
        #: The root, resolved once: links in the caller's own path to it are the caller's choice.
        self.root: Final = os.path.realpath(path)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ dispatch

    def __call__(self, **arguments: Any) -> str:
        """Run one command; the tool's function. Absent and ``null`` arguments are the same.

        Raises:
            MemoryToolError: the command is refused or failed (an ``is_error`` result).
        """
        given = {k: v for k, v in arguments.items() if v is not None}
        command = given.pop("command", None)
        if not isinstance(command, str) or command not in COMMANDS:
            known = ", ".join(COMMANDS)
            got = "no command" if command is None else f"command '{show(str(command))}'"
            raise MemoryToolError(f"{got}: the memory tool's commands are {known}")
        required, optional = COMMANDS[command]
        missing = sorted(required - given.keys())
        extra = sorted(given.keys() - required - optional)
        if missing:
            raise MemoryToolError(f"{command}: missing {', '.join(missing)}")
        if extra:  # nothing the model sent is silently dropped
            takes = ", ".join(sorted(required | optional))
            raise MemoryToolError(f"{command}: does not take {', '.join(extra)} (it takes {takes})")
        with self._lock:
            try:
                method = getattr(self, command)
                result: str = method(**given)
            except MemoryToolError:
                raise
            except OSError as exc:  # a file-system failure is a result too (spec §18.3-a)
                where = f"{command} {show(str(given.get('path', given.get('old_path', ''))))}"
                raise MemoryToolError(f"{where}: {exc.strerror or exc}") from None
        return result

    def touched(self, arguments: dict[str, Any]) -> list[str]:
        """The file-system paths a command names (``path``, ``old_path``, ``new_path``), for its snapshot.

        A path the command would refuse is left out (a refused command changes nothing).
        """
        out: list[str] = []
        for key in ("path", "old_path", "new_path"):
            with contextlib.suppress(MemoryToolError):
                if key in arguments:
                    out.append(os.path.join(self.root, *parse_path(arguments[key], key)))
        return out

    def recorded(self, arguments: dict[str, Any]) -> tuple[str, list[snapshots.FileChange]]:
        """Run one command as ``__call__`` does; also return what it changed (spec RU1-d).

        Raises:
            MemoryToolError: the command is refused or failed (nothing changed, nothing to record).
        """
        paths = [] if arguments.get("command") == "view" else self.touched(arguments)
        try:
            before = snapshots.capture(paths)
        except (snapshots.SnapshotError, OSError) as exc:
            raise MemoryToolError(f"{arguments.get('command')}: cannot snapshot what it changes: {exc}") from None
        result = self(**arguments)
        try:
            after = snapshots.capture(paths)
        except (snapshots.SnapshotError, OSError) as exc:
            raise MemoryToolError(f"{arguments.get('command')}: done, but not recorded for undo: {exc}") from None
        return result, snapshots.changes(before, after)

    # ------------------------------------------------------------------ walking

    @contextlib.contextmanager
    def _directory(self, names: tuple[str, ...], *, make: bool = False) -> Iterator[int]:
        """A descriptor of the directory ``names``, opened one name at a time without following links."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for depth, name in enumerate(names):
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not make:
                        raise MemoryToolError(f"{_display(names[: depth + 1])}: no such directory") from None
                    os.mkdir(name, 0o700, dir_fd=fd)
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                        raise
                    kind = _kind(fd, name)
                    what = (
                        "a symbolic link, which the memory tool does not follow"
                        if kind == "link"
                        else "not a directory"
                    )
                    raise MemoryToolError(f"{_display(names[: depth + 1])}: is {what}") from None
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def _plan(self, names: tuple[str, ...]) -> tuple[int, str | None]:
        """Before making anything: how many of ``names``' directories are missing, and what the last name is.

        So a command refused for room or for an existing target has made no directory
        (spec §18.3-a: a refused command changes nothing). Links are refused as in ``_directory``.
        """
        parents = names[:-1]
        for depth in range(len(parents) + 1):
            with self._directory(parents[:depth]) as fd:
                if depth == len(parents):
                    return 0, _kind(fd, names[-1])
                if _kind(fd, parents[depth]) is None:
                    return len(parents) - depth, None
        raise AssertionError("unreachable")  # pragma: no cover

    def _read(self, parent: int, names: tuple[str, ...]) -> str:
        """The text of the file ``names[-1]`` in ``parent``: a regular file, UTF-8, within the bound."""
        where = _display(names)
        kind = _kind(parent, names[-1])
        if kind is None:
            raise MemoryToolError(f"{where}: no such file")
        if kind != "file":
            raise MemoryToolError(f"{where}: is {_KIND_TEXT[kind]}" + ("" if kind == "link" else ", not a file"))
        try:
            fd = os.open(names[-1], _READ_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a link since the check above
                raise MemoryToolError(f"{where}: is a symbolic link, which the memory tool does not follow") from None
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise MemoryToolError(f"{where}: is not a regular file")
            if info.st_size > MAX_FILE_BYTES:
                raise MemoryToolError(f"{where}: is {info.st_size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
            chunks: list[bytes] = []
            size = 0
            while size <= MAX_FILE_BYTES:  # read one byte past the bound, in case it grew
                chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
        if size > MAX_FILE_BYTES:
            raise MemoryToolError(f"{where}: is over {MAX_FILE_BYTES:,} bytes, the limit")
        data = b"".join(chunks)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MemoryToolError(f"{where}: is not UTF-8 text (byte {exc.start:,})") from None

    def _write_new(self, parent: int, name: str, text: str) -> None:
        """Write ``text`` to a new file ``name``; ``O_EXCL`` never follows nor replaces anything."""
        fd = os.open(name, _CREATE_FLAGS, 0o600, dir_fd=parent)
        try:
            data = memoryview(text.encode("utf-8"))
            while data:
                written = os.write(fd, data)
                data = data[written:]
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=parent)
            raise
        os.close(fd)

    def _replace(self, parent: int, name: str, text: str) -> None:
        """Replace the file ``name`` with ``text`` atomically: a new file, then ``renameat`` over it."""
        temporary = _TMP_PREFIX + secrets.token_hex(8)
        self._write_new(parent, temporary, text)
        try:
            os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=parent)
            raise

    def _usage(self) -> _Usage:
        """Files and directories under the root and their bytes; stops counting just past ``MAX_ENTRIES``."""
        entries = 0
        total = 0
        stack = [os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
        try:
            while stack and entries <= MAX_ENTRIES:
                fd = stack.pop()
                try:
                    with os.scandir(fd) as listing:
                        for entry in listing:
                            entries += 1
                            if entries > MAX_ENTRIES:
                                break
                            if entry.is_dir(follow_symlinks=False):
                                with contextlib.suppress(OSError):
                                    stack.append(os.open(entry.name, _DIR_FLAGS, dir_fd=fd))
                            elif entry.is_file(follow_symlinks=False):
                                total += entry.stat(follow_symlinks=False).st_size
                finally:
                    os.close(fd)
        finally:
            for fd in stack:
                os.close(fd)
        return _Usage(entries, total)

    def _check_room(self, *, new_entries: int, new_bytes: int, where: str) -> None:
        """Refuse a change that would pass ``MAX_ENTRIES`` or ``MAX_TOTAL_BYTES`` (spec §18.4-a)."""
        usage = self._usage()
        if new_entries and usage.entries + new_entries > MAX_ENTRIES:
            raise MemoryToolError(
                f"{where}: the memory directory is full ({MAX_ENTRIES:,} files and directories, the limit); "
                "delete something first"
            )
        if new_bytes > 0 and usage.total_bytes + new_bytes > MAX_TOTAL_BYTES:
            raise MemoryToolError(
                f"{where}: the memory directory would hold {usage.total_bytes + new_bytes:,} bytes; "
                f"the limit is {MAX_TOTAL_BYTES:,}; delete something first"
            )

    # ------------------------------------------------------------------ commands

    def view(self, path: object, view_range: object = None) -> str:
        """A file's lines, numbered from 1, or a directory's entries two levels deep (spec §18.1-a)."""
        names = parse_path(path)
        if not names:
            if view_range is not None:
                raise MemoryToolError(f"{MEMORY_ROOT}: is a directory; view_range applies to files")
            with self._directory(()) as fd:
                return self._listing(fd, ())
        with self._directory(names[:-1]) as parent:
            kind = _kind(parent, names[-1])
            if kind == "dir":
                if view_range is not None:
                    raise MemoryToolError(f"{_display(names)}: is a directory; view_range applies to files")
                with self._directory(names) as fd:
                    return self._listing(fd, names)
            text = self._read(parent, names)
        return _numbered(text, names, view_range)

    def _listing(self, fd: int, names: tuple[str, ...]) -> str:
        """Entries of the directory ``fd`` and of its subdirectories, with sizes; bounded."""
        rows: list[str] = []
        seen = 0
        more = False

        def scan(dir_fd: int, prefix: tuple[str, ...], depth: int) -> None:
            nonlocal seen, more
            with os.scandir(dir_fd) as listing:
                entries = []
                for entry in listing:
                    seen += 1
                    if seen > MAX_ENTRIES:
                        more = True
                        break
                    entries.append(entry)
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name.startswith(_TMP_PREFIX):
                    continue  # a write in progress (or one cut short): not a memory
                shown = show("/".join((MEMORY_ROOT, *prefix, entry.name)), whole=True)
                if entry.is_symlink():
                    rows.append(f"-\t{shown} (symbolic link, not followed)")
                elif entry.is_dir(follow_symlinks=False):
                    rows.append(f"-\t{shown}/")
                    if depth < 2:
                        with contextlib.suppress(OSError):
                            child = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
                            try:
                                scan(child, (*prefix, entry.name), depth + 1)
                            finally:
                                os.close(child)
                else:
                    size = entry.stat(follow_symlinks=False).st_size
                    rows.append(f"{size}\t{shown}")

        scan(fd, names, 1)
        head = f"The files and directories in {_display(names)}, two levels deep (bytes, path):"
        if not rows:
            return f"{_display(names)} is empty."
        if more:
            rows.append(f"(more than {MAX_ENTRIES:,} entries; the rest are not listed)")
        return _bounded([head, *rows], "view a subdirectory to see less")

    def create(self, path: object, file_text: object) -> str:
        """Write a new file (its directories are made as needed); an existing path is refused."""
        names = parse_path(path)
        if not names:
            raise MemoryToolError(f"{MEMORY_ROOT}: is the memory directory itself; create a file inside it")
        text = _text(file_text, "file_text")
        size = len(text.encode("utf-8"))
        where = _display(names)
        if size > MAX_FILE_BYTES:
            raise MemoryToolError(f"{where}: file_text is {size:,} bytes; the limit is {MAX_FILE_BYTES:,}")
        missing, kind = self._plan(names)
        if kind is not None:
            raise MemoryToolError(
                f"{where}: already exists ({_KIND_TEXT[kind]}); edit it with str_replace or insert, or delete it first"
            )
        self._check_room(new_entries=missing + 1, new_bytes=size, where=where)
        with self._directory(names[:-1], make=True) as parent:
            try:
                self._write_new(parent, names[-1], text)
            except FileExistsError:
                raise MemoryToolError(f"{where}: already exists (made by someone else just now)") from None
        return f"Created {where} ({size:,} bytes)."

    def str_replace(self, path: object, old_str: object, new_str: object) -> str:
        """Replace the one occurrence of ``old_str`` in a file with ``new_str``."""
        names = parse_path(path)
        old = _text(old_str, "old_str")
        new = _text(new_str, "new_str")
        where = _display(names)
        if not names:
            raise MemoryToolError(f"{MEMORY_ROOT}: is a directory, not a file")
        if not old:
            raise MemoryToolError(f"{where}: old_str is empty; give the exact text to replace")
        with self._directory(names[:-1]) as parent:
            text = self._read(parent, names)
            count = text.count(old)
            if count == 0:
                raise MemoryToolError(f"{where}: old_str does not occur in the file; nothing was changed")
            if count > 1:
                lines = _occurrence_lines(text, old)
                raise MemoryToolError(
                    f"{where}: old_str occurs {count} times (lines {', '.join(map(str, lines))}); "
                    "make it unique; nothing was changed"
                )
            updated = text.replace(old, new, 1)
            self._store(parent, names, text, updated)
        line = text[: text.index(old)].count("\n") + 1
        return f"Edited {where}: replaced the text at line {line}."

    def insert(self, path: object, insert_line: object, insert_text: object = None, new_str: object = None) -> str:
        """Insert text after line ``insert_line`` (0: at the top) of a file."""
        names = parse_path(path)
        where = _display(names)
        if insert_text is not None and new_str is not None and insert_text != new_str:
            raise MemoryToolError(f"{where}: insert_text and new_str differ; give the text once (insert_text)")
        chunk = _text(insert_text if insert_text is not None else new_str, "insert_text")
        if not names:
            raise MemoryToolError(f"{MEMORY_ROOT}: is a directory, not a file")
        if isinstance(insert_line, bool) or not isinstance(insert_line, int):
            raise MemoryToolError(f"{where}: insert_line must be an integer")
        with self._directory(names[:-1]) as parent:
            text = self._read(parent, names)
            lines = text.splitlines(keepends=True)
            if not 0 <= insert_line <= len(lines):
                raise MemoryToolError(
                    f"{where}: insert_line {insert_line} is out of range; "
                    f"the file has {len(lines)} lines (0 to {len(lines)})"
                )
            if lines and insert_line == len(lines) and not lines[-1].endswith(("\n", "\r")):
                lines[-1] += "\n"
            if not chunk.endswith("\n"):
                chunk += "\n"
            updated = "".join(lines[:insert_line]) + chunk + "".join(lines[insert_line:])
            self._store(parent, names, text, updated)
        return f"Inserted {chunk.count(chr(10))} line(s) into {where} after line {insert_line}."

    def _store(self, parent: int, names: tuple[str, ...], before: str, after: str) -> None:
        """Check the bounds for the edited text, then replace the file with it."""
        where = _display(names)
        size = len(after.encode("utf-8"))
        if size > MAX_FILE_BYTES:
            raise MemoryToolError(
                f"{where}: the edited file would be {size:,} bytes; "
                f"the limit is {MAX_FILE_BYTES:,}; nothing was changed"
            )
        self._check_room(new_entries=0, new_bytes=size - len(before.encode("utf-8")), where=where)
        self._replace(parent, names[-1], after)

    def delete(self, path: object) -> str:
        """Delete a file, a directory with everything in it, or a link (never what it points to)."""
        names = parse_path(path)
        if not names:
            raise MemoryToolError(f"{MEMORY_ROOT}: is the memory directory itself; delete what is inside it")
        where = _display(names)
        with self._directory(names[:-1]) as parent:
            kind = _kind(parent, names[-1])
            if kind is None:
                raise MemoryToolError(f"{where}: no such file or directory")
            if kind == "dir":
                # rmtree with dir_fd works on descriptors, never following a link inside.
                shutil.rmtree(names[-1], dir_fd=parent)
            else:
                os.unlink(names[-1], dir_fd=parent)
        return f"Deleted {where}" + (" and everything in it." if kind == "dir" else ".")

    def rename(self, old_path: object, new_path: object) -> str:
        """Move a file or directory to a new path (its directories made as needed); an existing target is refused."""
        old = parse_path(old_path, "old_path")
        new = parse_path(new_path, "new_path")
        if not old or not new:
            raise MemoryToolError(f"{MEMORY_ROOT}: is the memory directory itself; it cannot be renamed or replaced")
        if new == old:
            raise MemoryToolError(f"{_display(new)}: old_path and new_path are the same; nothing to do")
        if new[: len(old)] == old:
            raise MemoryToolError(f"{_display(new)}: is inside {_display(old)}; a directory cannot move into itself")
        with self._directory(old[:-1]) as source:
            if _kind(source, old[-1]) is None:
                raise MemoryToolError(f"{_display(old)}: no such file or directory")
            missing, kind = self._plan(new)
            if kind is not None:
                raise MemoryToolError(f"{_display(new)}: already exists ({_KIND_TEXT[kind]}); delete it first")
            if missing:
                self._check_room(new_entries=missing, new_bytes=0, where=_display(new))
            with self._directory(new[:-1], make=True) as target:
                os.rename(old[-1], new[-1], src_dir_fd=source, dst_dir_fd=target)
        return f"Renamed {_display(old)} to {_display(new)}."


_KIND_TEXT: Final = {
    "file": "a file",
    "dir": "a directory",
    "link": "a symbolic link, which the memory tool does not follow",
    "other": "a special file",
}


def _kind(dir_fd: int, name: str) -> str | None:
    """What ``name`` in ``dir_fd`` is, without following a link: file, dir, link, other, or None."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return "link"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    if stat.S_ISREG(info.st_mode):
        return "file"
    return "other"


def _text(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise MemoryToolError(f"{field} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MemoryToolError(f"{field} is not valid Unicode text (a lone surrogate)") from None
    return value


def _occurrence_lines(text: str, needle: str) -> list[int]:
    lines: list[int] = []
    start = text.find(needle)
    while start != -1 and len(lines) < 10:
        lines.append(text.count("\n", 0, start) + 1)
        start = text.find(needle, start + 1)
    return lines


def _numbered(text: str, names: tuple[str, ...], view_range: object) -> str:
    """``text`` with line numbers, optionally only ``[first, last]`` (1-based, ``last`` -1: to the end)."""
    where = _display(names)
    lines = text.splitlines()
    first, last = 1, len(lines)
    if view_range is not None:
        if (
            not isinstance(view_range, list | tuple)
            or len(view_range) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in view_range)
        ):
            raise MemoryToolError(f"{where}: view_range must be two integers [first, last]")
        first, last = view_range[0], view_range[1]
        if last == -1:
            last = len(lines)
        if not 1 <= first <= max(1, len(lines)) or not first <= last <= len(lines):
            raise MemoryToolError(
                f"{where}: view_range {list(view_range)} is out of range; the file has {len(lines)} lines "
                "(first from 1, last up to the count or -1)"
            )
    head = f"{where}, lines {first} to {last} of {len(lines)}:" if lines else f"{where} is empty."
    rows = [f"{n:6}\t{lines[n - 1]}" for n in range(first, last + 1)]
    return _bounded([head, *rows], "pass view_range to see the rest")


def _bounded(rows: list[str], hint: str) -> str:
    """Join ``rows`` with newlines, cut at a row boundary to ``MAX_VIEW_CHARS``, saying so (spec §18.4-a)."""
    kept: list[str] = []
    size = 0
    for row in rows:
        if size + len(row) + 1 > MAX_VIEW_CHARS - 200:
            kept.append(
                f"[output cut at {MAX_VIEW_CHARS:,} characters: {len(kept) - 1} of {len(rows) - 1} rows; {hint}]"
            )
            break
        kept.append(row if len(row) <= MAX_VIEW_CHARS // 4 else row[: MAX_VIEW_CHARS // 4] + "…[line cut]")
        size += len(kept[-1]) + 1
    return "\n".join(kept)


_DESCRIPTION: Final = (
    "Your memory: a directory of text files under /memories that persists between conversations. "
    "Check it before a task, record what you learn, and keep it organised. Commands: "
    "view {path, view_range?: [first, last]} shows a file with line numbers or lists a directory; "
    "create {path, file_text} writes a new file; "
    "str_replace {path, old_str, new_str} replaces the one occurrence of old_str; "
    "insert {path, insert_line, insert_text} inserts after line insert_line (0: at the top); "
    "delete {path}; rename {old_path, new_path}. Every path starts with /memories/."
)

_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "command": {"enum": list(COMMANDS), "description": "The command to run."},
        "path": {"type": "string", "description": "A path under /memories, e.g. /memories/notes.md."},
        "view_range": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "view: the first and last line to show, from 1; last -1 means to the end.",
        },
        "file_text": {"type": "string", "description": "create: the file's content."},
        "old_str": {"type": "string", "description": "str_replace: the exact text to replace; must occur once."},
        "new_str": {"type": "string", "description": "str_replace: the replacement text."},
        "insert_line": {"type": "integer", "description": "insert: the line after which to insert; 0 is the top."},
        "insert_text": {"type": "string", "description": "insert: the text to insert."},
        "old_path": {"type": "string", "description": "rename: the path to move."},
        "new_path": {"type": "string", "description": "rename: where to move it."},
    },
    "required": ["command"],
}


class _Recording:
    """The memory tool's function: a command, and its record when the call is an agent's (spec RU1-d).

    Called without a context (``tool.fn(command=...)``) it is ``MemoryFiles.__call__``. With
    an agent's context and a store keeping snapshots, the command runs (in the executor's
    thread) under a lock with its capture, its changes are queued in call order, and the
    awaitable it returns records the queue, in order, on the event loop.
    """

    def __init__(self, files: MemoryFiles) -> None:
        self.files = files
        self._lock = threading.Lock()
        self._queue: list[tuple[ToolContext, list[snapshots.FileChange]]] = []
        self._order = asyncio.Lock()

    def __call__(self, _memory_context: ToolContext | None = None, **arguments: Any) -> Any:
        ctx = _memory_context
        if ctx is None or not ctx.agent_uuid or not isinstance(ctx.store, snapshots.SnapshotStore):
            return self.files(**arguments)
        with self._lock:
            result, found = self.files.recorded(arguments)
            self._queue.append((ctx, found))
        return self._record(result)

    async def _record(self, result: str) -> str:
        async with self._order:
            with self._lock:
                queue, self._queue = self._queue, []
            for ctx, found in queue:
                await snapshots.record_changes(ctx.store, ctx.agent_uuid, ctx.run_id, ctx.step, found)
        return result


def memory_tool(root: str | os.PathLike[str], *, name: str = "memory") -> Tool:
    """A backend tool giving the model a memory directory at ``root`` (spec §18).

    Args:
        root: the directory; created (mode 0700) if missing. The model sees it as ``/memories``.
        name: the tool name the model calls.

    Returns:
        The ``Tool``; pass it in ``Agent(tools=[...])``.

    Raises:
        ConfigError: ``root`` cannot be a directory, or the platform is not POSIX.
    """
    files = MemoryFiles(root)
    # Every argument is passed through as the model sent it (``Any``): the commands check
    # types themselves, so a wrong type is a message naming the command and the field.
    params: dict[str, Any] = dict.fromkeys(_SCHEMA["properties"], Any)
    recording = _Recording(files)
    return Tool(
        name=name,
        description=_DESCRIPTION,
        input_schema=_SCHEMA,
        fn=recording,
        param_types=params,
        context_param="_memory_context",
    )
