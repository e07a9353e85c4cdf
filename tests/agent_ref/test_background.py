"""Background tasks: a subagent that runs while its parent goes on (spec/agent-ref.md §14).

Every response is validated strictly by the autouse tee (tests/agent_ref_validating.py).
"""

# ruff: noqa: ARG001  (hooks take the signature they are given)

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, Fault, MemoryStore, ScriptedModel, default_tools
from agent_ref.errors import ConfigError
from agent_ref.run.subagents import AgentSpec, parse_spawn, spawn_tool_definition
from agent_ref.store.state import NOTIFICATION_TAG
from agent_ref.tools.demo import confirm
from agent_ref_support import envelopes, fast_retry, run
from envelope import reconstruct, tree

if TYPE_CHECKING:
    from agent_ref.policy.hooks import HookInput
    from agent_ref.store.core import Store

BACKGROUND = "Research tides in the background"


def _agent(model: ScriptedModel | None = None, spec: AgentSpec | None = None, **kw: Any) -> Agent:
    spec = spec or AgentSpec(description="researches one topic")
    return Agent(
        model or ScriptedModel(), tools=default_tools(), retry=fast_retry(), subagents={"researcher": spec}, **kw
    )


def _notices(request: dict[str, Any]) -> list[str]:
    return [
        b["text"]
        for m in request["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "text" and b["text"].startswith(NOTIFICATION_TAG)
    ]


def _started(lines: list[bytes], parent: str) -> dict[str, Any]:
    (result,) = [e for e in envelopes(lines) if e["agent"] == parent and e["type"] == "tool_result"][:1]
    started: dict[str, Any] = json.loads(result["delta"])
    return started


def test_spec_14_1_a_the_spawn_returns_a_task_id_at_once_and_the_parent_goes_on() -> None:
    """The spawning call's result is the task id, sent before the child ends; the parent streams meanwhile [R14.1-a]."""
    lines: list[bytes] = []
    agent = _agent()
    result = run(agent.run(BACKGROUND, lines.append))
    assert result.stop_reason == "end_turn"
    assert lines.count(b"[DONE]") == 1
    envs = envelopes(lines)
    started = _started(lines, agent.agent_uuid)
    assert started["status"] == "pending"
    assert started["task_id"].startswith("task_")
    child = started["agent"]
    order = [(e["agent"], e["type"]) for e in envs if e["final"]]
    child_end = order.index((child, "meta_final"))
    assert order.index((agent.agent_uuid, "tool_result")) < order.index((child, "meta_init"))
    # the parent's next turn streamed while the child ran: a parent block closed between the child's ends
    between = order[order.index((child, "meta_init")) : child_end]
    assert (agent.agent_uuid, "text") in between
    (root,) = tree(reconstruct(lines)).roots  # the task nests under its spawning call
    assert [c.agent for c in root.children] == [child]
    assert not root.children[0].orphan


def test_spec_14_2_a_a_task_goes_pending_running_completed() -> None:
    """pending in the spawn's result, running when the child starts, completed with its answer at the end [R14.2-a]."""
    seen: list[str] = []
    holder: dict[str, Agent] = {}

    def on_start(data: HookInput) -> None:
        if data.tool_name == "researcher":
            seen.extend(t.status for t in holder["agent"].state.tasks)

    agent = _agent(hooks={"SubagentStart": [on_start]})
    holder["agent"] = agent
    lines: list[bytes] = []
    run(agent.run(BACKGROUND, lines.append))
    assert _started(lines, agent.agent_uuid)["status"] == "pending"
    assert seen == ["running"]
    (task,) = agent.state.tasks
    assert task.status == "completed"
    assert task.result.startswith("Findings on tides")
    assert task.notified


def test_spec_14_4_a_the_next_call_carries_a_notification_and_the_parent_sees_the_result() -> None:
    """The parent ended with a task running: it waits, then one more step carries the notification [R14.4-a] [R14.7-a]."""
    model = ScriptedModel()
    agent = _agent(model)
    result = run(agent.run(BACKGROUND, lambda _: None))
    mine = [r for r in model.requests if r["messages"][0]["content"][0]["text"] == BACKGROUND]  # not the child's
    assert len(mine) == 3  # spawn; "it runs in the background" (end_turn); the one more step
    assert _notices(mine[1]) == []
    (notice,) = _notices(mine[2])
    assert 'status="completed"' in notice
    assert "Findings on tides" in notice
    assert result.final_text.startswith("The background task reported back: Findings on tides")


def test_spec_14_3_a_task_status_polls_and_a_seen_result_is_not_notified_again() -> None:
    """task_status reports the task; a result the model polled is not notified too [R14.3-a] [R14.4-a]."""
    model = ScriptedModel()
    agent = _agent(model)
    lines: list[bytes] = []
    run(agent.run(BACKGROUND + " and check on it", lines.append))
    polls = [e for e in envelopes(lines) if e["type"] == "tool_result" and e["name"] == "task_status"]
    (poll,) = polls
    status = json.loads(poll["delta"])
    task = agent.state.tasks[0]
    assert (status["task_id"], status["subagent"], status["agent"]) == (task.task_id, "researcher", task.agent_uuid)
    notified = sum(len(_notices(r)) for r in model.requests[-1:])
    if status["status"] == "completed":
        assert notified == 0
    else:
        assert status["status"] == "running"
        assert notified == 1


def test_spec_14_3_a_task_status_with_an_unknown_id_is_an_error_result() -> None:
    """An unknown task id is an is_error result naming the run's tasks [R14.3-a]."""
    agent = _agent()
    status = agent.tools["task_status"]
    assert status.executor == "backend"

    fn = status.fn
    assert fn is not None

    async def call(task_id: str) -> str:
        return str(await fn(task_id=task_id))

    with pytest.raises(ValueError, match="unknown task 'task_x'; tasks of this run: none"):
        asyncio.run(call("task_x"))
    assert json.loads(asyncio.run(call(""))) == {"tasks": []}


def test_spec_14_3_a_reserved_names_and_the_background_flag() -> None:
    """task_status is reserved beside spawn_subagent; background must be a bool [R14.3-a] [R14.1-a]."""
    from agent_ref import tool

    @tool(name="task_status")
    def mine(task_id: str) -> str:
        """Mine.

        Args:
            task_id: an id.
        """
        return task_id

    with pytest.raises(ConfigError, match="a tool is named 'task_status'"):
        Agent(ScriptedModel(), tools=[mine], subagents={"r": AgentSpec("d")})
    specs = {"r": AgentSpec("d")}
    assert spawn_tool_definition(specs)["input_schema"]["properties"]["run_in_background"]["type"] == "boolean"
    assert parse_spawn({"agent": "r", "task": "t", "background": True}, specs) == ("r", specs["r"], "t")


def test_spec_14_2_a_a_task_whose_child_fails_is_failed_and_notified() -> None:
    """A child whose run ends in error: status failed, and the parent is told so [R14.2-a]."""
    failing = ScriptedModel(faults=[Fault(kind="status", status=400)])
    model = ScriptedModel()
    agent = _agent(model, AgentSpec(description="d", model=failing))
    run(agent.run(BACKGROUND, lambda _: None))
    (task,) = agent.state.tasks
    assert task.status == "failed"
    (notice,) = _notices(model.requests[-1])
    assert 'status="failed"' in notice


def test_spec_14_6_a_abort_kills_the_tasks_and_the_stream_stays_valid(tmp_path: Any) -> None:
    """Aborting the run while its task streams: status killed, its run closed aborted, one [DONE] [R14.6-a]."""
    store: Store = MemoryStore()
    agent = _agent(store=store)
    lines: list[bytes] = []

    def sink(line: bytes) -> None:
        lines.append(line)
        if line != b"[DONE]":
            env = json.loads(line)
            if env["agent"] != agent.agent_uuid and env["type"] == "text":
                agent.abort()

    result = run(agent.run(BACKGROUND, sink))
    assert result.stop_reason == "aborted"
    assert lines.count(b"[DONE]") == 1
    (task,) = agent.state.tasks
    assert task.status == "killed"
    assert not [e for e in envelopes(lines) if e["agent"] == task.agent_uuid and e["type"] == "meta_final"]
    (record,) = asyncio.run(store.runs(task.agent_uuid))
    assert record.stop_reason == "aborted"


def test_spec_14_5_a_a_pause_waits_for_running_tasks_and_the_resume_is_notified() -> None:
    """A frontend pause waits for the tasks; their results reach the model after the resume, in a fresh agent [R14.5-a]."""
    store: Store = MemoryStore()
    agent = _agent(store=store)
    first: list[bytes] = []
    paused = run(agent.run(BACKGROUND + " and confirm", first.append))
    assert paused.stop_reason == "awaiting_frontend_tools"
    envs = envelopes(first)
    order = [(e["agent"], e["type"]) for e in envs if e["final"]]
    child = agent.state.tasks[0].agent_uuid
    assert order.index((child, "meta_final")) < order.index((agent.agent_uuid, "awaiting_frontend_tools"))
    saved = asyncio.run(store.load(agent.agent_uuid))
    assert saved is not None
    assert [(t.status, t.notified) for t in saved.tasks] == [("completed", False)]
    model = ScriptedModel()
    fresh = asyncio.run(
        Agent.load(
            agent.agent_uuid,
            store,
            model,
            tools=default_tools(),
            subagents={"researcher": AgentSpec(description="researches one topic")},
        )
    )
    (call,) = paused.pending_frontend_tools
    result = run(fresh.continue_with_tool_results([{"tool_use_id": call.tool_use_id, "content": "yes"}], first.append))
    (notice,) = _notices(model.requests[0])
    assert "Findings on tides" in notice
    assert result.final_text.startswith("The background task reported back")


def test_spec_14_5_b_a_background_child_gets_no_frontend_tools() -> None:
    """A background child is built without its spec's frontend tools: it cannot pause [R14.5-b]."""
    child_model = ScriptedModel()
    spec = AgentSpec(description="d", model=child_model, tools=[confirm])
    run(_agent(spec=spec).run("Research tides (confirm) in the background", lambda _: None))
    (request,) = child_model.requests
    assert "tools" not in request or all(t["name"] != "confirm" for t in request["tools"])


def test_spec_14_6_a_max_steps_kills_a_task_still_running() -> None:
    """The run ends at max_steps with its task stuck in a tool: the task is killed, the stream stays valid [R14.6-a]."""
    from agent_ref import tool

    @tool(name="calculator")
    async def stuck(expression: str) -> str:
        """Never answers.

        Args:
            expression: ignored.
        """
        await asyncio.Event().wait()
        return expression

    store: Store = MemoryStore()
    agent = _agent(spec=AgentSpec(description="d", tools=[stuck]), store=store, max_steps=1)
    lines: list[bytes] = []
    result = run(agent.run("Research 2 + 3 in the background", lines.append))
    assert result.stop_reason == "max_steps"
    (task,) = agent.state.tasks
    assert task.status == "killed"
    assert lines.count(b"[DONE]") == 1
    child = [e for e in envelopes(lines) if e["agent"] == task.agent_uuid]
    assert child
    assert child[0]["type"] == "meta_init"
    assert not [e for e in child if e["type"] == "meta_final"]  # killed: it sends nothing more
    (record,) = asyncio.run(store.runs(task.agent_uuid))
    assert record.stop_reason == "aborted"
