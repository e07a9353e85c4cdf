"""Undo never follows a symbolic link (spec agent-ref [RU1-a], [RU1-g]; issue 38 §9).

The issue's case: the memory directory swapped for a link, ``agent-ref undo --to-step 1``
exited 0 and wrote ``notes.md`` into the linked directory (a variant deleted a matching
file there). Each test swaps something for a link after the records were made and checks
that the undo refuses, naming the path, and that nothing behind the link changed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref.cli.commands import main
from agent_ref.store.core import MemoryStore, SQLiteStore
from agent_ref.tools import snapshots as snapshots_module
from agent_ref.tools.context import ToolContext
from agent_ref.tools.memory import memory_tool
from agent_ref.tools.snapshots import UndoConflict, restore_files

if TYPE_CHECKING:
    from agent_ref.tools.core import Tool

AGENT = "agent-1"


def call(tool: Tool, store: object, step: int, **arguments: Any) -> None:
    """One memory call of the agent at ``step``; it must succeed."""
    assert tool.fn is not None
    ctx = ToolContext(AGENT, "run", f"toolu_{step}", "memory", store, step=step)  # type: ignore[arg-type]
    value = tool.fn(_memory_context=ctx, **arguments)
    result = asyncio.run(value) if asyncio.iscoroutine(value) else value
    assert isinstance(result, str)
    assert not result.startswith("Error"), result


def files(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` (not following links), by relative path."""
    out: dict[str, bytes] = {}
    for here, _, names in os.walk(root):
        for name in names:
            out[os.path.relpath(os.path.join(here, name), root)] = Path(here, name).read_bytes()
    return out


def swap_for_link(directory: Path, elsewhere: Path) -> None:
    """Move ``directory``'s content to ``elsewhere`` and put a link to it in its place."""
    directory.rename(elsewhere)
    directory.symlink_to(elsewhere, target_is_directory=True)


def two_steps(tmp_path: Path) -> tuple[Tool, MemoryStore, Path]:
    root = tmp_path / "mem"
    store = MemoryStore()
    tool = memory_tool(root)
    call(tool, store, 1, command="create", path="/memories/notes.md", file_text="# Notes\n- tea\n")
    call(tool, store, 2, command="str_replace", path="/memories/notes.md", old_str="tea", new_str="coffee")
    return tool, store, root


def test_spec_RU1_g_a_memory_directory_swapped_for_a_link_refuses_the_undo(tmp_path: Path) -> None:
    """[RU1-g] The issue's case: the undo would write notes.md through the link; it refuses instead."""
    _, store, root = two_steps(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    swap_for_link(root, elsewhere)
    before = files(elsewhere)
    with pytest.raises(UndoConflict, match=r"notes\.md: a directory on its way is now a symbolic link"):
        asyncio.run(restore_files(store, AGENT, to_step=1))
    assert files(elsewhere) == before
    assert root.is_symlink()
    assert len(asyncio.run(store.snapshots(AGENT, 0))) == 2  # nothing dropped: the undo did not happen


def test_spec_RU1_g_deletion_through_a_linked_directory_is_refused(tmp_path: Path) -> None:
    """[RU1-g] The variant: undo to 0 removes notes.md; behind a link it must not delete the match there."""
    root = tmp_path / "mem"
    store = MemoryStore()
    tool = memory_tool(root)
    call(tool, store, 1, command="create", path="/memories/notes.md", file_text="mine\n")
    elsewhere = tmp_path / "elsewhere"
    swap_for_link(root, elsewhere)
    with pytest.raises(UndoConflict, match="symbolic link"):
        asyncio.run(restore_files(store, AGENT, to_step=0))
    assert (elsewhere / "notes.md").read_text() == "mine\n"


def test_spec_RU1_g_a_subdirectory_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    """[RU1-g] A link deeper down (``/memories/d``) is refused as the root's is."""
    root = tmp_path / "mem"
    store = MemoryStore()
    tool = memory_tool(root)
    call(tool, store, 1, command="create", path="/memories/d/c.md", file_text="one")
    call(tool, store, 2, command="str_replace", path="/memories/d/c.md", old_str="one", new_str="two")
    elsewhere = tmp_path / "elsewhere"
    swap_for_link(root / "d", elsewhere)
    with pytest.raises(UndoConflict, match=r"c\.md: a directory on its way is now a symbolic link"):
        asyncio.run(restore_files(store, AGENT, to_step=1))
    assert (elsewhere / "c.md").read_text() == "two"


def test_spec_RU1_a_a_file_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    """[RU1-a] The leaf itself a link to a file of the recorded content: refused, the file it names untouched."""
    _, store, root = two_steps(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_bytes((root / "notes.md").read_bytes())
    (root / "notes.md").unlink()
    (root / "notes.md").symlink_to(outside)
    with pytest.raises(UndoConflict, match=r"notes\.md: is now a link or special file"):
        asyncio.run(restore_files(store, AGENT, to_step=1))
    assert outside.read_text() == "# Notes\n- coffee\n"


def test_spec_RU1_g_a_link_swapped_in_after_the_check_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[RU1-g] The swap lands between the check and the writes: each write opens its way again, no link followed."""
    _, store, root = two_steps(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    checked = snapshots_module._check_restorable

    def check_then_swap(*args: Any) -> None:
        checked(*args)
        swap_for_link(root, elsewhere)

    monkeypatch.setattr(snapshots_module, "_check_restorable", check_then_swap)
    with pytest.raises(UndoConflict, match="became a symbolic link during the undo"):
        asyncio.run(restore_files(store, AGENT, to_step=1))
    assert (elsewhere / "notes.md").read_text() == "# Notes\n- coffee\n"
    assert [p.name for p in elsewhere.iterdir()] == ["notes.md"]  # no temporary file left there either


def test_spec_RU1_g_agent_ref_undo_refuses_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[RU1-g] The command of the issue: exit 2 with the path, nothing written into the linked directory."""
    db = tmp_path / "agents.db"
    store = SQLiteStore(db)
    root = tmp_path / "mem"
    tool = memory_tool(root)
    call(tool, store, 1, command="create", path="/memories/notes.md", file_text="one\n")
    call(tool, store, 2, command="str_replace", path="/memories/notes.md", old_str="one", new_str="two")
    elsewhere = tmp_path / "elsewhere"
    swap_for_link(root, elsewhere)
    assert main(["undo", AGENT, "--to-step", "1", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agent-ref undo: error: ")
    assert err.count("\n") == 1
    assert "symbolic link" in err
    assert (elsewhere / "notes.md").read_text() == "two\n"


def test_spec_RU1_g_a_link_in_the_callers_own_path_still_undoes(tmp_path: Path) -> None:
    """[RU1-g] A link the caller put in the path it gave (its choice) is resolved once, when recorded."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "via").symlink_to(real, target_is_directory=True)
    store = MemoryStore()
    tool = memory_tool(tmp_path / "via" / "mem")
    call(tool, store, 1, command="create", path="/memories/a.md", file_text="one")
    call(tool, store, 2, command="str_replace", path="/memories/a.md", old_str="one", new_str="two")
    asyncio.run(restore_files(store, AGENT, to_step=1))
    assert (real / "mem" / "a.md").read_text() == "one"
    paths = snapshots_module.capture([str(tmp_path / "via" / "mem" / "a.md")])
    assert str(real / "mem" / "a.md") in paths
