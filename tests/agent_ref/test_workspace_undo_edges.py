"""The workspace history's worst inputs: caches, bounds, FIFOs, modes, crashes mid-restore (spec §WU1)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore
from agent_ref.store.core import MemoryStore
from agent_ref.tools import snapshots, workspace_history
from agent_ref.tools.core import tool
from agent_ref.tools.snapshots import UndoConflict, restore_files
from agent_ref.tools.workspace_history import BlobCache, begin_step, history_dir, scan
from agent_ref_support import meta
from undo_support import tree

if TYPE_CHECKING:
    from collections.abc import Callable

    from validating import ValidatedSink


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@tool
def put(path: str, text: str) -> str:
    """Write ``text`` to ``path`` under the workspace (no ``writes=``)."""
    target = Path(os.environ["WS_ROOT"], path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return "put"


def _agent(root: Path, store: object) -> Agent:
    return Agent(ScriptedModel(), tools=[put], store=store, workspace=root)


def _run(agent: Agent, sink: list[bytes], *calls: dict[str, str]) -> dict[str, Any]:
    prompt = " ".join(f"call put with {json.dumps(c)}" for c in calls)
    asyncio.run(agent.run(prompt, sink.append))
    return meta(sink, "meta_final")


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    monkeypatch.setenv("WS_ROOT", str(ws))
    return ws


def test_spec_WU1_b_unchanged_files_are_not_read_again(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """[WU1-b] The stat shortcut: a second scan of an unchanged tree reads no file; a touched one is read."""
    for i in range(20):
        (root / f"f{i}.txt").write_text(str(i))
    blobs = BlobCache(history_dir("agent-x"))
    assert not Path(blobs.root).is_relative_to(root)  # the cache is outside the workspace
    reads: list[str] = []
    real = workspace_history._read_file

    def counting(dir_fd: int, name: str, info: os.stat_result, cache: BlobCache) -> str:
        reads.append(name)
        return real(dir_fd, name, info, cache)

    monkeypatch.setattr(workspace_history, "_read_file", counting)
    first = scan(str(root), blobs, {})
    assert len(reads) == 21
    reads.clear()
    assert scan(str(root), blobs, first) == first
    assert reads == []
    (root / "f3.txt").write_text("changed")
    scan(str(root), blobs, first)
    assert reads == ["f3.txt"]


def test_spec_WU1_b_undo_needs_only_the_store(
    root: Path, tmp_path: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WU1-b] With the cache gone (another machine of a fleet), undo still restores from the store's records."""
    store = SQLiteStore(tmp_path / "agents.db")
    agent = _agent(root, store)
    _run(agent, validated_sink(), {"path": "a.txt", "text": "changed\n"}, {"path": "d/b.txt", "text": "new\n"})
    shutil.rmtree(tmp_path / "cache")
    report = asyncio.run(restore_files(SQLiteStore(tmp_path / "agents.db"), agent.agent_uuid, to_step=0))
    assert report.undone_steps == (1,)
    assert tree(root) == {"a.txt": ("file", (root / "a.txt").stat().st_mode & 0o777, b"a\n")}


def test_spec_WU1_b_a_damaged_cache_records_nothing_and_says_so(
    root: Path, tmp_path: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WU1-b] [WU1-d] Bytes in the cache that do not match their digest are never restored: the step says why."""
    store = MemoryStore()
    agent = _agent(root, store)

    @tool
    def spoil() -> str:
        """Damage the cached copy of a.txt, then change a.txt."""
        for blob in (tmp_path / "cache").rglob("objects/*/*"):
            blob.write_bytes(b"not what it was")
        (root / "a.txt").write_text("b\n")
        return "spoiled"

    agent = Agent(ScriptedModel(), tools=[spoil], store=store, workspace=root)
    sink = validated_sink()
    asyncio.run(agent.run("call spoil with {}", sink.append))
    [step] = meta(sink, "meta_final")["workspace_steps"]
    assert step["step"] == 0
    assert "damaged bytes" in step["error"]
    assert asyncio.run(store.snapshots(agent.agent_uuid, 0)) == []


def test_spec_WU1_d_a_file_over_the_bound_is_named_not_kept(
    root: Path, monkeypatch: pytest.MonkeyPatch, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WU1-d] A changed file over the size bound is in ``not_kept``; undo restores the rest and leaves it."""
    monkeypatch.setattr(workspace_history, "MAX_SNAPSHOT_FILE_BYTES", 10)
    store = MemoryStore()
    agent = _agent(root, store)
    final = _run(agent, validated_sink(), {"path": "big.txt", "text": "x" * 50}, {"path": "b.txt", "text": "b"})
    [step] = final["workspace_steps"]
    assert step["not_kept"] == ["big.txt"]
    assert step["paths"] == ["+ b.txt"]
    asyncio.run(restore_files(store, agent.agent_uuid, to_step=0))
    assert sorted(tree(root)) == ["a.txt", "big.txt"]


