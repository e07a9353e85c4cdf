"""A PostgreSQL server for the tests: the one ``AGENT_REF_TEST_PG_URL`` names, or a throwaway one.

When the variable is unset, ``scripts/pg-test-server`` starts a server on 127.0.0.1 in a
temporary directory for the whole session and stops it at the end. When no server can be
had: outside CI the PostgreSQL tests are skipped with a loud reason; with ``CI=true``
they fail (spec scaleout §4-a: CI must run them).
Each test gets a schema of its own (``fresh_schema``), dropped afterwards.

Throwaway data directories are ``agent-ref-pg-*`` and ``agent-ref-pgfault-*`` in the
temporary directory, each with an ``owner.pid`` file naming the test process that made
it. A test process killed before its cleanup leaves its directory behind; before making
a new one the launcher removes the stale ones (``sweep_stale``, spec [HY4-a]).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
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
#: The names of our throwaway data directories (in ``tempfile.gettempdir()``).
PREFIXES = ("agent-ref-pg-", "agent-ref-pgfault-")
#: The file in each that names the test process that made it.
OWNER_FILE = "owner.pid"
#: A directory without ``OWNER_FILE`` (made before it existed, or cut between ``mkdtemp``
#: and writing it) is stale only when nothing in it changed for this long.
UNMARKED_STALE_SECONDS = 3600


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (one of another user counts; a bad pid does not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _pid_in(path: Path) -> int | None:
    """The pid on the first line of ``path``; ``None`` when it is missing or holds no pid."""
    try:
        first = path.read_text().split("\n", 1)[0].strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(first) if first.isdigit() else None


def _our_uids() -> set[int]:
    """Owners a directory of ours may have: us, and ``postgres`` when we are root (the script chowns to it)."""
    uids = {os.geteuid()}
    if os.geteuid() == 0:
        import pwd

        with contextlib.suppress(KeyError):
            uids.add(pwd.getpwnam("postgres").pw_uid)
    return uids


def _newest_change(directory: Path) -> float:
    """The latest modification time of the directory, its data directory and its server log."""
    times = []
    for path in (directory, directory / "data", directory / "server.log", directory / "data" / "postmaster.pid"):
        with contextlib.suppress(OSError):
            times.append(path.stat().st_mtime)
    return max(times, default=time.time())  # gone meanwhile: as if changed now (kept)


def is_stale(directory: Path, *, now: float | None = None) -> bool:
    """Whether ``directory`` is a throwaway data directory of ours whose server and owner are gone.

    Ours: a real directory (not a link) named with one of ``PREFIXES``, owned by us (or by
    ``postgres`` when we are root). Gone: no live postmaster (``data/postmaster.pid``
    missing, or its process dead), and the test process named in ``owner.pid`` dead; a
    directory without ``owner.pid`` counts as gone only when nothing in it changed for
    ``UNMARKED_STALE_SECONDS``. Every doubt keeps the directory (a reused pid reads as alive).
    """
    if not directory.name.startswith(PREFIXES):
        return False
    try:
        info = directory.lstat()
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid not in _our_uids():
        return False
    postmaster = _pid_in(directory / "data" / "postmaster.pid")
    if postmaster is not None and _alive(postmaster):
        return False
    owner = _pid_in(directory / OWNER_FILE)
    if owner is not None:
        return not _alive(owner)
    if (directory / OWNER_FILE).exists():
        return False  # there but unreadable: not ours to judge
    return (time.time() if now is None else now) - _newest_change(directory) >= UNMARKED_STALE_SECONDS


def sweep_stale(root: Path | None = None) -> list[Path]:
    """Remove the stale throwaway data directories in ``root`` (the temporary directory); return them.

    Only ``is_stale`` ones; a directory another process removes meanwhile, or one that
    cannot be removed, is left (and not returned).
    """
    base = Path(tempfile.gettempdir()) if root is None else root
    removed: list[Path] = []
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not is_stale(entry):
            continue
        try:
            shutil.rmtree(entry)
        except OSError:
            continue
        removed.append(entry)
    return removed


def make_directory(prefix: str) -> Path:
    """A new throwaway data directory (stale ones swept first) with ``owner.pid`` naming this process."""
    sweep_stale()
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    (directory / OWNER_FILE).write_text(f"{os.getpid()}\n")
    return directory


def _remove(directory: Path) -> None:
    """Stop the server in ``directory`` if any and remove it; the directory is gone even when the script is."""
    with contextlib.suppress(OSError, subprocess.TimeoutExpired):
        subprocess.run([str(SCRIPT), "stop", str(directory)], capture_output=True, timeout=60, check=False)
    shutil.rmtree(directory, ignore_errors=True)


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
    directory = make_directory(PREFIXES[0])
    try:
        url = _start(directory)
        if url is None:
            return
        yield url
    finally:
        _remove(directory)


def _start(directory: Path) -> str | None:
    """Start a throwaway server in ``directory`` and return its URL; ``None`` after ``_unavailable`` said why."""
    try:
        started = subprocess.run(
            [str(SCRIPT), "start", str(directory)], capture_output=True, text=True, timeout=120, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"scripts/pg-test-server could not run: {exc}")
        return None
    if started.returncode != 0:
        _unavailable(f"scripts/pg-test-server failed ({started.returncode}): {started.stderr.strip()[-400:]}")
        return None
    return started.stdout.strip()


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
    directory = make_directory(PREFIXES[1])
    try:
        url = _start(directory)
        if url is None:
            return
        yield Cluster(url, directory)
    finally:
        _remove(directory)
