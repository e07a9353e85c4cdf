"""Handlers on the in-memory queue (one process, the embedded default): the ``subagent`` adapter, kinds.

[P6.4-a] [P6.4-b] [P6.8-a]
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from agent_ref.errors import UnavailableError
from agent_ref.fleet.task_queue import Claim, MemoryTaskQueue, Task
from agent_ref.fleet.worker import SUBAGENT_KIND, ChildOutcome, SubagentTask, TaskContext, Worker, subagent_handler
from fault_support import wait_until_async


def _payload(**fields: Any) -> dict[str, Any]:
    return {"subagent": "researcher", "task": "find X", "agent_uuid": "child-1", "parent_agent": "parent-1", **fields}


def test_spec_scaleout_p6_8_a_the_subagent_handler_maps_a_child_run_to_the_task() -> None:
    seen: list[tuple[SubagentTask, int]] = []

    async def run_child(spec: SubagentTask, context: TaskContext) -> ChildOutcome:
        seen.append((spec, context.attempt))
        if spec.task == "explode":
            return ChildOutcome(final_text="", stop_reason="error", error="the model failed: overloaded")
        if spec.task == "stop":
            return ChildOutcome(final_text="partial", stop_reason="aborted")
        return ChildOutcome(final_text=f"done: {spec.task}", stop_reason="end_turn")

    async def go() -> list[Task]:
        queue = MemoryTaskQueue()
        await queue.enqueue(SUBAGENT_KIND, _payload(), parent="parent-1")
        await queue.enqueue(SUBAGENT_KIND, _payload(task="explode"), parent="parent-1")
        await queue.enqueue(SUBAGENT_KIND, _payload(task="stop"), parent="parent-1")
        await queue.enqueue(SUBAGENT_KIND, {"subagent": "researcher", "task": 3}, parent="parent-1")
        await queue.enqueue("other", None)
        worker = Worker(queue, {SUBAGENT_KIND: subagent_handler(run_child)}, name="w")
        assert await worker.run(max_tasks=4) == 4
        return await queue.tasks()

    ok, exploded, stopped, bad, other = asyncio.run(go())
    assert (ok.status, ok.result) == (
        "completed",
        {"final_text": "done: find X", "stop_reason": "end_turn", "agent": "child-1"},
    )
    assert (exploded.status, exploded.error) == ("failed", "the model failed: overloaded")
    assert (stopped.status, stopped.error) == ("failed", "aborted")
    assert bad.status == "failed"
    assert bad.error.startswith("the payload of a 'subagent' task is not a SubagentTask: Expected `str`, got `int`")
    assert "$.task" in bad.error
    assert other.status == "pending"  # a kind this worker has no handler for is left to others
    assert [(s.subagent, s.parent_agent, a) for s, a in seen] == [("researcher", "parent-1", 1)] * 3


def test_spec_scaleout_p6_4_a_a_worker_in_one_process_on_the_memory_queue() -> None:
    """Three workers of one process share a memory queue: each task runs once; a parent's wait wakes."""
    ran: list[int] = []

    async def work(context: TaskContext) -> Any:
        await asyncio.sleep(0.001)
        ran.append(context.payload)
        return context.payload * 2

    async def go() -> None:
        queue = MemoryTaskQueue()
        tasks = [await queue.enqueue("double", n, parent="p") for n in range(30)]
        fleet = [Worker(queue, {"double": work}, name=f"w{n}", poll_seconds=0.05) for n in range(3)]
        runners = [asyncio.ensure_future(w.run()) for w in fleet]
        ended = [await queue.wait(t.task_id, timeout=10) for t in tasks]
        for worker in fleet:
            worker.stop()
        await asyncio.wait_for(asyncio.gather(*runners), timeout=5)
        assert [t.result for t in ended] == [2 * n for n in range(30)]
        assert sorted(ran) == list(range(30))
        assert sum(w.finished["completed"] for w in fleet) == 30

    asyncio.run(go())


