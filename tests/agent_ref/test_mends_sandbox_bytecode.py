"""Python run by the sandboxed Bash writes no bytecode into the workspace (spec [MA1-a]).

A real bubblewrap sandbox (skipped with a reason when bwrap is missing, failed under
``CI=true``): a workspace with a module, a Bash call importing it, then no ``__pycache__``
in the workspace and no change recorded for the step. Every response goes through the
strict validator (the autouse tee of tests/agent_ref).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore
from agent_ref.tools.sandbox import Shell
from agent_ref.tools.sandbox.jail import clean_env
from agent_ref_support import envelopes, meta
from sandbox_support import need_bwrap, run

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace cache under this test's directory, never the user's ``~/.cache``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "mod.py").write_text("VALUE = 42\n")
    return root


def _pycache(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.name == "__pycache__" or p.suffix == ".pyc")


def test_spec_ma1_a_an_import_in_bash_leaves_no_pycache_and_no_step_change(tmp_path: Path) -> None:
    """[MA1-a] Bash runs `python3 -c 'import mod'` in the sandbox: it ran, no __pycache__, the step changed nothing."""
    need_bwrap()
    root = _workspace(tmp_path)
    agent = Agent(ScriptedModel(), workspace=root, store=SQLiteStore(tmp_path / "agents.db"))
    command = "python3 -c 'import mod; print(mod.VALUE)'"
    lines: list[bytes] = []
    asyncio.run(agent.run(f"call Bash with {json.dumps({'command': command})}", lines.append))
    (result,) = [e for e in envelopes(lines) if e["type"] == "tool_result" and e.get("name") == "Bash"]
    assert "42" in result["delta"]
    assert "[exit code 0]" in result["delta"]
    assert _pycache(root) == []
    assert meta(lines, "meta_final").get("workspace_steps", []) == []


def test_spec_ma1_a_both_modes_set_it_and_a_command_may_unset_it(tmp_path: Path) -> None:
    """[MA1-a] The sandboxed and the unsandboxed shell both set it; `unset` in the command writes bytecode again."""
    root = _workspace(tmp_path)
    assert clean_env(root)["PYTHONDONTWRITEBYTECODE"] == "1"
    need_bwrap()
    for shell in (Shell(root), Shell(root, unsandboxed=True)):
        done = run(shell, "python3 -c 'import mod'; echo $PYTHONDONTWRITEBYTECODE")
        assert done.output.splitlines()[0] == "1", done.output
        assert _pycache(root) == []
    run(Shell(root), "unset PYTHONDONTWRITEBYTECODE; python3 -c 'import mod'")
    assert [p.name for p in _pycache(root)][:1] == ["__pycache__"]
