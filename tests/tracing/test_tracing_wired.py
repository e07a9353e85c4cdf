"""Spans of REAL agent runs (spec ``spec/agent-ref.md`` §20.6): the embedded model, a child, a pause, a resume.

The agent is given ``Tracing(tracer_provider=...)`` over an SDK provider exporting into
memory; every response is validated strictly by the validating tee (``conftest.py``).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any

from opentelemetry.trace import StatusCode

from agent_ref import Agent, ScriptedModel, SQLiteStore, default_tools, tool
from agent_ref.run.options import AgentOptions
from agent_ref.run.retry import IncompleteStreamError
from agent_ref.run.subagents import AgentSpec
from agent_ref.tools.demo import confirm
from agent_ref.tracing import STEP_SPAN, Tracing
from agent_ref_support import fast_retry

if TYPE_CHECKING:
    from collections.abc import Coroutine, Sequence
    from pathlib import Path

    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from agent_ref.run.finish import AgentResult

Exported = tuple["TracerProvider", "InMemorySpanExporter"]

#: The second child's task says "confirm": it pauses on a frontend call; the first finishes.
ONE_PAUSES = "Research tides and volcanoes (confirm first) in parallel"
MODEL = ScriptedModel().name


def run(coro: Coroutine[Any, Any, AgentResult]) -> AgentResult:
    return asyncio.run(coro)


def config(tracing: Tracing, **more: Any) -> dict[str, Any]:
    spec = AgentSpec(description="researches one topic", tools=[confirm])
    return {"tools": default_tools(), "subagents": {"researcher": spec}, "tracing": tracing, **more}


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def trace_of(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.trace_id)


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def all_text(spans: Sequence[ReadableSpan]) -> str:
    parts = []
    for span in spans:
        parts += [str(v) for v in (span.attributes or {}).values()]
        for event in span.events:
            parts += [str(v) for v in (event.attributes or {}).values()]
    return "\n".join(parts)


def test_run_with_a_child_and_a_pause_resumed_by_a_fresh_agent_is_one_trace_R20_6_a(
    exported: Exported, tmp_path: Path
) -> None:
    """A run whose child pauses, resumed by a new Agent from the store: one tree, one root [R20.6-a] [R20.3-a]."""
    provider, exporter = exported
    tracing = Tracing(tracer_provider=provider)
    store = SQLiteStore(tmp_path / "agents.db")
    agent = Agent(ScriptedModel(), store=store, **config(tracing))
    first: list[bytes] = []
    paused = run(agent.run(ONE_PAUSES, first.append))
    assert paused.stop_reason == "awaiting_frontend_tools"
    pause_spans = list(exporter.get_finished_spans())
    (root_paused,) = [s for s in named(pause_spans, "invoke_agent") if parent_of(s) is None]
    stored = run_sync_load(store, agent.agent_uuid)
    assert stored.run is not None
    tp = stored.run.traceparent
    assert tp is not None
    assert tp[:52] == f"00-{trace_of(root_paused):032x}-{span_id(root_paused):016x}"  # the pause keeps it
    assert attrs(root_paused)["agent_ref.stop_reason"] == "awaiting_frontend_tools"
    assert root_paused.status.status_code == StatusCode.UNSET  # a pause is an outcome, not a fault [R20.2-b]
    (pending,) = paused.pending_frontend_tools

    fresh = asyncio.run(_load(agent.agent_uuid, store, tracing))
    second: list[bytes] = []
    done = fresh.continue_with_tool_results([{"tool_use_id": pending.tool_use_id, "content": "yes"}], second.append)
    assert run(done).stop_reason == "end_turn"

    spans = list(exporter.get_finished_spans())
    assert {trace_of(s) for s in spans} == {trace_of(root_paused)}  # one trace
    roots = [s for s in spans if parent_of(s) is None]
    assert roots == [root_paused]  # one root: the first response's run span
    ids = {span_id(s): s for s in spans}
    for span in spans:  # every parent is a span of the trace: a connected tree
        assert span is root_paused or parent_of(span) in ids, span.name

    roots_resumed = [s for s in named(spans, "invoke_agent") if s is not root_paused]
    (root_resumed,) = roots_resumed
    assert parent_of(root_resumed) == span_id(root_paused)
    assert [(link.context.span_id, dict(link.attributes or {})) for link in root_resumed.links] == [
        (span_id(root_paused), {"agent_ref.link": "paused_response"})
    ]
    assert attrs(root_resumed)["agent_ref.resumed"] is True
    assert attrs(root_resumed)["agent_ref.response"] == 1
    assert attrs(root_resumed)["agent_ref.stop_reason"] == "end_turn"
    assert attrs(root_resumed)["gen_ai.usage.output_tokens"] > 0

    # the children: each first run span under its spawning call's span, named after the subagent
    children = named(spans, "invoke_agent researcher")
    spawns = {attrs(s)["gen_ai.tool.call.id"]: s for s in named(spans, "execute_tool spawn_subagent")}
    firsts = [c for c in children if "agent_ref.resumed" not in attrs(c)]
    assert len(firsts) == 2
    for child in firsts:
        spawn = spawns[attrs(child)["agent_ref.parent_tool_use_id"]]
        assert parent_of(child) == span_id(spawn)
        assert attrs(spawn)["agent_ref.tool.executor"] == "subagent"
        assert attrs(child)["gen_ai.agent.name"] == "researcher"
    (child_resumed,) = [c for c in children if attrs(c).get("agent_ref.resumed")]
    (child_paused,) = [c for c in firsts if attrs(c)["gen_ai.agent.id"] == attrs(child_resumed)["gen_ai.agent.id"]]
    assert parent_of(child_resumed) == span_id(child_paused)  # the child's own pause, continued
    (frontend,) = named(spans, "execute_tool confirm")
    assert attrs(frontend)["agent_ref.tool.awaiting_frontend"] is True
    assert attrs(frontend)["agent_ref.tool.executor"] == "frontend"

    # steps hold the model calls; the calculator-free run still has a chat per step
    for call in named(spans, f"chat {MODEL}"):
        assert ids[parent_of(call)].name == STEP_SPAN  # type: ignore[index]
        assert attrs(call)["gen_ai.request.model"] == MODEL
        assert "gen_ai.usage.input_tokens" in attrs(call)
    for spawn in spawns.values():
        assert ids[parent_of(spawn)].name == STEP_SPAN  # type: ignore[index]

    # no content by default: not the prompt, not the tasks, not a tool result [R20.4-a]
    text = all_text(spans)
    for secret in ("tides", "volcanoes", "Findings", "yes"):
        assert secret not in text


def run_sync_load(store: SQLiteStore, agent_uuid: str) -> Any:
    state = asyncio.run(store.load(agent_uuid))
    assert state is not None
    return state


async def _load(agent_uuid: str, store: SQLiteStore, tracing: Tracing) -> Agent:
    return await Agent.load(agent_uuid, store, ScriptedModel(), **config(tracing))


def test_a_background_child_runs_under_its_spawning_call_span_R20_3_c(exported: Exported) -> None:
    """The background task's run span is the spawning call's child, though that span ended first [R20.3-c]."""
    provider, exporter = exported
    agent = Agent(ScriptedModel(), **config(Tracing(tracer_provider=provider)))
    result = run(agent.run("Research tides in the background", lambda _line: None))
    assert result.stop_reason == "end_turn"
    spans = list(exporter.get_finished_spans())
    (spawn,) = named(spans, "execute_tool spawn_subagent")
    (child,) = named(spans, "invoke_agent researcher")
    assert parent_of(child) == span_id(spawn)
    assert child.start_time is not None
    assert spawn.end_time is not None
    assert attrs(child)["agent_ref.stop_reason"] == "end_turn"
    assert {trace_of(s) for s in spans} == {trace_of(spawn)}


def test_backend_tools_are_execute_tool_spans_under_the_step_R20_2_a(exported: Exported) -> None:
    """A calculator call: an ``execute_tool calculator`` span under its step, its result kept out [R20.4-a]."""
    provider, exporter = exported
    agent = Agent(ScriptedModel(), tools=default_tools(), tracing=Tracing(tracer_provider=provider))
    result = run(agent.run("What is 5 + (10 * 2)?", lambda _line: None))
    assert "25" in result.final_text
    spans = list(exporter.get_finished_spans())
    ids = {span_id(s): s for s in spans}
    (tool,) = named(spans, "execute_tool calculator")
    assert ids[parent_of(tool)].name == STEP_SPAN  # type: ignore[index]
    assert attrs(tool)["agent_ref.tool.executor"] == "backend"
    assert tool.status.status_code == StatusCode.UNSET
    steps = sorted(attrs(s)["agent_ref.step"] for s in named(spans, STEP_SPAN))
    assert steps == list(range(1, len(steps) + 1))
    assert len(steps) == result.steps
    (root,) = named(spans, "invoke_agent")
    assert attrs(root)["agent_ref.steps"] == result.steps
    assert attrs(root)["agent_ref.cost_usd"] == result.cost_usd
    # The result, not recorded by default: "25" standing alone in a text attribute (ids, hex
    # and numbers such as token counts may contain the digits and are not the result).
    texts = [v for s in spans for v in (s.attributes or {}).values() if isinstance(v, str)]
    assert not [t for t in texts if re.search(r"(?<![\w.])25(?!\w|\.\d)", t)]


def test_capture_content_records_tool_arguments_and_results_R20_4_a(exported: Exported) -> None:
    """With ``capture_content`` the call's arguments and result are attributes (and the request's messages)."""
    provider, exporter = exported
    tracing = Tracing(tracer_provider=provider, capture_content=True)
    agent = Agent(ScriptedModel(), tools=default_tools(), tracing=tracing)
    run(agent.run("What is 5 + (10 * 2)?", lambda _line: None))
    spans = list(exporter.get_finished_spans())
    (tool,) = named(spans, "execute_tool calculator")
    assert "10 * 2" in attrs(tool)["gen_ai.tool.call.arguments"]
    assert "25" in attrs(tool)["gen_ai.tool.call.result"]
    first_call = named(spans, f"chat {MODEL}")[0]
    messages = json.loads(attrs(first_call)["gen_ai.input.messages"])
    assert messages[0]["parts"][0]["content"] == "What is 5 + (10 * 2)?"


class Broken(ScriptedModel):
    """A model whose every stream ends before ``message_stop`` (a transient failure, retried)."""

    async def stream(self, params: dict[str, Any]) -> Any:  # noqa: ARG002  # the model protocol's
        """Fail at once."""
        raise IncompleteStreamError("cut")
        yield  # an async generator


def test_failed_model_calls_and_a_failed_run_are_error_spans_R20_2_b(exported: Exported) -> None:
    """Each failed attempt is an ERROR ``chat`` span with the stage's class; the run ending ``error`` is ERROR."""
    provider, exporter = exported
    agent = Agent(Broken(), tracing=Tracing(tracer_provider=provider), retry=fast_retry(2))
    lines: list[bytes] = []
    result = run(agent.run("hello", lines.append))
    assert result.stop_reason == "error"
    spans = list(exporter.get_finished_spans())
    calls = named(spans, f"chat {MODEL}")
    assert [attrs(c)["agent_ref.attempt"] for c in calls] == [1, 2]  # a retry is a sibling span
    assert all(c.status.status_code == StatusCode.ERROR for c in calls)
    assert {attrs(c)["error.type"] for c in calls} == {"incomplete_stream"}
    (root,) = named(spans, "invoke_agent")
    assert root.status.status_code == StatusCode.ERROR
    assert attrs(root)["error.type"] == "incomplete_stream"  # the error envelope's type
    assert attrs(root)["agent_ref.stop_reason"] == "error"


