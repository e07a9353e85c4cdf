"""Many followers of one response share one reader (spec delivery [D3.4-e]): ``SharedFollows`` and the journal."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envelope.delivery import DONE_LINE, JournalGapError, LiveStream
from envelope.delivery._shared_follow import SharedFollows
from envelope.delivery.postgres import PostgresJournal

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator


class _Source:
    """A response written by the test: ``put`` adds a line, ``fail`` ends it with an error; reads are counted."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.opened = 0
        self.error: Exception | None = None
        self.more = asyncio.Event()

    def put(self, line: bytes) -> None:
        self.lines.append(line)
        self.more.set()

    async def read(self, _run_id: str, _response: int) -> AsyncGenerator[tuple[int, bytes], None]:
        self.opened += 1
        seq = 0
        while True:
            while seq < len(self.lines):
                yield seq, self.lines[seq]
                if self.lines[seq] == DONE_LINE:
                    return
                seq += 1
            if self.error is not None:
                raise self.error
            self.more.clear()
            await self.more.wait()


async def _all(shared: SharedFollows, after: int = -1) -> list[tuple[int, bytes]]:
    return [item async for item in shared.follow("run-a", 0, after)]


def test_spec_delivery_3_4_e_followers_of_one_response_share_one_reader_and_each_gets_its_own_continuation() -> None:
    """[D3.4-e]: 50 followers, from different ``after``s, one source opened; each gets exactly its lines, in order."""
    lines = [f'{{"n":{i}}}'.encode() for i in range(20)] + [DONE_LINE]

    async def main() -> tuple[list[list[tuple[int, bytes]]], int, int]:
        source = _Source()
        shared = SharedFollows(source.read)
        followers = [asyncio.create_task(_all(shared, after=i % 7 - 1)) for i in range(50)]
        for line in lines:
            source.put(line)
            await asyncio.sleep(0)
        got = await asyncio.wait_for(asyncio.gather(*followers), 10)
        return got, source.opened, shared.feeds()

    got, opened, feeds = asyncio.run(main())
    assert opened == 1
    assert feeds == 0  # the feed went away with its last follower
    for i, each in enumerate(got):
        assert each == list(enumerate(lines))[i % 7 :]


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 30),
    joins=st.lists(st.tuples(st.integers(0, 30), st.integers(-1, 30)), min_size=1, max_size=8),
)
def test_spec_delivery_3_4_e_followers_joining_at_any_moment_miss_and_repeat_nothing(
    count: int, joins: list[tuple[int, int]]
) -> None:
    """[D3.4-e] property: a follower that joins after k lines were written, from any ``after``, gets seq after+1 .. end."""
    lines = [f'{{"n":{i}}}'.encode() for i in range(count)] + [DONE_LINE]

    async def main() -> list[tuple[int, list[tuple[int, bytes]]]]:
        source = _Source()
        shared = SharedFollows(source.read)
        tasks = []
        for written, line in enumerate(lines):
            for at, after in joins:
                if at == written:
                    tasks.append((after, asyncio.create_task(_all(shared, after))))
            source.put(line)
            await asyncio.sleep(0)
        return [(after, await asyncio.wait_for(task, 10)) for after, task in tasks]

    for after, got in asyncio.run(main()):
        assert got == list(enumerate(lines))[after + 1 :]


def test_spec_delivery_3_4_e_a_source_failure_reaches_every_follower_and_the_next_follower_reads_anew() -> None:
    """[D3.4-e]: the reader's error is raised in each follower (its type and text); a later follower opens a new reader."""

    async def main() -> tuple[list[BaseException | list[tuple[int, bytes]]], int, list[tuple[int, bytes]]]:
        source = _Source()
        shared = SharedFollows(source.read)
        followers = [asyncio.create_task(_all(shared)) for _ in range(3)]
        source.put(b'{"n":0}')
        await asyncio.sleep(0)
        source.error = JournalGapError("expected line 1, read 3")
        source.more.set()
        got = await asyncio.gather(*followers, return_exceptions=True)
        source.error = None
        source.put(DONE_LINE)
        again = await asyncio.wait_for(_all(shared), 10)
        return got, source.opened, again

    got, opened, again = asyncio.run(main())
    assert [type(g) for g in got] == [JournalGapError] * 3
    assert {str(g) for g in got} == {"expected line 1, read 3"}
    assert len({id(g) for g in got}) == 3  # one exception object per follower
    assert opened == 2
    assert again == [(0, b'{"n":0}'), (1, DONE_LINE)]


def test_spec_delivery_3_4_e_the_reader_stops_when_its_last_follower_leaves() -> None:
    """[D3.4-e]: followers that go away (a closed browser) stop the shared reader; nothing keeps reading for nobody."""

    async def main() -> tuple[int, bool]:
        source = _Source()
        shared = SharedFollows(source.read)
        followers = [asyncio.create_task(_all(shared)) for _ in range(4)]
        source.put(b'{"n":0}')
        await asyncio.sleep(0.01)  # a yield point for the tasks to start (no ordering depends on its length)
        feed_tasks = {t for t in asyncio.all_tasks() if t not in followers and t is not asyncio.current_task()}
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        await asyncio.gather(*feed_tasks, return_exceptions=True)
        return shared.feeds(), all(t.done() for t in feed_tasks)

    feeds, stopped = asyncio.run(main())
    assert feeds == 0
    assert stopped


def _connections(url: str, application: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", (application,)
        ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("followers", [120])
def test_spec_delivery_3_4_e_a_hundred_followers_of_a_run_on_postgres_hold_one_connection(
    pg_schema_url: str, followers: int
) -> None:
    """[D3.4-e]: 120 followers of one response on one journal: one database connection reads for all, every
    follower gets every line (before, each follower held a connection of its own: 120)."""
    application = "shared-follow-test"
    sep = "&" if "?" in pg_schema_url else "?"
    reader_url = f"{pg_schema_url}{sep}application_name={application}"
    writer = PostgresJournal(pg_schema_url)
    reader = PostgresJournal(reader_url, poll_seconds=0.05)
    lines = [f'{{"n":{i}}}'.encode() for i in range(10)] + [DONE_LINE]

    async def main() -> tuple[list[list[tuple[int, bytes]]], int]:
        stream = LiveStream("run-fan", 0, writer)
        stream.append(lines[0])
        await stream.flushed()
        started = asyncio.Event()
        seen = 0

        async def one() -> list[tuple[int, bytes]]:
            nonlocal seen
            got = []
            async for item in reader.follow("run-fan", 0):
                got.append(item)
                if item[0] == 0:
                    seen += 1
                    if seen == followers:
                        started.set()
            return got

        tasks = [asyncio.create_task(one()) for _ in range(followers)]
        await asyncio.wait_for(started.wait(), 60)
        held = await asyncio.to_thread(_connections, pg_schema_url, application)
        for line in lines[1:]:
            stream.append(line)
        return await asyncio.wait_for(asyncio.gather(*tasks), 60), held

    try:
        got, held = asyncio.run(main())
    finally:
        writer.close()
        reader.close()
    # The reader journal's own writer connection (opened at construction) and the one shared follower.
    assert held == 2
    assert all(each == list(enumerate(lines)) for each in got)
