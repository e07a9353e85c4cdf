"""Fixtures of the fleet suite (issue 30 §5): the task queue and its workers.

``pg_schema_url`` (the root conftest's: a fresh schema on the session's PostgreSQL) serves
the queue tests; ``fleet_cluster`` is a PostgreSQL server of this suite's own, which the
outage test stops and starts for real (``pg_support.Cluster``); ``workers`` starts worker
processes (``agent-ref worker``'s ``main``) and kills or stops every one after the test.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from fleet_support import WorkerProcess
from pg_support import Cluster, cluster, root_conftest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path


_root = root_conftest()


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X`` (see ``root_conftest``)."""
    return getattr(_root, name)


@pytest.fixture(scope="session")
def fleet_cluster() -> Iterator[Cluster]:
    """A PostgreSQL server of the fleet tests' own, which a test may stop and start."""
    yield from cluster()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start worker processes: ``workers(url, name, *args)``; every one is stopped (or killed) after the test."""
    started: list[WorkerProcess] = []

    def start(url: str, name: str, *args: str) -> WorkerProcess:
        process = WorkerProcess(url, name, tmp_path / f"{name}.log", *args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()
