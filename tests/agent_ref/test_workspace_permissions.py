"""Permissions that fit the workspace tools: the SDK's rule forms and the approval's diff (spec §WS3)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from agent_ref import Agent, MemoryStore, ReplayModel
from agent_ref.cli.flags import CliError, permission_config
from agent_ref.policy.permissions import (
    PermissionAllow,
    PermissionAsk,
    PermissionDeny,
    PermissionRule,
    PermissionRuleError,
    decide,
    parse_rule,
)
from agent_ref.run.options import AgentOptions
from agent_ref_support import envelopes, fast_retry, run
from validating import assert_valid
from workspace_support import replay_calls

if TYPE_CHECKING:
    from pathlib import Path


def test_spec_WS3_b_a_command_prefix_rule_covers_the_command_and_nothing_chained() -> None:
    """[WS3-b] `Bash(git status:*)`: the command or it plus arguments; an allow covers no shell operator."""
    allow = parse_rule("Bash(git status:*)", "allow")
    assert allow == PermissionRule(behavior="allow", tool="Bash", command="git status")
    assert allow.matches("Bash", {"command": "git status"})
    assert allow.matches("Bash", {"command": "git status --short"})
    assert not allow.matches("Bash", {"command": "git statusx"})
    assert not allow.matches("Bash", {"command": "git push"})
    for chained in [
        "git status && rm -rf ~",
        "git status; curl x",
        "git status | sh",
        "git status $(id)",
        "git status\nrm",
    ]:
        assert not allow.matches("Bash", {"command": chained}), chained
    assert not allow.matches("Write", {"command": "git status"})
    assert not allow.matches("Bash", {"command": 3})
    deny = parse_rule("Bash(rm:*)", "deny")
    assert deny.matches("Bash", {"command": "ls && rm -rf /"})
    assert deny.matches("Bash", {"command": "rm x"})
    assert not deny.matches("Bash", {"command": "rmdir x"})
    assert allow.describe() == "allow Bash(git status:*)"


def test_spec_WS3_b_a_path_glob_rule_is_relative_to_the_workspace(tmp_path: Path) -> None:
    """[WS3-b] `Write(src/**)` and `Edit(*.md)` over file_path, relative or absolute, never outside the root."""
    root = str(tmp_path)
    write = parse_rule("Write(src/**)", "allow", root=root)
    assert write.matches("Write", {"file_path": "src/a.py"})
    assert write.matches("Write", {"file_path": f"{root}/src/deep/b.py"})
    assert not write.matches("Write", {"file_path": "docs/a.md"})
    assert not write.matches("Write", {"file_path": "src/../../etc/passwd"})
    assert not write.matches("Write", {"file_path": "/etc/src/x"})
    assert not write.matches("Write", {"file_path": "src/a\x00"})
    md = parse_rule("Edit(*.md)", "allow", root=root)
    assert md.matches("Edit", {"file_path": "README.md"})
    assert md.matches("Edit", {"file_path": "docs/deep/guide.md"})
    assert not md.matches("Edit", {"file_path": "README.md.py"})
    top = parse_rule("Edit(src/*.py)", "allow", root=root)
    assert top.matches("Edit", {"file_path": "src/a.py"})
    assert not top.matches("Edit", {"file_path": "src/pkg/a.py"})
    glob = parse_rule("Grep(src/**)", "allow", root=root)
    assert glob.matches("Grep", {"pattern": "x", "path": "src/pkg"})
    assert parse_rule("Read", "allow") == PermissionRule(behavior="allow", tool="Read")
    rule = msgspec.json.decode(msgspec.json.encode(write), type=PermissionRule)
    assert rule == write  # stored with the agent's state and read back equal


def test_spec_WS3_b_rule_text_that_is_no_form_is_refused() -> None:
    """[WS3-b] A rule text that is none of the forms names itself and the forms."""
    for text in ["Bash(", "Write()", "a b", "Write(x) y", ""]:
        with pytest.raises(PermissionRuleError, match="rule"):
            parse_rule(text, "allow")
    with pytest.raises(CliError, match="Write\\(src/\\*\\*\\)"):
        permission_config(_args(allow_rules=["Write("]))


def _args(**values: Any) -> Any:
    import argparse

    base: dict[str, Any] = {
        "permission_mode": None,
        "allow_rules": [],
        "deny_rules": [],
        "ask_rules": [],
        "workspace": None,
    }
    return argparse.Namespace(**(base | values))


def test_spec_WS3_a_auto_asks_about_write_and_edit_unless_a_rule_allows(tmp_path: Path) -> None:
    """[WS3-a] In auto, Write/Edit ask with no rule; an allow's path glob lets them run; a deny wins."""
    config = permission_config(
        _args(
            permission_mode="auto",
            allow_rules=["Write(src/**)", "Read", "Bash(git status:*)"],
            deny_rules=["Edit(*.lock)"],
            workspace=tmp_path,
        )
    )
    rules = config["permission_rules"]
    assert isinstance(decide("auto", rules, "Write", {"file_path": "src/a.py", "content": ""}), PermissionAllow)
    assert isinstance(decide("auto", rules, "Write", {"file_path": "notes.txt", "content": ""}), PermissionAsk)
    assert isinstance(decide("auto", rules, "Edit", {"file_path": "src/a.py"}), PermissionAsk)
    assert isinstance(decide("auto", rules, "Edit", {"file_path": "deps/x.lock"}), PermissionDeny)
    assert isinstance(decide("auto", rules, "Read", {"file_path": "anything"}), PermissionAllow)
    assert isinstance(decide("auto", rules, "Bash", {"command": "git status"}), PermissionAllow)
    assert isinstance(decide("auto", rules, "Bash", {"command": "git status; rm x"}), PermissionAsk)
    assert isinstance(decide("ask", rules, "Write", {"file_path": "src/a.py"}), PermissionAsk)


def test_spec_WS3_c_the_approval_shows_the_diff_of_the_change(tmp_path: Path) -> None:
    """[WS3-c] An Edit awaiting approval carries the unified diff in its reason; nothing is written until approved."""
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    model = ReplayModel(replay_calls([("Edit", {"file_path": "a.py", "old_string": "y = 2", "new_string": "y = 3"})]))
    options = AgentOptions(workspace=tmp_path, store=MemoryStore(), retry=fast_retry(), permission_mode="auto")
    agent = Agent(model, options=options)
    lines: list[bytes] = []
    result = run(agent.run("edit", lines.append))
    assert_valid(lines)
    assert result.stop_reason == "awaiting_frontend_tools"
    (pause,) = [e for e in envelopes(lines) if e["type"] == "awaiting_frontend_tools"]
    (element,) = json.loads(pause["delta"])
    assert element["input"] == {"file_path": "a.py", "old_string": "y = 2", "new_string": "y = 3"}
    reason = element["approval"]["reason"]
    assert reason == (
        "no permission rule covers Edit\n"
        f"--- a{tmp_path}/a.py\n+++ b{tmp_path}/a.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n"
    )
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = 2\n"
    after: list[bytes] = []
    run(agent.continue_with_tool_results([{"tool_use_id": "toolu_0", "decision": "approve"}], after.append))
    assert_valid(after)
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = 3\n"
