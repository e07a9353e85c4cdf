"""``PostgresJournal.request_stop`` / ``stop_requests``: a stop request reaches every listening process (spec delivery §3.5)."""

from __future__ import annotations

import asyncio
import time

import psycopg

from envelope.delivery.postgres import STOP_CHANNEL, PostgresJournal


async def _until_listening(url: str, count: int = 1) -> None:
    """Wait (at most 10 s) until ``count`` sessions have run ``LISTEN`` on the stop channel."""
    deadline = time.monotonic() + 10
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE query = %s", (f"LISTEN {STOP_CHANNEL}",)
            ).fetchone()
            if row is not None and int(row[0]) >= count:
                return
            assert time.monotonic() < deadline, "the listener never listened"
            await asyncio.sleep(0.02)


def test_spec_delivery_3_5_a_a_stop_request_reaches_a_listener_on_another_journal(pg_schema_url: str) -> None:
    """[D3.5-a]: journal A asks; a listener on journal B receives the run id, in order, each once (bounded waits)."""
    asking = PostgresJournal(pg_schema_url)
    listening = PostgresJournal(pg_schema_url)

    async def main() -> list[str]:
        got: list[str] = []
        ready = asyncio.Event()

        async def listen() -> None:
            requests = listening.stop_requests()
            first = asyncio.ensure_future(anext(requests))
            await _until_listening(pg_schema_url)
            ready.set()
            got.append(await first)
            got.append(await anext(requests))
            await requests.aclose()

        task = asyncio.create_task(listen())
        await asyncio.wait_for(ready.wait(), 10)
        asking.request_stop("run-one")
        asking.request_stop("run-two")
        await asyncio.wait_for(task, 10)
        return got

    try:
        got = asyncio.run(main())
    finally:
        asking.close()
        listening.close()
    assert got == ["run-one", "run-two"]


def test_spec_delivery_3_5_a_a_request_sent_before_anyone_listens_is_not_kept(pg_schema_url: str) -> None:
    """[D3.5-a]: a notification is not stored: a listener that starts later does not see an earlier request (senders repeat)."""
    asking = PostgresJournal(pg_schema_url)
    listening = PostgresJournal(pg_schema_url)

    async def main() -> str:
        asking.request_stop("run-early")
        requests = listening.stop_requests()
        first = asyncio.ensure_future(anext(requests))
        await _until_listening(pg_schema_url)
        asking.request_stop("run-late")
        got = await asyncio.wait_for(first, 10)
        await requests.aclose()
        return got

    try:
        assert asyncio.run(main()) == "run-late"
    finally:
        asking.close()
        listening.close()
