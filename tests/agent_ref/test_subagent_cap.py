"""The per-step cap on spawned children (spec/agent-ref.md §13.9, issue 24 §6).

One step could start any number of concurrent children (169 were seen). Every response
here is validated strictly by the autouse tee (tests/agent_ref_validating.py).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent_ref import Agent, ConfigError, ReplayModel, ScriptedModel, default_tools
from agent_ref import agent as agent_module
from agent_ref.run.context import RunContext
from agent_ref.run.subagents import DEFAULT_MAX_SUBAGENTS_PER_STEP, SUBAGENT_TOOL, AgentSpec, over_cap
from agent_ref.run.tool_step import _cap_spawns
from agent_ref.store.state import BackgroundTask, RunState, TaskStatus
from agent_ref.tools.core import ToolCallRequest, ToolOutcome
from agent_ref_support import fast_retry, run
from envelope import Emitter, reconstruct


def _start(model: str = "fan-out") -> dict[str, Any]:
    message: dict[str, Any] = {"id": "m1", "type": "message", "role": "assistant", "model": model, "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}
    return {"type": "message_start", "message": message}


def _spawning_call(inputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One model call asking for ``len(inputs)`` spawns in one step."""
    events = [_start()]
    for i, tool_input in enumerate(inputs):
        block = {"type": "tool_use", "id": f"toolu_{i:03d}", "name": SUBAGENT_TOOL, "input": {}}
        events.append({"type": "content_block_start", "index": i, "content_block": block})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
        events.append({"type": "content_block_delta", "index": i, "delta": delta})
        events.append({"type": "content_block_stop", "index": i})
    events += [
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return events


def _answer() -> list[dict[str, Any]]:
    return [
        _start(),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "joined"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]


def _fan_out(inputs: list[dict[str, Any]], **kw: Any) -> tuple[Agent, ReplayModel, list[bytes]]:
    """A parent whose model spawns ``inputs`` in one step, then answers; children on the scripted model."""
    model = ReplayModel([_spawning_call(inputs), _answer()])
    specs = {"researcher": AgentSpec(description="researches one topic", model=ScriptedModel())}
    agent = Agent(model, tools=default_tools(), subagents=specs, retry=fast_retry(), **kw)
    lines: list[bytes] = []
    result = run(agent.run("fan out", lines.append))
    assert result.stop_reason == "end_turn"
    return agent, model, lines


def _children(agent: Agent, lines: list[bytes]) -> list[str]:
    return [a for a in reconstruct(lines).agents if a != agent.agent_uuid]


def _results_sent(model: ReplayModel) -> list[dict[str, Any]]:
    return [b for b in model.server.requests[1]["messages"][-1]["content"] if b.get("type") == "tool_result"]


def test_spec_13_9_a_a_step_of_twenty_spawns_starts_the_default_eight() -> None:
    """20 spawns in one step: 8 children run, the other 12 are is_error results the model reads [R13.9-a].

    Before the cap, all 20 children started (169 were seen in the field).
    """
    inputs = [{"agent": "researcher", "task": f"Research topic {i}"} for i in range(20)]
    agent, model, lines = _fan_out(inputs)
    assert len(_children(agent, lines)) == DEFAULT_MAX_SUBAGENTS_PER_STEP == 8
    sent = _results_sent(model)
    assert [b["tool_use_id"] for b in sent] == [f"toolu_{i:03d}" for i in range(20)]  # none dropped, call order
    assert [bool(b.get("is_error")) for b in sent] == [False] * 8 + [True] * 12
    assert all(b["content"][0]["text"].startswith("Findings on topic") for b in sent[:8])
    assert {b["content"][0]["text"] for b in sent[8:]} == {over_cap(8, 0)}
    # the stream shows each refused call's result too
    rebuilt = reconstruct(lines).agents[agent.agent_uuid]
    refused = [b for b in rebuilt if b.type == "tool_result" and b.content == over_cap(8, 0)]
    assert len(refused) == 12


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    cap=st.integers(min_value=1, max_value=4),
    kinds=st.lists(st.sampled_from(["ok", "unknown", "empty", "bad-background"]), min_size=1, max_size=7),
)
@example(cap=1, kinds=["ok", "unknown", "ok", "ok"])
@example(cap=2, kinds=["empty", "ok", "ok", "bad-background", "ok"])
def test_spec_13_9_a_property_slots_go_in_call_order_to_calls_that_start_a_child(cap: int, kinds: list[str]) -> None:
    """Whatever the mix: the first ``cap`` calls that would start a child run; invalid calls hold no slot [R13.9-a]."""
    inputs = {
        "ok": {"agent": "researcher", "task": "Research tides"},
        "unknown": {"agent": "nobody", "task": "Research tides"},
        "empty": {"agent": "researcher", "task": " "},
        "bad-background": {"agent": "researcher", "task": "Research tides", "background": "yes"},
    }
    # Each call its own input (a distinct "n"), so the loop guard (§16) sees no repeat.
    calls = [{**inputs[k], "n": i} for i, k in enumerate(kinds)]
    agent, model, lines = _fan_out(calls, max_subagents_per_step=cap)
    sent = _results_sent(model)
    assert len(sent) == len(kinds)
    valid_seen = 0
    for kind, block in zip(kinds, sent, strict=True):
        text = block["content"][0]["text"]
        if kind != "ok":
            assert block["is_error"] is True
            assert text != over_cap(cap, 0)  # its own error, not the cap's
            continue
        valid_seen += 1
        if valid_seen <= cap:
            assert "is_error" not in block
            assert text.startswith("Findings on tides")
        else:
            assert block["is_error"] is True
            assert text == over_cap(cap, 0)
    assert len(_children(agent, lines)) == min(cap, kinds.count("ok"))


