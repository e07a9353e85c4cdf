"""``envelope.delivery.postgres`` on its own: its own table, a follower across journals, no agent (spec delivery §3.4)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import psycopg
import pytest

from envelope.delivery import DONE_LINE, JournalError, JournalUnavailableError, LiveStream
from envelope.delivery.postgres import PostgresJournal, describe_database


def test_importing_the_backend_needs_no_agent() -> None:
    """The PostgreSQL journal loads psycopg and nothing of the agent."""
    code = (
        "import sys, envelope.delivery.postgres\n"
        "assert 'psycopg' in sys.modules\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('agent_ref', 'starlette', 'anthropic')]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def test_spec_delivery_3_4_a_a_fresh_database_gets_the_table_and_a_follower_reads_every_line(
    pg_schema_url: str,
) -> None:
    """[D3.4-a]: on a schema without the agent's migrations, a writer's live stream is read once, in order, elsewhere."""
    writer = PostgresJournal(pg_schema_url)
    reader = PostgresJournal(pg_schema_url, poll_seconds=0.05)
    with psycopg.connect(pg_schema_url) as conn:
        tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}
    assert tables == {"stream_journal"}  # its own table only: no store, no agent migrations
    lines = [f'{{"n":{i}}}'.encode() for i in range(25)] + [DONE_LINE]

    async def main() -> list[tuple[int, bytes]]:
        stream = LiveStream("run-x", 0, writer)
        follower = asyncio.create_task(_collect(reader, "run-x", 3))
        for line in lines:
            stream.append(line)
            await asyncio.sleep(0)
        return await asyncio.wait_for(follower, 30)

    try:
        got = asyncio.run(main())
    finally:
        writer.close()
        reader.close()
    assert got == list(enumerate(lines))[4:]


async def _collect(journal: PostgresJournal, run_id: str, after: int) -> list[tuple[int, bytes]]:
    return [item async for item in journal.follow(run_id, 0, after)]


def test_an_unreachable_database_is_a_clear_error_without_its_password() -> None:
    """[D5.1-a]: no server at the URL: ``JournalUnavailableError`` naming host, port and database, never the password."""
    with pytest.raises(JournalUnavailableError, match=r"127\.0\.0\.1:1/nodb") as info:
        PostgresJournal("postgresql://u:secret@127.0.0.1:1/nodb", connect_timeout=2)
    assert "secret" not in str(info.value)
    assert "127.0.0.1" not in info.value.public
    assert describe_database("not a url ===") == "the PostgreSQL database (unparsable URL)"


def test_a_failing_prepare_is_a_journal_error(pg_schema_url: str) -> None:
    """A ``prepare`` the database refuses: ``JournalError`` saying what failed; the connection is closed."""

    def bad(conn: psycopg.Connection[tuple[object, ...]]) -> None:
        conn.execute("SELECT * FROM no_such_table")

    with pytest.raises(JournalError, match="cannot prepare the journal in PostgreSQL"):
        PostgresJournal(pg_schema_url, prepare=bad)
