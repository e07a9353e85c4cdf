"""A worker rides out a PostgreSQL restart (spec scaleout §6.4-b): ``pg_ctl stop -m fast``, then start.

[P6.4-b]

The server is the fleet suite's own (``fleet_cluster``, a fresh schema on it); the worker
is an ``agent-ref worker`` process. Bounded; loopback only.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agent_ref.fleet.task_queue import PostgresTaskQueue
from fleet_support import create_runs_table, runs, wait_until
from pg_support import fresh_schema

if TYPE_CHECKING:
    from collections.abc import Callable

    from fleet_support import WorkerProcess
    from pg_support import Cluster


def _enqueue(url: str, n: int, seconds: float) -> list[str]:
    async def go() -> list[str]:
        queue = PostgresTaskQueue(url)
        try:
            return [(await queue.enqueue("record", {"seconds": seconds}, idempotent=True)).task_id for _ in range(n)]
        finally:
            await queue.aclose()

    return asyncio.run(go())


def _statuses(url: str) -> list[str]:
    async def go() -> list[str]:
        queue = PostgresTaskQueue(url)
        try:
            return [t.status for t in await queue.tasks()]
        finally:
            await queue.aclose()

    return asyncio.run(go())


def test_spec_scaleout_p6_4_b_the_worker_survives_a_database_restart(
    fleet_cluster: Cluster, workers: Callable[..., WorkerProcess]
) -> None:
    fleet_cluster.ensure_running()
    schema = fresh_schema(fleet_cluster.url)
    url = next(schema)
    try:
        create_runs_table(url)
        _enqueue(url, 3, 0.05)
        process = workers(url, "steady", "--lease", "3", "--poll", "0.3")
        wait_until(lambda: _statuses(url) == ["completed"] * 3, 30, "the first tasks to complete")

        fleet_cluster.stop()
        # the worker's claims fail meanwhile: it says so, once, and keeps running
        wait_until(lambda: "retrying until the database answers" in process.text(), 30, "the worker to meet the outage")
        assert process.proc.poll() is None, process.text()[-2000:]
        fleet_cluster.start()

        _enqueue(url, 3, 0.05)
        wait_until(lambda: _statuses(url) == ["completed"] * 6, 30, "the tasks enqueued after the restart")
        assert process.proc.poll() is None
        assert len(runs(url)) == 6
        log = process.text()
        assert log.count("retrying until the database answers") == 1, log
        assert log.count("the database answers again") == 1, log
        assert "Traceback" not in log
        assert process.terminate() == 0
    finally:
        fleet_cluster.ensure_running()
        next(schema, None)
