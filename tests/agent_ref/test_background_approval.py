"""A background child's call that needs approval is denied, not paused (spec/agent-ref.md [AP3-a]).

Real runs on the scripted model: the parent spawns a background child whose spec asks about
the calculator; with nobody to ask, the child's model gets an ``is_error`` result saying
why, and the parent's run ends by itself. Every response is validated strictly by the
autouse tee (tests/agent_ref_validating.py); the recordings are validated here too.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore, default_tools
from agent_ref.fleet.task_queue import MemoryTaskQueue, Task
from agent_ref.fleet.worker import (
    SUBAGENT_KIND,
    SubagentTask,
    TaskContext,
    TaskFailed,
    Worker,
    child_runner,
    subagent_handler,
)
from agent_ref.policy.permissions import (
    PermissionAllow,
    PermissionNarrowing,
    PermissionRule,
    ToolPermissionContext,
    background_denial,
)
from agent_ref.run.background import BackgroundQueue
from agent_ref.run.subagents import AgentSpec
from agent_ref_support import envelopes, fast_retry, run
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from pathlib import Path

    from agent_ref.policy.hooks import HookInput
    from agent_ref.store.core import Store

PROMPT = "Research 6 * 7 in the background"


def _config(**more: Any) -> dict[str, Any]:
    spec = AgentSpec(
        description="researches one topic",
        tools=default_tools(),
        permissions=PermissionNarrowing(rules=(PermissionRule(behavior="ask", tool="calculator"),)),
    )
    return {
        "tools": default_tools(),
        "retry": fast_retry(),
        "subagents": {"researcher": spec},
        "permission_mode": "auto",
        "permission_rules": [{"behavior": "allow", "tool": "spawn_subagent"}],
        **more,
    }


def _child_results(store: Store, child_uuid: str) -> list[dict[str, Any]]:
    state = run(store.load(child_uuid))
    assert state is not None
    return [
        b
        for m in state.messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


def _run(store: Store, **more: Any) -> tuple[Any, list[bytes], str]:
    agent = Agent(ScriptedModel(), store=store, **_config(**more))
    lines: list[bytes] = []
    result = run(agent.run(PROMPT, lines.append))
    envs = envelopes(lines)
    (spawned,) = [e for e in envs if e["agent"] == agent.agent_uuid and e["type"] == "tool_result"]
    child_uuid = str(json.loads(spawned["delta"])["agent"])
    return result, lines, child_uuid


def test_ap3_a_a_background_childs_approval_is_denied_and_the_run_ends_by_itself(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    result, lines, child_uuid = _run(store)
    assert result.stop_reason == "end_turn"  # not awaiting_frontend_tools: the task could not pause the run
    envs = envelopes(lines)
    assert [e for e in envs if e["type"] == "awaiting_frontend_tools"] == []
    (denied,) = [e for e in envs if e["agent"] == child_uuid and e["type"] == "tool_result"]
    (block,) = _child_results(store, child_uuid)
    assert block["is_error"] is True
    text = block["content"] if isinstance(block["content"], str) else block["content"][0]["text"]
    assert text.startswith("not run: calculator needs a person's approval (")
    assert text.endswith("and nobody can give it in a background task, which cannot pause the run")
    assert text in denied["delta"]  # the stream shows what the child's model got
    assert "42" not in text  # the calculator did not run
    assert "The background task reported back" in result.final_text  # the parent heard back, the task ended
    assert_valid(run(store.run_log(result.run_id)))


def test_ap3_a_the_denial_text_names_the_tool_and_the_reason() -> None:
    text = background_denial("delete_draft", "an ask rule matches")
    assert text == (
        "not run: delete_draft needs a person's approval (an ask rule matches), and nobody can give "
        "it in a background task, which cannot pause the run"
    )


def test_ap3_a_an_in_process_can_use_tool_still_answers_a_background_childs_ask(tmp_path: Path) -> None:
    asked: list[str] = []

    def allow(name: str, _tool_input: dict[str, Any], context: ToolPermissionContext) -> PermissionAllow:
        asked.append(f"{name}:{context.agent_uuid}")
        return PermissionAllow()

    store = SQLiteStore(tmp_path / "a.db")
    result, _, child_uuid = _run(store, can_use_tool=allow)
    assert result.stop_reason == "end_turn"
    assert f"calculator:{child_uuid}" in asked
    (block,) = _child_results(store, child_uuid)
    assert not block.get("is_error")
    assert "42" in json.dumps(block["content"])


def test_ap3_a_a_foreground_child_with_the_same_rules_still_pauses(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    agent = Agent(ScriptedModel(), store=store, **_config())
    lines: list[bytes] = []
    result = run(agent.run("Research 6 * 7 and 2 + 2 in parallel", lines.append))
    assert result.stop_reason == "awaiting_frontend_tools"  # the denial is for background tasks only


def test_ap3_b_a_remote_background_childs_approval_is_denied_on_the_worker(tmp_path: Path) -> None:
    """The task-queue path: the worker's child has the parent's narrowed permissions and denies the ask [AP3-b]."""
    store = SQLiteStore(tmp_path / "a.db")
    queue = MemoryTaskQueue()
    told: list[HookInput] = []
    hooks = {"SubagentStart": [told.append], "SubagentStop": [told.append]}
    config = _config(background_queue=BackgroundQueue(queue=queue, poll_seconds=0.05), hooks=hooks)
    runner = child_runner(lambda: Agent(ScriptedModel(), store=store, **_config()), lambda: store)
    worker = Worker(queue, {SUBAGENT_KIND: subagent_handler(runner)}, poll_seconds=0.05, lease_seconds=5)
    agent = Agent(ScriptedModel(), store=store, **config)
    lines: list[bytes] = []

    async def both() -> Any:
        working = asyncio.ensure_future(worker.run(max_tasks=1))
        try:
            return await asyncio.wait_for(agent.run(PROMPT, lines.append), timeout=60)
        finally:
            await asyncio.wait_for(working, timeout=10)

    result = run(both())
    assert result.stop_reason == "end_turn"
    assert [e for e in envelopes(lines) if e["type"] == "awaiting_frontend_tools"] == []
    (task,) = run(queue.tasks(parent=agent.agent_uuid))
    assert task.status == "completed"
    assert task.payload["permissions"]["inherited"]  # the parent's narrowed rules travel with the task
    (block,) = _child_results(store, task.payload["agent_uuid"])
    assert block["is_error"] is True
    assert "nobody can give it in a background task" in json.dumps(block["content"])
    # [AP4-a]: the remote child's hooks are told its id, and SubagentStop its transcript (from the store).
    assert [(d.event, d.subagent_uuid) for d in told] == [
        ("SubagentStart", task.payload["agent_uuid"]),
        ("SubagentStop", task.payload["agent_uuid"]),
    ]
    assert told[1].transcript[0] == {"role": "user", "content": [{"type": "text", "text": "Research 6 * 7"}]}
    assert any(b.get("type") == "tool_result" for m in told[1].transcript for b in m["content"] if isinstance(b, dict))
    assert_valid(run(store.run_log(result.run_id)))


def test_ap3_b_a_bad_permissions_payload_fails_the_task_naming_the_field(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    runner = child_runner(lambda: Agent(ScriptedModel(), store=store, **_config()), lambda: store)
    bad = SubagentTask(subagent="researcher", task="Research 6 * 7", agent_uuid="c1", parent_agent="p1")
    bad.permissions = {"mode": "sometimes"}
    context = TaskContext(task=Task(task_id="t1", kind=SUBAGENT_KIND, payload={}), attempt=1, worker="w")
    with pytest.raises(TaskFailed, match=r"permissions are not a permission state: .*\$\.mode"):
        asyncio.run(_awaited(runner(bad, context)))


async def _awaited(job: Awaitable[Any]) -> Any:
    return await job


def test_ap3_b_a_workers_child_cannot_be_widened_below_its_parents_narrowing(tmp_path: Path) -> None:
    """The narrowed mode is the worker child's floor: a callback's ``updated_mode`` below it denies the call."""
    store = SQLiteStore(tmp_path / "a.db")

    def widen(_name: str, _tool_input: dict[str, Any], _context: ToolPermissionContext) -> PermissionAllow:
        return PermissionAllow(updated_mode="full")

    runner = child_runner(lambda: Agent(ScriptedModel(), store=store, **_config(can_use_tool=widen)), lambda: store)
    payload = SubagentTask(
        subagent="researcher",
        task="Research 6 * 7",
        agent_uuid="c1",
        parent_agent="p1",
        permissions={"mode": "ask", "floor": "ask", "inherited": [], "session": []},
    )
    context = TaskContext(task=Task(task_id="t1", kind=SUBAGENT_KIND, payload={}), attempt=1, worker="w")
    outcome = asyncio.run(_awaited(runner(payload, context)))
    assert outcome.stop_reason == "end_turn"
    (block,) = _child_results(store, "c1")
    assert block["is_error"] is True  # the widening answer was refused, so the call was denied
    assert "less strict than this agent's floor 'ask'" in json.dumps(block["content"])
