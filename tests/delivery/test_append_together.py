"""Lines of several responses committed together (spec delivery [D3.4-f]): the off-loop worker and ``PostgresJournal``."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from envelope.delivery import DONE_LINE, JournalError, LiveStream
from envelope.delivery._offloop import OffLoopJournal
from envelope.delivery.postgres import PostgresJournal
from streams import text_response
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Sequence


class _Recording:
    """A journal with ``append_together`` that records each call's lines, and fails the lines of run ``bad``."""

    def __init__(self) -> None:
        self.calls: list[list[tuple[str, int, bytes]]] = []
        self.lines: dict[tuple[str, int], list[bytes]] = {}

    def append(self, run_id: str, response: int, line: bytes) -> None:
        error = self.append_together([(run_id, response, line)])[0]
        if error is not None:
            raise error

    def append_together(self, lines: list[tuple[str, int, bytes]]) -> list[Exception | None]:
        self.calls.append(list(lines))
        out: list[Exception | None] = []
        for run_id, response, line in lines:
            if run_id == "bad":
                out.append(JournalError("the database refused it"))
            else:
                self.lines.setdefault((run_id, response), []).append(line)
                out.append(None)
        return out


def test_spec_delivery_3_4_f_appends_queued_together_reach_the_journal_in_one_call_each_with_its_own_outcome() -> None:
    """[D3.4-f]: 20 appends queued behind a busy call go to ``append_together`` at once; the failing one's caller
    alone gets its error."""
    journal = _Recording()
    io = OffLoopJournal(journal)  # type: ignore[arg-type]  # a Journal enough for appends
    gate = threading.Event()

    async def main() -> list[BaseException | None]:
        busy = asyncio.ensure_future(io.call(gate.wait, 10))
        await asyncio.sleep(0)  # the worker takes the gate call (its start is not awaited by anything else)
        appends = [asyncio.ensure_future(io.append(f"r{i}", 0, b'{"n":1}')) for i in range(19)]
        appends.append(asyncio.ensure_future(io.append("bad", 0, b'{"n":1}')))
        await asyncio.sleep(0)
        gate.set()
        await busy
        return await asyncio.gather(*appends, return_exceptions=True)

    outcomes = asyncio.run(main())
    assert outcomes[:19] == [None] * 19
    assert isinstance(outcomes[19], JournalError)
    assert str(outcomes[19]) == "the database refused it"
    assert [len(c) for c in journal.calls] == [20]  # one call for all twenty, not twenty round trips
    assert sorted(journal.lines) == sorted((f"r{i}", 0) for i in range(19))


def test_spec_delivery_3_4_f_postgres_commits_lines_of_several_responses_together_in_order(pg_schema_url: str) -> None:
    """[D3.4-f]: ``append_together`` over three responses, two lines each, and a line that fails: every good line is
    committed in its response's order; the failed response's later line is not tried."""
    journal = PostgresJournal(pg_schema_url)
    try:
        first = [("a", 0, b'{"n":0}'), ("b", 0, b'{"n":0}'), ("c", 0, b'{"n":0}')]
        assert journal.append_together(first) == [None, None, None]
        lines = [
            ("a", 0, b'{"n":1}'),
            ("b", 0, b'{"n":1}'),
            ("c\x00", 0, b'{"n":1}'),  # PostgreSQL text cannot hold NUL: this response's lines fail
            ("a", 0, b'{"n":2}'),
            ("c\x00", 0, b'{"n":2}'),
            ("b", 0, DONE_LINE),
            ("c", 0, b'{"n":1}'),
        ]
        errors = journal.append_together(lines)
        assert [e is None for e in errors] == [True, True, False, True, False, True, True]
        assert "earlier line" in str(errors[4])
        assert journal.read("a", 0) == [b'{"n":0}', b'{"n":1}', b'{"n":2}']
        assert journal.read("b", 0) == [b'{"n":0}', b'{"n":1}', DONE_LINE]
        assert journal.read("c", 0) == [b'{"n":0}', b'{"n":1}']
        with psycopg.connect(pg_schema_url, autocommit=True) as conn:
            locks = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()
        assert locks is not None
        assert int(locks[0]) == 2  # a and c still written; b let go after its [DONE]
    finally:
        journal.close()


