"""Notification of kind ``approval`` when a pause waits for a person's approval (spec/agent-ref.md [AP2-a]).

Real runs on the scripted model; every response is validated strictly by the autouse tee
(tests/agent_ref_validating.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hypothesis import given
from hypothesis import strategies as st

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools
from agent_ref.policy.permissions import PermissionNarrowing, PermissionRule
from agent_ref.run.finish import pause_notifications
from agent_ref.run.subagents import AgentSpec
from agent_ref.store.state import PendingCall
from agent_ref_support import fast_retry, run

if TYPE_CHECKING:
    from agent_ref.policy.hooks import HookInput

ASK_CALCULATOR = [{"behavior": "ask", "tool": "calculator"}]


def _notified(prompt: str, **config: Any) -> tuple[str, list[tuple[str | None, str | None]]]:
    seen: list[tuple[str | None, str | None]] = []

    def record(data: HookInput) -> None:
        seen.append((data.notification_kind, data.notification))

    agent = Agent(
        ScriptedModel(),
        store=MemoryStore(),
        tools=default_tools(),
        retry=fast_retry(),
        hooks={"Notification": [record]},
        **config,
    )
    result = run(agent.run(prompt, lambda _line: None))
    return result.stop_reason, seen


def test_ap2_a_a_pause_on_an_approval_notifies_kind_approval_naming_the_tool() -> None:
    stop, seen = _notified("What is 6 * 7?", permission_mode="auto", permission_rules=ASK_CALCULATOR)
    assert stop == "awaiting_frontend_tools"
    assert seen == [("approval", "approval needed for: calculator")]


def test_ap2_a_a_pause_with_both_notifies_each_kind_once_approval_first() -> None:
    prompt = "Please confirm, then tell me what is 6 * 7"
    stop, seen = _notified(
        prompt, permission_mode="auto", permission_rules=[*ASK_CALCULATOR, {"behavior": "allow", "tool": "*"}]
    )
    assert stop == "awaiting_frontend_tools"
    assert seen == [
        ("approval", "approval needed for: calculator"),
        ("frontend_tools", "waiting for frontend tools: confirm"),
    ]


def test_ap2_a_a_frontend_only_pause_keeps_kind_frontend_tools() -> None:
    stop, seen = _notified("Please confirm, then tell me what is 6 * 7")
    assert stop == "awaiting_frontend_tools"
    assert seen == [("frontend_tools", "waiting for frontend tools: confirm")]


def test_ap2_a_a_childs_approval_is_notified_once_by_the_root() -> None:
    spec = AgentSpec(
        description="researches one topic",
        tools=default_tools(),
        permissions=PermissionNarrowing(rules=(PermissionRule(behavior="ask", tool="calculator"),)),
    )
    stop, seen = _notified(
        "Research 6 * 7 and 2 + 2 in parallel",
        subagents={"researcher": spec},
        permission_mode="auto",
        permission_rules=[{"behavior": "allow", "tool": "spawn_subagent"}],
    )
    assert stop == "awaiting_frontend_tools"
    assert seen == [("approval", "approval needed for: calculator")]  # two children's calls, one notice


_NAMES = st.sampled_from(["calculator", "confirm", "delete_draft", "mcp__demo__echo"])


@given(st.lists(st.tuples(_NAMES, st.booleans()), min_size=1, max_size=8))
def test_ap2_a_one_notification_per_kind_naming_each_tool_once(calls: list[tuple[str, bool]]) -> None:
    pending = [
        PendingCall(tool_use_id=f"toolu_{i}", name=name, input={}, approval="asked" if asks else None)
        for i, (name, asks) in enumerate(calls)
    ]
    got = pause_notifications(pending)
    kinds = [k for k, _ in got]
    assert kinds == sorted(set(kinds))  # approval before frontend_tools, each once
    assert ("approval" in kinds) == any(asks for _, asks in calls)
    assert ("frontend_tools" in kinds) == (not all(asks for _, asks in calls))
    for kind, text in got:
        named = text.split(": ", 1)[1].split(", ")
        want = sorted({n for n, asks in calls if asks == (kind == "approval")})
        assert named == want
