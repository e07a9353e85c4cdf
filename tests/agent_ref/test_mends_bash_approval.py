"""A Bash awaiting approval shows its command, with or without `workspace=` (spec agent-ref [WM1-e])."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, MemoryStore, ScriptedModel
from agent_ref.policy.permissions import parse_rule
from agent_ref.tools.sandbox import bash_tools
from agent_ref_support import envelopes, run
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path


def _approval(**config: Any) -> dict[str, Any]:
    """The approval of `git status && rm -rf x`, which the prefix rule does not cover."""
    rules = [parse_rule("Bash(git status:*)", "allow")]
    agent = Agent(ScriptedModel(), store=MemoryStore(), permission_mode="auto", permission_rules=rules, **config)
    lines: list[bytes] = []
    prompt = 'call Bash with {"command": "git status && rm -rf x"}'
    assert run(agent.run(prompt, lines.append)).stop_reason == "awaiting_frontend_tools"
    assert_valid(lines)
    (pause,) = [e for e in envelopes(lines) if e["type"] == "awaiting_frontend_tools"]
    (element,) = json.loads(pause["delta"])
    assert element["name"] == "Bash"
    approval: dict[str, Any] = element["approval"]
    return approval


@pytest.mark.parametrize("given", ["bash_tools", "workspace"])
def test_spec_WM1_e_the_bash_approval_shows_the_command(tmp_path: Path, given: str) -> None:
    """[WM1-e] [WS3-c] `bash_tools(root)` alone and `workspace=root` both put the command in the reason."""
    config: dict[str, Any] = {"tools": bash_tools(tmp_path)} if given == "bash_tools" else {"workspace": tmp_path}
    reason = _approval(**config)["reason"]
    assert reason == "no permission rule covers Bash\ncommand: git status && rm -rf x"
    assert not (tmp_path / "x").exists()
