"""How soon a parent waiting on a task of the PostgreSQL queue learns of its end (spec scaleout §6.5-b).

``python -m benchmarks.task_wake [--url URL] [--trials 10] [--poll 2.0]``

A waiter (``PostgresTaskQueue.wait``) waits on a task another connection holds; the
holder completes it; the delay from the completion's return to the waiter's wake is
timed, once with LISTEN/NOTIFY (``listen=True``) and once by polling alone, each with a
poll period of ``--poll`` seconds. The goal is a ratio of this one run: the notified
waiter's median delay is at most 0.3 of the poll period (the tests count the waiter's
reads instead: ``tests/fleet/test_pg_task_queue.py``); the polling waiter's median,
about half the period, is printed beside it for scale. Exit status 1 when the goal is
missed.

Without ``--url`` a throwaway server is started with ``scripts/pg-test-server`` and
stopped at the end. Waiter, holder and database share the machine's cores: compare runs
from one machine only.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

from agent_ref.fleet.task_queue import PostgresTaskQueue
from benchmarks.load_scaleout import database

#: The notified waiter's median delay, as a fraction of the poll period, that the goal allows.
GOAL_RATIO = 0.3


async def _delay(url: str, *, listen: bool, poll: float) -> float:
    """Seconds from a completion's return to the waiter's wake, for one task."""
    queue = PostgresTaskQueue(url, listen=listen, poll_seconds=poll)
    holder = PostgresTaskQueue(url)
    try:
        task = await queue.enqueue("bench", None)
        claim = await holder.claim("holder", lease_seconds=60)
        assert claim is not None
        woke: list[float] = []

        async def waiter() -> None:
            ended = await queue.wait(task.task_id, timeout=poll * 4)
            woke.append(time.perf_counter())
            assert ended.status == "completed", ended.status

        waiting = asyncio.ensure_future(waiter())
        await asyncio.sleep(min(0.2, poll / 4))  # a benchmark, not a test: let the waiter settle into its wait
        await holder.complete(claim, None)
        completed = time.perf_counter()
        await asyncio.wait_for(waiting, timeout=poll * 5)
        return woke[0] - completed
    finally:
        await holder.aclose()
        await queue.aclose()


async def _measure(url: str, trials: int, poll: float) -> dict[str, list[float]]:
    return {
        mode: [await _delay(url, listen=mode == "notify", poll=poll) for _ in range(trials)]
        for mode in ("notify", "polling")
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; print the delays and whether the goal is met (exit status 1 if not)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.task_wake",
        description="How soon a waiting parent learns a task of the PostgreSQL queue ended: "
        "LISTEN/NOTIFY against polling, as a ratio of the poll period.",
    )
    parser.add_argument(
        "--url", default=None, help="a PostgreSQL URL (default: a throwaway server from scripts/pg-test-server)"
    )
    parser.add_argument("--trials", type=int, default=10, help="tasks waited on per mode (default: 10)")
    parser.add_argument("--poll", type=float, default=2.0, help="the waiter's poll period, seconds (default: 2.0)")
    args = parser.parse_args(argv)
    if args.trials < 1 or args.poll <= 0:
        parser.error("--trials must be at least 1 and --poll above 0")
    with database(args.url) as url:
        delays = asyncio.run(_measure(url, args.trials, args.poll))
    medians = {mode: statistics.median(values) for mode, values in delays.items()}
    for mode, values in delays.items():
        print(
            f"{mode:8} median {medians[mode] * 1000:8.1f} ms  max {max(values) * 1000:8.1f} ms"
            f"  ({medians[mode] / args.poll:.3f} of the {args.poll:g} s poll period, {len(values)} tasks)"
        )
    ratio = medians["notify"] / args.poll
    met = ratio <= GOAL_RATIO
    print(f"goal: notified median <= {GOAL_RATIO} of the poll period: {ratio:.3f}, {'met' if met else 'MISSED'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
