"""The server's journal, on files and on PostgreSQL (spec server §3.1, spec scaleout §2)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from agent_ref.server.streams import FileJournal, Journal
from agent_ref.store.postgres import PostgresJournal

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


@pytest.fixture(params=["file", "postgresql"])
def journal_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Journal]]:
    """Make journals on one place (two calls: two processes); they are closed after the test."""
    made: list[FileJournal | PostgresJournal] = []
    url = str(request.getfixturevalue("pg_schema_url")) if request.param == "postgresql" else ""

    def make() -> Journal:
        journal = PostgresJournal(url) if url else FileJournal(tmp_path / "streams")
        made.append(journal)
        return journal

    yield make
    for journal in made:
        journal.close()


def test_spec_server_3_1_lines_read_back_in_order_per_response(journal_factory: Callable[[], Journal]) -> None:
    """Appended lines read back in order, per (run, response); another journal object sees them."""
    writer, reader = journal_factory(), journal_factory()
    assert reader.read("run-1", 0) is None
    assert reader.responses("run-1") == 0
    for line in (b'{"a":1}', b'{"a":2}', b"[DONE]"):
        writer.append("run-1", 0, line)
    writer.append("run-1", 1, b'{"b":"\xc3\xa9"}')
    assert reader.read("run-1", 0) == [b'{"a":1}', b'{"a":2}', b"[DONE]"]
    assert reader.read("run-1", 1) == [b'{"b":"\xc3\xa9"}']
    assert reader.responses("run-1") == 2
    assert reader.responses("run-2") == 0


def test_spec_server_3_3_b_unfinished_lists_responses_without_done(journal_factory: Callable[[], Journal]) -> None:
    """A response whose writer stopped before ``[DONE]`` is unfinished; an ended one is not."""
    writer = journal_factory()
    writer.append("ended", 0, b"x")
    writer.append("ended", 0, b"[DONE]")
    writer.append("cut", 0, b"x")
    close = getattr(writer, "close", None)
    assert close is not None
    close()  # the writing process is gone
    assert journal_factory().unfinished() == [("cut", 0)]


def test_spec_scaleout_2_2_a_a_live_writers_response_is_not_unfinished(pg_schema_url: str) -> None:
    """A starting process never closes a response another live process is writing [P2.2-a] [D3.4-c]."""
    writer, starter, other = PostgresJournal(pg_schema_url), PostgresJournal(pg_schema_url), None
    try:
        writer.append("live", 0, b"x")
        assert starter.unfinished() == []  # the writer holds it
        writer.close()  # the writer dies
        assert starter.unfinished() == [("live", 0)]
        other = PostgresJournal(pg_schema_url)
        assert other.unfinished() == []  # the first to claim it closes it, alone
        starter.append("live", 0, b"closing")
        starter.append("live", 0, b"[DONE]")
        assert other.read("live", 0) == [b"x", b"closing", b"[DONE]"]
        assert other.unfinished() == []
    finally:
        for journal in (writer, starter, other):
            if journal is not None:
                journal.close()


@pytest.mark.parametrize("listen", [True, False])
def test_spec_scaleout_2_1_a_follow_gets_every_line_once_in_order(pg_schema_url: str, listen: bool) -> None:
    """A follower that starts before, during or after the writing gets each line once, in order [P2.1-a] [D3.4-a]."""
    writer = PostgresJournal(pg_schema_url)
    reader = PostgresJournal(pg_schema_url, poll_seconds=0.05, listen=listen)
    lines = [f'{{"n":{i}}}'.encode() for i in range(40)] + [b"[DONE]"]

    async def follow(after: int) -> list[tuple[int, bytes]]:
        return [item async for item in reader.follow("run-f", 0, after)]

    async def main() -> tuple[list[tuple[int, bytes]], ...]:
        early = asyncio.create_task(follow(-1))
        for i, line in enumerate(lines):
            writer.append("run-f", 0, line)
            if i % 7 == 0:
                await asyncio.sleep(0.01)
        late = await follow(29)
        return await early, late

    try:
        early, late = asyncio.run(main())
    finally:
        writer.close()
        reader.close()
    assert early == list(enumerate(lines))
    assert late == list(enumerate(lines))[30:]


def test_spec_scaleout_2_1_b_follow_stops_when_the_writer_is_gone(pg_schema_url: str) -> None:
    """A follower of a response whose writer died gets what was written, then stops, never hangs [P2.1-b] [D3.4-b]."""
    writer = PostgresJournal(pg_schema_url)
    reader = PostgresJournal(pg_schema_url, poll_seconds=0.05)

    async def follow() -> list[tuple[int, bytes]]:
        got: list[tuple[int, bytes]] = []
        async for item in reader.follow("run-d", 0):
            got.append(item)
            if len(got) == 2:
                writer.close()  # the writer dies mid-response
        return got

    writer.append("run-d", 0, b"a")
    writer.append("run-d", 0, b"b")
    writer.append("run-d", 0, b"c")
    try:
        got = asyncio.run(asyncio.wait_for(follow(), 30))
    finally:
        reader.close()
    assert got == [(0, b"a"), (1, b"b"), (2, b"c")]