def test_spec_WU1_d_too_many_entries_runs_the_step_unrecorded(
    root: Path, monkeypatch: pytest.MonkeyPatch, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WU1-d] A workspace over the entry bound: the tool still runs, nothing is recorded, the summary says why."""
    monkeypatch.setattr(workspace_history, "MAX_WORKSPACE_ENTRIES", 3)
    for i in range(5):
        (root / f"n{i}").write_text("")
    store = MemoryStore()
    agent = _agent(root, store)
    final = _run(agent, validated_sink(), {"path": "c.txt", "text": "c"})
    assert (root / "c.txt").read_text() == "c"
    [step] = final["workspace_steps"]
    assert step["step"] == 0
    assert "more than 3 entries" in step["error"]
    assert asyncio.run(store.snapshots(agent.agent_uuid, 0)) == []


def test_spec_WU1_c_a_fifo_is_never_opened_and_a_chmod_since_refuses(
    root: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WU1-c] A FIFO in the workspace does not hang a snapshot; a mode changed since the step refuses undo."""
    os.mkfifo(root / "pipe")
    store = MemoryStore()
    agent = _agent(root, store)
    _run(agent, validated_sink(), {"path": "a.txt", "text": "changed\n"})
    (root / "a.txt").chmod(0o600)
    with pytest.raises(UndoConflict, match=r"a\.txt: changed since it was recorded"):
        asyncio.run(restore_files(store, agent.agent_uuid, to_step=0))
    assert (root / "a.txt").read_text() == "changed\n"
    (root / "a.txt").chmod(0o644 & ~_umask())
    asyncio.run(restore_files(store, agent.agent_uuid, to_step=0))
    assert (root / "a.txt").read_text() == "a\n"
    assert (root / "pipe").exists()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_spec_WU1_h_a_restore_cut_short_is_finished_by_running_it_again(
    root: Path, monkeypatch: pytest.MonkeyPatch, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WU1-h] A crash after the first file written: the same undo again finishes it, the records kept until then."""
    for i in range(4):
        (root / f"f{i}.txt").write_text(f"old {i}\n")
    before = tree(root)
    store = MemoryStore()
    agent = _agent(root, store)
    _run(agent, validated_sink(), *({"path": f"f{i}.txt", "text": f"new {i}\n"} for i in range(4)))
    written: list[str] = []
    real = snapshots._write

    def crash_after_one(fd: int, name: str, content: bytes, mode: int | None = None) -> None:
        if written:
            raise OSError(28, "No space left on device")
        written.append(name)
        real(fd, name, content, mode)

    monkeypatch.setattr(snapshots, "_write", crash_after_one)
    with pytest.raises(OSError, match="No space left"):
        asyncio.run(restore_files(store, agent.agent_uuid, to_step=0))
    assert written == ["f0.txt"]
    assert (root / "f0.txt").read_text() == "old 0\n"
    assert (root / "f1.txt").read_text() == "new 1\n"
    assert len(asyncio.run(store.snapshots(agent.agent_uuid, 0))) == 1  # still there for the retry
    monkeypatch.setattr(snapshots, "_write", real)
    asyncio.run(restore_files(store, agent.agent_uuid, to_step=0))
    assert tree(root) == before
    assert asyncio.run(store.snapshots(agent.agent_uuid, 0)) == []


def test_spec_WU1_a_concurrent_calls_of_one_step_are_one_file_step(
    root: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WU1-a] Several calls in one step, run concurrently, make one record: one file step to undo."""
    store = MemoryStore()
    agent = _agent(root, store)
    calls = [{"path": f"c/{i}.txt", "text": str(i)} for i in range(4)]
    final = _run(agent, validated_sink(), *calls)
    [step] = final["workspace_steps"]
    assert (step["step"], step["added"]) == (1, 5)
    assert [s for s, _ in asyncio.run(store.snapshots(agent.agent_uuid, 0))] == [1]


def test_spec_WU1_a_no_workspace_no_store_records_nothing(root: Path) -> None:
    """[WU1-a] Without a workspace, an agent id or a store keeping snapshots there is no baseline."""
    assert asyncio.run(begin_step(None, MemoryStore(), "a")) is None
    assert asyncio.run(begin_step(root, MemoryStore(), "")) is None
    assert asyncio.run(begin_step(root, object(), "a")) is None
