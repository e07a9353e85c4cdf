"""The search tools of the workspace: ``Glob`` and ``Grep``, with the Claude Agent SDK's inputs.

Owns: the glob language both use (``glob_regex``: ``**`` any directories, ``*`` and ``?``
within a name, ``[...]``, ``{a,b}``; spec [WS2-e]), ``glob`` (matching files, newest first)
and ``grep`` (a regular expression over the files; output modes ``content``,
``files_with_matches`` and ``count``, ``-i``, ``-n``, context lines, ``head_limit``;
[WS2-f]). The search runs in Python's ``re`` over the descriptors ``confine.walk`` opens;
``ripgrep`` is used instead when ``rg`` is on ``PATH`` (``backend``), run in the
directory's descriptor (``fchdir``) so no path is looked up again by name ([WS2-g]).
Does not own: path confinement (``confine.py``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Final, Literal

from .confine import Workspace, WorkspaceError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["MAX_GLOB_RESULTS", "GrepQuery", "backend", "glob", "glob_regex", "grep"]

#: Paths ``Glob`` answers at most (newest first); more is said in a note.
MAX_GLOB_RESULTS: Final = 100
#: Output lines ``Grep`` collects at most before stopping the search (the result bound cuts further).
MAX_GREP_LINES: Final = 20_000
#: Characters of one matching line ``Grep`` shows.
MAX_GREP_LINE_CHARS: Final = 2000
#: Largest file ``Grep`` searches, in bytes.
MAX_GREP_FILE_BYTES: Final = 10_000_000
OutputMode = Literal["content", "files_with_matches", "count"]


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """The regular expression of a glob over ``/``-separated relative paths ([WS2-e]).

    Raises:
        WorkspaceError: an unclosed ``[`` or ``{``.
    """
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                raise WorkspaceError(f"glob {pattern!r}: '[' at character {i} is not closed")
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        elif c == "{":
            depth += 1
            out.append("(?:")
        elif c == "}" and depth:
            depth -= 1
            out.append(")")
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    if depth:
        raise WorkspaceError(f"glob {pattern!r}: a '{{' is not closed")
    try:
        return re.compile("".join(out), re.DOTALL)
    except re.error as exc:
        raise WorkspaceError(f"glob {pattern!r}: {exc}") from None


def _glob_matches(pattern: str, rel: str) -> bool:
    """A glob without ``/`` matches a file's name at any depth; one with ``/`` its whole relative path."""
    target = rel if "/" in pattern else rel.rsplit("/", 1)[-1]
    return glob_regex(pattern).fullmatch(target) is not None


def glob(ws: Workspace, pattern: str, path: str | None = None) -> str:
    """The files below ``path`` (the root by default) whose relative path matches ``pattern``, newest first.

    Raises:
        WorkspaceError: a refused path, or a glob that cannot be read.
    """
    names = ws.names(path or "")
    regex = glob_regex(pattern)
    found: list[tuple[int, str]] = []
    for file_names, info, _ in ws.walk(names):
        rel = "/".join(file_names[len(names) :])
        if regex.fullmatch(rel):
            found.append((info.st_mtime_ns, ws.shown(file_names)))
    found.sort(key=lambda item: (-item[0], item[1]))
    if not found:
        return "No files found"
    lines = [shown for _, shown in found[:MAX_GLOB_RESULTS]]
    if len(found) > MAX_GLOB_RESULTS:
        lines.append(f"[agent-ref: {len(found)} files match; the {MAX_GLOB_RESULTS} newest are shown]")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class GrepQuery:
    """One ``Grep`` call's input, checked (the SDK's names: ``-i``, ``-n``, ``-A``, ``-B``, ``-C``)."""

    pattern: str
    path: str | None = None
    glob: str | None = None
    output_mode: OutputMode = "files_with_matches"
    ignore_case: bool = False
    line_numbers: bool = True
    after: int = 0
    before: int = 0
    head_limit: int | None = None
    multiline: bool = False

    def regex(self) -> re.Pattern[str]:
        """The compiled pattern.

        Raises:
            WorkspaceError: a pattern ``re`` cannot read, with ``re``'s reason.
        """
        flags = (re.IGNORECASE if self.ignore_case else 0) | (re.DOTALL | re.MULTILINE if self.multiline else 0)
        try:
            return re.compile(self.pattern, flags)
        except re.error as exc:
            raise WorkspaceError(f"pattern {self.pattern!r}: {exc}") from None


def backend() -> Literal["ripgrep", "python"]:
    """Which search ``Grep`` runs: ``ripgrep`` when ``rg`` is on ``PATH``, else ``python`` ([WS2-g])."""
    return "ripgrep" if shutil.which("rg") else "python"


def grep(ws: Workspace, query: GrepQuery, *, use: Literal["ripgrep", "python"] | None = None) -> str:
    """Search the files below ``query.path`` for ``query.pattern`` ([WS2-f]).

    Raises:
        WorkspaceError: a refused path, or a pattern or glob that cannot be read.
    """
    query.regex()  # a bad pattern is one error, whichever search runs
    if query.glob is not None:
        glob_regex(query.glob)
    names = ws.names(query.path or "")
    chosen = use or backend()
    lines = _ripgrep(ws, names, query) if chosen == "ripgrep" else list(_python(ws, names, query))
    if query.head_limit is not None:
        lines = lines[: query.head_limit]
    if not lines:
        return "No matches found" if query.output_mode == "content" else "No files found"
    return "\n".join(lines)


def _candidates(ws: Workspace, names: list[str], query: GrepQuery) -> Iterator[tuple[str, bytes]]:
    """Each text file to search (sorted by path) as its shown path and bytes."""
    try:
        os.close(ws.open_dir(names))
    except WorkspaceError:
        if not names:
            raise
        fd, name, all_names = ws.parent("/".join(names))  # a single file
        try:
            file_fd = ws.open_in(fd, name, ws.shown(all_names))
        finally:
            os.close(fd)
        with open(file_fd, "rb") as f:
            yield ws.shown(all_names), f.read(MAX_GREP_FILE_BYTES)
        return
    yield from _files(ws, ws.walk(names), names, query)


def _files(
    ws: Workspace, walked: Iterator[tuple[list[str], os.stat_result, int]], names: list[str], query: GrepQuery
) -> Iterator[tuple[str, bytes]]:
    for file_names, info, fd in walked:
        rel = "/".join(file_names[len(names) :])
        if query.glob is not None and not _glob_matches(query.glob, rel):
            continue
        if info.st_size > MAX_GREP_FILE_BYTES:
            continue
        shown = ws.shown(file_names)
        try:
            file_fd = ws.open_in(fd, file_names[-1], shown)
        except WorkspaceError:
            continue
        with open(file_fd, "rb") as f:
            data = f.read(MAX_GREP_FILE_BYTES)
        if b"\x00" not in data[:8192]:
            yield shown, data


def _python(ws: Workspace, names: list[str], query: GrepQuery) -> Iterator[str]:
    regex = query.regex()
    emitted = 0
    for shown, data in _candidates(ws, names, query):
        text = data.decode("utf-8", "replace")
        if query.multiline:
            hits = {text.count("\n", 0, m.start()) for m in regex.finditer(text)}
            lines = text.splitlines()
        else:
            lines = text.splitlines()
            hits = {n for n, line in enumerate(lines) if regex.search(line)}
        if not hits:
            continue
        if query.output_mode == "files_with_matches":
            out = [shown]
        elif query.output_mode == "count":
            out = [f"{shown}:{len(hits)}"]
        else:
            out = _content(shown, lines, sorted(hits), query, first=emitted == 0)
        for line in out:
            emitted += 1
            if emitted > MAX_GREP_LINES or (query.head_limit is not None and emitted > query.head_limit):
                return
            yield line


def _content(shown: str, lines: list[str], hits: list[int], query: GrepQuery, *, first: bool) -> list[str]:
    """``path:n:line`` for a match, ``path-n-line`` for context, ``--`` between groups (ripgrep's form)."""
    context = query.after > 0 or query.before > 0
    wanted: list[int] = []
    for n in hits:
        for m in range(max(0, n - query.before), min(len(lines), n + query.after + 1)):
            if not wanted or m > wanted[-1]:
                wanted.append(m)
    hit_set = set(hits)
    out: list[str] = [] if first or not context else ["--"]
    previous = None
    for m in wanted:
        if context and previous is not None and m != previous + 1:
            out.append("--")
        sep = ":" if m in hit_set else "-"
        line = lines[m][:MAX_GREP_LINE_CHARS]
        out.append(f"{shown}{sep}{m + 1}{sep}{line}" if query.line_numbers else f"{shown}{sep}{line}")
        previous = m
    return out


def _rg_args(query: GrepQuery) -> list[str]:
    args = ["rg", "--no-config", "--hidden", "--no-ignore", "--sort", "path", "--no-messages", "--color", "never"]
    args += ["--glob", "!.git", "--max-filesize", str(MAX_GREP_FILE_BYTES), "--with-filename"]
    if query.ignore_case:
        args.append("-i")
    if query.multiline:
        args += ["-U", "--multiline-dotall"]
    if query.glob is not None:
        args += ["--glob", query.glob]
    if query.output_mode == "files_with_matches":
        args.append("-l")
    elif query.output_mode == "count":
        args.append("-c")
    else:
        args += ["-n"] if query.line_numbers else ["-N"]
        args += ["-A", str(query.after), "-B", str(query.before)]
    return [*args, "--regexp", query.pattern, "."]


def _ripgrep(ws: Workspace, names: list[str], query: GrepQuery) -> list[str]:
    """``rg`` run in the directory's descriptor; its ``./x`` paths shown from the root ([WS2-g])."""
    try:
        fd = ws.open_dir(names)
    except WorkspaceError:
        if not names:
            raise
        return list(_python(ws, names, query))  # a single file: read through confine, not by rg
    base = ws.shown(names)
    limit = min(MAX_GREP_LINES, query.head_limit or MAX_GREP_LINES)
    out: list[str] = []
    try:
        with subprocess.Popen(
            _rg_args(query),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            preexec_fn=lambda: os.fchdir(fd),  # the walked descriptor, not a path
        ) as proc:
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                out.append(base + line[1:] if line.startswith("./") else line)
                if len(out) >= limit:
                    proc.kill()
                    break
    finally:
        os.close(fd)
    return out
