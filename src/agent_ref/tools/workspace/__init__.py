"""Workspace tools: ``Read``, ``Write``, ``Edit``, ``Glob`` and ``Grep`` over one directory (issue 41 §1).

Owns: ``workspace_tools(root)``, the tools with the Claude Agent SDK's names and inputs,
each confined to ``root`` (spec ``spec/agent-ref.md`` §WS); ``WRITING_TOOLS``, the ones
that change files (asked about in ``auto`` mode, §WS3); ``change_preview``, the diff an
approval of one of them shows. Does not own: the confinement (``confine.py``), the file
tools' bodies (``files.py``), the search (``search.py``), nor ``Bash`` (the sandbox's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Literal

from ..core import Tool, tool
from . import files, search
from .confine import Workspace, WorkspaceError

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from ..core import ToolCallRequest

__all__ = ["WRITING_TOOLS", "Workspace", "WorkspaceError", "change_preview", "with_change", "workspace_tools"]

#: The workspace tools that change files: ``auto`` asks about them unless a rule allows ([WS3-a]).
WRITING_TOOLS: Final = frozenset({"Write", "Edit", "Bash"})

_GREP_DESCRIPTION: Final = (
    "Search file contents with a regular expression (ripgrep when installed, else Python's re). "
    "output_mode: files_with_matches (default: paths), content (matching lines, with -n line numbers "
    "and -A/-B/-C context), count (matches per file). glob filters files (e.g. '*.py', 'src/**/*.ts'); "
    "-i ignores case; head_limit keeps the first N lines or entries; multiline lets . and patterns span lines."
)


def _grep_schema() -> dict[str, Any]:
    number = {"type": "integer", "minimum": 0}
    props: dict[str, Any] = {
        "pattern": {"type": "string", "description": "the regular expression to search for"},
        "path": {"type": "string", "description": "file or directory to search (default: the workspace)"},
        "glob": {"type": "string", "description": "only files matching this glob, e.g. '*.js' or '**/*.{ts,tsx}'"},
        "output_mode": {"type": "string", "enum": ["content", "files_with_matches", "count"]},
        "-i": {"type": "boolean", "description": "case-insensitive search"},
        "-n": {"type": "boolean", "description": "line numbers in content mode (default: true)"},
        "-A": {**number, "description": "lines after each match (content mode)"},
        "-B": {**number, "description": "lines before each match (content mode)"},
        "-C": {**number, "description": "lines before and after each match (content mode)"},
        "head_limit": {**number, "description": "keep only the first N output lines or entries"},
        "multiline": {"type": "boolean", "description": "patterns may span lines"},
    }
    return {"type": "object", "properties": props, "required": ["pattern"]}


def _grep_tool(ws: Workspace) -> Tool:
    types: dict[str, Any] = {
        "pattern": str,
        "path": str,
        "glob": str,
        "output_mode": Literal["content", "files_with_matches", "count"],
        "-i": bool,
        "-n": bool,
        "-A": int,
        "-B": int,
        "-C": int,
        "head_limit": int,
        "multiline": bool,
    }

    def grep_call(**kw: Any) -> str:
        if "pattern" not in kw:
            raise WorkspaceError("Grep needs a pattern")
        for key in ("-A", "-B", "-C", "head_limit"):
            if kw.get(key) is not None and kw[key] < 0:
                raise WorkspaceError(f"{key} must be 0 or more, not {kw[key]}")
        context = kw.get("-C") or 0
        query = search.GrepQuery(
            pattern=kw["pattern"],
            path=kw.get("path"),
            glob=kw.get("glob"),
            output_mode=kw.get("output_mode", "files_with_matches"),
            ignore_case=bool(kw.get("-i", False)),
            line_numbers=bool(kw.get("-n", True)),
            after=kw.get("-A") or context,
            before=kw.get("-B") or context,
            head_limit=kw.get("head_limit"),
            multiline=bool(kw.get("multiline", False)),
        )
        return search.grep(ws, query)

    return Tool(
        name="Grep", description=_GREP_DESCRIPTION, input_schema=_grep_schema(), fn=grep_call, param_types=types
    )


def workspace_tools(root: Path) -> list[Tool]:
    """The workspace tools over ``root``: Read, Write, Edit, Glob, Grep (spec §WS).

    Args:
        root: an existing directory; resolved once, nothing below it is followed.

    Returns:
        The tools, in that order.

    Raises:
        WorkspaceError: ``root`` is not an existing directory.
    """
    ws = Workspace.at(root)

    @tool(name="Read")
    def read_tool(file_path: str, offset: int | None = None, limit: int | None = None) -> str:
        """Read a text file of the workspace; lines come numbered (cat -n), 2000 from offset by default.

        Args:
            file_path: the file, absolute within the workspace or relative to it.
            offset: the first line to read (1-based).
            limit: how many lines to read.
        """
        return files.read(ws, file_path, offset, limit)

    @tool(name="Write")
    def write_tool(file_path: str, content: str) -> str:
        """Write a file of the workspace, replacing it if it exists; missing directories are made.

        Args:
            file_path: the file, absolute within the workspace or relative to it.
            content: the whole new content.
        """
        return files.write(ws, file_path, content)

    @tool(name="Edit")
    def edit_tool(file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> str:
        """Replace text in a file of the workspace: old_string must occur exactly once unless replace_all.

        Args:
            file_path: the file, absolute within the workspace or relative to it.
            old_string: the exact text to replace.
            new_string: the text to put instead.
            replace_all: replace every occurrence.
        """
        return files.edit(ws, file_path, old_string, new_string, replace_all)

    @tool(name="Glob")
    def glob_tool(pattern: str, path: str | None = None) -> str:
        """Find files by glob pattern ('**/*.py', 'src/*.{ts,tsx}'), newest first.

        Args:
            pattern: the glob, matched against paths relative to path.
            path: the directory to search (default: the workspace).
        """
        return search.glob(ws, pattern, path)

    return [read_tool, write_tool, edit_tool, glob_tool, _grep_tool(ws)]


def change_preview(root: Path, name: str, tool_input: Mapping[str, object]) -> str | None:
    """The unified diff a ``Write`` or ``Edit`` call would make in ``root`` ([WS3-c]); ``None`` for other tools."""
    try:
        ws = Workspace.at(root)
    except WorkspaceError:
        return None
    return files.preview(ws, name, tool_input)


def with_change(root: Path | None, call: ToolCallRequest, reason: str) -> str:
    """An approval's reason with the change it approves: the diff of a Write or Edit, the command of a Bash ([WS3-c]).

    Args:
        root: the agent's workspace; ``None``: the reason as it is.
        call: the call awaiting approval.
        reason: why the permissions ask.
    """
    if root is None:
        return reason
    if call.name == "Bash" and isinstance(call.input.get("command"), str):
        return f"{reason}\ncommand: {call.input['command'][: files.MAX_PREVIEW_CHARS]}"
    diff = change_preview(root, call.name, call.input)
    return reason if diff is None else f"{reason}\n{diff}"
