"""Durable approval in the agent core: an ``ask`` rule with no callback pauses the run (spec §12.6).

The pause element carries the marker; a fresh agent (another process's) resumes with an
approve / approve-edited / deny answer; bad answers are refused before anything is stored.
Every response goes through the strict validator (the autouse tee of tests/agent_ref).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore, default_tools
from agent_ref.errors import ConfigError, ToolResultsError
from agent_ref.policy.permissions import PermissionNarrowing, PermissionRule
from agent_ref.run.subagents import AgentSpec
from agent_ref_support import envelopes, fast_retry, run
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

    from agent_ref.store.core import Store
    from agent_ref.store.state import AgentState

PROMPT = "What is 6 * 7?"
ASK_CALCULATOR = [{"behavior": "ask", "tool": "calculator"}]


def _config(**more: Any) -> dict[str, Any]:
    base = {
        "tools": default_tools(),
        "retry": fast_retry(),
        "permission_mode": "auto",
        "permission_rules": ASK_CALCULATOR,
    }
    return {**base, **more}


def _paused(store: Store, **more: Any) -> tuple[Agent, list[bytes], dict[str, Any]]:
    agent = Agent(ScriptedModel(), store=store, **_config(**more))
    lines: list[bytes] = []
    result = run(agent.run(PROMPT, lines.append))
    assert result.stop_reason == "awaiting_frontend_tools"
    (pause,) = [e for e in envelopes(lines) if e["type"] == "awaiting_frontend_tools"]
    (element,) = json.loads(pause["delta"])
    return agent, lines, element


def _resume(agent_uuid: str, store: Store, answer: dict[str, Any], **more: Any) -> tuple[Any, list[bytes]]:
    """Resume as another process would: a new model and agent loaded from the store."""
    fresh = run(Agent.load(agent_uuid, store, ScriptedModel(), **_config(**more)))
    lines: list[bytes] = []
    result = run(fresh.continue_with_tool_results([answer], lines.append))
    return result, lines


def _results(lines: list[bytes]) -> list[dict[str, Any]]:
    return [e for e in envelopes(lines) if e["type"] == "tool_result"]


def test_r12_6_a_an_ask_rule_pauses_with_the_marker_and_the_state_saved(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    agent, lines, element = _paused(store)
    assert element["name"] == "calculator"
    assert element["input"] == {"expression": "6 * 7"}
    assert element["approval"]["reason"]
    assert _results(lines) == []  # the call did not run
    saved = _stored(store, agent.agent_uuid)
    assert saved.status == "awaiting_frontend_tools"
    assert [p.tool_use_id for p in saved.pending_approvals] == [element["tool_use_id"]]


def test_r12_6_c_approved_on_another_process_runs_the_tool(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    agent, first, element = _paused(store)
    result, second = _resume(agent.agent_uuid, store, {"tool_use_id": element["tool_use_id"], "decision": "approve"})
    assert result.stop_reason == "end_turn"
    (done,) = _results(second)
    assert done["id"] == element["tool_use_id"]
    assert "42" in done["delta"]
    assert "42" in result.final_text
    log = run(store.run_log(result.run_id))  # the run's recording: pause + resume, one stream
    assert log == first + second
    assert_valid(log)


def test_r12_6_c_approve_with_edited_input_runs_the_edit(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    agent, _, element = _paused(store)
    answer = {"tool_use_id": element["tool_use_id"], "decision": "approve", "updated_input": {"expression": "5 + 5"}}
    result, second = _resume(agent.agent_uuid, store, answer)
    (done,) = _results(second)
    assert "10" in done["delta"]
    assert result.stop_reason == "end_turn"


def test_r12_6_c_deny_with_a_message_is_an_error_result_and_interrupt_ends_the_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    agent, _, element = _paused(store)
    deny = {"tool_use_id": element["tool_use_id"], "decision": "deny", "message": "not today"}
    result, second = _resume(agent.agent_uuid, store, deny)
    (done,) = _results(second)
    assert "not today" in done["delta"]
    assert result.stop_reason == "end_turn"

    agent2, _, element2 = _paused(SQLiteStore(tmp_path / "b.db"))
    stop = {"tool_use_id": element2["tool_use_id"], "decision": "deny", "message": "stop it", "interrupt": True}
    result2, lines2 = _resume(agent2.agent_uuid, agent2.store, stop)
    assert result2.stop_reason == "interrupted"
    assert "stop it" in _results(lines2)[0]["delta"]


@pytest.mark.parametrize(
    ("answer", "field"),
    [
        ({"decision": "maybe"}, "decision"),
        ({"decision": "approve", "updated_input": [1]}, "updated_input"),
        ({"decision": "deny", "interrupt": "yes"}, "interrupt"),
        ({"decision": "approve", "updated_permissions": [{"behavior": "allow"}]}, "updated_permissions[0]"),
        ({"decision": "approve", "updated_mode": "never"}, "updated_mode"),
    ],
)
def test_r12_6_b_a_bad_answer_is_refused_before_anything_is_stored(
    tmp_path: Path, answer: dict[str, Any], field: str
) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    agent, _, element = _paused(store)
    before = _stored(store, agent.agent_uuid)
    fresh = run(Agent.load(agent.agent_uuid, store, ScriptedModel(), **_config()))
    with pytest.raises(ToolResultsError) as caught:
        run(fresh.continue_with_tool_results([{"tool_use_id": element["tool_use_id"], **answer}], _ignore))
    message = str(caught.value)
    assert element["tool_use_id"] in message
    assert field in message
    after = _stored(store, agent.agent_uuid)
    assert after.version == before.version
    assert after.status == "awaiting_frontend_tools"


def test_r12_5_g_updated_permissions_hold_after_a_resume_on_another_process(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    agent, _, element = _paused(store)
    rule = {"behavior": "allow", "tool": "calculator"}
    answer = {"tool_use_id": element["tool_use_id"], "decision": "approve", "updated_permissions": [rule]}
    result, _ = _resume(agent.agent_uuid, store, answer)
    assert result.stop_reason == "end_turn"
    saved = _stored(store, agent.agent_uuid)
    assert PermissionRule(behavior="allow", tool="calculator") in saved.permissions.session


def test_permission_options_are_checked_and_serialisable() -> None:
    with pytest.raises(ConfigError, match="permission_mode"):
        Agent(ScriptedModel(), permission_mode="sometimes")
    with pytest.raises(ConfigError, match=r"permission_rules\[0\]"):
        Agent(ScriptedModel(), permission_rules=[{"behavior": "never", "tool": "x"}])
    agent = Agent(ScriptedModel(), permission_mode="auto", permission_rules=ASK_CALCULATOR)
    plain = agent.options.to_dict()
    assert plain["permission_mode"] == "auto"
    assert plain["permission_rules"] == [{"behavior": "ask", "tool": "calculator", "input": {}}]


def test_a_run_with_no_rules_runs_the_tool_as_before(tmp_path: Path) -> None:
    agent = Agent(ScriptedModel(), store=SQLiteStore(tmp_path / "a.db"), tools=default_tools(), retry=fast_retry())
    lines: list[bytes] = []
    result = run(agent.run(PROMPT, lines.append))
    assert result.stop_reason == "end_turn"
    assert "42" in _results(lines)[0]["delta"]


#: The root spawns freely; its children inherit this and ask about the calculator (their narrowing).
ROOT_RULES: dict[str, Any] = {
    "permission_mode": "auto",
    "permission_rules": [{"behavior": "allow", "tool": "spawn_subagent"}],
}


def _child_config() -> dict[str, Any]:
    spec = AgentSpec(
        description="researches one topic",
        tools=default_tools(),
        permissions=PermissionNarrowing(rules=(PermissionRule(behavior="ask", tool="calculator"),)),
    )
    return {"tools": default_tools(), "retry": fast_retry(), "subagents": {"researcher": spec}, **ROOT_RULES}


def test_r12_6_a_a_childs_call_needing_approval_pauses_the_whole_run(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    agent = Agent(ScriptedModel(), store=store, **_child_config())
    first: list[bytes] = []
    paused = run(agent.run("Research 6 * 7 and 2 + 2 in parallel", first.append))
    assert paused.stop_reason == "awaiting_frontend_tools"
    (pause,) = [e for e in envelopes(first) if e["type"] == "awaiting_frontend_tools"]
    pending = json.loads(pause["delta"])
    assert pending
    assert all(p["name"] == "calculator" and "approval" in p and p["agent"] != agent.agent_uuid for p in pending)
    fresh = run(Agent.load(agent.agent_uuid, store, ScriptedModel(), **_child_config()))
    second: list[bytes] = []
    answers = [{"tool_use_id": p["tool_use_id"], "decision": "approve"} for p in pending]
    result = run(fresh.continue_with_tool_results(answers, second.append))
    assert result.stop_reason == "end_turn"
    ran = {e["id"] for e in _results(second)}
    assert {p["tool_use_id"] for p in pending} <= ran
    log = run(store.run_log(result.run_id))
    assert log == first + second
    assert_valid(log)


def _stored(store: Store, agent_uuid: str) -> AgentState:
    """The agent's stored state (it is there)."""
    state = run(store.load(agent_uuid))
    assert state is not None
    return state


def _ignore(line: bytes) -> None:
    """A sink that keeps nothing."""
