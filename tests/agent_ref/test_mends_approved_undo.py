"""An approved call is recorded for undo like an un-asked one (spec agent-ref [WM1-a])."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore
from agent_ref.cli.commands import main
from agent_ref_support import envelopes, meta, run
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace cache under this test's directory, never the user's ``~/.cache``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _config(root: Path) -> dict[str, Any]:
    return {"workspace": root, "permission_mode": "auto"}


def test_spec_WM1_a_an_approved_write_is_undone_and_diffed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[WM1-a] A Write approved at the pause is in meta_final.workspace_steps, `diff` shows it, undo reverts it."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "README.md").write_text("old\n")
    db = tmp_path / "a.db"
    agent = Agent(ScriptedModel(), store=SQLiteStore(db), **_config(root))
    first: list[bytes] = []
    prompt = 'call Write with {"file_path": "README.md", "content": "new\\n"}'
    assert run(agent.run(prompt, first.append)).stop_reason == "awaiting_frontend_tools"
    assert_valid(first)
    (pause,) = [e for e in envelopes(first) if e["type"] == "awaiting_frontend_tools"]
    (element,) = json.loads(pause["delta"])
    assert (root / "README.md").read_text() == "old\n"  # not run before the approval

    fresh = run(Agent.load(agent.agent_uuid, SQLiteStore(db), ScriptedModel(), **_config(root)))
    second: list[bytes] = []
    answer = {"tool_use_id": element["tool_use_id"], "decision": "approve"}
    run(fresh.continue_with_tool_results([answer], second.append))
    assert_valid(second)
    assert (root / "README.md").read_text() == "new\n"
    (step,) = meta(second, "meta_final")["workspace_steps"]
    assert step["paths"] == ["~ README.md"]
    assert step["run_step"] == 1

    capsys.readouterr()
    assert main(["diff", agent.agent_uuid, "--step", str(step["step"]), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "-old\n" in out
    assert "+new\n" in out
    assert main(["undo", agent.agent_uuid, "--to-step", "0", "--db", str(db)]) == 0
    assert (root / "README.md").read_text() == "old\n"
