"""The fleet under load (issue 30 §5): 4 worker processes, 200 tasks, two of them killed -9 mid-task.

[P6.7-a] [P6.2-a] [P6.2-b] [P6.3-a]

Every task ends ``completed`` exactly once: each worker logs the completions the queue
accepted from it, and across all workers (the killed ones included) no task appears
twice, and a task none logged was completed by a killed worker (killed between the commit
and its log line); the result kept is that of the latest attempt's run. The
``record`` handler (``fleet_support``) writes a row per run before its work, so the test
also sees the runs that never completed: every extra run belongs to a killed worker or was
fenced (logged as discarded). Bounded: every wait has a deadline; loopback only.
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
from typing import TYPE_CHECKING

import psycopg

from agent_ref.fleet.task_queue import PostgresTaskQueue, Task
from fleet_support import create_runs_table, runs, wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from fleet_support import WorkerProcess

TASKS = 200
WORKERS = 4
LEASE = "3"


def _counts(url: str) -> dict[str, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT status, count(*) FROM agent_tasks GROUP BY status").fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def _running_on(url: str, owner: str) -> str | None:
    """A task ``owner`` holds now (running, its lease live), or ``None``."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT task_id FROM agent_tasks WHERE status = 'running' AND lease_owner = %s", (owner,)
        ).fetchone()
    return None if row is None else str(row[0])


def test_spec_scaleout_p6_7_a_four_workers_two_hundred_tasks_two_killed(
    pg_schema_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    url = pg_schema_url
    create_runs_table(url)
    rng = random.Random(30)

    async def enqueue() -> list[str]:
        queue = PostgresTaskQueue(url)
        try:
            return [
                (await queue.enqueue("record", {"seconds": rng.uniform(0.02, 0.12)}, idempotent=True)).task_id
                for _ in range(TASKS)
            ]
        finally:
            await queue.aclose()

    began = time.monotonic()
    ids = asyncio.run(enqueue())
    fleet = [workers(url, f"w{n}", "--lease", LEASE, "--heartbeat", "0.5", "--poll", "0.5") for n in range(WORKERS)]

    killed: dict[str, str] = {}  # worker name -> the task it held when killed
    for after, victim in ((40, fleet[0]), (110, fleet[1])):
        wait_until(lambda n=after: _counts(url).get("completed", 0) >= n, 90, f"{after} completions")
        held = wait_until(lambda v=victim: _running_on(url, v.name), 10, f"{victim.name} to hold a task", every=0.005)
        victim.kill()
        killed[victim.name] = held

    wait_until(lambda: _counts(url).get("completed", 0) == TASKS, 120, f"all {TASKS} tasks completed")
    elapsed = time.monotonic() - began
    for survivor in fleet[2:]:
        assert survivor.terminate() == 0, survivor.text()[-2000:]

    assert _counts(url) == {"completed": TASKS}
    accepted = collections.Counter(task for w in fleet for task, _ in w.completions())
    assert set(accepted) <= set(ids)
    assert [t for t, n in accepted.items() if n > 1] == [], "a task was completed more than once"

    queue = PostgresTaskQueue(url)
    try:
        stored = {t.task_id: t for t in asyncio.run(_all(queue))}
    finally:
        asyncio.run(queue.aclose())
    by_task: dict[str, list[tuple[int, str]]] = collections.defaultdict(list)
    for task_id, attempt, worker in runs(url):
        by_task[task_id].append((attempt, worker))
    discarded = "\n".join(w.text() for w in fleet)
    for task_id in ids:
        task = stored[task_id]
        final = (task.attempts, task.result["worker"])
        if task_id not in accepted:  # only a worker killed between its commit and its log line leaves none
            assert task.result["worker"] in killed, f"{task_id}: completed, but no worker logged it"
        assert task.result["attempt"] == task.attempts
        assert final in by_task[task_id], f"{task_id}: the kept result is not of a recorded run"
        for attempt, worker in by_task[task_id]:
            if (attempt, worker) != final:  # a run whose result was not kept
                assert worker in killed or f"task {task_id} (attempt {attempt} of {worker})" in discarded, (
                    task_id,
                    by_task[task_id],
                )
    taken_over = sum(1 for t in stored.values() if t.attempts > 1)
    for name, held in killed.items():  # taken over, unless the kill came right after its commit
        task = stored[held]
        assert (task.attempts >= 2 and task.result["worker"] != name) or (
            task.attempts == 1 and task.result["worker"] == name
        ), (name, task)
    assert any(stored[held].attempts >= 2 for held in killed.values()), "no kill hit a task mid-run"
    print(
        f"\nfleet load: {TASKS} tasks, {WORKERS} workers, 2 killed: {elapsed:.1f} s; "
        f"{len(runs(url))} runs, {taken_over} tasks taken over"
    )


async def _all(queue: PostgresTaskQueue) -> list[Task]:
    return await queue.tasks()
