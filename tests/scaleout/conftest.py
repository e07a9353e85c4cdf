"""Fixtures of the two-process tests: a PostgreSQL schema and server processes on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pg_support import fresh_schema, root_conftest, server
from scaleout_support import Process

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


_root = root_conftest()


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X`` (see ``root_conftest``)."""
    return getattr(_root, name)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL server for the session (see ``pg_support``)."""
    yield from server()


@pytest.fixture
def pg_schema_url(pg_url: str) -> Iterator[str]:
    """A URL whose tables live in a fresh schema."""
    yield from fresh_schema(pg_url)


@pytest.fixture
def processes(pg_schema_url: str) -> Iterator[Callable[..., Process]]:
    """Start server processes on the test's schema: ``processes(*args)``; all are stopped after."""
    started: list[Process] = []

    def start(*args: str) -> Process:
        process = Process(pg_schema_url, *args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
