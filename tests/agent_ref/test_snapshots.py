"""Snapshots of what file-changing tools changed, and undo (spec agent-ref §22)."""

from __future__ import annotations

import asyncio
import inspect
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_ref.store.core import MemoryStore, SQLiteStore
from agent_ref.tools import snapshots as snapshots_module
from agent_ref.tools.context import ToolContext
from agent_ref.tools.memory import MemoryToolError, memory_tool
from agent_ref.tools.snapshots import SnapshotError, UndoConflict, restore_files

if TYPE_CHECKING:
    from agent_ref.tools.core import Tool

AGENT = "agent-1"
Tree = dict[str, str | None]  # relative path -> file text, None for a directory


def tree(root: Path) -> Tree:
    """Every file and directory below ``root`` (temporary files of a write included: none may remain)."""
    out: Tree = {}
    for here, dirs, files in os.walk(root):
        for name in dirs:
            out[os.path.relpath(os.path.join(here, name), root)] = None
        for name in files:
            out[os.path.relpath(os.path.join(here, name), root)] = Path(here, name).read_text()
    return out


async def call(tool: Tool, store: object, run_id: str, step: int, **arguments: Any) -> str | None:
    """One memory call as the agent makes it at ``step`` of ``run_id``; ``None`` when refused."""
    assert tool.fn is not None
    ctx = ToolContext(AGENT, run_id, f"toolu_{run_id}_{step}", "memory", store, step=step)  # type: ignore[arg-type]
    try:
        value = tool.fn(_memory_context=ctx, **arguments)  # as the executor does: the call, then its awaitable
        result = await value if inspect.isawaitable(value) else value
    except MemoryToolError:
        return None
    assert isinstance(result, str)
    return result


NAMES = st.sampled_from(["/memories/a.md", "/memories/b.md", "/memories/d/c.md", "/memories/d/e/f.md", "/memories/d"])
TEXT = st.text(alphabet="xy\n", max_size=6)
OPS = st.one_of(
    st.builds(lambda p, t: {"command": "create", "path": p, "file_text": t}, NAMES, TEXT),
    st.builds(lambda p, o, n: {"command": "str_replace", "path": p, "old_str": o, "new_str": n}, NAMES, TEXT, TEXT),
    st.builds(lambda p, t: {"command": "insert", "path": p, "insert_line": 0, "insert_text": t}, NAMES, TEXT),
    st.builds(lambda p: {"command": "delete", "path": p}, NAMES),
    st.builds(lambda a, b: {"command": "rename", "old_path": a, "new_path": b}, NAMES, NAMES),
)
# Runs of steps of calls: each inner list is a step (its calls in order), each middle list a run.
RUNS = st.lists(st.lists(st.lists(OPS, min_size=1, max_size=3), min_size=1, max_size=3), min_size=1, max_size=3)


async def replay(tool: Tool, store: object, root: Path, runs: list[list[list[dict[str, Any]]]]) -> list[Tree]:
    """Run the calls; the tree as each of the agent's file-changing steps ended (index 0: before any)."""
    seen = [tree(root)]
    for r, steps in enumerate(runs):
        for s, ops in enumerate(steps, start=1):
            recorded = len(await store.snapshots(AGENT, 0))  # type: ignore[attr-defined]
            for op in ops:
                await call(tool, store, f"run{r}", s, **op)
            if len(await store.snapshots(AGENT, 0)) > recorded:  # type: ignore[attr-defined]
                seen.append(tree(root))  # a step that changed nothing is not an agent step (RU1-b)
    return seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=RUNS, pick=st.integers(min_value=0, max_value=20), which=st.sampled_from(["memory", "sqlite"]))
def test_spec_RU1_a_undo_gives_the_directory_as_it_was_at_that_step(
    tmp_path_factory: pytest.TempPathFactory, runs: list[list[list[dict[str, Any]]]], pick: int, which: str
) -> None:
    """[RU1-a] [RU1-b] [RU1-d] Random memory calls over steps and runs; undo to a random step equals that step's tree."""
    tmp = tmp_path_factory.mktemp("undo")
    root = tmp / "mem"
    store = MemoryStore() if which == "memory" else SQLiteStore(tmp / "agents.db")
    tool = memory_tool(root)

    async def go() -> None:
        seen = await replay(tool, store, root, runs)
        to = pick % len(seen)
        report = await restore_files(store, AGENT, to_step=to)
        assert tree(root) == seen[to]
        assert report.undone_steps == tuple(range(to + 1, len(seen)))
        # Undoing dropped the later steps: the next change is step to + 1, and undo to `to` takes it back.
        await call(tool, store, "after", 1, command="create", path="/memories/new.md", file_text="n")
        assert [s for s, _ in await store.snapshots(AGENT, 0)][-1:] == [to + 1]
        await restore_files(store, AGENT, to_step=to)
        assert tree(root) == seen[to]

    asyncio.run(go())


