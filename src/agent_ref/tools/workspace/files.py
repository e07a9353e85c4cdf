"""The file tools of the workspace: ``Read``, ``Write`` and ``Edit``, with the Claude Agent SDK's inputs.

Owns: the three tools' bodies and results (spec ``spec/agent-ref.md`` §WS2): ``Read``
``{file_path, offset?, limit?}`` answers numbered lines (``cat -n``'s form), ``Write``
``{file_path, content}`` replaces or creates a file, ``Edit`` ``{file_path, old_string,
new_string, replace_all?}`` replaces one unique match (or every one). Also ``preview``:
the unified diff a change would make, shown in an approval (spec [WS3-c]).
Does not own: how a path is reached (``confine.py``: every component without links).
"""

from __future__ import annotations

import difflib
import os
from typing import TYPE_CHECKING, BinaryIO, Final

from .confine import Workspace, WorkspaceError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DEFAULT_READ_LINES", "MAX_FILE_BYTES", "MAX_LINE_CHARS", "edit", "preview", "read", "write"]

#: Lines ``Read`` answers when no ``limit`` is given (the SDK's default).
DEFAULT_READ_LINES: Final = 2000
#: Characters of one line ``Read`` shows; the rest of a longer line is cut with a note.
MAX_LINE_CHARS: Final = 2000
#: Largest file ``Read`` reads and ``Edit`` edits (bytes); a larger one is read in parts by ``offset``.
MAX_FILE_BYTES: Final = 10_000_000
#: Bytes of one line ``Read`` keeps (room for ``MAX_LINE_CHARS`` characters of UTF-8); the rest is skipped.
_LINE_BYTES: Final = 4 * 2000 + 4
#: Bytes of a file looked at for a NUL to call it binary.
_SNIFF: Final = 8192
#: Characters of a diff an approval shows ([WS3-c]).
MAX_PREVIEW_CHARS: Final = 4000


def _text(data: bytes, shown: str, first: int = 1) -> tuple[str, str]:
    """``data`` as text and a note when it was not UTF-8 ([WS2-b]).

    Raises:
        WorkspaceError: a NUL in its first bytes: a binary file.
    """
    if b"\x00" in data[:_SNIFF]:
        raise WorkspaceError(f"{shown}: is a binary file ({len(data):,} bytes read); Read shows text files only")
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + first
        note = f"[agent-ref: {shown} is not UTF-8 (line {line}); undecodable bytes are shown as U+FFFD]\n"
        return data.decode("utf-8", "replace"), note