def test_spec_13_9_a_running_background_tasks_hold_slots() -> None:
    """Background tasks of earlier steps still running take slots; ended ones do not [R13.9-a]."""
    agent = Agent(
        ScriptedModel(),
        subagents={"researcher": AgentSpec(description="d")},
        max_subagents_per_step=3,
    )
    agent.state.run = RunState(run_id="r", user_query="q", started_at=0.0)
    statuses: list[TaskStatus] = ["running", "pending", "completed", "failed", "killed"]
    agent.state.tasks = [
        BackgroundTask(task_id=f"t{i}", tool_use_id=f"b{i}", name="researcher", agent_uuid=f"a{i}", task="x", status=s)
        for i, s in enumerate(statuses)
    ]
    calls = [
        ToolCallRequest(id=f"c{i}", name=SUBAGENT_TOOL, input={"agent": "researcher", "task": "t"}) for i in range(3)
    ]
    response = agent_module._Response(agent_module._nowhere, agent.agent_uuid, "r", 0, 2048, "default")
    ctx = RunContext(
        options=agent.options,
        model=agent.model,
        store=agent.store,
        tools=agent.tools,
        state=agent.state,
        emitter=Emitter(agent.agent_uuid),
        response=response,
        new_agent=Agent,
    )
    outcomes: dict[str, ToolOutcome] = {}
    kept = asyncio.run(_cap_spawns(ctx, calls, outcomes))
    assert [c.id for c in kept] == ["c0"]  # 3 slots, 2 held by the running and the pending task
    assert sorted(outcomes) == ["c1", "c2"]
    assert all(o.is_error and o.text == over_cap(3, 2) for o in outcomes.values())
    assert "2 of them background tasks" in over_cap(3, 2)


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "8"])
def test_spec_13_9_a_a_cap_below_one_or_not_an_integer_is_a_config_error(bad: object) -> None:
    """``max_subagents_per_step`` must be an integer >= 1 [R13.9-a]."""
    with pytest.raises(ConfigError, match="max_subagents_per_step must be an integer of at least 1"):
        Agent(ScriptedModel(), max_subagents_per_step=bad)
