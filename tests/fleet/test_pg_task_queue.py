"""The task queue on a real PostgreSQL (spec scaleout §6): claim races, leases, fencing, kill, notifications.

[P6.1-a] [P6.2-a] [P6.2-b] [P6.3-a] [P6.4-a] [P6.5-a] [P6.5-b] [P6.6-a]

Each test has a schema of its own (``pg_schema_url``); every wait is bounded; loopback only.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from agent_ref.errors import StateError, UnavailableError
from agent_ref.fleet.task_queue import Claim, LeaseLostError, PostgresTaskQueue, Task, UnknownTaskError
from agent_ref.fleet.worker import TaskContext, Worker
from fault_support import wait_until_async

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable


def _run(url: str, body: Callable[[PostgresTaskQueue], Awaitable[Any]], **options: Any) -> Any:
    async def go() -> Any:
        queue = PostgresTaskQueue(url, **options)
        try:
            return await asyncio.wait_for(body(queue), timeout=60)
        finally:
            await queue.aclose()

    return asyncio.run(go())


def test_spec_scaleout_p6_2_b_claim_race_each_task_claimed_once(pg_schema_url: str) -> None:
    """Sixteen claimers on their own connections, sixty tasks: every task claimed exactly once, none left."""

    async def body(queue: PostgresTaskQueue) -> None:
        ids = {(await queue.enqueue("k", i)).task_id for i in range(60)}
        claimers = [PostgresTaskQueue(pg_schema_url) for _ in range(16)]
        got: list[tuple[str, int]] = []

        async def claimer(n: int) -> None:
            while (claim := await claimers[n].claim(f"w{n}", lease_seconds=60)) is not None:
                got.append((claim.task_id, claim.attempt))

        try:
            await asyncio.gather(*(claimer(n) for n in range(16)))
        finally:
            for other in claimers:
                await other.aclose()
        assert sorted(t for t, _ in got) == sorted(ids)
        assert {a for _, a in got} == {1}
        assert all(t.status == "running" for t in await queue.tasks())

    _run(pg_schema_url, body)


def test_spec_scaleout_p6_2_a_expired_lease_taken_over_and_the_old_holder_fenced(pg_schema_url: str) -> None:
    async def body(queue: PostgresTaskQueue) -> None:
        task = await queue.enqueue("k", {"x": 1}, idempotent=True, parent="agent-1")
        old = await queue.claim("old", lease_seconds=2)
        assert old is not None
        assert await queue.claim("new", lease_seconds=30) is None  # its lease lives
        taken: list[Claim] = []

        async def taken_over() -> bool:  # claimed at once when the old lease runs out
            claim = await queue.claim("new", lease_seconds=30)
            if claim is not None:
                taken.append(claim)
            return claim is not None

        await wait_until_async(taken_over, "a claim of the task once the old lease ran out")
        (new,) = taken
        assert (new.task_id, new.attempt) == (task.task_id, 2)
        for late in (queue.heartbeat(old), queue.complete(old, "stale"), queue.fail(old, "stale"), queue.release(old)):
            with pytest.raises(LeaseLostError, match="attempt 2 by new took it over"):
                await late
        done = await queue.complete(new, {"ok": True})
        assert (done.status, done.result, done.attempts) == ("completed", {"ok": True}, 2)
        stored = await queue.get(task.task_id)
        assert stored is not None
        assert (stored.status, stored.result, stored.parent, stored.payload) == (
            "completed",
            {"ok": True},
            "agent-1",
            {"x": 1},
        )
        with pytest.raises(LeaseLostError, match="it is completed"):
            await queue.complete(new, "twice")

    _run(pg_schema_url, body)


def test_spec_scaleout_p6_3_a_a_lost_task_that_is_not_idempotent_fails_result_unknown(pg_schema_url: str) -> None:
    async def body(queue: PostgresTaskQueue) -> None:
        task = await queue.enqueue("k", None)  # idempotent=False by default
        claim = await queue.claim("w1", lease_seconds=0.2)
        assert claim is not None
        ended = await queue.wait(task.task_id, timeout=30)  # polling by id accounts for the expired lease
        assert ended.status == "failed"
        assert ended.error.startswith("result unknown: the lease of w1 ran out during attempt 1")
        assert await queue.claim("w2") is None
        bounded = await queue.enqueue("k", None, idempotent=True, max_attempts=1)
        assert await queue.claim("w1", lease_seconds=0.2) is not None

        async def ended_by_its_lease() -> bool:
            stored = await queue.get(bounded.task_id)
            return stored is not None and stored.status != "running"

        await wait_until_async(ended_by_its_lease, "the lease of the bounded task to run out")
        assert await queue.claim("w2") is None
        failed = await queue.get(bounded.task_id)
        assert failed is not None
        assert failed.status == "failed"
        assert "attempts exhausted" in failed.error

    _run(pg_schema_url, body)


def test_spec_scaleout_p6_4_a_heartbeats_keep_a_long_task(pg_schema_url: str) -> None:
    """A 2.5 s task under a 0.6 s lease: heartbeats keep it; a second worker never gets it; one attempt."""

    async def slow(context: TaskContext) -> Any:
        await asyncio.sleep(2.5)
        return context.attempt

    async def body(queue: PostgresTaskQueue) -> None:
        task = await queue.enqueue("slow", None, idempotent=True)
        first = Worker(queue, {"slow": slow}, name="first", lease_seconds=0.6, heartbeat_seconds=0.15)
        runner = asyncio.ensure_future(first.run(max_tasks=1))
        other = PostgresTaskQueue(pg_schema_url)
        refused = 0
        try:
            while not runner.done():  # tried all along the task, past many of its 0.6 s leases
                assert await other.claim("second", lease_seconds=5) is None
                refused += 1
                await asyncio.sleep(0.1)
        finally:
            await other.aclose()
        assert await runner == 1
        assert refused >= 1
        assert first.finished["completed"] == 1
        done = await queue.get(task.task_id)
        assert done is not None
        assert (done.status, done.attempts, done.result) == ("completed", 1, 1)

    _run(pg_schema_url, body)


def test_spec_scaleout_p6_5_a_kill_cancels_the_running_handler(pg_schema_url: str) -> None:
    cancelled = asyncio.Event()

    async def forever(context: TaskContext) -> Any:  # noqa: ARG001
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async def body(queue: PostgresTaskQueue) -> None:
        pending = await queue.enqueue("forever", None)
        assert (await queue.kill(pending.task_id, "not needed")).status == "killed"
        task = await queue.enqueue("forever", None)
        worker = Worker(queue, {"forever": forever}, name="w", lease_seconds=3, heartbeat_seconds=0.1)
        runner = asyncio.ensure_future(worker.run(max_tasks=1))
        while (await queue.get(task.task_id)).status != "running":  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
        killed = await queue.kill(task.task_id, "the parent was aborted")
        assert (killed.status, killed.error) == ("killed", "the parent was aborted")
        await asyncio.wait_for(cancelled.wait(), timeout=3)  # at the next heartbeat
        await asyncio.wait_for(runner, timeout=3)
        assert worker.finished["lost"] == 1
        again = await queue.get(task.task_id)
        assert again is not None
        assert (again.status, again.result) == ("killed", None)
        assert (await queue.kill(task.task_id)).error == "the parent was aborted"  # an ended task stays as it is
        with pytest.raises(UnknownTaskError, match="no task 'missing'"):
            await queue.kill("missing")

    _run(pg_schema_url, body)


@pytest.mark.parametrize("listen", [True, False], ids=["notify", "polling"])
def test_spec_scaleout_p6_5_b_a_waiting_parent_wakes_on_completion(
    pg_schema_url: str, listen: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LISTEN/NOTIFY wakes the waiter (its poll is an hour away); without it, polling finds the end.

    Counted, not timed: the waiter's reads of the task. The completion comes after its
    first read (the task running); a notification wakes it for exactly one more read.
    """

    async def body(queue: PostgresTaskQueue) -> None:
        task = await queue.enqueue("k", None, parent="agent-9")
        reads: list[str] = []
        real_get = queue.get

        async def counted(task_id: str) -> Task | None:
            found = await real_get(task_id)
            reads.append(found.status if found is not None else "none")
            return found

        monkeypatch.setattr(queue, "get", counted)
        holder = PostgresTaskQueue(pg_schema_url)
        try:
            claim = await holder.claim("w", lease_seconds=30)
            assert claim is not None
            waiting = asyncio.ensure_future(queue.wait(task.task_id, timeout=20))
            await wait_until_async(lambda: bool(reads), "the waiter's first read of the task")
            await holder.complete(claim, [1, 2])
            ended = await asyncio.wait_for(waiting, timeout=15)  # a hang guard: the poll would be an hour
        finally:
            await holder.aclose()
        assert (ended.status, ended.result) == ("completed", [1, 2])
        assert reads[0] == "running"
        assert reads[-1] == "completed"
        if listen:
            assert reads == ["running", "completed"]  # woken once, by the notification
        assert [t.task_id for t in await queue.tasks(parent="agent-9")] == [task.task_id]

    _run(pg_schema_url, body, poll_seconds=3600.0 if listen else 0.2, listen=listen)


