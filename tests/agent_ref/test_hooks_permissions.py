"""Hooks and the permission callback on the scripted model (spec/agent-ref.md §12).

Every response these tests make is validated strictly by the autouse tee
(tests/agent_ref_validating.py).
"""

# ruff: noqa: ARG001, ARG005  (hooks and callbacks take the signature they are given; many ignore it)

from __future__ import annotations

import logging
from typing import Any

import pytest

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref.errors import ConfigError
from agent_ref.policy.hooks import HOOK_EVENTS, HookDecision, HookInput
from agent_ref.policy.permissions import PermissionAllow, PermissionDeny, ToolPermissionContext
from agent_ref_support import blocks, drop, fast_retry, meta, run

PROMPT = "What is 5 + (10 * 2)?"


def _agent(model: ScriptedModel | None = None, **kw: Any) -> Agent:
    return Agent(model or ScriptedModel(), tools=default_tools(), retry=fast_retry(), **kw)


def _result_block(lines: list[bytes]) -> dict[str, Any]:
    (found,) = [b for b in blocks(lines) if b["type"] == "tool_result"]
    return found


def _sent_result(model: ScriptedModel) -> dict[str, Any]:
    """The tool_result the model was given in its second request."""
    content = model.requests[1]["messages"][-1]["content"]
    (found,) = [dict(b) for b in content if b.get("type") == "tool_result"]
    inner = found.get("content")
    if isinstance(inner, list):  # text blocks: joined, so tests compare the text the model read
        found["content"] = "".join(str(b.get("text", "")) for b in inner)
    return found


def _hook_errors(lines: list[bytes]) -> list[dict[str, Any]]:
    """The failed hooks the stream reports: ``meta_status`` of kind ``hook`` (envelope-v1 [4.16-c]), never ``error``."""
    found = list(blocks(lines))
    assert not [b for b in found if b["type"] == "error" and b["data"].get("type") == "hook_error"]
    return [
        b["data"]
        for b in found
        if b["type"] == "meta_status" and b["data"].get("kind") == "hook" and b["data"].get("outcome") == "failed"
    ]


def test_spec_12_1_a_events_fire_in_timeline_order() -> None:
    """Every event of a tool run fires once, in seed 004's order [R12.1-a]; hooks of one event run in order."""
    seen: list[str] = []

    def record(tag: str) -> Any:
        def hook(data: HookInput) -> None:
            seen.append(f"{data.event}:{tag}")

        return hook

    hooks = {event: [record("a"), record("b")] for event in HOOK_EVENTS}
    lines: list[bytes] = []
    result = run(_agent(hooks=hooks).run(PROMPT, lines.append))
    assert result.stop_reason == "end_turn"
    assert seen == [
        f"{event}:{tag}"
        for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "SessionEnd")
        for tag in ("a", "b")
    ]


def test_spec_12_2_a_pre_tool_use_modify_runs_with_new_input() -> None:
    """PreToolUse ``modify``: the tool runs with the hook's input; a later hook sees it [R12.2-a] [R12.2-b]."""
    told: list[dict[str, Any]] = []

    def change(data: HookInput) -> HookDecision:
        return HookDecision(action="modify", updated_input={"expression": "2 * 21"})

    def look(data: HookInput) -> None:
        told.append(dict(data.tool_input))

    model = ScriptedModel()
    lines: list[bytes] = []
    run(_agent(model, hooks={"PreToolUse": [change, look]}).run(PROMPT, lines.append))
    assert told == [{"expression": "2 * 21"}]
    assert _result_block(lines)["content"] == "42"
    assert _sent_result(model)["content"] == "42"


def test_spec_12_2_b_pre_tool_use_block_is_an_error_result_the_model_sees() -> None:
    """PreToolUse ``block``: not run; an is_error result with the message [R12.2-b]; later hooks not asked."""
    later: list[str] = []
    model = ScriptedModel()
    lines: list[bytes] = []
    hooks = {
        "PreToolUse": [
            lambda d: HookDecision(action="block", message="calculators are off today"),
            lambda d: later.append("asked"),
        ],
        "PostToolUseFailure": [lambda d: later.append(f"failure:{d.result}")],
    }
    result = run(_agent(model, hooks=hooks).run(PROMPT, lines.append))
    assert result.stop_reason == "end_turn"
    assert _result_block(lines)["content"] == "calculators are off today"
    sent = _sent_result(model)
    assert sent["is_error"] is True
    assert sent["content"] == "calculators are off today"
    assert later == []  # a blocked call is not run, so no PostToolUse* either
    assert "The calculator failed" in result.final_text


def test_spec_12_3_a_a_hook_that_raises_is_reported_not_a_crash(caplog: pytest.LogCaptureFixture) -> None:
    """A raising observing hook: logged, a ``hook`` status (outcome failed), the run goes on [R12.3-a] [4.16-c]."""

    def broken(data: HookInput) -> None:
        raise RuntimeError("hook bug")

    lines: list[bytes] = []
    with caplog.at_level(logging.WARNING, logger="agent_ref"):
        result = run(_agent(hooks={"PostToolUse": [broken], "SessionEnd": [broken]}).run(PROMPT, lines.append))
    assert result.stop_reason == "end_turn"
    errors = _hook_errors(lines)
    assert [(e["event"], e["hook"]) for e in errors] == [("PostToolUse", 0), ("SessionEnd", 0)]
    assert "RuntimeError: hook bug" in errors[0]["message"]
    assert "PostToolUse hook 0" in caplog.text
    assert meta(lines, "meta_final")["stop_reason"] == "end_turn"


