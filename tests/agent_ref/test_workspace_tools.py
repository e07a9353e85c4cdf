"""The workspace tools Read, Write, Edit, Glob and Grep: direct calls and through the agent (spec §WS2, §WS4)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, MemoryStore, ReplayModel
from agent_ref.errors import ConfigError
from agent_ref.run.options import AgentOptions
from agent_ref.tools.workspace import Workspace, WorkspaceError, files, search, workspace_tools
from agent_ref_support import fast_retry, run
from validating import assert_valid
from workspace_support import replay_calls

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "a.py").write_text("import os\n\ndef main():\n    return os.getcwd()\n")
    (tmp_path / "src" / "pkg" / "b.py").write_text("# TODO: b\nvalue = 1\n")
    (tmp_path / "README.md").write_text("# Title\nTODO: docs\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "config").write_text("TODO in git\n")
    return Workspace.at(tmp_path)


def test_spec_WS2_a_read_numbers_lines_and_pages_by_offset_and_limit(ws: Workspace) -> None:
    """[WS2-a] Read answers `cat -n` lines; offset and limit page it; the rest is said in a note."""
    assert files.read(ws, "src/a.py", offset=3, limit=1) == (
        "3\tdef main():\n[agent-ref: lines 3-3 of 4; pass offset=4 for more]"
    )
    (ws.root / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 2501)))
    text = files.read(ws, "long.txt")
    assert text.splitlines()[0] == "   1\tline 1"
    assert text.splitlines()[-1] == "[agent-ref: lines 1-2000 of 2500; pass offset=2001 for more]"
    with pytest.raises(WorkspaceError, match="offset 9 is past its end"):
        files.read(ws, "src/a.py", offset=9)
    with pytest.raises(WorkspaceError, match="offset must be"):
        files.read(ws, "src/a.py", offset=0)
    with pytest.raises(WorkspaceError, match="no such file"):
        files.read(ws, "missing.txt")
    (ws.root / "wide.txt").write_text("x" * 5000)
    assert files.read(ws, "wide.txt") == "1\t" + "x" * 2000 + " [agent-ref: line cut at 2000 characters]"


def test_spec_WS2_b_binary_and_non_utf8_files(ws: Workspace) -> None:
    """[WS2-b] A file with a NUL is refused as binary; undecodable bytes are shown as U+FFFD with a note."""
    (ws.root / "blob.bin").write_bytes(b"\x89PNG\x00\x00data")
    with pytest.raises(WorkspaceError, match="is a binary file"):
        files.read(ws, "blob.bin")
    (ws.root / "latin.txt").write_bytes(b"caf\xe9\n")
    text = files.read(ws, "latin.txt")
    assert (
        text
        == f"[agent-ref: {ws.root}/latin.txt is not UTF-8 (line 1); undecodable bytes are shown as U+FFFD]\n1\tcaf\ufffd"
    )
    with pytest.raises(WorkspaceError, match="is not UTF-8"):
        files.edit(ws, "latin.txt", "caf", "tea")
    assert (ws.root / "latin.txt").read_bytes() == b"caf\xe9\n"


def test_spec_WS2_c_write_creates_directories_and_says_which(ws: Workspace) -> None:
    """[WS2-c] Write makes missing directories, says created or updated, and writes the exact text."""
    assert files.write(ws, "new/deep/c.txt", "é\n") == f"File created successfully at: {ws.root}/new/deep/c.txt"
    assert (ws.root / "new" / "deep" / "c.txt").read_text() == "é\n"
    assert files.write(ws, "new/deep/c.txt", "2") == f"The file {ws.root}/new/deep/c.txt has been updated successfully."
    with pytest.raises(WorkspaceError, match="is the workspace directory"):
        files.write(ws, str(ws.root), "x")
    with pytest.raises(WorkspaceError, match=r"a\.py: is a file, not a directory"):
        files.write(ws, "src/a.py/inner.txt", "x")


def test_spec_WS2_d_edit_unique_match_and_replace_all(ws: Workspace) -> None:
    """[WS2-d] Edit replaces one unique match; several need replace_all; absent, empty or equal strings are errors."""
    path = ws.root / "src" / "a.py"
    with pytest.raises(WorkspaceError, match="occurs 2 times"):
        files.edit(ws, "src/a.py", "os", "sys")
    with pytest.raises(WorkspaceError, match="was not found"):
        files.edit(ws, "src/a.py", "nothing here", "x")
    with pytest.raises(WorkspaceError, match="is empty"):
        files.edit(ws, "src/a.py", "", "x")
    with pytest.raises(WorkspaceError, match="are the same"):
        files.edit(ws, "src/a.py", "main", "main")
    with pytest.raises(WorkspaceError, match="no such file"):
        files.edit(ws, "src/none.py", "a", "b")
    assert path.read_text() == "import os\n\ndef main():\n    return os.getcwd()\n"
    assert files.edit(ws, "src/a.py", "def main", "def run") == f"The file {path} has been updated successfully."
    assert files.edit(ws, "src/a.py", "os", "sys", replace_all=True).endswith("(2 occurrences).")
    assert path.read_text() == "import sys\n\ndef run():\n    return sys.getcwd()\n"


def test_spec_WS2_e_glob_matches_relative_paths_newest_first(ws: Workspace) -> None:
    """[WS2-e] `**` spans directories, `*` stays in a name, braces choose; newest first; `.git` is skipped."""
    os.utime(ws.root / "src" / "a.py", ns=(1, 1_000_000_000))
    assert search.glob(ws, "**/*.py") == f"{ws.root}/src/pkg/b.py\n{ws.root}/src/a.py"
    assert search.glob(ws, "src/*.py") == f"{ws.root}/src/a.py"
    assert search.glob(ws, "*.{md,txt}") == f"{ws.root}/README.md"
    assert search.glob(ws, "*.py", path="src/pkg") == f"{ws.root}/src/pkg/b.py"
    assert search.glob(ws, "**/config") == "No files found"
    with pytest.raises(WorkspaceError, match="is not closed"):
        search.glob(ws, "[abc")


def test_spec_WS2_f_grep_output_modes_case_context_and_head_limit(ws: Workspace) -> None:
    """[WS2-f] files_with_matches by default, content with line numbers and context, count, -i, glob, head_limit."""
    root = ws.root
    assert search.grep(ws, search.GrepQuery("TODO")) == f"{root}/README.md\n{root}/src/pkg/b.py"
    assert search.grep(ws, search.GrepQuery("todo")) == "No files found"
    assert search.grep(ws, search.GrepQuery("todo", ignore_case=True, glob="*.py")) == f"{root}/src/pkg/b.py"
    assert search.grep(ws, search.GrepQuery("[ol]", output_mode="count", glob="src/**")) == (
        f"{root}/src/a.py:2\n{root}/src/pkg/b.py:1"
    )
    content = search.grep(ws, search.GrepQuery("getcwd|TODO", output_mode="content", before=1, path="src"))
    assert content == (
        f"{root}/src/a.py-3-def main():\n{root}/src/a.py:4:    return os.getcwd()\n--\n{root}/src/pkg/b.py:1:# TODO: b"
    )
    plain = search.grep(ws, search.GrepQuery("TODO", output_mode="content", line_numbers=False, head_limit=1))
    assert plain == f"{root}/README.md:TODO: docs"
    assert search.grep(ws, search.GrepQuery("value", path="src/pkg/b.py", output_mode="content")) == (
        f"{root}/src/pkg/b.py:2:value = 1"
    )
    assert (
        search.grep(ws, search.GrepQuery("main.*getcwd", multiline=True, output_mode="count")) == f"{root}/src/a.py:1"
    )
    with pytest.raises(WorkspaceError, match="pattern '\\(': missing \\)"):
        search.grep(ws, search.GrepQuery("("))


@pytest.mark.skipif(search.backend() != "ripgrep", reason="ripgrep (rg) is not on PATH")
def test_spec_WS2_g_ripgrep_and_python_answer_the_same(ws: Workspace) -> None:
    """[WS2-g] Where rg is installed, it and the Python search give the same output in every mode."""
    for query in [
        search.GrepQuery("TODO"),
        search.GrepQuery("o", output_mode="count"),
        search.GrepQuery("getcwd|TODO", output_mode="content", before=1, after=1),
        search.GrepQuery("todo", ignore_case=True, glob="*.py", output_mode="content"),
    ]:
        assert search.grep(ws, query, use="ripgrep") == search.grep(ws, query, use="python"), query


def test_spec_WS2_g_the_backend_is_rg_on_path_else_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """[WS2-g] `backend()` is python with no rg on PATH, ripgrep with one."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert search.backend() == "python"
    fake = tmp_path / "rg"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    assert search.backend() == "ripgrep"


