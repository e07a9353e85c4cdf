"""The queue's pure rules and the in-memory queue (spec scaleout §6), with a fake clock.

[P6.1-a] [P6.2-a] [P6.2-b] [P6.3-a] [P6.5-a]
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_ref.errors import StateError
from agent_ref.fleet.task_queue import (
    TERMINAL,
    Claim,
    LeaseLostError,
    MemoryTaskQueue,
    Task,
    UnknownTaskError,
    rules_claim,
    rules_expire,
    rules_finish,
    rules_heartbeat,
    rules_kill,
    rules_release,
)

if TYPE_CHECKING:
    from collections.abc import Callable


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _task(**fields: Any) -> Task:
    return Task(task_id="task_x", kind="k", payload={"n": 1}, created_at=1.0, updated_at=1.0, **fields)


def test_spec_scaleout_p6_2_a_a_claim_fences_every_later_write() -> None:
    task, first = rules_claim(_task(idempotent=True), "a", 10.0, 5.0)
    assert first is not None
    assert (task.status, task.attempts, task.lease_owner, task.lease_expires_at) == ("running", 1, "a", 15.0)
    task = rules_expire(task, 15.0)  # a's lease ran out: back to pending, claimable
    assert task.status == "pending"
    task, second = rules_claim(task, "b", 15.0, 5.0)
    assert second is not None
    assert second.attempt == 2
    writes: list[Callable[[], Task]] = [
        lambda: rules_heartbeat(task, first, 16.0),
        lambda: rules_finish(task, first, 16.0, result="late"),
        lambda: rules_finish(task, first, 16.0, error="late"),
        lambda: rules_release(task, first, 16.0),
    ]
    for write in writes:
        with pytest.raises(LeaseLostError, match="attempt 2 by b took it over") as caught:
            write()
        assert caught.value.task is task
    done = rules_finish(task, second, 17.0, result={"ok": True})
    assert (done.status, done.result, done.lease_owner) == ("completed", {"ok": True}, "")
    with pytest.raises(LeaseLostError, match="it is completed"):
        rules_finish(done, second, 18.0, result="twice")


def test_spec_scaleout_p6_2_b_an_expired_lease_still_renews_while_nobody_took_it() -> None:
    task, claim = rules_claim(_task(), "a", 10.0, 5.0)
    assert claim is not None
    renewed = rules_heartbeat(task, claim, 20.0)  # late, but nobody claimed it meanwhile
    assert renewed.lease_expires_at == 25.0
    assert renewed.heartbeat_at == 20.0


def test_spec_scaleout_p6_3_a_a_lost_worker_fails_a_task_that_is_not_idempotent() -> None:
    task, claim = rules_claim(_task(idempotent=False), "w1", 10.0, 5.0)
    assert claim is not None
    assert rules_expire(task, 14.9) is task
    failed = rules_expire(task, 15.0)
    assert failed.status == "failed"
    assert failed.error.startswith("result unknown: the lease of w1 ran out during attempt 1")
    after, none = rules_claim(task, "w2", 15.0, 5.0)
    assert none is None
    assert after.status == "failed"


def test_spec_scaleout_p6_3_a_attempts_are_bounded() -> None:
    task = _task(idempotent=True, max_attempts=2)
    for attempt in (1, 2):
        task, claim = rules_claim(task, f"w{attempt}", 10.0 * attempt, 1.0)
        assert claim is not None
        assert claim.attempt == attempt
    task, claim = rules_claim(task, "w3", 100.0, 1.0)
    assert claim is None
    assert task.status == "failed"
    assert "attempts exhausted" in task.error
    assert "may be claimed 2 times" in task.error


def test_spec_scaleout_p6_4_a_a_release_is_not_counted_against_the_attempts() -> None:
    task = _task(idempotent=True, max_attempts=1)
    task, claim = rules_claim(task, "w1", 10.0, 5.0)
    assert claim is not None
    task = rules_release(task, claim, 11.0)
    assert (task.status, task.released, task.attempts) == ("pending", 1, 1)
    task, again = rules_claim(task, "w2", 12.0, 5.0)
    assert again is not None
    assert again.attempt == 2  # the fencing number still grows


def test_spec_scaleout_p6_5_a_kill_ends_pending_and_running_tasks_and_leaves_ended_ones() -> None:
    assert rules_kill(_task(), 5.0, "not needed").status == "killed"
    task, claim = rules_claim(_task(), "w", 10.0, 5.0)
    assert claim is not None
    killed = rules_kill(task, 11.0, "parent aborted")
    assert (killed.status, killed.error, killed.lease_owner) == ("killed", "parent aborted", "")
    with pytest.raises(LeaseLostError, match=r"it was killed \(parent aborted\)"):
        rules_finish(killed, claim, 12.0, result=1)
    done = rules_finish(task, claim, 11.0, result=1)
    assert rules_kill(done, 12.0) is done


def test_bad_arguments_are_clear_errors() -> None:
    async def go() -> None:
        queue = MemoryTaskQueue()
        with pytest.raises(ValueError, match="non-empty kind"):
            await queue.enqueue("", {})
        with pytest.raises(ValueError, match="max_attempts must be a positive integer"):
            await queue.enqueue("k", {}, max_attempts=0)
        with pytest.raises(ValueError, match="payload of a 'k' task must be JSON"):
            await queue.enqueue("k", {"f": object()})
        await queue.enqueue("k", 1, task_id="t1")
        with pytest.raises(StateError, match="a task 't1' exists already"):
            await queue.enqueue("k", 1, task_id="t1")
        with pytest.raises(UnknownTaskError, match="no task 'nope'"):
            await queue.kill("nope")
        with pytest.raises(ValueError, match="non-empty name"):
            await queue.claim("")
        with pytest.raises(ValueError, match="lease_seconds must be positive"):
            await queue.claim("w", lease_seconds=0)
        assert await queue.get("nope") is None

    asyncio.run(go())


def test_memory_queue_claims_oldest_first_of_the_kinds_asked() -> None:
    async def go() -> None:
        clock = Clock()
        queue = MemoryTaskQueue(clock)
        for i, kind in enumerate(["a", "b", "a"]):
            clock.now += 1
            await queue.enqueue(kind, i, task_id=f"t{i}")
        first = await queue.claim("w", kinds=["b"])
        assert first is not None
        assert first.task_id == "t1"
        second = await queue.claim("w")
        assert second is not None
        assert second.task_id == "t0"
        third = await queue.claim("w", kinds=["a", "b"])
        assert third is not None
        assert third.task_id == "t2"
        assert await queue.claim("w") is None

    asyncio.run(go())


def test_memory_queue_wait_wakes_on_the_end() -> None:
    async def go() -> None:
        queue = MemoryTaskQueue()
        task = await queue.enqueue("k", None)
        claim = await queue.claim("w")
        assert claim is not None

        async def finish() -> None:
            await asyncio.sleep(0.05)
            await queue.complete(claim, "done")

        finisher = asyncio.ensure_future(finish())
        ended = await asyncio.wait_for(queue.wait(task.task_id, timeout=5), timeout=2)
        await finisher
        assert (ended.status, ended.result) == ("completed", "done")
        still = await queue.enqueue("k", None)
        assert (await queue.wait(still.task_id, timeout=0.05)).status == "pending"

    asyncio.run(go())


# Steps of several workers on one queue: claim, heartbeat, complete, fail, release, kill, time passes.
_STEP = st.one_of(
    st.tuples(st.just("claim"), st.integers(0, 2)),
    st.tuples(st.just("beat"), st.integers(0, 2)),
    st.tuples(st.just("complete"), st.integers(0, 2)),
    st.tuples(st.just("fail"), st.integers(0, 2)),
    st.tuples(st.just("release"), st.integers(0, 2)),
    st.tuples(st.just("kill"), st.integers(0, 3)),
    st.tuples(st.just("tick"), st.integers(1, 8)),
)
_ALLOWED = {
    ("pending", "running"),
    ("pending", "killed"),
    ("running", "running"),  # a heartbeat, or a takeover of an expired lease
    ("running", "pending"),
    ("running", "completed"),
    ("running", "failed"),
    ("running", "killed"),
}


@given(
    steps=st.lists(_STEP, max_size=60),
    idempotent=st.lists(st.booleans(), min_size=4, max_size=4),
    max_attempts=st.integers(1, 3),
)
def test_spec_scaleout_p6_1_a_any_interleaving_keeps_the_invariants(
    steps: list[tuple[str, int]], idempotent: list[bool], max_attempts: int
) -> None:
    """Whatever workers do and however time passes: transitions follow the graph, an ended task never changes,
    each task is completed at most once and only by the holder of its latest attempt, attempts stay bounded."""

    async def go() -> None:
        clock = Clock()
        queue = MemoryTaskQueue(clock)
        ids = []
        for i, flag in enumerate(idempotent):
            clock.now += 0.001
            ids.append((await queue.enqueue("k", i, idempotent=flag, max_attempts=max_attempts)).task_id)
        held: dict[int, list[Claim]] = {0: [], 1: [], 2: []}
        accepted: dict[str, int] = {}
        for action, n in steps:
            before = {t.task_id: t for t in await queue.tasks()}
            if action == "tick":
                clock.now += n
            elif action == "kill":
                await queue.kill(ids[n])
            elif action == "claim":
                claim = await queue.claim(f"w{n}", lease_seconds=5)
                if claim is not None:
                    held[n].append(claim)
            elif held[n]:
                claim = held[n].pop(0)
                stored = before[claim.task_id]
                latest = stored.status == "running" and stored.attempts == claim.attempt
                try:
                    if action == "beat":
                        await queue.heartbeat(claim)
                        held[n].append(claim)
                    elif action == "complete":
                        await queue.complete(claim, claim.attempt)
                        accepted[claim.task_id] = accepted.get(claim.task_id, 0) + 1
                    elif action == "fail":
                        await queue.fail(claim, "no")
                    else:
                        await queue.release(claim)
                except LeaseLostError:
                    assert not latest
                else:
                    assert latest
            for task in await queue.tasks():
                was = before[task.task_id]
                if was.status != task.status or was.attempts != task.attempts:
                    assert (was.status, task.status) in _ALLOWED, (was, task)
                if was.status in TERMINAL:
                    assert task == was
                assert task.attempts - task.released <= task.max_attempts
                assert task.attempts >= was.attempts
        for task in await queue.tasks():
            assert accepted.get(task.task_id, 0) == (1 if task.status == "completed" else 0)
            if task.status == "completed":
                assert task.result == task.attempts  # the result of the latest attempt's holder

    asyncio.run(go())


def test_memory_queue_lists_a_parents_tasks_and_outlives_an_event_loop() -> None:
    queue = MemoryTaskQueue()

    async def add() -> None:
        await queue.enqueue("k", 1, parent="a", task_id="t1")
        await queue.enqueue("k", 2, parent="b", task_id="t2")
        assert (await queue.wait("t2", timeout=0.02)).status == "pending"  # a wait in this loop

    async def finish() -> list[str]:
        claim = await queue.claim("w")
        assert claim is not None
        waiting = asyncio.ensure_future(queue.wait("t1", timeout=5))
        await asyncio.sleep(0.01)
        await queue.complete(claim, "ok")
        assert (await asyncio.wait_for(waiting, timeout=2)).status == "completed"
        return [t.task_id for t in await queue.tasks(parent="a")]

    asyncio.run(add())
    assert asyncio.run(finish()) == ["t1"]  # a second loop: the queue's condition is made anew
