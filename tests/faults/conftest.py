"""Fixtures of the fault-injection suite (issue 24): real faults, each bounded, loopback only.

Generic pieces any fault test may use: ``pg_cluster`` (a PostgreSQL server of the test's
own, which it may stop and start for real), ``pg_processes`` (server processes,
``tests/scaleout/serve_pg.py``, on a URL; stopped after the test), and ``read_stream``
(reads an SSE answer in a thread with a deadline, so a hung server fails the test
instead of hanging it). Helpers that are not fixtures live in ``fault_support.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pg_support import Cluster, cluster, root_conftest
from scaleout_support import Process

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


_root = root_conftest()


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X`` (see ``root_conftest``)."""
    return getattr(_root, name)


@pytest.fixture
def pg_cluster() -> Iterator[Cluster]:
    """A PostgreSQL server of this test's own (``pg_support.Cluster``): the test may stop and start it."""
    yield from cluster()


@pytest.fixture
def pg_processes() -> Iterator[Callable[..., Process]]:
    """Start server processes: ``pg_processes(url, *args)``; every one is stopped after the test."""
    started: list[Process] = []

    def start(url: str, *args: str) -> Process:
        process = Process(url, *args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
