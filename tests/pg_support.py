"""A PostgreSQL server for the tests: the one ``AGENT_REF_TEST_PG_URL`` names, or a throwaway one.

When the variable is unset, ``scripts/pg-test-server`` starts a server on 127.0.0.1 in a
temporary directory for the whole session and stops it at the end. When no server can be
had: outside CI the PostgreSQL tests are skipped with a loud reason; with ``CI=true``
they fail (spec scaleout §4-a: CI must run them).
Each test gets a schema of its own (``fresh_schema``), dropped afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import psycopg
import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "pg-test-server"
URL_ENV = "AGENT_REF_TEST_PG_URL"


def _unavailable(reason: str) -> None:
    message = f"POSTGRESQL TESTS NOT RUN: {reason} (set {URL_ENV}, or install Debian's postgresql package)"
    if os.environ.get("CI") == "true":
        pytest.fail(message + "; in CI they must run", pytrace=False)
    pytest.skip(message)


def server() -> Iterator[str]:
    """Yield the URL of a PostgreSQL server for the session (a generator for a session fixture)."""
    given = os.environ.get(URL_ENV)
    if given:
        yield given
        return
    directory = tempfile.mkdtemp(prefix="agent-ref-pg-")
    try:
        started = subprocess.run(
            [str(SCRIPT), "start", directory], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"scripts/pg-test-server could not run: {exc}")
        return
    if started.returncode != 0:
        subprocess.run([str(SCRIPT), "stop", directory], capture_output=True, timeout=60, check=False)
        _unavailable(f"scripts/pg-test-server failed ({started.returncode}): {started.stderr.strip()[-400:]}")
        return
    try:
        yield started.stdout.strip()
    finally:
        subprocess.run([str(SCRIPT), "stop", directory], capture_output=True, timeout=60, check=False)


def with_schema(url: str, schema: str) -> str:
    """``url`` with every connection's ``search_path`` set to ``schema``."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}', safe='')}"


def fresh_schema(url: str) -> Iterator[str]:
    """Yield a URL whose tables live in a new, empty schema; drop it afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_schema(url, schema)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def root_conftest() -> ModuleType:
    """``tests/conftest.py`` loaded under a private name.

    pytest imports every ``conftest.py`` of a directory without ``__init__.py`` as module
    ``conftest``, so a sub-directory's conftest replaces the root one in ``sys.modules``
    while other tests do ``from conftest import ROOT``. A sub-directory conftest forwards
    the names it lacks to this module (as ``tests/agent_ref/conftest.py`` does).
    """
    spec = importlib.util.spec_from_file_location("_tests_root_conftest_pg", ROOT / "tests" / "conftest.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Cluster:
    """A PostgreSQL server of one test's own, that the test may stop and start for real (``tests/faults/``).

    Made by ``scripts/pg-test-server start`` in a temporary directory; ``stop()`` is
    ``pg_ctl stop -m fast`` (every session is cut, as an operator's restart does) and
    ``start()`` starts it again on the same port with the same options (read back from
    the ``postmaster.opts`` file PostgreSQL writes at each start). Every step is bounded.

    Attributes:
        url: the server's URL (``postgresql://user@127.0.0.1:PORT/postgres``).
        directory: the temporary directory (data in ``data/``, the server's log in ``server.log``).
    """

    def __init__(self, url: str, directory: Path) -> None:
        """Wrap a server ``scripts/pg-test-server`` started in ``directory``."""
        self.url = url
        self.directory = directory
        data = directory / "data"
        opts = shlex.split((data / "postmaster.opts").read_text())
        self._bin = Path(opts[0]).parent
        given = opts[1:]
        keep: list[str] = []
        while given:  # every option but -D (pg_ctl passes it)
            flag = given.pop(0)
            if flag == "-D":
                given.pop(0)
                continue
            keep.append(flag)
        self._options = shlex.join(keep)

    def _ctl(self, *args: str) -> None:
        command = [str(self._bin / "pg_ctl"), "-D", str(self.directory / "data"), "-w", "-t", "30", *args]
        if os.geteuid() == 0:  # the server refuses to run as root (scripts/pg-test-server does the same)
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"pg_ctl {' '.join(args[:1])} failed: {done.stderr.strip()[-400:]}")

    def stop(self) -> None:
        """``pg_ctl stop -m fast``: open sessions are terminated, the server is gone until ``start``."""
        self._ctl("-m", "fast", "stop")

    def start(self) -> None:
        """``pg_ctl start`` with the first start's options; returns once it accepts connections."""
        self._ctl("-l", str(self.directory / "server.log"), "-o", self._options, "start")

    def ensure_running(self) -> None:
        """Start it if a test left it stopped (a failed test may have)."""
        try:
            with psycopg.connect(self.url, connect_timeout=2):
                return
        except psycopg.OperationalError:
            self.start()


def cluster() -> Iterator[Cluster]:
    """Yield a PostgreSQL server of the caller's own (a generator for a fixture); removed afterwards.

    Unlike ``server()`` it never uses ``AGENT_REF_TEST_PG_URL``: a test that stops the
    server must own it. No server can be had: skipped loudly, or failed with ``CI=true``.
    """
    directory = Path(tempfile.mkdtemp(prefix="agent-ref-pgfault-"))
    try:
        started = subprocess.run(
            [str(SCRIPT), "start", str(directory)], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"scripts/pg-test-server could not run: {exc}")
        return
    try:
        if started.returncode != 0:
            _unavailable(f"scripts/pg-test-server failed ({started.returncode}): {started.stderr.strip()[-400:]}")
            return
        yield Cluster(started.stdout.strip(), directory)
    finally:
        subprocess.run([str(SCRIPT), "stop", str(directory)], capture_output=True, timeout=60, check=False)