def test_a_failing_tool_is_an_error_span_R20_2_b(exported: Exported) -> None:
    """A tool that raises: its span has ``error.type`` ``tool_error``; the run goes on (not an ERROR run)."""
    provider, exporter = exported

    @tool
    def calculator(expression: str) -> str:
        """Always fails."""
        raise RuntimeError("boom " + expression)

    agent = Agent(ScriptedModel(), tools=[calculator], tracing=Tracing(tracer_provider=provider))
    result = run(agent.run("What is 5 + (10 * 2)?", lambda _line: None))
    assert result.stop_reason == "end_turn"
    spans = list(exporter.get_finished_spans())
    (failed,) = named(spans, "execute_tool calculator")
    assert failed.status.status_code == StatusCode.ERROR
    assert attrs(failed)["error.type"] == "tool_error"
    assert "boom" not in all_text(spans)
    (root,) = named(spans, "invoke_agent")
    assert root.status.status_code == StatusCode.UNSET


def test_tracing_off_makes_no_span_and_keeps_no_traceparent_R20_1_a(exported: Exported, tmp_path: Path) -> None:
    """``Tracing(enabled=False)``: nothing exported, and a pause stores no ``traceparent``."""
    provider, exporter = exported
    store = SQLiteStore(tmp_path / "agents.db")
    agent = Agent(ScriptedModel(), store=store, **config(Tracing(tracer_provider=provider, enabled=False)))
    paused = run(agent.run(ONE_PAUSES, lambda _line: None))
    assert paused.stop_reason == "awaiting_frontend_tools"
    assert exporter.get_finished_spans() == ()
    state = run_sync_load(store, agent.agent_uuid)
    assert state.run.traceparent is None


def test_children_share_the_parents_tracing_and_not_its_memory_R20_6_a(tmp_path: Path) -> None:
    """``for_child`` passes ``tracing`` on; ``memory`` stays the root's [R21.5-a]."""
    from agent_ref.tools.memory_store import FileMemory

    tracing = Tracing(enabled=False)
    options = AgentOptions(tracing=tracing, memory=FileMemory(tmp_path), memory_timeout=3.0)
    child = options.for_child(AgentSpec(description="d"), options.store or SQLiteStore(tmp_path / "a.db"))
    assert child.tracing is tracing
    assert child.memory is None
