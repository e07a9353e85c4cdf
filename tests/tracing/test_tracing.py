"""Spans of a run as the agent makes them (spec ``spec/agent-ref.md`` §20), read back from the SDK's in-memory exporter.

The helpers are driven in the order the agent's stages call them: run → step → model call
→ tool call → child run (and a background child), a pause whose ``traceparent`` goes
through JSON (as the state does), and a resume under another tracer provider.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agent_ref.policy import scrub
from agent_ref.tracing import NOOP, OFF, SEMCONV_VERSION, STEP_SPAN, Tracing, _parse_traceparent

if TYPE_CHECKING:
    from collections.abc import Sequence

Exported = tuple[TracerProvider, InMemorySpanExporter]

MODEL = "claude-sonnet-4-5"
USAGE = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 30, "cache_creation_input_tokens": 5}
PROMPT = "MARKER-PROMPT what is 5 + 3?"
TOOL_INPUT = {"expression": "MARKER-INPUT 5 + 3"}
TOOL_RESULT = "MARKER-RESULT 8"


def by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    out: dict[str, ReadableSpan] = {}
    for span in spans:
        assert span.name not in out, f"two spans named {span.name!r}"
        out[span.name] = span
    return out


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def trace_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


def drive_parent_with_child(tracing: Tracing) -> str | None:
    """One run: a step whose model call asks for a calculator and a subagent; the child runs under the spawning call."""
    with tracing.run(agent_id="agent-1", run_id="run-1", model=MODEL) as run:
        with tracing.step(1):
            with tracing.model_call(model=MODEL, attempt=1, max_tokens=2048) as call:
                call.record_request({"messages": [{"role": "user", "content": PROMPT}], "system": "be brief"})
                call.record_response(
                    stop_reason="tool_use",
                    usage=USAGE,
                    response_model=MODEL + "-20250929",
                    response_id="msg_1",
                    cost_usd=0.0012,
                    content=[{"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": TOOL_INPUT}],
                )
            with tracing.tool_call(name="calculator", call_id="toolu_1", arguments=TOOL_INPUT) as tool:
                tool.record_result(is_error=False, result=TOOL_RESULT)
            spawn = tracing.tool_call(name="spawn_subagent", call_id="toolu_2", executor="subagent")
            child_run = tracing.run(
                agent_id="child-1", agent_name="researcher", run_id="run-c", model=MODEL, parent_tool_use_id="toolu_2"
            )
            with spawn, child_run as child, tracing.step(1), tracing.model_call(model=MODEL) as child_call:
                child_call.record_response(stop_reason="end_turn", usage={"input_tokens": 7, "output_tokens": 3})
                child.end_run("end_turn", usage={"input_tokens": 7, "output_tokens": 3}, cost_usd=0.0001, steps=1)
        run.end_run("end_turn", usage=USAGE, cost_usd=0.0013, steps=2)
        return run.traceparent()


def test_run_step_call_tool_and_child_form_one_tree_R20_2_a(exported: Exported) -> None:
    """[R20.2-a] names, kinds, parentage and the GenAI attributes of every span of a run with a child."""
    provider, exporter = exported
    drive_parent_with_child(Tracing(tracer_provider=provider))
    spans = exporter.get_finished_spans()
    assert SEMCONV_VERSION == "1.41.0"
    # Two runs, two steps, two chats: told apart by parentage below, so first the names that are unique.
    runs = [s for s in spans if s.name.startswith("invoke_agent")]
    assert sorted(s.name for s in runs) == ["invoke_agent", "invoke_agent researcher"]
    root = next(s for s in runs if s.name == "invoke_agent")
    child = next(s for s in runs if s.name == "invoke_agent researcher")
    steps = [s for s in spans if s.name == STEP_SPAN]
    chats = [s for s in spans if s.name == f"chat {MODEL}"]
    tools = by_name([s for s in spans if s.name.startswith("execute_tool")])
    assert len(spans) == 2 + 2 + 2 + 2
    assert {trace_id(s) for s in spans} == {trace_id(root)}
    assert root.parent is None
    step1 = next(s for s in steps if parent_of(s) == span_id(root))
    chat1 = next(s for s in chats if parent_of(s) == span_id(step1))
    calculator = tools["execute_tool calculator"]
    spawn = tools["execute_tool spawn_subagent"]
    assert parent_of(calculator) == parent_of(spawn) == span_id(step1)
    assert parent_of(child) == span_id(spawn)  # the child run sits under the spawning call
    child_step = next(s for s in steps if parent_of(s) == span_id(child))
    assert any(parent_of(s) == span_id(child_step) for s in chats)

    assert root.kind == SpanKind.INTERNAL
    assert chat1.kind == SpanKind.CLIENT
    assert calculator.kind == SpanKind.INTERNAL
    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.agent.id": "agent-1",
        "gen_ai.conversation.id": "agent-1",
        "gen_ai.request.model": MODEL,
        "agent_ref.run_id": "run-1",
        "agent_ref.response": 0,
        "agent_ref.stop_reason": "end_turn",
        "gen_ai.response.finish_reasons": ("end_turn",),
        "gen_ai.usage.input_tokens": 135,  # cached tokens included, as the conventions count them
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 30,
        "gen_ai.usage.cache_creation.input_tokens": 5,
        "agent_ref.cost_usd": 0.0013,
        "agent_ref.steps": 2,
    }
    assert (child.attributes or {})["gen_ai.agent.name"] == "researcher"
    assert (child.attributes or {})["agent_ref.parent_tool_use_id"] == "toolu_2"
    assert dict(chat1.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.max_tokens": 2048,
        "agent_ref.attempt": 1,
        "gen_ai.response.finish_reasons": ("tool_use",),
        "gen_ai.response.model": MODEL + "-20250929",
        "gen_ai.response.id": "msg_1",
        "gen_ai.usage.input_tokens": 135,
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 30,
        "gen_ai.usage.cache_creation.input_tokens": 5,
        "agent_ref.cost_usd": 0.0012,
    }
    assert dict(calculator.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "calculator",
        "gen_ai.tool.call.id": "toolu_1",
        "gen_ai.tool.type": "function",
        "agent_ref.tool.executor": "backend",
    }
    assert (spawn.attributes or {})["agent_ref.tool.executor"] == "subagent"
    assert dict(step1.attributes or {}) == {"agent_ref.step": 1}
    assert all(s.status.status_code == StatusCode.UNSET for s in spans)


def test_background_child_runs_under_the_spawning_tool_span_R20_3_c(exported: Exported) -> None:
    """[R20.3-c] a task started inside a tool span keeps that span as its parent after the span has ended."""
    provider, exporter = exported
    tracing = Tracing(tracer_provider=provider)
    released = asyncio.Event()

    async def background_child() -> None:
        await released.wait()  # runs after the spawning call's span has ended
        with tracing.run(agent_id="bg-1", agent_name="worker", run_id="run-bg", model=MODEL), tracing.step(1):
            pass

    async def main() -> None:
        with tracing.run(agent_id="agent-1", run_id="run-1", model=MODEL), tracing.step(1):
            with tracing.tool_call(name="spawn_subagent", call_id="toolu_bg", executor="subagent"):
                task = asyncio.ensure_future(background_child())
            released.set()
            await task

    asyncio.run(main())
    spans = by_name([s for s in exporter.get_finished_spans() if s.name != STEP_SPAN])
    spawn = spans["execute_tool spawn_subagent"]
    child = spans["invoke_agent worker"]
    assert parent_of(child) == span_id(spawn)
    assert trace_id(child) == trace_id(spawn)
    assert child.start_time is not None
    assert spawn.end_time is not None
    assert child.start_time > spawn.end_time


def test_concurrent_tool_calls_each_under_the_step_R20_3_c(exported: Exported) -> None:
    """[R20.3-c] tools run concurrently (one task each) get sibling spans under the step, none nested in another."""
    provider, exporter = exported
    tracing = Tracing(tracer_provider=provider)

    async def call(i: int) -> None:
        with tracing.tool_call(name=f"tool{i}", call_id=f"toolu_{i}"):
            await asyncio.sleep(0.01 * (3 - i))

    async def main() -> None:
        with tracing.step(1):
            await asyncio.gather(*(call(i) for i in range(3)))

    asyncio.run(main())
    spans = by_name(exporter.get_finished_spans())
    step = spans[STEP_SPAN]
    assert [parent_of(spans[f"execute_tool tool{i}"]) for i in range(3)] == [span_id(step)] * 3


def test_pause_and_resume_under_another_provider_is_one_connected_trace_R20_3_a(exported: Exported) -> None:
    """[R20.3-a] the pause's traceparent, kept as a JSON string, parents and links the resumed response's run span."""
    provider, exporter = exported
    tracing = Tracing(tracer_provider=provider)
    with tracing.run(agent_id="agent-1", run_id="run-1", model=MODEL) as run:
        with tracing.step(1), tracing.tool_call(name="confirm", call_id="toolu_f", executor="frontend") as tool:
            tool.record_paused()
        run.end_run("awaiting_frontend_tools", usage=USAGE, steps=1)
        stored = json.dumps({"run": {"traceparent": run.traceparent()}})
    paused = by_name(exporter.get_finished_spans())["invoke_agent"]
    assert (by_name(exporter.get_finished_spans())["execute_tool confirm"].attributes or {})[
        "agent_ref.tool.awaiting_frontend"
    ] is True

    # Another process: its own provider and exporter, and a server request span current at the resume.
    other_exporter = InMemorySpanExporter()
    other = TracerProvider()
    other.add_span_processor(SimpleSpanProcessor(other_exporter))
    resumed_tracing = Tracing(tracer_provider=other)
    traceparent = json.loads(stored)["run"]["traceparent"]
    assert isinstance(traceparent, str)
    request_tracer = other.get_tracer("server")
    with (
        request_tracer.start_as_current_span("POST /agent/resume"),
        resumed_tracing.run(
            agent_id="agent-1", run_id="run-1", model=MODEL, response=1, resumed_from=traceparent
        ) as resumed,
    ):
        with resumed_tracing.step(2):
            pass
        resumed.end_run("end_turn", usage=USAGE, steps=2)
    spans = by_name(other_exporter.get_finished_spans())
    request = spans["POST /agent/resume"]
    resumed_span = spans["invoke_agent"]
    assert trace_id(resumed_span) == trace_id(paused)  # one trace across the pause
    assert parent_of(resumed_span) == span_id(paused)
    assert resumed_span.parent is not None
    assert resumed_span.parent.is_remote
    assert (resumed_span.attributes or {})["agent_ref.resumed"] is True
    assert (resumed_span.attributes or {})["agent_ref.response"] == 1
    links = {(link.context.span_id, (link.attributes or {}).get("agent_ref.link")) for link in resumed_span.links}
    assert links == {(span_id(paused), "paused_response"), (span_id(request), "resumed_by")}
    assert parent_of(spans[STEP_SPAN]) == span_id(resumed_span)
    other.shutdown()


def test_a_malformed_stored_traceparent_is_ignored_and_logged_R20_3_b(
    exported: Exported, caplog: pytest.LogCaptureFixture
) -> None:
    """[R20.3-b] a traceparent that is not W3C trace context starts a new trace, no link, a warning; never an error."""
    provider, exporter = exported
    tracing = Tracing(tracer_provider=provider)
    with caplog.at_level(logging.WARNING, logger="agent_ref"):
        resumed = tracing.run(agent_id="a", run_id="r", model=MODEL, resumed_from="00-not-a-trace\n")
        with resumed:
            pass
    (span,) = exporter.get_finished_spans()
    assert span.parent is None
    assert list(span.links) == []
    assert (span.attributes or {})["agent_ref.resumed"] is True
    assert "traceparent that is not W3C trace context" in caplog.text
    assert "\\n" in caplog.text  # the stored text is shown escaped, on one line


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=120))
def test_parsing_any_stored_text_never_raises_R20_3_b(text: str) -> None:
    """[R20.3-b] any string read back from a state gives a valid span context or ``None``, never an exception."""
    logging.getLogger("agent_ref").disabled = True
    try:
        parsed = _parse_traceparent(text)
    finally:
        logging.getLogger("agent_ref").disabled = False
    assert parsed is None or parsed.is_valid


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1), st.sampled_from([0, 1]))
def test_traceparent_round_trips_R20_3_a(trace: int, span: int, flags: int) -> None:
    """[R20.3-a] the string a span gives back names the same trace, span and sampled flag."""
    text = f"00-{trace:032x}-{span:016x}-{flags:02x}"
    parsed = _parse_traceparent(text)
    assert parsed is not None
    assert (parsed.trace_id, parsed.span_id, int(parsed.trace_flags)) == (trace, span, flags)


def all_text(spans: Sequence[ReadableSpan]) -> str:
    parts: list[str] = []
    for span in spans:
        parts += [f"{k}={v!r}" for k, v in (span.attributes or {}).items()]
        for event in span.events:
            parts += [event.name] + [f"{k}={v!r}" for k, v in (event.attributes or {}).items()]
        parts.append(str(span.status.description))
    return "\n".join(parts)


def test_no_content_in_attributes_by_default_R20_4_a(exported: Exported) -> None:
    """[R20.4-a] prompt, tool input, tool result and an exception's message stay out of every span by default."""
    provider, exporter = exported
    tracing = Tracing(tracer_provider=provider)
    drive_parent_with_child(tracing)
    with (
        pytest.raises(ValueError, match="MARKER-EXC"),
        tracing.tool_call(name="boom", call_id="t", arguments=TOOL_INPUT),
    ):
        raise ValueError("MARKER-EXC secret detail")
    text = all_text(exporter.get_finished_spans())
    assert "MARKER" not in text
    boom = by_name([s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")])["execute_tool boom"]
    assert (boom.attributes or {})["error.type"] == "ValueError"
    assert list(boom.events) == []


def test_content_when_asked_is_structured_and_scrubbed_R20_4_a(exported: Exported) -> None:
    """[R20.4-a] with capture_content the conventions' content attributes appear, as JSON, held secrets scrubbed."""
    provider, exporter = exported
    scrub.hold(["sk-held-secret-value-1234"])
    tracing = Tracing(tracer_provider=provider, capture_content=True)
    with tracing.model_call(model=MODEL) as call:
        call.record_request(
            {
                "messages": [
                    {"role": "user", "content": PROMPT + " sk-held-secret-value-1234"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "calc", "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "8"}]},
                ],
                "system": "be brief",
            }
        )
        call.record_response(stop_reason="end_turn", usage={}, content=[{"type": "text", "text": "MARKER-OUT 8"}])
    with tracing.tool_call(name="calc", call_id="t1", arguments=TOOL_INPUT) as tool:
        tool.record_result(is_error=False, result=TOOL_RESULT)
    spans = by_name(exporter.get_finished_spans())
    chat = spans[f"chat {MODEL}"].attributes or {}
    messages = json.loads(str(chat["gen_ai.input.messages"]))
    assert messages[0] == {"role": "user", "parts": [{"type": "text", "content": PROMPT + " [redacted]"}]}
    assert messages[1]["parts"] == [{"type": "tool_call", "id": "t1", "name": "calc", "arguments": {}}]
    assert messages[2]["parts"] == [{"type": "tool_call_response", "id": "t1", "result": "8"}]
    assert json.loads(str(chat["gen_ai.system_instructions"])) == [{"type": "text", "content": "be brief"}]
    output = json.loads(str(chat["gen_ai.output.messages"]))
    assert output == [
        {"role": "assistant", "parts": [{"type": "text", "content": "MARKER-OUT 8"}], "finish_reason": "end_turn"}
    ]
    tool_attrs = spans["execute_tool calc"].attributes or {}
    assert json.loads(str(tool_attrs["gen_ai.tool.call.arguments"])) == TOOL_INPUT
    assert tool_attrs["gen_ai.tool.call.result"] == TOOL_RESULT


def test_failures_set_error_type_and_status_R20_2_b(exported: Exported) -> None:
    """[R20.2-b] a failed attempt, an error result, a cancelled call and a run that ended in error are ERROR spans."""
    provider, exporter = exported
    tracing = Tracing(tracer_provider=provider)
    with tracing.model_call(model=MODEL, attempt=1) as call:
        call.error("overloaded_error")

    def fail_classified() -> None:
        with tracing.model_call(model=MODEL, attempt=2) as call:
            call.error("rate_limit_error")  # the stage's classification stands when its exception leaves the block
            raise RuntimeError("run failed")

    with pytest.raises(RuntimeError):
        fail_classified()
    with tracing.tool_call(name="denied", call_id="t1") as tool:
        tool.record_result(is_error=True, error_type="denied")
    with tracing.tool_call(name="failing", call_id="t2") as tool:
        tool.record_result(is_error=True)

    async def cancelled() -> None:
        with tracing.tool_call(name="slow", call_id="t3"):
            await asyncio.sleep(10)

    async def main() -> None:
        task = asyncio.ensure_future(cancelled())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    with tracing.run(agent_id="a", run_id="r1", model=MODEL) as run:
        run.end_run("error", error_type="rate_limit_error")
    with tracing.run(agent_id="b", run_id="r2", model=MODEL) as run:
        run.end_run("lost")
    with tracing.run(agent_id="c", run_id="r3", model=MODEL) as run:
        run.end_run("max_steps")
    spans = exporter.get_finished_spans()
    errors = {
        (s.name, (s.attributes or {}).get("agent_ref.run_id") or (s.attributes or {}).get("agent_ref.attempt")): (
            s.attributes or {}
        ).get("error.type")
        for s in spans
        if s.status.status_code == StatusCode.ERROR
    }
    assert errors == {
        (f"chat {MODEL}", 1): "overloaded_error",
        (f"chat {MODEL}", 2): "rate_limit_error",
        ("execute_tool denied", None): "denied",
        ("execute_tool failing", None): "tool_error",
        ("execute_tool slow", None): "cancelled",
        ("invoke_agent", "r1"): "rate_limit_error",
        ("invoke_agent", "r2"): "lost",
    }


def test_disabled_tracing_returns_the_shared_noop_R20_1_a() -> None:
    """[R20.1-a] ``enabled=False``: every helper is the one no-op object; nothing is recorded."""
    assert OFF.tool_call(name="t", call_id="c") is NOOP
    tracing = Tracing(enabled=False)
    spans: list[Any] = [
        tracing.run(agent_id="a", run_id="r", model=MODEL),
        tracing.step(1),
        tracing.model_call(model=MODEL),
        tracing.tool_call(name="t", call_id="c"),
    ]
    assert all(s is NOOP for s in spans)
    with tracing.run(agent_id="a", run_id="r", model=MODEL) as run:
        run.end_run("end_turn", usage=USAGE, cost_usd=1.0)
        assert run.traceparent() is None