def test_spec_scaleout_p6_6_a_the_table_is_created_once_by_processes_starting_together(pg_schema_url: str) -> None:
    async def body(queue: PostgresTaskQueue) -> None:
        queues = [PostgresTaskQueue(pg_schema_url) for _ in range(6)]
        try:
            made = await asyncio.gather(*(q.enqueue("k", i) for i, q in enumerate(queues)))
        finally:
            for q in queues:
                await q.aclose()
        assert len({t.task_id for t in made}) == 6
        assert len(await queue.tasks()) == 6
        with pytest.raises(StateError, match=f"a task '{made[0].task_id}' exists already"):
            await queue.enqueue("k", 0, task_id=made[0].task_id)
        claim = await queue.claim("w")
        assert claim is not None
        with pytest.raises(ValueError, match=r"result of task .* must be JSON"):
            await queue.complete(claim, {"f": object()})

    _run(pg_schema_url, body)


def test_an_unreachable_database_is_one_clear_error() -> None:
    async def body() -> None:
        queue = PostgresTaskQueue("postgresql://nobody:secret@127.0.0.1:9/db", connect_timeout=2)
        with pytest.raises(
            UnavailableError, match=r"cannot enqueue a 'k' task in PostgreSQL 127\.0\.0\.1:9/db"
        ) as caught:
            await queue.enqueue("k", None)
        assert "secret" not in str(caught.value)
        await queue.aclose()

    asyncio.run(body())


