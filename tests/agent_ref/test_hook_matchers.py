"""Hook matchers, per-hook timeouts and the decisions of seed 004's events (spec §12.7, §12.8).

``run_hooks`` and the pure helpers, called directly; where each event fires is the agent's.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref.errors import ConfigError
from agent_ref.policy.hooks import (
    EVENT_ACTIONS,
    HOOK_EVENTS,
    MAX_STOP_CONTINUATIONS,
    HookDecision,
    HookEntry,
    HookFailure,
    HookInput,
    HookMatcher,
    check_hooks,
    child_hooks,
    keep_going,
    run_hooks,
)
from agent_ref_support import blocks, fast_retry, run


def _data(event: Any = "PreToolUse", tool: str | None = "calc", **extra: Any) -> HookInput:
    return HookInput(event=event, agent_uuid="a1", run_id="r1", tool_name=tool, tool_input={"x": 1}, **extra)


def _run(
    hooks: list[HookEntry], data: HookInput, timeout: float | None = None
) -> tuple[HookDecision, dict[str, Any], list[HookFailure]]:
    failures: list[HookFailure] = []
    decision, tool_input = asyncio.run(run_hooks(hooks, data, failures, timeout=timeout))
    return decision, dict(tool_input), failures


def _recorder(seen: list[str], tag: str, answer: HookDecision | None = None) -> Any:
    def hook(_told: HookInput) -> HookDecision | None:
        seen.append(tag)
        return answer

    return hook


# ----------------------------------------------------------------------------- matchers


def test_spec_12_8_a_a_matcher_fires_only_for_matching_tool_names() -> None:
    """[R12.8-a] A matcher's hooks run for names its pattern matches; plain hooks for every call."""
    seen: list[str] = []
    hooks: list[HookEntry] = [
        HookMatcher("mcp__github__*", [_recorder(seen, "github")]),
        _recorder(seen, "all"),
        HookMatcher("calc", [_recorder(seen, "calc1"), _recorder(seen, "calc2")]),
    ]
    _run(hooks, _data(tool="mcp__github__get_issue"))
    assert seen == ["github", "all"]
    seen.clear()
    _run(hooks, _data(tool="calc"))
    assert seen == ["all", "calc1", "calc2"]
    seen.clear()
    _run(hooks, _data(event="PostToolUse", tool="calculator"))
    assert seen == ["all"]


def test_spec_12_8_a_a_failure_names_the_hooks_position_counting_matchers_hooks() -> None:
    """[R12.8-a] [R12.3-a] The reported index counts every hook of the list, matched or not."""

    def boom(_: HookInput) -> None:
        raise RuntimeError("no")

    hooks: list[HookEntry] = [HookMatcher("other", [boom, boom]), HookMatcher("*", [lambda _: None, boom])]
    decision, _, failures = _run(hooks, _data(event="PostToolUse"))
    assert [(f.event, f.index, f.message) for f in failures] == [("PostToolUse", 3, "RuntimeError: no")]
    assert decision.action == "continue"


def test_spec_12_8_a_on_an_event_without_a_tool_only_star_matches() -> None:
    """[R12.8-a] Stop has no tool name: a ``*`` matcher fires, and check_hooks refuses another pattern."""
    seen: list[str] = []
    _run([HookMatcher("*", [_recorder(seen, "star")])], _data(event="Stop", tool=None))
    assert seen == ["star"]
    with pytest.raises(ConfigError, match=r"hooks\['Stop'\]\[0\]: a matcher's pattern 'calc' needs a tool name"):
        check_hooks({"Stop": [HookMatcher("calc", [_recorder(seen, "x")])]})
    check_hooks({"SubagentStop": [HookMatcher("researcher", [_recorder(seen, "x")])], "Stop": [lambda _: None]})


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: HookMatcher("mcp__gh__.*", [print]), "HookMatcher.pattern: 'mcp__gh__.*' has '.'"),
        (lambda: HookMatcher("*", print), "HookMatcher.hooks: must be a sequence of hooks"),  # type: ignore[arg-type]
        (lambda: HookMatcher("*", [print, 3]), r"HookMatcher.hooks\[1\]: must be callable, not int"),  # type: ignore[list-item]
        (lambda: HookMatcher("*", [print], timeout=0), "HookMatcher.timeout: must be a positive number"),
        (lambda: HookMatcher("*", [print], timeout=float("inf")), "HookMatcher.timeout: must be a positive"),
        (lambda: HookMatcher("*", [print], timeout=True), "HookMatcher.timeout: must be a positive"),
        (lambda: check_hooks({"Nope": []}), "unknown hook events: Nope"),
        (lambda: check_hooks({"Stop": [3]}), r"hooks\['Stop'\]\[0\]: must be a hook or a HookMatcher, not int"),  # type: ignore[list-item]
        (lambda: check_hooks({}, timeout=-1), "hook timeout: must be a positive number"),
    ],
)
def test_spec_12_8_a_bad_matchers_and_hook_lists_are_config_errors(make: Any, needle: str) -> None:
    """[R12.8-a] [R12.1-b] Each mistake is a ConfigError naming where it is."""
    with pytest.raises(ConfigError, match=needle):
        make()


