"""Fixtures of the fault-injection suite (issue 24): real faults, each bounded, loopback only.

Generic pieces any fault test may use: ``pg_cluster`` (a PostgreSQL server of the fault
tests' own, which a test may stop and start for real; ``pg_cluster_url`` gives a fresh
schema on it) and ``pg_processes`` (server processes, ``tests/scaleout/serve_pg.py``, on
a URL; stopped after the test). Helpers that are not fixtures (``Reader``: an SSE answer
read in a thread, waited for with deadlines) live in ``tests/fault_support.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pg_support import Cluster, cluster, fresh_schema, root_conftest
from scaleout_support import Process

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


_root = root_conftest()


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X`` (see ``root_conftest``)."""
    return getattr(_root, name)


@pytest.fixture(scope="session")
def pg_fault_cluster() -> Iterator[Cluster]:
    """One PostgreSQL server for the fault tests only (``pg_support.Cluster``), made once (``initdb`` is slow)."""
    yield from cluster()


@pytest.fixture
def pg_cluster(pg_fault_cluster: Cluster) -> Iterator[Cluster]:
    """The fault tests' PostgreSQL server, running when the test starts and when it ends: the test may stop and start it.

    Its ``url`` is the server's; tests that need isolation use ``pg_cluster_url`` (a fresh schema on it).
    """
    pg_fault_cluster.ensure_running()
    yield pg_fault_cluster
    pg_fault_cluster.ensure_running()


@pytest.fixture
def pg_cluster_url(pg_cluster: Cluster) -> Iterator[str]:
    """A URL whose tables live in a fresh schema of ``pg_cluster``'s server (dropped after, the server restarted first)."""
    schema = fresh_schema(pg_cluster.url)
    yield next(schema)
    pg_cluster.ensure_running()
    next(schema, None)


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