@pytest.mark.parametrize("which", ["memory", "sqlite"])
def test_spec_RU1_c_a_changed_file_refuses_the_undo_and_changes_nothing(tmp_path: Path, which: str) -> None:
    """[RU1-c] A file changed since its record refuses the whole undo, naming it; nothing is written."""
    root = tmp_path / "mem"
    store = MemoryStore() if which == "memory" else SQLiteStore(tmp_path / "agents.db")
    tool = memory_tool(root)

    async def go() -> None:
        await call(tool, store, "r", 1, command="create", path="/memories/a.md", file_text="one\n")
        await call(tool, store, "r", 2, command="create", path="/memories/b.md", file_text="two\n")
        await call(tool, store, "r", 3, command="str_replace", path="/memories/a.md", old_str="one", new_str="1")
        (root / "a.md").write_text("edited by hand\n")
        before = tree(root)
        with pytest.raises(UndoConflict, match=r"a\.md: changed since it was recorded; nothing was restored"):
            await restore_files(store, AGENT, to_step=0)
        assert tree(root) == before  # b.md, which could have been removed, is still there
        assert len(await store.snapshots(AGENT, 0)) == 3
        # A file the undo would have to remove a directory around is a conflict too.
        await call(tool, store, "r", 4, command="create", path="/memories/d/x.md", file_text="x")
        (root / "d" / "mine.txt").write_text("not the agent's")
        with pytest.raises(UndoConflict, match=r"mine\.txt: was not recorded but is inside"):
            await restore_files(store, AGENT, to_step=3)
        assert (root / "d" / "x.md").exists()

    asyncio.run(go())


def test_spec_RU1_c_undo_is_idempotent_and_bad_steps_are_refused(tmp_path: Path) -> None:
    """[RU1-c] A path already at its target is not a conflict (an undo cut short can be retried); bad input is clear."""
    root = tmp_path / "mem"
    store = MemoryStore()
    tool = memory_tool(root)

    async def go() -> None:
        await call(tool, store, "r", 1, command="create", path="/memories/a.md", file_text="one\n")
        (root / "a.md").unlink()  # as if an earlier undo removed it and died before dropping the record
        report = await restore_files(store, AGENT, to_step=0)
        assert report.undone_steps == (1,)
        assert tree(root) == {}
        with pytest.raises(SnapshotError, match="to_step must be an integer from 0"):
            await restore_files(store, AGENT, to_step=-1)
        with pytest.raises(SnapshotError, match="keeps no snapshots"):
            await restore_files(object(), AGENT, to_step=0)

    asyncio.run(go())


def test_spec_RU1_d_no_agent_no_record(tmp_path: Path) -> None:
    """[RU1-d] A call outside an agent run (no agent id) changes the file and records nothing."""
    store = MemoryStore()
    tool = memory_tool(tmp_path / "mem")
    assert tool.fn is not None
    ctx = ToolContext("", "", "toolu_1", "memory", store)
    assert tool.fn(_memory_context=ctx, command="create", path="/memories/a.md", file_text="x").startswith("Created")
    assert (tmp_path / "mem" / "a.md").read_text() == "x"
    assert asyncio.run(store.snapshots("", 0)) == []


def test_spec_RU1_e_pg_store_keeps_snapshots(pg_schema_url: str, tmp_path: Path) -> None:
    """[RU1-e] The PostgreSQL store keeps the records (migration 0002) and undo works on it."""
    from agent_ref.store.postgres import PostgresStore

    root = tmp_path / "mem"
    tool = memory_tool(root)

    async def go() -> None:
        store = PostgresStore(pg_schema_url)
        try:
            await call(tool, store, "r", 1, command="create", path="/memories/a.md", file_text="one\n")
            await call(tool, store, "r", 1, command="create", path="/memories/d/b.md", file_text="two\n")
            await call(tool, store, "r", 2, command="str_replace", path="/memories/a.md", old_str="one", new_str="1")
            await call(tool, store, "s", 1, command="delete", path="/memories/d")
            assert [s for s, _ in await store.snapshots(AGENT, 0)] == [1, 1, 2, 3]
            report = await restore_files(store, AGENT, to_step=1)
            assert report.undone_steps == (2, 3)
            assert tree(root) == {"a.md": "one\n", "d": None, "d/b.md": "two\n"}
            (root / "a.md").write_text("hand")
            with pytest.raises(UndoConflict, match=r"a\.md"):
                await restore_files(store, AGENT, to_step=0)
            assert tree(root) == {"a.md": "hand", "d": None, "d/b.md": "two\n"}
        finally:
            await store.aclose()

    asyncio.run(go())


def test_spec_RU1_a_a_file_over_the_bound_refuses_the_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """[RU1-a] A file over the snapshot bound: the memory call is refused before it runs, nothing recorded."""
    root = tmp_path / "mem"
    store = MemoryStore()
    tool = memory_tool(root)
    (root / "big.md").write_text("0123456789")
    monkeypatch.setattr(snapshots_module, "MAX_SNAPSHOT_FILE_BYTES", 5)
    assert tool.fn is not None
    ctx = ToolContext(AGENT, "r", "toolu_1", "memory", store, step=1)
    with pytest.raises(MemoryToolError, match=r"cannot snapshot what it changes: .*big\.md: is 10 bytes"):
        tool.fn(_memory_context=ctx, command="str_replace", path="/memories/big.md", old_str="0", new_str="x")
    assert (root / "big.md").read_text() == "0123456789"
    assert asyncio.run(store.snapshots(AGENT, 0)) == []