# ----------------------------------------------------------------------------- timeouts


def test_spec_12_8_b_an_async_hook_that_overruns_blocks_a_pre_tool_use_call() -> None:
    """[R12.8-b] An overrun is a failure like a raise: fail closed for PreToolUse, reported with its limit."""
    seen: list[str] = []

    async def slow(_: HookInput) -> None:
        await asyncio.sleep(30)  # cancelled at the limit: never reaches the next line
        seen.append("slow finished")

    decision, _, failures = _run([HookMatcher("*", [slow], timeout=0.05), _recorder(seen, "after")], _data())
    assert decision.action == "block"
    assert decision.message == "blocked: a PreToolUse hook failed (TimeoutError: the hook did not answer within 0.05 s)"
    assert [(f.index, f.message) for f in failures] == [(0, "TimeoutError: the hook did not answer within 0.05 s")]
    assert seen == []


def test_spec_12_8_b_a_blocking_sync_hook_is_left_in_its_thread_and_the_chain_goes_on() -> None:
    """[R12.8-b] A sync hook under a limit runs in a daemon thread; on overrun it is abandoned, not awaited."""
    release = threading.Event()
    seen: list[str] = []

    def stuck(_: HookInput) -> None:
        release.wait(30)
        seen.append("stuck finished")

    try:
        decision, _, failures = _run([stuck, _recorder(seen, "after")], _data(event="PostToolUse"), timeout=0.05)
        assert seen == ["after"]  # the chain ended while ``stuck`` still waited: it was not awaited
        assert [f.message for f in failures] == ["TimeoutError: the hook did not answer within 0.05 s"]
        assert decision.action == "continue"
    finally:
        release.set()


def test_spec_12_8_b_the_matchers_timeout_beats_the_default_and_fast_hooks_pass() -> None:
    """[R12.8-b] Under a limit, sync and async hooks that answer in time decide as usual."""

    async def fast(_: HookInput) -> HookDecision:
        return HookDecision(action="modify", updated_input={"x": 2})

    def sync(data: HookInput) -> HookDecision:
        return HookDecision(action="modify", updated_input={"x": data.tool_input["x"] + 1})

    class Callable:
        async def __call__(self, data: HookInput) -> HookDecision:
            await asyncio.sleep(0)
            return HookDecision(action="modify", updated_input={"x": data.tool_input["x"] * 10})

    hooks: list[HookEntry] = [HookMatcher("*", [fast, sync], timeout=5), Callable()]
    decision, tool_input, failures = _run(hooks, _data(), timeout=0.001 + 5)
    assert (decision.action, tool_input, failures) == ("modify", {"x": 30}, [])

    async def slowish(_: HookInput) -> None:
        await asyncio.sleep(0.2)

    _, _, failures = _run([HookMatcher("*", [slowish], timeout=5)], _data(), timeout=0.01)
    assert failures == []


# ----------------------------------------------------------------------------- decisions


