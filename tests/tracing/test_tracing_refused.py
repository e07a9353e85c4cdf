"""Calls refused before they ran get an ``execute_tool`` span too, with why (spec [IN3-a]).

A permission deny, a PreToolUse block, the loop guard, and an approval denied on a resume
(by a fresh agent, as another process would): each refused call is an ``execute_tool``
span with status ERROR, ``error.type`` and ``agent_ref.tool.refused`` naming the reason;
the message the model got only with ``capture_content``.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import StatusCode

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools
from agent_ref.policy.hooks import HookDecision
from agent_ref.policy.permissions import PermissionDeny
from agent_ref.tracing import STEP_SPAN, Tracing
from agent_ref_support import envelopes, fast_retry

if TYPE_CHECKING:
    from collections.abc import Sequence

    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

Exported = tuple["TracerProvider", "InMemorySpanExporter"]
PROMPT = "What is 5 + (10 * 2)?"


def _tool_spans(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.name == "execute_tool calculator"]


def _attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def _parent_name(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> str | None:
    assert span.parent is not None
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    return by_id[span.parent.span_id].name


def _assert_refused(span: ReadableSpan, reason: str) -> None:
    assert span.status.status_code == StatusCode.ERROR
    assert _attrs(span)["error.type"] == reason
    assert _attrs(span)["agent_ref.tool.refused"] == reason
    assert _attrs(span)["gen_ai.operation.name"] == "execute_tool"
    assert _attrs(span)["gen_ai.tool.call.id"].startswith("toolu_")


def test_a_permission_deny_is_a_refused_span_under_its_step(exported: Exported) -> None:
    """``can_use_tool`` denies: one ERROR span ``permission_denied``, the message kept out by default [IN3-a]."""
    provider, exporter = exported

    def deny(name: str, tool_input: dict[str, Any], context: Any) -> PermissionDeny:
        assert name == "calculator", (tool_input, context)
        return PermissionDeny(message="calculators are off today")

    agent = Agent(ScriptedModel(), tools=default_tools(), can_use_tool=deny, tracing=Tracing(tracer_provider=provider))
    asyncio.run(agent.run(PROMPT, lambda _line: None))
    spans = list(exporter.get_finished_spans())
    (span,) = _tool_spans(spans)
    _assert_refused(span, "permission_denied")
    assert _parent_name(span, spans) == STEP_SPAN
    assert "agent_ref.tool.refusal_message" not in _attrs(span)
    assert "calculators are off" not in json.dumps([_attrs(s) for s in spans])


def test_a_pretooluse_block_is_a_refused_span_with_its_message_when_captured(exported: Exported) -> None:
    """A PreToolUse ``block``: ``hook_blocked``; with ``capture_content`` the message is recorded [IN3-a]."""
    provider, exporter = exported
    hooks = {"PreToolUse": [lambda _d: HookDecision(action="block", message="no sums on Sunday")]}
    agent = Agent(
        ScriptedModel(),
        tools=default_tools(),
        hooks=hooks,
        tracing=Tracing(tracer_provider=provider, capture_content=True),
    )
    asyncio.run(agent.run(PROMPT, lambda _line: None))
    (span,) = _tool_spans(list(exporter.get_finished_spans()))
    _assert_refused(span, "hook_blocked")
    assert _attrs(span)["agent_ref.tool.refusal_message"] == "no sums on Sunday"


def test_the_loop_guard_refusal_is_a_refused_span(exported: Exported) -> None:
    """The third identical call is not run: its span says ``loop_detected``; the two that ran do not [IN3-a]."""
    provider, exporter = exported
    agent = Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry(), tracing=Tracing(tracer_provider=provider))
    result = asyncio.run(agent.run("Please keep repeating the sum.", lambda _line: None))
    assert result.stop_reason == "loop_detected"
    spans = _tool_spans(list(exporter.get_finished_spans()))
    assert [s.status.status_code for s in spans[:2]] == [StatusCode.UNSET, StatusCode.UNSET]
    _assert_refused(spans[2], "loop_detected")
    assert len(spans) == 3


def test_an_approval_denied_on_a_resume_is_a_refused_span_in_the_same_trace(exported: Exported) -> None:
    """Paused on an ``ask``; a fresh agent resumes with a denial: ``approval_denied``, in the pause's trace [IN3-a]."""
    provider, exporter = exported
    store = MemoryStore()
    config: dict[str, Any] = {
        "tools": default_tools(),
        "retry": fast_retry(),
        "permission_mode": "auto",
        "permission_rules": [{"behavior": "ask", "tool": "calculator"}],
        "store": store,
        "tracing": Tracing(tracer_provider=provider),
    }
    agent = Agent(ScriptedModel(), **config)
    lines: list[bytes] = []
    paused = asyncio.run(agent.run(PROMPT, lines.append))
    assert paused.stop_reason == "awaiting_frontend_tools"
    (pause,) = [e for e in envelopes(lines) if e["type"] == "awaiting_frontend_tools"]
    (element,) = json.loads(pause["delta"])
    del config["store"]
    fresh = asyncio.run(Agent.load(agent.agent_uuid, store, ScriptedModel(), **config))
    answer = {"tool_use_id": element["tool_use_id"], "decision": "deny", "message": "not today"}
    asyncio.run(fresh.continue_with_tool_results([answer], lambda _line: None))
    spans = list(exporter.get_finished_spans())
    refused = [s for s in _tool_spans(spans) if s.status.status_code == StatusCode.ERROR]
    (span,) = refused
    _assert_refused(span, "approval_denied")
    runs = [s for s in spans if s.name == "invoke_agent"]
    assert {s.context.trace_id for s in runs if s.context is not None} == {span.context.trace_id}
