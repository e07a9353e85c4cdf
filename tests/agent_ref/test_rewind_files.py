"""``Agent.rewind`` reverts the files too (spec [IN4-a]): real runs of the scripted model with the memory tool.

"remember that X" is a ``view`` (step 1), a ``create`` or ``str_replace`` of
``/memories/notes.md`` (step 2, the run's one file-changing step), then the answer (spec §8.3).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, MemoryStore, ScriptedModel, SQLiteStore
from agent_ref.cli.commands import main as cli_main
from agent_ref.store.state import encode_state
from agent_ref.tools.memory import memory_tool
from agent_ref.tools.snapshots import UndoConflict
from agent_ref_support import assert_valid_responses, fast_retry

if TYPE_CHECKING:
    from pathlib import Path

FACTS = ("tea is green", "the sky is blue", "cats purr")


def _remembering(root: Path, store: Any) -> tuple[Agent, list[str]]:
    """An agent that ran "remember that X" for each fact; its run ids."""
    agent = Agent(ScriptedModel(), tools=[memory_tool(root)], store=store, retry=fast_retry())
    runs = []
    for fact in FACTS:
        lines: list[bytes] = []
        result = asyncio.run(agent.run(f"Please remember that {fact}.", lines.append))
        assert_valid_responses(lines)
        assert result.stop_reason == "end_turn"
        runs.append(result.run_id)
    return agent, runs


def _notes(root: Path) -> str | None:
    path = root / "notes.md"
    return path.read_text() if path.exists() else None


@pytest.mark.parametrize("which", ["memory", "sqlite"])
def test_rewind_to_a_run_reverts_the_files_changed_since(tmp_path: Path, which: str) -> None:
    """Rewind to before run 2: the notes hold the first fact only; a later run records on from there [IN4-a]."""
    root = tmp_path / "mem"
    store = MemoryStore() if which == "memory" else SQLiteStore(tmp_path / "a.db")
    agent, runs = _remembering(root, store)
    assert all(fact in (_notes(root) or "") for fact in FACTS)
    done = asyncio.run(agent.rewind(run=runs[1]))
    assert done.files is not None
    assert done.files.to_step == 1
    assert done.files.undone_steps == (2, 3)
    notes = _notes(root)
    assert notes is not None
    assert FACTS[0] in notes
    assert FACTS[1] not in notes
    assert FACTS[2] not in notes
    # history and files agree: a new run adds to the notes as they are now
    asyncio.run(agent.run("Please remember that owls hoot.", lambda _line: None))
    assert _notes(root) == f"# Notes\n- owls hoot\n- {FACTS[0]}\n"


def test_rewind_to_a_step_maps_to_the_file_steps(tmp_path: Path) -> None:
    """Step 2 keeps run 1's create (its results are kept); step 1 keeps only the view: no notes file [IN4-a]."""
    root = tmp_path / "mem"
    agent, _ = _remembering(root, MemoryStore())
    done = asyncio.run(agent.rewind(step=5))  # run 2's create and its result kept, run 2's answer not
    assert done.files is not None
    assert done.files.to_step == 2
    assert FACTS[1] in (_notes(root) or "")
    assert FACTS[2] not in (_notes(root) or "")
    done = asyncio.run(agent.rewind(step=2))
    assert done.files is not None
    assert done.files.to_step == 1
    assert done.files.undone_steps == (2,)
    done = asyncio.run(agent.rewind(step=1))
    assert done.files is not None
    assert done.files.to_step == 0
    assert _notes(root) is None
    again = asyncio.run(agent.rewind(step=1))
    assert again.files is None  # nothing recorded after the point any more


def test_a_changed_file_refuses_the_whole_rewind(tmp_path: Path) -> None:
    """A notes file edited by hand since: ``UndoConflict``; the stored history and the file unchanged [IN4-a]."""
    root = tmp_path / "mem"
    store = SQLiteStore(tmp_path / "a.db")
    agent, runs = _remembering(root, store)
    (root / "notes.md").write_text("edited by hand\n")
    state = asyncio.run(store.load(agent.agent_uuid))
    assert state is not None
    before = encode_state(state)
    with pytest.raises(UndoConflict, match=r"notes\.md: changed since it was recorded"):
        asyncio.run(agent.rewind(run=runs[1]))
    after = asyncio.run(store.load(agent.agent_uuid))
    assert after is not None
    assert encode_state(after) == before
    assert _notes(root) == "edited by hand\n"
    assert len(agent.state.messages) == len(state.messages)


def test_cli_rewind_says_what_it_restored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``agent-ref rewind`` names the file steps undone and the paths restored [IN4-a]."""
    db = tmp_path / "a.db"
    root = tmp_path / "mem"
    agent, runs = _remembering(root, SQLiteStore(db))
    capsys.readouterr()
    code = cli_main(["rewind", agent.agent_uuid, "--to-run", runs[2], "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "files as of step 2 (file steps undone: 3; 1 restored, 0 removed)" in err
    assert FACTS[2] not in (_notes(root) or "")
    code = cli_main(["rewind", agent.agent_uuid, "--to-step", "1", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "files as of step 0 (file steps undone: 1, 2; 0 restored, 1 removed)" in err
    (root / "x").mkdir()
    code = cli_main(["rewind", agent.agent_uuid, "--to-step", "0", "--db", str(db)])
    assert code == 0
    assert "no recorded file change to revert" in capsys.readouterr().err