def test_spec_12_7_a_each_event_reads_only_its_actions() -> None:
    """[R12.7-a] What an event does not read is ignored: the chain goes on, the decision is continue."""
    assert set(EVENT_ACTIONS) <= set(HOOK_EVENTS)
    for event in ("PostToolUse", "SessionEnd", "Notification", "SubagentStop"):
        seen: list[str] = []
        hooks: list[HookEntry] = [
            _recorder(seen, "block", HookDecision(action="block", message="x")),
            _recorder(seen, "abort", HookDecision(action="abort_all")),
            _recorder(seen, "keep", HookDecision(action="keep_going")),
            _recorder(seen, "last"),
        ]
        decision, _, _ = _run(hooks, _data(event=event))
        assert seen == ["block", "abort", "keep", "last"], event
        assert decision.action == "continue"
    assert HOOK_EVENTS.index("PreCompact") < HOOK_EVENTS.index("Notification") < HOOK_EVENTS.index("Stop")


def test_spec_12_7_a_a_decision_that_means_nothing_fails_its_hook() -> None:
    """[R12.7-a] [R12.3-a] HookDecision checks itself: a hook building a bad one fails, reported."""
    with pytest.raises(ValueError, match=r"HookDecision\.action: must be one of"):
        HookDecision(action="explode")  # type: ignore[arg-type]

    def bad(_: HookInput) -> HookDecision:
        return HookDecision(additional_context=5)  # type: ignore[arg-type]

    decision, _, failures = _run([bad], _data(event="UserPromptSubmit", tool=None, prompt="hi"))
    assert decision.action == "continue"
    assert failures[0].message == "TypeError: HookDecision.additional_context: must be a string, not int"


def test_spec_12_7_b_prompt_hooks_add_context_in_order_and_block_ends_the_chain() -> None:
    """[R12.7-b] Contexts joined by a blank line; a UserPromptSubmit block stands and stops the chain."""
    seen: list[str] = []
    add = [
        _recorder(seen, "a", HookDecision(additional_context="the user is in Paris")),
        _recorder(seen, "b"),
        _recorder(seen, "c", HookDecision(additional_context="answer in French")),
    ]
    for event in ("UserPromptSubmit", "SessionStart"):
        decision, _, _ = _run(add, _data(event=event, tool=None, prompt="hi"))
        assert decision.action == "continue"
        assert decision.additional_context == "the user is in Paris\n\nanswer in French"
    decision, _, _ = _run(add, _data(event="Stop", tool=None))
    assert decision.additional_context is None
    seen.clear()
    blocking = [add[0], _recorder(seen, "no", HookDecision(action="block", message="not that")), add[2]]
    decision, _, _ = _run(blocking, _data(event="UserPromptSubmit", tool=None, prompt="hi"))
    assert (decision.action, decision.message) == ("block", "not that")
    assert seen == ["a", "no"]
    decision, _, _ = _run(blocking, _data(event="SessionStart", tool=None, prompt="hi"))
    assert decision.action == "continue"  # SessionStart cannot block


def test_spec_12_7_c_abort_all_stops_the_chain_with_its_message() -> None:
    """[R12.7-c] PreToolUse abort_all: no later hook runs, the decision is returned as given."""
    seen: list[str] = []
    hooks: list[HookEntry] = [
        _recorder(seen, "modify", HookDecision(action="modify", updated_input={"x": 9})),
        _recorder(seen, "abort", HookDecision(action="abort_all", message="stop everything")),
        _recorder(seen, "never"),
    ]
    decision, tool_input, _ = _run(hooks, _data())
    assert (decision.action, decision.message) == ("abort_all", "stop everything")
    assert tool_input == {"x": 9}
    assert seen == ["modify", "abort"]


def test_spec_12_7_d_stop_keep_going_is_bounded() -> None:
    """[R12.7-d] keep_going stops the Stop chain; it counts for end_turn only, at most MAX times per run."""
    seen: list[str] = []
    hooks: list[HookEntry] = [
        _recorder(seen, "go", HookDecision(action="keep_going", message="  check the tests  ")),
        _recorder(seen, "never"),
    ]
    decision, _, _ = _run(hooks, _data(event="Stop", tool=None, stop_reason="end_turn"))
    assert seen == ["go"]
    assert keep_going(decision, "end_turn", 0) == "check the tests"
    assert keep_going(decision, "max_steps", 0) is None
    assert keep_going(decision, "end_turn", MAX_STOP_CONTINUATIONS) is None
    assert keep_going(HookDecision(action="keep_going"), "end_turn", 0) == "a Stop hook asked to keep going"
    assert keep_going(HookDecision(), "end_turn", 0) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=12))
