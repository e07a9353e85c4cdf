"""The worker's stops and its command line (spec scaleout §6.4): grace, release, ``result unknown``, SIGTERM.

[P6.4-a]
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref.fleet.task_queue import PostgresTaskQueue
from agent_ref.fleet.worker import TaskContext, Worker, add_worker_command, load_handlers, main
from fleet_support import create_runs_table, runs, wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

    from fleet_support import WorkerProcess


#: A task the worker must cut, not wait out: longer than any test's hang guard.
FOREVER = 3600.0


async def _stop_during(
    url: str, seconds: float, *, idempotent: bool, grace: float
) -> tuple[Worker, tuple[Any, list[Any]], list[str]]:
    """Stop a worker while it runs a ``seconds`` task; the worker, (that task, the others), how the handler ended."""
    ends: list[str] = []

    async def sleepy(context: TaskContext) -> Any:
        try:
            await asyncio.sleep(float(context.payload))
        except asyncio.CancelledError:
            ends.append("cancelled")
            raise
        ends.append("slept")
        return "slept"

    queue = PostgresTaskQueue(url)
    try:
        task = await queue.enqueue("sleepy", seconds, idempotent=idempotent)
        await queue.enqueue("sleepy", 0, idempotent=idempotent)  # never claimed: the worker stops first
        worker = Worker(queue, {"sleepy": sleepy}, name="w", lease_seconds=5, grace_seconds=grace)
        runner = asyncio.ensure_future(worker.run())
        while (await queue.get(task.task_id)).status != "running":  # type: ignore[union-attr]
            await asyncio.sleep(0.02)
        worker.stop()
        await asyncio.wait_for(runner, timeout=30)  # a hang guard: a FOREVER task must be cut at the grace
        stored = {t.task_id: t for t in await queue.tasks()}
        return worker, (stored.pop(task.task_id), list(stored.values())), ends
    finally:
        await queue.aclose()


def test_spec_scaleout_p6_4_a_a_stop_lets_the_current_task_finish_within_the_grace(pg_schema_url: str) -> None:
    worker, (task, others), ends = asyncio.run(_stop_during(pg_schema_url, 0.5, idempotent=False, grace=FOREVER))
    assert ends == ["slept"]
    assert (task.status, task.result, task.attempts) == ("completed", "slept", 1)
    assert [t.status for t in others] == ["pending"]
    assert worker.finished["completed"] == 1


def test_spec_scaleout_p6_4_a_past_the_grace_an_idempotent_task_is_released(pg_schema_url: str) -> None:
    worker, (task, _), ends = asyncio.run(_stop_during(pg_schema_url, FOREVER, idempotent=True, grace=0.3))
    assert ends == ["cancelled"]  # cut at the grace, not waited out (the hang guard would fail first)
    assert (task.status, task.released, task.attempts, task.lease_owner) == ("pending", 1, 1, "")
    assert worker.finished["released"] == 1


def test_spec_scaleout_p6_4_a_past_the_grace_a_task_not_idempotent_fails_result_unknown(pg_schema_url: str) -> None:
    _, (task, _), ends = asyncio.run(_stop_during(pg_schema_url, FOREVER, idempotent=False, grace=0.3))
    assert ends == ["cancelled"]
    assert task.status == "failed"
    assert task.error.startswith("result unknown: worker w stopped during attempt 1")


def test_spec_scaleout_p6_4_a_a_failing_handler_fails_its_task_with_a_public_reason(pg_schema_url: str) -> None:
    async def broken(context: TaskContext) -> Any:
        raise KeyError(context.payload)

    async def odd(context: TaskContext) -> Any:  # noqa: ARG001
        return object()

    async def go() -> list[Any]:
        queue = PostgresTaskQueue(pg_schema_url)
        try:
            await queue.enqueue("broken", "missing")
            await queue.enqueue("odd", None)
            worker = Worker(queue, {"broken": broken, "odd": odd}, name="w")
            assert await worker.run(max_tasks=2) == 2
            return await queue.tasks()
        finally:
            await queue.aclose()

    first, second = asyncio.run(go())
    assert (first.status, first.error) == ("failed", "KeyError: 'missing'")
    assert second.status == "failed"
    assert "returned a result that is not JSON" in second.error


def test_spec_scaleout_p6_4_a_sigterm_stops_the_process_after_its_task(
    pg_schema_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    """``agent-ref worker`` (its ``main``, in a process of its own): SIGTERM, the task finishes, exit 0."""
    create_runs_table(pg_schema_url)

    async def enqueue() -> None:
        queue = PostgresTaskQueue(pg_schema_url)
        try:
            await queue.enqueue("record", {"seconds": 1.5})
            await queue.enqueue("echo", {"later": True})
        finally:
            await queue.aclose()

    asyncio.run(enqueue())
    # a grace no test waits out: the exit below (within the hang guard) comes from the task's end
    process = workers(pg_schema_url, "solo", "--grace", str(FOREVER))
    wait_until(lambda: runs(pg_schema_url), 30, "the worker to start its task")
    assert process.terminate(timeout=30) == 0
    log = process.text()
    assert [a for _, a in process.completions()] == [1], log
    assert "stopped (completed 1" in log

    async def statuses() -> list[str]:
        queue = PostgresTaskQueue(pg_schema_url)
        try:
            return [t.status for t in await queue.tasks()]
        finally:
            await queue.aclose()

    assert asyncio.run(statuses()) == ["completed", "pending"]


def test_the_command_line_refuses_what_cannot_work(capsys: pytest.CaptureFixture[str]) -> None:
    """Each refusal is one line on stderr and exit status 2; nothing is started."""

    def refused(*argv: str) -> str:
        assert main(list(argv)) == 2
        err = capsys.readouterr().err
        assert err.startswith("agent-ref worker: error: ")
        assert err.count("\n") == 1
        assert "Traceback" not in err
        return err

    assert "a worker needs a PostgreSQL database" in refused("--db", "agents.sqlite")
    assert "--handlers 'no_such_module_here:H': No module named" in refused(
        "--db", "postgresql://127.0.0.1:9/x", "--handlers", "no_such_module_here:H"
    )
    assert "heartbeat_seconds must be above 0 and below the lease" in refused(
        "--db", "postgresql://127.0.0.1:9/x", "--lease", "1", "--heartbeat", "2"
    )
    assert "lease_seconds must be positive" in refused("--db", "postgresql://127.0.0.1:9/x", "--lease", "0")
    with pytest.raises(SystemExit) as exited:  # argparse's own: usage and the missing option
        main([])
    assert exited.value.code == 2
    assert "--db" in capsys.readouterr().err
    with pytest.raises(ValueError, match="expected MODULE:NAME"):
        load_handlers(["nocolon"])
    with pytest.raises(ValueError, match="not a mapping of kind names to handlers"):
        load_handlers(["fleet_support:RECORD_ENV"])
    assert set(load_handlers(["fleet_support:HANDLERS"])) == {"echo", "record"}


def test_the_subcommand_parser_for_agent_ref() -> None:
    """``add_worker_command`` gives ``agent-ref`` (``cli.py``, wired by its owner) the same options."""
    parser = argparse.ArgumentParser(prog="agent-ref")
    add_worker_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["worker", "--db", "postgresql://h/d", "--lease", "9", "--handlers", "m:H"])
    assert (args.command, args.db, args.lease, args.handlers, args.grace) == (
        "worker",
        "postgresql://h/d",
        9.0,
        ["m:H"],
        30.0,
    )