def test_spec_12_3_a_a_raising_pre_tool_use_hook_blocks_the_call() -> None:
    """PreToolUse that raises fails closed: the call is not run, the model sees why [R12.3-a]."""

    async def broken(data: HookInput) -> HookDecision:
        raise ValueError("cannot decide")

    model = ScriptedModel()
    lines: list[bytes] = []
    run(_agent(model, hooks={"PreToolUse": [broken]}).run(PROMPT, lines.append))
    sent = _sent_result(model)
    assert sent["is_error"] is True
    assert "ValueError: cannot decide" in sent["content"]
    assert [e["event"] for e in _hook_errors(lines)] == ["PreToolUse"]


def test_spec_12_4_a_allow_and_allow_with_updated_input() -> None:
    """``can_use_tool``: allow runs as asked; allow with ``updated_input`` runs the new input [R12.4-a]."""
    asked: list[tuple[str, dict[str, Any], str]] = []

    def allow(name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext) -> PermissionAllow:
        asked.append((name, tool_input, ctx.tool_use_id))
        return PermissionAllow()

    lines: list[bytes] = []
    run(_agent(can_use_tool=allow).run(PROMPT, lines.append))
    assert asked[0][:2] == ("calculator", {"expression": "5 + (10 * 2)"})
    assert asked[0][2] == _result_block(lines)["id"]
    assert _result_block(lines)["content"] == "25"

    async def change(name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext) -> PermissionAllow:
        return PermissionAllow(updated_input={"expression": "1 + 1"})

    lines = []
    run(_agent(can_use_tool=change).run(PROMPT, lines.append))
    assert _result_block(lines)["content"] == "2"


def test_spec_12_4_a_deny_with_message_is_an_error_result() -> None:
    """Deny: not run; the model sees an is_error result with the message; the run goes on [R12.4-a]."""
    model = ScriptedModel()
    lines: list[bytes] = []
    result = run(
        _agent(model, can_use_tool=lambda n, i, c: PermissionDeny(message="no maths")).run(PROMPT, lines.append)
    )
    assert result.stop_reason == "end_turn"
    assert _sent_result(model) == {
        "type": "tool_result",
        "tool_use_id": _result_block(lines)["id"],
        "content": "no maths",
        "is_error": True,
    }


def test_spec_12_4_c_deny_and_interrupt_ends_the_run() -> None:
    """Deny with interrupt: the call answered, the run ends as ``interrupted``, no further model call [R12.4-c]."""
    model = ScriptedModel()
    lines: list[bytes] = []
    agent = _agent(model, can_use_tool=lambda n, i, c: PermissionDeny(message="stop now", interrupt=True))
    result = run(agent.run(PROMPT, lines.append))
    assert result.stop_reason == "interrupted"
    assert len(model.requests) == 1
    assert meta(lines, "meta_final")["stop_reason"] == "interrupted"
    assert _result_block(lines)["content"] == "stop now"
    history = agent.state.messages
    assert history[-1]["content"][0]["is_error"] is True  # the history stays valid [R1.2-b]
    # the agent can run again afterwards
    again = run(agent.run("hello", drop))
    assert again.stop_reason == "end_turn"


def test_spec_12_4_b_a_raising_permission_callback_denies_and_is_reported() -> None:
    """``can_use_tool`` that raises or answers garbage: denied (fail closed) and reported [R12.4-b]."""

    def broken(name: str, tool_input: dict[str, Any], ctx: ToolPermissionContext) -> PermissionAllow:
        raise KeyError("policy")

    model = ScriptedModel()
    lines: list[bytes] = []
    result = run(_agent(model, can_use_tool=broken).run(PROMPT, lines.append))
    assert result.stop_reason == "end_turn"
    assert _sent_result(model)["is_error"] is True
    assert [e["event"] for e in _hook_errors(lines)] == ["can_use_tool"]

    model = ScriptedModel()
    lines = []
    run(_agent(model, can_use_tool=lambda n, i, c: "yes").run(PROMPT, lines.append))
    assert "must return PermissionAllow or PermissionDeny" in _sent_result(model)["content"]


def test_spec_12_1_b_unknown_hook_event_is_refused() -> None:
    """A misspelt event name is a ConfigError, not a hook that never fires [R12.1-b]."""
    with pytest.raises(ConfigError, match="unknown hook events: PreToolUsed"):
        _agent(hooks={"PreToolUsed": [lambda d: None]})


def test_spec_12_2_c_hook_returning_garbage_is_reported() -> None:
    """A hook that returns something other than HookDecision/None is a failing hook [R12.3-a]."""
    lines: list[bytes] = []
    run(_agent(hooks={"Stop": [lambda d: 42]}).run(PROMPT, lines.append))
    (error,) = _hook_errors(lines)
    assert "must return HookDecision or None" in error["message"]


def test_spec_12_1_a_session_end_fires_on_an_error_end_and_stop_does_not() -> None:
    """A run that ends in ``error``: SessionEnd fires (every end), Stop does not (not the loop's own stop) [R12.1-a]."""
    from agent_ref import Fault

    seen: list[tuple[str, str | None]] = []
    hooks = {event: [lambda d: seen.append((d.event, d.stop_reason))] for event in ("Stop", "SessionEnd")}
    lines: list[bytes] = []
    result = run(_agent(ScriptedModel(faults=[Fault(kind="status", status=400)]), hooks=hooks).run("hi", lines.append))
    assert result.stop_reason == "error"
    assert seen == [("SessionEnd", "error")]
