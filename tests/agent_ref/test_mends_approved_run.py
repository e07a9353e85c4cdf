"""A call a person approved runs as the step's calls do: its context, its span, its checkpoint (spec [MA1-c]).

Each scenario pauses on an ``ask`` rule, then a fresh agent (another process's) resumes with
an approval. Every response goes through the strict validator (the autouse tee of
tests/agent_ref), and the run's whole log is checked again as a follower reads it back.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent_ref import Agent, MemoryStore, ScriptedModel
from agent_ref.agent import _nowhere
from agent_ref.run.checkpoints import UNKNOWN_RESULT
from agent_ref.tools.core import Tool, ToolContext, tool
from agent_ref.tracing import Tracing
from agent_ref_support import envelopes, fast_retry
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator


class Died(BaseException):
    """The process stops here (nothing of the agent catches a ``BaseException`` of its own)."""


@tool
async def whoami(ctx: ToolContext) -> str:
    """Say which run and step this call is part of.

    Args:
        ctx: Never in the schema.
    """
    return f"agent={ctx.agent_uuid} run={ctx.run_id} step={ctx.step} store={ctx.store is not None}"


class Notes:
    """A ``note`` tool that records what it was called with."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def tools(self) -> list[Tool]:
        async def note(text: str) -> str:
            """Write a note.

            Args:
                text: the note.
            """
            self.seen.append(text)
            return f"noted {text}"

        return [tool(note)]


def _config(tools: list[Tool], name: str, **more: Any) -> dict[str, Any]:
    rules = [{"behavior": "ask", "tool": name}]
    return {"tools": tools, "retry": fast_retry(), "permission_mode": "auto", "permission_rules": rules, **more}


def _pause(agent: Agent, prompt: str) -> list[dict[str, Any]]:
    """Run ``prompt`` to its approval pause; the pending elements."""
    lines: list[bytes] = []
    result = asyncio.run(agent.run(prompt, lines.append))
    assert result.stop_reason == "awaiting_frontend_tools"
    (pause,) = [e for e in envelopes(lines) if e["type"] == "awaiting_frontend_tools"]
    elements: list[dict[str, Any]] = json.loads(pause["delta"])
    return elements


def _approve(element: dict[str, Any]) -> dict[str, Any]:
    return {"tool_use_id": element["tool_use_id"], "decision": "approve"}


@pytest.fixture
def exported() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """A fresh SDK provider whose finished spans land in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def test_spec_ma1_c_an_approved_call_gets_its_tool_context() -> None:
    """[MA1-c] An approved tool reading its ToolContext sees the agent, the run, the paused step and the store."""
    store = MemoryStore()
    agent = Agent(ScriptedModel(), store=store, **_config([whoami], "whoami"))
    (element,) = _pause(agent, "call whoami with {}")
    fresh = asyncio.run(Agent.load(agent.agent_uuid, store, ScriptedModel(), **_config([whoami], "whoami")))
    lines: list[bytes] = []
    result = asyncio.run(fresh.continue_with_tool_results([_approve(element)], lines.append))
    assert result.stop_reason == "end_turn"
    (done,) = [e for e in envelopes(lines) if e["type"] == "tool_result"]
    assert done["id"] == element["tool_use_id"]
    assert done["delta"] == f"agent={agent.agent_uuid} run={result.run_id} step=1 store=True"


def test_spec_ma1_c_an_approved_call_is_an_execute_tool_span_of_the_run(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """[MA1-c] The approved call's run is an ``execute_tool`` span with its result, in the pause's trace."""
    provider, exporter = exported
    store = MemoryStore()
    notes = Notes()
    config = _config(notes.tools(), "note", tracing=Tracing(tracer_provider=provider))
    agent = Agent(ScriptedModel(), store=store, **config)
    (element,) = _pause(agent, 'call note with {"text": "a"}')
    paused = [s for s in exporter.get_finished_spans() if s.name == "execute_tool note"]
    fresh = asyncio.run(Agent.load(agent.agent_uuid, store, ScriptedModel(), **config))
    asyncio.run(fresh.continue_with_tool_results([_approve(element)], _nowhere))
    spans = list(exporter.get_finished_spans())
    ran = [s for s in spans if s.name == "execute_tool note" and s not in paused]
    assert notes.seen == ["a"]
    (span,) = ran
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.tool.call.id"] == element["tool_use_id"]
    assert attributes["agent_ref.tool.executor"] == "backend"
    assert span.status.status_code != StatusCode.ERROR
    runs = [s for s in spans if s.name.startswith("invoke_agent")]
    assert runs
    assert {s.context.trace_id for s in runs if s.context is not None} == {span.context.trace_id}


def _dies_on_result(tool_use_id: str) -> Any:
    """A sink whose process dies as the ``tool_result`` of ``tool_use_id`` reaches it."""

    def sink(line: bytes) -> None:
        envelope = json.loads(line) if line.startswith(b"{") else {}
        if envelope.get("type") == "tool_result" and envelope.get("id") == tool_use_id:
            raise Died

    return sink


@pytest.mark.agent_stream_codes("W161")  # the dying response: cut after its last line, no [DONE]
def test_spec_ma1_c_an_approved_result_is_checkpointed_and_not_run_again() -> None:
    """[MA1-c] [CK1.3-c] Killed as an approved call's result is streamed: the continuation reuses it and the denial.

    Two asked calls: one approved, one denied. The process dies on the approved result's
    line; recovery continues the run from its checkpoint (not back to the pause, where a
    second approval would run the call again), with both results reused.
    """
    store = MemoryStore()
    notes = Notes()
    config = _config(notes.tools(), "note", checkpoints=True)
    agent = Agent(ScriptedModel(), store=store, **config)
    first, second = _pause(agent, 'call note with {"text": "a"} and call note with {"text": "b"}')
    answers = [_approve(first), {"tool_use_id": second["tool_use_id"], "decision": "deny", "message": "not b"}]
    dying = asyncio.run(Agent.load(agent.agent_uuid, store, ScriptedModel(), **config))
    with pytest.raises(Died):
        asyncio.run(dying.continue_with_tool_results(answers, _dies_on_result(first["tool_use_id"])))
    assert notes.seen == ["a"]
    state = asyncio.run(store.load(agent.agent_uuid))
    assert state is not None
    assert state.lease_owner is not None
    asyncio.run(store.renew_lease(state.agent_uuid, state.lease_owner, 0.0))  # its lease runs out

    other = asyncio.run(Agent.load(agent.agent_uuid, store, ScriptedModel(), **config))
    lines: list[bytes] = []
    result = asyncio.run(other.recover(lines.append))
    assert result is not None, "the run went back to its pause: a second approval would run the call again"
    assert notes.seen == ["a"]
    assert result.stop_reason == "end_turn"
    assert "note gave: noted a" in result.final_text
    assert "not b" in result.final_text
    assert UNKNOWN_RESULT not in result.final_text
    assert_valid(lines)
    responses = asyncio.run(store.run_responses(result.run_id))
    assert_valid([line for response in responses for line in response])