def _lines(f: BinaryIO, start: int, count: int) -> tuple[list[bytes], int, bool]:
    """Lines ``start`` to ``start + count - 1`` of ``f`` (each at most ``_LINE_BYTES``), how many lines, any cut.

    The file is read one bounded line at a time: memory stays bounded whatever its size.
    """
    chosen: list[bytes] = []
    total = 0
    cut = False
    while raw := f.readline(_LINE_BYTES):
        if not raw.endswith(b"\n") and len(raw) == _LINE_BYTES:
            cut = True
            while (rest := f.readline(_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass  # the rest of an overlong line: skipped, not kept
        total += 1
        if start <= total < start + count:
            chosen.append(raw.rstrip(b"\r\n"))
    return chosen, total, cut


def read(ws: Workspace, file_path: str, offset: int | None = None, limit: int | None = None) -> str:
    """Read a file of the workspace: numbered lines from ``offset`` (1-based), at most ``limit`` ([WS2-a]).

    Raises:
        WorkspaceError: a refused path or file, a binary file, or a bad offset or limit.
    """
    start = 1 if offset is None else offset
    count = DEFAULT_READ_LINES if limit is None else limit
    if start < 1:
        raise WorkspaceError(f"offset must be a line number of at least 1, not {start}")
    if count < 1:
        raise WorkspaceError(f"limit must be at least 1 line, not {count}")
    file_fd, shown = ws.open_file(file_path)
    with os.fdopen(file_fd, "rb") as f:
        head = f.read(_SNIFF)
        if b"\x00" in head:
            size = os.fstat(f.fileno()).st_size
            raise WorkspaceError(f"{shown}: is a binary file ({size:,} bytes); Read shows text files only")
        f.seek(0)
        chosen, total, _ = _lines(f, start, count)
    if total == 0:
        return f"[agent-ref: {shown} is empty]"
    if start > total:
        raise WorkspaceError(f"{shown}: has {total} lines; offset {start} is past its end")
    text, note = _text(b"\n".join(chosen), shown, start)
    width = len(str(start + len(chosen) - 1))
    out = []
    for number, line in enumerate(text.split("\n"), start):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" [agent-ref: line cut at {MAX_LINE_CHARS} characters]"
        out.append(f"{number:>{width}}\t{line}")
    end = start + len(chosen) - 1
    if end < total:
        out.append(f"[agent-ref: lines {start}-{end} of {total}; pass offset={end + 1} for more]")
    return note + "\n".join(out)


def write(ws: Workspace, file_path: str, content: str) -> str:
    """Write ``content`` to a file of the workspace, making its directories ([WS2-c]).

    Raises:
        WorkspaceError: a refused path, a non-regular or hard-linked target ([WS1-d]).
    """
    shown, created = ws.write_file(file_path, content.encode("utf-8", "surrogateescape"))
    if created:
        return f"File created successfully at: {shown}"
    return f"The file {shown} has been updated successfully."


def _edited(text: str, old_string: str, new_string: str, replace_all: bool, shown: str) -> tuple[str, int]:
    """``text`` with the replacement made, and how many; the SDK's refusals as errors ([WS2-d])."""
    if old_string == "":
        raise WorkspaceError(f"{shown}: old_string is empty; pass the text to replace (Write makes a new file)")
    if old_string == new_string:
        raise WorkspaceError(f"{shown}: old_string and new_string are the same; there is nothing to change")
    found = text.count(old_string)
    if found == 0:
        raise WorkspaceError(f"{shown}: old_string was not found in the file")
    if found > 1 and not replace_all:
        raise WorkspaceError(
            f"{shown}: old_string occurs {found} times; give more context to make it unique, or pass replace_all"
        )
    return text.replace(old_string, new_string) if replace_all else text.replace(old_string, new_string, 1), found


def edit(ws: Workspace, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
    """Replace ``old_string`` by ``new_string`` in a file of the workspace ([WS2-d]).

    Raises:
        WorkspaceError: a refused path or file, not UTF-8, or ``old_string`` absent, ambiguous or unchanged.
    """
    fd, name, shown, info = ws.stat_for_write(file_path)
    try:
        if info is None:
            raise WorkspaceError(f"{shown}: no such file; Write makes a new file")
        file_fd = ws.open_in(fd, name, shown)
    finally:
        os.close(fd)
    with open(file_fd, "rb", closefd=True) as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise WorkspaceError(f"{shown}: is over {MAX_FILE_BYTES:,} bytes; Edit edits smaller files")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkspaceError(f"{shown}: is not UTF-8 (byte {exc.start}); Edit would damage it") from None
    changed, count = _edited(text, old_string, new_string, replace_all, shown)
    ws.write_file(file_path, changed.encode("utf-8"), expect=info)
    times = f" ({count} occurrences)" if replace_all and count > 1 else ""
    return f"The file {shown} has been updated successfully{times}."


def _diff(before: str, after: str, shown: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), f"a{shown}", f"b{shown}"
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    if len(text) > MAX_PREVIEW_CHARS:
        text = text[:MAX_PREVIEW_CHARS] + f"[agent-ref: diff cut at {MAX_PREVIEW_CHARS} characters]\n"
    return text


def preview(ws: Workspace, name: str, tool_input: Mapping[str, object]) -> str | None:
    """The unified diff a ``Write`` or ``Edit`` call would make, for its approval ([WS3-c]); else ``None``.

    Never raises: a call whose change cannot be computed gets a one-line reason instead.
    """
    if name not in ("Write", "Edit"):
        return None
    path = tool_input.get("file_path")
    if not isinstance(path, str):
        return None
    try:
        try:
            data, _, shown = ws.read_file(path, MAX_FILE_BYTES)
            before = data.decode("utf-8", "replace")
        except WorkspaceError:
            before, shown = "", ws.shown(ws.names(path))
        if name == "Write":
            content = tool_input.get("content")
            after = content if isinstance(content, str) else ""
        else:
            old, new = tool_input.get("old_string"), tool_input.get("new_string")
            if not isinstance(old, str) or not isinstance(new, str):
                return None
            after, _ = _edited(before, old, new, bool(tool_input.get("replace_all", False)), shown)
        return _diff(before, after, shown)
    except WorkspaceError as exc:
        return f"(no diff: {exc})"
