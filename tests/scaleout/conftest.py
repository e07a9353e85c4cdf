"""Fixtures of the two-process tests: a PostgreSQL schema and server processes on it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pg_support import root_conftest
from scaleout_support import Process

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


_root = root_conftest()


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X`` (see ``root_conftest``)."""
    return getattr(_root, name)


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
