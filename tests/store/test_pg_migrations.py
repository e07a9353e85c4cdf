"""Schema migrations of the PostgreSQL store (spec scaleout §1.1)."""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest

from agent_ref import StateError
from agent_ref.store.migrations import migrations
from agent_ref.store.postgres import PostgresStore, migrate


def test_spec_scaleout_1_1_a_migrations_apply_once_and_are_recorded(pg_schema_url: str) -> None:
    """Processes starting together apply each migration once; a later start applies none [P1.1-a]."""
    applied: list[list[int]] = []

    def start() -> None:
        with psycopg.connect(pg_schema_url, autocommit=True) as conn:
            applied.append(migrate(conn))

    threads = [threading.Thread(target=start) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    versions = [v for v, _, _ in migrations()]
    assert sorted(applied, key=len) == [[], [], versions]
    with psycopg.connect(pg_schema_url, autocommit=True) as conn:
        recorded = [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()]
        assert recorded == versions
        assert migrate(conn) == []


def test_spec_scaleout_1_1_b_a_newer_schema_is_refused(pg_schema_url: str) -> None:
    """A database migrated by newer code is refused with a clear error, not used [P1.1-b]."""
    with psycopg.connect(pg_schema_url, autocommit=True) as conn:
        migrate(conn)
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (9999, 'from_the_future')")

    async def body() -> None:
        store = PostgresStore(pg_schema_url)
        try:
            await store.load("x")
        finally:
            await store.aclose()

    with pytest.raises(StateError, match="schema is at version 9999, newer than this code"):
        asyncio.run(body())


def test_spec_scaleout_1_3_a_unreachable_database_is_a_state_error() -> None:
    """No server at the URL: a ``StateError`` naming where, without the password [P1.3-a]."""

    async def body() -> None:
        store = PostgresStore("postgresql://u:secret@127.0.0.1:1/nodb", timeout=2)
        await store.load("x")

    with pytest.raises(StateError, match=r"127\.0\.0\.1:1/nodb") as info:
        asyncio.run(body())
    assert "secret" not in str(info.value)