def _results(model: ReplayModel) -> list[tuple[str, bool]]:
    """Each tool result the model was sent: its text and whether it is an error."""
    found = []
    for request in model.server.requests[1:]:
        block = request["messages"][-1]["content"][0]
        found.append((block["content"][0]["text"], bool(block.get("is_error"))))
    return found


def test_spec_WS4_a_the_agent_uses_each_tool_in_its_workspace(ws: Workspace) -> None:
    """[WS4-a] `AgentOptions.workspace` gives the agent the five tools; a run uses each, strictly valid."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("Write", {"file_path": "notes/todo.md", "content": "- fix main\n"}),
        ("Edit", {"file_path": "src/a.py", "old_string": "def main", "new_string": "def run"}),
        ("Read", {"file_path": "src/a.py", "offset": 3, "limit": 1}),
        ("Glob", {"pattern": "**/*.md"}),
        ("Grep", {"pattern": "fix|run", "output_mode": "content", "-n": True}),
        ("Read", {"file_path": "../outside.txt"}),
    ]
    model = ReplayModel(replay_calls(calls))
    agent = Agent(model, options=AgentOptions(workspace=ws.root, store=MemoryStore(), retry=fast_retry()))
    assert {"Read", "Write", "Edit", "Glob", "Grep"} <= set(agent.tools)
    lines: list[bytes] = []
    run(agent.run("work", lines.append))
    assert_valid(lines)
    root = ws.root
    assert _results(model) == [
        (f"File created successfully at: {root}/notes/todo.md", False),
        (f"The file {root}/src/a.py has been updated successfully.", False),
        ("3\tdef run():\n[agent-ref: lines 3-3 of 4; pass offset=4 for more]", False),
        (f"{root}/notes/todo.md\n{root}/README.md", False),
        (f"{root}/notes/todo.md:1:- fix main\n{root}/src/a.py:3:def run():", False),
        ("WorkspaceError: ../outside.txt: '..' is not allowed in a workspace path", True),
    ]
    tools = [json.loads(line) for line in lines if b'"tool_result"' in line]
    assert [t["name"] for t in tools] == ["Write", "Edit", "Read", "Glob", "Grep", "Read"]


def test_spec_WS4_a_options_refuse_a_missing_workspace_and_rebuild_on_replace(tmp_path: Path) -> None:
    """[WS4-a] A workspace that is not a directory is a ConfigError; `replace` keeps one set of the tools."""
    with pytest.raises(ConfigError, match=r"workspace: .*must be an existing directory"):
        AgentOptions(workspace=tmp_path / "none")
    options = AgentOptions(workspace=tmp_path)
    again = options.replace(max_steps=3)
    files = ["Read", "Write", "Edit", "Glob", "Grep"]
    assert [t.name for t in again.tools] == [*files, "Bash", "BashOutput", "KillShell"]  # and Bash: [WS5-a]
    schemas = {t.name: t.input_schema for t in workspace_tools(tmp_path)}
    assert schemas["Read"]["required"] == ["file_path"]
    assert schemas["Edit"]["required"] == ["file_path", "old_string", "new_string"]
    assert set(schemas["Grep"]["properties"]) >= {"pattern", "glob", "output_mode", "-i", "-n", "-A", "-B", "-C"}