@pytest.mark.parametrize("streams", [40])
def test_spec_delivery_3_4_f_live_streams_of_one_process_share_statements_and_lose_nothing(
    pg_schema_url: str, streams: int
) -> None:
    """[D3.4-f]: 40 live streams writing at once through one journal: every line of each is journaled once, in
    order, and the journal's statements are fewer than its lines (lines that arrived together went together)."""
    journal = PostgresJournal(pg_schema_url)
    sizes: list[int] = []
    together = journal.append_together

    def counting(lines: Sequence[tuple[str, int, bytes]]) -> list[Exception | None]:
        sizes.append(len(lines))
        return together(lines)

    journal.append_together = counting  # type: ignore[method-assign]  # what the off-loop worker calls
    payload = [f'{{"n":{i}}}'.encode() for i in range(15)] + [DONE_LINE]

    async def write(run_id: str) -> None:
        stream = LiveStream(run_id, 0, journal)
        for line in payload:
            await stream.write(line)

    async def main() -> None:
        await asyncio.wait_for(asyncio.gather(*(write(f"run-{i}") for i in range(streams))), 120)

    try:
        asyncio.run(main())
        for i in range(streams):
            assert journal.read(f"run-{i}", 0) == payload
    finally:
        journal.close()
    assert sum(sizes) == streams * len(payload)
    assert max(sizes) > 1


def _round_trips(monkeypatch: pytest.MonkeyPatch, journal: PostgresJournal) -> list[str]:
    """The statements the journal's writer connection sends from now on (one round trip each)."""
    sent: list[str] = []
    real = psycopg.Connection.execute

    def execute(conn: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        if conn is journal._conn:
            sent.append(str(query))
        return real(conn, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    return sent


def test_spec_delivery_3_4_f_a_batch_of_one_response_is_one_statement(
    pg_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[D3.4-f] with [D3.6-d]: 300 lines of one response: its first line and its [DONE] on their own, the lines
    between them a statement per ``BATCH_LINES``; each committed once, in order; a follower reads them all."""
    lines = text_response(words=296)  # 300 lines: meta_init, 296 deltas, the text's end, meta_final, [DONE]
    assert len(lines) == 300
    journal = PostgresJournal(pg_schema_url)
    try:
        sent = _round_trips(monkeypatch, journal)
        assert journal.append_upto("run-1", 0, lines) == (len(lines), None)
        inserts = [q for q in sent if "INSERT INTO stream_journal" in q]
        assert len(inserts) == 4  # the first line; 255 lines; the 43 after them; [DONE]
        assert len(sent) <= 7  # besides: the lock, the tail, the unlock after [DONE]
        monkeypatch.undo()

        async def follow() -> list[bytes]:
            return [line async for _, line in journal.follow("run-1", 0)]

        followed = asyncio.run(asyncio.wait_for(follow(), 30))
        assert followed == lines
        assert journal.read("run-1", 0) == lines
        assert_valid(followed)
    finally:
        journal.close()


def test_spec_delivery_3_4_f_a_failing_line_stops_its_response_not_the_others(pg_schema_url: str) -> None:
    """[D3.4-f]: two responses' batches in one call, one of them refused part way: the other is whole; the refused
    one keeps the lines before the refusal and no line after it (``append_upto`` counts them)."""
    journal = PostgresJournal(pg_schema_url)
    try:
        assert journal.append_upto("good", 0, [b'{"n":0}']) == (1, None)
        assert journal.append_upto("bad", 0, [b'{"n":0}']) == (1, None)
        good = [f'{{"n":{n}}}'.encode() for n in range(1, 40)]
        bad = [b'{"n":1}', b'{"n":2}', b"no\x00nul", b'{"n":4}']  # bytea holds NUL; the line is refused below
        calls = [("good", 0, line) for line in good[:20]] + [("bad", 0, line) for line in bad]
        calls += [("good", 0, line) for line in good[20:]]
        real = journal._insert_together

        def refusing(items: list[Any]) -> None:  # the database refusing the statement that holds the bad line
            if any(p.line == b"no\x00nul" for p in items):
                return  # as a refused statement: nothing committed, each line tried on its own
            real(items)

        journal._insert_together = refusing  # type: ignore[method-assign]
        real_one = journal._append_one

        def one(conn: Any, run_id: str, response: int, lines: list[bytes]) -> int:
            if lines[0] == b"no\x00nul":
                raise JournalError("the database refused it")
            return real_one(conn, run_id, response, lines)

        journal._append_one = one  # type: ignore[method-assign]
        errors = journal.append_together(calls)
        assert [e is None for e in errors] == [True] * 20 + [True, True, False, False] + [True] * 19
        assert "earlier line" in str(errors[23])
        assert journal.read("good", 0) == [b'{"n":0}', *good]
        assert journal.read("bad", 0) == [b'{"n":0}', b'{"n":1}', b'{"n":2}']
    finally:
        journal.close()