def test_spec_12_7_d_no_stop_hook_keeps_a_run_going_more_than_the_bound(wants: list[bool]) -> None:
    """[R12.7-d] Property: whatever Stop hooks answer, a run is kept going at most MAX_STOP_CONTINUATIONS times."""
    continuations = 0
    for want in wants:
        decision = HookDecision(action="keep_going" if want else "continue")
        if keep_going(decision, "end_turn", continuations) is None:
            break
        continuations += 1
    assert continuations <= MAX_STOP_CONTINUATIONS
    assert continuations == min(MAX_STOP_CONTINUATIONS, next((i for i, w in enumerate(wants) if not w), len(wants)))


def test_spec_12_7_e_subagent_stop_and_notification_inputs_reach_the_hook() -> None:
    """[R12.7-e] SubagentStop is told the child's id and transcript; Notification its text and kind."""
    told: list[HookInput] = []
    transcript = (
        {"role": "user", "content": "find x"},
        {"role": "assistant", "content": [{"type": "text", "text": "x"}]},
    )
    _run(
        [HookMatcher("researcher", [told.append])],
        _data(event="SubagentStop", tool="researcher", subagent_uuid="child-1", transcript=transcript, result="x"),
    )
    _run(
        [told.append],
        _data(event="Notification", tool=None, notification="approve delete?", notification_kind="approval"),
    )
    assert (told[0].subagent_uuid, tuple(told[0].transcript), told[0].result) == ("child-1", transcript, "x")
    assert (told[1].notification, told[1].notification_kind) == ("approve delete?", "approval")


def test_spec_12_7_f_children_do_not_get_the_session_hooks() -> None:
    """[R12.7-f] A subagent runs its parent's hooks but SessionStart and SessionEnd."""
    hooks: dict[str, list[HookEntry]] = {event: [print] for event in HOOK_EVENTS}
    assert sorted(child_hooks(hooks)) == sorted(set(HOOK_EVENTS) - {"SessionStart", "SessionEnd"})
    assert child_hooks(hooks)["PreToolUse"] == [print]
    assert child_hooks(hooks)["PreToolUse"] is not hooks["PreToolUse"]


# ----------------------------------------------------------------------------- through the agent as it is


def _agent_with(hooks: dict[str, list[HookEntry]]) -> Agent:
    return Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry(), hooks=hooks)


def test_spec_12_8_a_matchers_and_timeouts_work_in_an_agent_run() -> None:
    """[R12.8-a] [R12.8-b] The agent's hook lists take matchers today: only the matching one fires,
    and an overrunning matched hook blocks the call (the stream is strictly validated by the tee)."""
    seen: list[str] = []

    async def slow(_: HookInput) -> None:
        await asyncio.sleep(30)

    hooks: dict[str, list[HookEntry]] = {
        "PreToolUse": [
            HookMatcher("mcp__*", [_recorder(seen, "mcp")]),
            HookMatcher("calc*", [_recorder(seen, "calc"), slow], timeout=0.05),
        ],
        "PostToolUse": [HookMatcher("*", [_recorder(seen, "post")])],
    }
    lines: list[bytes] = []
    result = run(_agent_with(hooks).run("What is 5 + (10 * 2)?", lines.append))
    assert result.stop_reason == "end_turn"
    assert seen == ["calc"]  # blocked, so no PostToolUse
    (sent,) = [b for b in blocks(lines) if b["type"] == "tool_result"]
    assert "the hook did not answer within 0.05 s" in str(sent["content"])
    assert not [b for b in blocks(lines) if b["type"] == "error"]  # a failed hook is a status ([4.16-c])
    errors = [b["data"] for b in blocks(lines) if b["type"] == "meta_status" and b["data"]["kind"] == "hook"]
    assert [(e["event"], e["hook"]) for e in errors] == [("PreToolUse", 2)]
