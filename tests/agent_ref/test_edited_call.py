"""A call run with another input than the model's shows the input that ran (envelope-v1 §4.6-a).

Issue 37: ``resume --approve TU --input '{"expression": "6 * 8"}'`` ran the edit while the
stream showed only the model's ``6 * 7`` and then the result 48. Now the producer sends the
call's edit, a second ``tool_call`` of the id with the input that ran, right before its
result; the recording of both responses is strictly valid, and both Python decoders (the
transcript and the tree) give the call as it ran. Every response goes through the strict
validator (the autouse tee of tests/agent_ref, and ``assert_valid`` here).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_ref import Agent, HookDecision, ScriptedModel, SQLiteStore, default_tools
from agent_ref.policy.permissions import PermissionAllow
from agent_ref_support import envelopes, fast_retry, run
from envelope import reconstruct, tree
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

    from agent_ref.policy.hooks import HookInput
    from agent_ref.policy.permissions import ToolPermissionContext

PROMPT = "What is 6 * 7?"


def _approval_agent(store: SQLiteStore) -> Agent:
    config: dict[str, Any] = {
        "tools": default_tools(),
        "retry": fast_retry(),
        "permission_mode": "auto",
        "permission_rules": [{"behavior": "ask", "tool": "calculator"}],
    }
    return Agent(ScriptedModel(), store=store, **config)


def _approved(tmp_path: Path, answer: dict[str, Any]) -> tuple[str, str, list[bytes], list[bytes]]:
    """Pause on the calculator, answer from a fresh agent: (agent, call id, first response, resumed one)."""
    store = SQLiteStore(tmp_path / "a.db")
    agent = _approval_agent(store)
    first: list[bytes] = []
    assert run(agent.run(PROMPT, first.append)).stop_reason == "awaiting_frontend_tools"
    (pause,) = [e for e in envelopes(first) if e["type"] == "awaiting_frontend_tools"]
    (element,) = json.loads(pause["delta"])
    fresh = run(Agent.load(agent.agent_uuid, store, ScriptedModel(), tools=default_tools()))
    second: list[bytes] = []
    result = run(fresh.continue_with_tool_results([{"tool_use_id": element["tool_use_id"], **answer}], second.append))
    assert result.stop_reason == "end_turn"
    return agent.agent_uuid, element["tool_use_id"], first, second


def _calls_and_results(lines: list[bytes], call_id: str) -> list[tuple[str, str]]:
    return [(e["type"], e["delta"]) for e in envelopes(lines) if e.get("id") == call_id]


def test_spec_4_6_a_an_approved_edit_is_sent_right_before_its_result(tmp_path: Path) -> None:
    """The resumed response shows the input that ran, then the result; the recording is valid [4.6-a] [V4.6-a]."""
    agent, call_id, first, second = _approved(
        tmp_path, {"decision": "approve", "updated_input": {"expression": "6 * 8"}}
    )
    assert _calls_and_results(first, call_id) == [("tool_call", '{"expression": "6 * 7"}')]
    shown = _calls_and_results(second, call_id)
    assert [kind for kind, _ in shown] == ["tool_call", "tool_result"]  # the edit, right before the result
    assert json.loads(shown[0][1]) == {"expression": "6 * 8"}
    assert shown[1][1] == "48"
    assert_valid(second)
    recording = [*first, *second]
    assert_valid(recording)
    transcript = reconstruct(recording)
    ran = transcript.call(agent, call_id)
    assert ran is not None
    assert json.loads(ran.content) == {"expression": "6 * 8"}
    calls = [b for b in transcript.to_dict()["agents"][agent]["blocks"] if b["type"] == "tool_call"]
    assert calls == [
        {"type": "tool_call", "complete": True, "id": call_id, "name": "calculator", "input": {"expression": "6 * 7"}},
        {
            "type": "tool_call",
            "complete": True,
            "id": call_id,
            "name": "calculator",
            "input": {"expression": "6 * 8"},
            "edit": True,
        },
    ]
    (root,) = tree(transcript).to_dict()["agents"]
    assert [b.get("edit", False) for b in root["blocks"] if b["type"] == "tool_call"] == [False, True]


def test_spec_4_6_a_an_approval_without_an_edit_sends_no_second_call(tmp_path: Path) -> None:
    """Approved as asked: the call ran with the model's input, so the record needs nothing more [4.6-a]."""
    agent, call_id, first, second = _approved(tmp_path, {"decision": "approve"})
    assert [kind for kind, _ in _calls_and_results(second, call_id)] == ["tool_result"]
    transcript = reconstruct([*first, *second])
    ran = transcript.call(agent, call_id)
    assert ran is not None
    assert json.loads(ran.content) == {"expression": "6 * 7"}
    assert all("edit" not in b for b in transcript.to_dict()["agents"][agent]["blocks"])


def test_spec_4_6_a_a_hook_or_a_callback_that_changes_the_input_shows_it() -> None:
    """Within one response, a PreToolUse ``modify`` or ``can_use_tool``'s ``updated_input`` is an edit too [4.6-a]."""

    def change(_data: HookInput) -> HookDecision:
        return HookDecision(action="modify", updated_input={"expression": "2 * 21"})

    async def allow_other(_name: str, _input: dict[str, Any], _ctx: ToolPermissionContext) -> PermissionAllow:
        return PermissionAllow(updated_input={"expression": "1 + 1"})

    for kw, expected, result in (
        ({"hooks": {"PreToolUse": [change]}}, {"expression": "2 * 21"}, "42"),
        ({"can_use_tool": allow_other}, {"expression": "1 + 1"}, "2"),
    ):
        lines: list[bytes] = []
        run(Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry(), **kw).run(PROMPT, lines.append))
        assert_valid(lines)
        calls = [e for e in envelopes(lines) if e["type"] in ("tool_call", "tool_result")]
        assert [(e["type"], e["id"]) for e in calls] == [
            ("tool_call", calls[0]["id"]),
            ("tool_call", calls[0]["id"]),
            ("tool_result", calls[0]["id"]),
        ]
        assert json.loads(calls[0]["delta"]) == {"expression": "6 * 7"}  # the model's call stays in the record
        assert json.loads(calls[1]["delta"]) == expected
        assert calls[2]["delta"] == result