def test_spec_scaleout_p6_4_a_the_grace_is_waited_for_not_spun(monkeypatch: pytest.MonkeyPatch) -> None:
    """During a stop's grace the worker sleeps until the task ends (no busy loop burning a core).

    Counted, not timed: the worker's waits (``asyncio.wait``) after the stop. One that waits
    wakes for the stop and for the task's end (a heartbeat is 10 s away); one that spins
    wakes thousands of times while the handler works 0.3 s.
    """
    real_wait = asyncio.wait
    waits: list[str] = []
    stopping = False

    async def counted(*args: Any, **kwargs: Any) -> Any:
        if stopping:
            waits.append("wait")
        return await real_wait(*args, **kwargs)

    monkeypatch.setattr(asyncio, "wait", counted)
    entered = asyncio.Event()

    async def nap(context: TaskContext) -> Any:
        entered.set()
        await asyncio.sleep(float(context.payload))  # the task's work, which the grace lets finish
        return "rested"

    async def go() -> Task:
        nonlocal stopping
        queue = MemoryTaskQueue()
        task = await queue.enqueue("nap", 0.3)
        worker = Worker(queue, {"nap": nap}, name="w", lease_seconds=30, grace_seconds=3600)
        runner = asyncio.ensure_future(worker.run())
        await asyncio.wait_for(entered.wait(), timeout=10)
        stopping = True
        worker.stop()
        await asyncio.wait_for(runner, timeout=30)  # a hang guard: the grace (an hour) is not what ends it
        ended = await queue.get(task.task_id)
        assert ended is not None
        return ended

    ended = asyncio.run(go())
    assert (ended.status, ended.result) == ("completed", "rested")
    assert 1 <= len(waits) <= 4, f"the worker woke {len(waits)} times in its grace: it spun"


class _FlakyQueue(MemoryTaskQueue):
    """A memory queue whose ``release`` and ``complete`` fail as an unreachable database does, for ``down`` seconds."""

    def __init__(self, down: float) -> None:
        super().__init__()
        self.down = down
        self.first: float | None = None
        self.calls = 0

    def _outage(self) -> None:
        self.calls += 1
        now = time.monotonic()
        if self.first is None:
            self.first = now
        if now - self.first < self.down:
            raise UnavailableError("cannot reach PostgreSQL 127.0.0.1:1/x: connection refused", retry_after=1)

    async def release(self, claim: Claim) -> Task:
        self._outage()
        return await super().release(claim)

    async def complete(self, claim: Claim, result: Any) -> Task:
        self._outage()
        return await super().complete(claim, result)


@pytest.mark.parametrize("stopping", [False, True], ids=["completing", "releasing-at-a-stop"])
def test_spec_scaleout_p6_4_b_recording_an_end_is_retried_with_backoff_through_an_outage(
    stopping: bool, caplog: pytest.LogCaptureFixture
) -> None:
    async def nap(context: TaskContext) -> Any:
        await asyncio.sleep(float(context.payload))
        return "rested"

    async def go() -> tuple[_FlakyQueue, Task]:
        queue = _FlakyQueue(down=1.2)
        task = await queue.enqueue("nap", 30.0 if stopping else 0.01, idempotent=True)
        worker = Worker(queue, {"nap": nap}, name="w", lease_seconds=30, grace_seconds=0.05)
        runner = asyncio.ensure_future(worker.run(max_tasks=1))
        if stopping:  # stopped while its handler runs: the end to record is the release

            async def running() -> bool:
                got = await queue.get(task.task_id)
                return got is not None and got.status == "running"

            await wait_until_async(running, "the worker to claim the task")
            worker.stop()
        await asyncio.wait_for(runner, timeout=10)
        ended = await queue.get(task.task_id)
        assert ended is not None
        return queue, ended

    with caplog.at_level(logging.WARNING, logger="agent_ref.worker"):
        queue, ended = asyncio.run(go())
    assert ended.status == ("pending" if stopping else "completed")
    assert 3 <= queue.calls <= 8, f"{queue.calls} tries in 1.2 s: the retries should back off"
    text = caplog.text
    assert text.count("retrying until the database answers") == 1, text
    assert text.count("the database answers again") == 1, text
