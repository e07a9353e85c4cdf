"""Background subagents that outlive their response, joined by a later one (spec/agent-ref.md §SA, [SA3-*]).

The parent's queue is a ``MemoryTaskQueue`` and the worker an in-process ``Worker``, started
only once the first response has ended (or from a hook in the later one), so the child is
certainly still waiting when its parent's response ends. Every response is validated
strictly (the autouse tee, and ``assert_valid`` here).
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from agent_ref import Agent, MemoryStore, ScriptedModel
from agent_ref.fleet.task_queue import MemoryTaskQueue
from agent_ref.fleet.worker import SUBAGENT_KIND, Worker, child_runner, subagent_handler
from agent_ref.run.background import BackgroundQueue
from agent_ref.run.subagents import AgentSpec
from agent_ref_support import envelopes, fast_retry, run
from validating import assert_valid

if TYPE_CHECKING:
    from agent_ref.policy.hooks import HookInput
    from agent_ref.run.finish import AgentResult

SPECS = {"researcher": AgentSpec(description="researches one topic")}


class _Setup:
    """A parent whose background tasks outlive their response, its queue, and a worker for them."""

    def __init__(self, *, outlive: bool = True, hooks: dict[str, Any] | None = None) -> None:
        self.store = MemoryStore()
        self.queue = MemoryTaskQueue()
        remote = BackgroundQueue(queue=self.queue, poll_seconds=0.05, outlive=outlive)
        self.model = ScriptedModel()
        self.agent = Agent(
            self.model,
            store=self.store,
            subagents=SPECS,
            retry=fast_retry(),
            background_queue=remote,
            hooks=hooks or {},
        )
        runner = child_runner(lambda: Agent(ScriptedModel(), store=self.store, subagents=SPECS), lambda: self.store)
        self.worker = Worker(self.queue, {SUBAGENT_KIND: subagent_handler(runner)}, poll_seconds=0.05, lease_seconds=5)

    async def respond(self, prompt: str) -> tuple[AgentResult, list[bytes]]:
        lines: list[bytes] = []
        result = await asyncio.wait_for(self.agent.run(prompt, lines.append), timeout=60)
        assert_valid(lines)
        return result, lines


def test_sa3_a_the_response_ends_while_its_background_child_waits() -> None:
    """With ``outlive``, the parent's response ends (one meta_final, [DONE]) with its task still pending [SA3-a]."""

    async def flow() -> None:
        setup = _Setup()
        result, lines = await setup.respond("Research tides in the background")
        assert result.stop_reason == "end_turn"
        assert lines[-1] == b"[DONE]"
        assert [e["type"] for e in envelopes(lines)].count("meta_final") == 1
        (row,) = await setup.queue.tasks(parent=setup.agent.agent_uuid)
        assert row.status == "pending"  # not killed: it runs on without the response
        (record,) = setup.agent.state.tasks
        assert (record.status, record.detached, record.notified) == ("pending", True, False)
        stored = await setup.store.load(setup.agent.agent_uuid)
        assert stored is not None
        assert [t.task_id for t in stored.tasks] == [record.task_id]  # saved with the state

    run(flow())


def test_sa3_a_without_outlive_the_response_still_waits_for_its_task() -> None:
    """The default keeps §14.4-a: the response waits for the queue task and answers with its result [SA3-a]."""

    async def flow() -> None:
        setup = _Setup(outlive=False)
        working = asyncio.ensure_future(setup.worker.run(max_tasks=1))
        result, _ = await setup.respond("Research tides in the background")
        await asyncio.wait_for(working, timeout=10)
        assert result.final_text.startswith("The background task reported back: Findings on tides")
        assert not setup.agent.state.tasks[0].detached

    run(flow())


def test_sa3_b_a_later_response_is_notified_of_a_task_that_ended_meanwhile() -> None:
    """The task ends between responses; the next response's first call carries its notification [SA3-b]."""

    async def flow() -> None:
        setup = _Setup()
        await setup.respond("Research tides in the background")
        assert await setup.worker.run(max_tasks=1) == 1  # the child runs with no response open
        (row,) = await setup.queue.tasks(parent=setup.agent.agent_uuid)
        assert row.status == "completed"
        result, lines = await setup.respond("Join the background task")
        assert result.final_text.startswith("The background task reported back: Findings on tides")
        (record,) = setup.agent.state.tasks
        assert (record.status, record.notified) == ("completed", True)
        calls = [e.get("name") for e in envelopes(lines) if e["type"] == "tool_call"]
        assert "task_status" not in calls  # told, not polled
        third, _ = await setup.respond("What is 2 + 2?")
        assert setup.agent.state.tasks == []  # seen: it does not follow the agent any further
        assert "Findings on tides" not in third.final_text

    run(flow())


def test_sa3_b_task_status_wait_joins_a_task_still_running() -> None:
    """The task is still waiting when the later response starts; ``task_status(wait=true)`` joins it [SA3-b]."""
    started: list[asyncio.Future[int]] = []
    setup: _Setup

    def start_worker(data: HookInput) -> None:
        if data.tool_name == "task_status" and not started:
            started.append(asyncio.ensure_future(setup.worker.run(max_tasks=1)))

    async def flow() -> None:
        await setup.respond("Research tides in the background")
        assert not started
        result, lines = await setup.respond("Join the background task")
        assert len(started) == 1
        assert await asyncio.wait_for(started[0], timeout=10) == 1
        assert result.final_text.startswith("Joined the background task: completed: Findings on tides")
        polls = [e for e in envelopes(lines) if e["type"] == "tool_call" and e.get("name") == "task_status"]
        assert polls
        assert json.loads("".join(p["delta"] for p in polls)) == {"wait": True}
        (record,) = setup.agent.state.tasks
        assert (record.status, record.notified) == ("completed", True)

    setup = _Setup(hooks={"PreToolUse": [start_worker]})
    run(flow())


def test_sa3_b_a_task_of_an_earlier_response_is_followed_and_notified_in_the_next() -> None:
    """A task still running when the next response starts is followed there and notified once it ends [SA3-b]."""

    async def flow() -> None:
        setup = _Setup()
        await setup.respond("Research tides in the background")
        working = asyncio.ensure_future(setup.worker.run(max_tasks=1))
        (record,) = setup.agent.state.tasks
        result, _ = await setup.respond("Join the background task")
        await asyncio.wait_for(working, timeout=10)
        assert "Findings on tides" in result.final_text
        assert record.task_id == setup.agent.state.tasks[0].task_id

    run(flow())
