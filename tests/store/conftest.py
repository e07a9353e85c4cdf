"""Fixtures of the store suite: one ``store_factory`` per backend (SQLite, PostgreSQL)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import SQLiteStore
from agent_ref.store.postgres import PostgresStore
from pg_support import root_conftest

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from agent_ref.store.core import Store


_root = root_conftest()


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X`` (see ``root_conftest``)."""
    return getattr(_root, name)


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the stores of one test live: a SQLite file path or a PostgreSQL URL."""
    if request.param == "sqlite":
        return str(tmp_path / "agents.db")
    url: str = request.getfixturevalue("pg_schema_url")
    return url


@pytest.fixture
def store_factory(backend: str) -> Callable[[], Store]:
    """Make a new store object on the test's database (two calls: two "processes")."""

    def make() -> Store:
        if backend.startswith("postgresql://"):
            return PostgresStore(backend)
        return SQLiteStore(backend)

    return make