def test_spec_scaleout_p6_2_a_a_stalled_worker_cannot_overwrite_the_new_owners_result(pg_schema_url: str) -> None:
    """A handler stalls its worker's event loop past the lease (no heartbeat can go out); another process takes
    the task over and completes it; the stalled worker's completion is refused and the new owner's result stays."""

    usurped = threading.Event()

    def take_over(task_id: str, out: list[Any]) -> None:
        async def go() -> None:
            other = PostgresTaskQueue(pg_schema_url)
            try:
                deadline = time.monotonic() + 10
                while (claim := await other.claim("usurper", lease_seconds=30)) is None:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.05)
                assert claim.task_id == task_id
                out.append(await other.complete(claim, "usurper's"))
                usurped.set()
            finally:
                await other.aclose()

        asyncio.run(go())

    async def stall(context: TaskContext) -> Any:  # noqa: ARG001
        # blocks the loop (a GC pause, a swapped-out process) until the other process has taken over and completed
        assert usurped.wait(30), "the task was never taken over"
        return "stalled worker's"

    async def body(queue: PostgresTaskQueue) -> None:
        task = await queue.enqueue("stall", None, idempotent=True)
        taken: list[Any] = []
        thread = threading.Thread(target=take_over, args=(task.task_id, taken))
        worker = Worker(queue, {"stall": stall}, name="stalled", lease_seconds=0.5, heartbeat_seconds=0.4)
        thread.start()
        await worker.run(max_tasks=1)
        thread.join(10)
        assert worker.finished["lost"] == 1
        assert worker.finished["completed"] == 0
        stored = await queue.get(task.task_id)
        assert stored is not None
        assert (stored.status, stored.result, stored.attempts) == ("completed", "usurper's", 2)
        assert taken[0].result == "usurper's"

    _run(pg_schema_url, body)


def test_spec_scaleout_p6_5_b_a_waiter_whose_listener_is_cut_falls_back_to_polling(pg_schema_url: str) -> None:
    """The waiting parent's LISTEN session is terminated (``pg_terminate_backend``); the end is still seen."""

    async def body(queue: PostgresTaskQueue) -> None:
        task = await queue.enqueue("k", None)
        holder = PostgresTaskQueue(pg_schema_url)
        try:
            claim = await holder.claim("w", lease_seconds=30)
            assert claim is not None
            waiting = asyncio.ensure_future(queue.wait(task.task_id, timeout=20))
            async with await psycopg.AsyncConnection.connect(pg_schema_url, autocommit=True) as admin:
                deadline = time.monotonic() + 5
                while True:  # the waiter's session, once it listens
                    cur = await admin.execute(
                        "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity"
                        " WHERE query LIKE 'LISTEN agent_ref_task_done%%' AND pid <> pg_backend_pid()"
                    )
                    if cut := [row[0] for row in await cur.fetchall()]:
                        break
                    assert time.monotonic() < deadline, "the waiter never listened"
                    await asyncio.sleep(0.05)

                async def gone() -> bool:  # the session is ended, so no notification can reach the waiter
                    cur = await admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", (cut,))
                    return not await cur.fetchall()

                await wait_until_async(gone, "the waiter's listening session to end")
            await holder.complete(claim, "seen anyway")
            ended = await asyncio.wait_for(waiting, timeout=10)
        finally:
            await holder.aclose()
        assert (ended.status, ended.result) == ("completed", "seen anyway")

    _run(pg_schema_url, body, poll_seconds=0.3)
