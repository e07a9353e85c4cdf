"""The journal's writer connection lost and replaced (spec scaleout §2.3-a), and the store's pool renewed (§1.4-a).

[P2.3-a] [D3.4-d] [P1.4-a] [P4-b]

Connections are cut for real: ``pg_terminate_backend`` from another session (the
writer's process lives; its connection dies), or the whole server stopped and started
(``pg_cluster``). Bounded and loopback only.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import psycopg
import pytest

from agent_ref.store.postgres import JournalTakenOverError, PostgresJournal, PostgresStore

# The journal is envelope.delivery's now and raises its errors; the store's UnavailableError is one of them.
from envelope.delivery import JournalUnavailableError as UnavailableError
from streams import text_response
from validating import assert_valid

if TYPE_CHECKING:
    from pg_support import Cluster


def _cut_every_other_session(url: str) -> None:
    """Terminate every other session of the database (as a restart or a network cut does to them)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid()"
            " AND datname = current_database()"
        )


def test_spec_scaleout_2_3_a_writer_reconnects_and_keeps_its_response(pg_cluster: Cluster, pg_cluster_url: str) -> None:
    """A restart between two lines: the next line goes through a new connection, in order, lock taken again."""
    writer, other = PostgresJournal(pg_cluster_url), None
    try:
        writer.append("run", 0, b"a")
        pg_cluster.stop()
        with pytest.raises(UnavailableError):
            writer.append("run", 0, b"b")
        pg_cluster.start()
        writer.append("run", 0, b"b")
        other = PostgresJournal(pg_cluster_url)
        assert other.unfinished() == []  # the writer holds its lock again
        assert other.claim("run", 0) is False
        writer.append("run", 0, b"[DONE]")
        assert other.read("run", 0) == [b"a", b"b", b"[DONE]"]
    finally:
        for journal in (writer, other):
            if journal is not None:
                journal.close()


def test_spec_scaleout_2_3_a_a_response_closed_meanwhile_is_not_written_twice(pg_cluster_url: str) -> None:
    """The writer's connection dies; another process closes the response; the writer's next line is refused."""
    writer, closer = PostgresJournal(pg_cluster_url), PostgresJournal(pg_cluster_url)
    try:
        writer.append("run", 0, b"a")
        _cut_every_other_session(pg_cluster_url)  # the closer's too: it reconnects on its next call
        assert closer.claim("run", 0) is True  # the lock died with the writer's session
        closer.append("run", 0, b"closing")
        closer.append("run", 0, b"[DONE]")
        with pytest.raises(JournalTakenOverError):
            writer.append("run", 0, b"b")
        assert closer.read("run", 0) == [b"a", b"closing", b"[DONE]"]
    finally:
        writer.close()
        closer.close()


def test_spec_scaleout_1_4_a_store_answers_at_once_while_down_and_after(
    pg_cluster: Cluster, pg_cluster_url: str
) -> None:
    """Down: UnavailableError naming the database in its text, nothing in its public text. Back: the next call works."""

    async def body() -> None:
        store = PostgresStore(pg_cluster_url)
        try:
            assert await store.load("nobody") is None
            _cut_every_other_session(pg_cluster_url)
            assert await store.load("nobody") is None  # a dead pooled connection costs nothing
            pg_cluster.stop()
            for _ in range(2):
                with pytest.raises(UnavailableError) as refused:
                    await asyncio.wait_for(store.load("nobody"), 8)
                assert "127.0.0.1" in str(refused.value)
                assert "127.0.0.1" not in refused.value.public
            pg_cluster.start()
            assert await asyncio.wait_for(store.load("nobody"), 8) is None
        finally:
            await store.aclose()

    asyncio.run(body())


@pytest.mark.parametrize("committed", [True, False])
def test_spec_delivery_3_4_f_a_statement_of_several_lines_cut_with_its_connection(
    pg_schema_url: str, monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    """[D3.4-f] with [D3.4-d]: the writer's session is terminated for real as its statement of many lines of one
    response runs, before (not committed) or after it committed (the answer lost): on the new connection each
    line is committed once, in order, none refused as another process's."""
    lines = text_response(words=97)  # 101 lines, [DONE] last: the 99 between the first and [DONE] go in one statement
    journal = PostgresJournal(pg_schema_url)
    real = psycopg.Connection.execute
    cut: list[int] = []

    def execute(conn: psycopg.Connection[Any], query: Any, *args: Any, **kwargs: Any) -> Any:
        if (
            conn is not journal._conn
            or cut
            or not str(query).startswith("WITH added AS (INSERT")
            or "unnest" not in str(query)
        ):
            return real(conn, query, *args, **kwargs)
        cut.append(conn.info.backend_pid)
        if committed:
            real(conn, query, *args, **kwargs)
        with psycopg.connect(pg_schema_url, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        return real(conn, "SELECT 1")  # the next round trip on the cut session fails, as the lost answer did

    try:
        assert journal.append_upto("run", 0, lines[:1]) == (1, None)
        monkeypatch.setattr(psycopg.Connection, "execute", execute)
        assert journal.append_upto("run", 0, lines[1:]) == (len(lines) - 1, None)
        monkeypatch.undo()
        assert len(cut) == 1  # the statement of the 99 lines was cut
        stored = journal.read("run", 0)
        assert stored == lines
        assert_valid(stored)
        with psycopg.connect(pg_schema_url, autocommit=True) as conn:
            locks = conn.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()
        assert locks == (0,)  # [DONE] let the response's lock go, taken again on the new session
    finally:
        journal.close()
