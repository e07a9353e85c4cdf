"""Throwaway PostgreSQL data directories do not pile up in the temporary directory (spec [HY4-a]).

Each case builds directories the way ``scripts/pg-test-server`` leaves them (``owner.pid``,
``data/postmaster.pid``, ``server.log``) under ``tmp_path``, with pids of processes that
are alive (this one) or dead (a child that has exited).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING

import pytest

import pg_support

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(30)
    return child.pid


def _made(root: Path, name: str, *, owner: int | None, postmaster: int | None, age: float = 0.0) -> Path:
    directory = root / name
    (directory / "data").mkdir(parents=True)
    (directory / "server.log").write_text("LOG:  database system is ready\n")
    if owner is not None:
        (directory / pg_support.OWNER_FILE).write_text(f"{owner}\n")
    if postmaster is not None:
        (directory / "data" / "postmaster.pid").write_text(f"{postmaster}\n/x/data\n")
    if age:
        then = time.time() - age
        for path in (directory / "data" / "postmaster.pid", directory / "server.log", directory / "data", directory):
            if path.exists():
                os.utime(path, (then, then))
    return directory


def test_hy4_a_only_dead_directories_of_ours_are_removed(tmp_path: Path, dead_pid: int) -> None:
    """Owner and server dead: removed; either alive, a foreign name, a link or a file: kept [HY4-a]."""
    me = os.getpid()
    gone = _made(tmp_path, "agent-ref-pg-gone", owner=dead_pid, postmaster=dead_pid)
    gone_fault = _made(tmp_path, "agent-ref-pgfault-gone", owner=dead_pid, postmaster=None)
    owner_alive = _made(tmp_path, "agent-ref-pg-running-test", owner=me, postmaster=None)
    server_alive = _made(tmp_path, "agent-ref-pg-orphan-server", owner=dead_pid, postmaster=me)
    foreign = _made(tmp_path, "someone-elses-pg-dir", owner=dead_pid, postmaster=None)
    (tmp_path / "agent-ref-pg-a-file").write_text("not a directory")
    (tmp_path / "agent-ref-pg-a-link").symlink_to(gone_fault, target_is_directory=True)
    removed = pg_support.sweep_stale(tmp_path)
    assert sorted(p.name for p in removed) == ["agent-ref-pg-gone", "agent-ref-pgfault-gone"]
    assert not gone.exists()
    assert not gone_fault.exists()
    for kept in (owner_alive, server_alive, foreign, tmp_path / "agent-ref-pg-a-file"):
        assert kept.exists(), kept.name
    assert (tmp_path / "agent-ref-pg-a-link").is_symlink()


def test_hy4_a_an_unmarked_directory_goes_only_when_long_unchanged(tmp_path: Path, dead_pid: int) -> None:
    """Without ``owner.pid`` (an older launcher, or one cut before writing it): removed only after an hour [HY4-a]."""
    old = _made(tmp_path, "agent-ref-pg-old", owner=None, postmaster=dead_pid, age=2 * 3600)
    empty_old = tmp_path / "agent-ref-pg-empty-old"
    empty_old.mkdir()
    then = time.time() - 2 * 3600
    os.utime(empty_old, (then, then))
    fresh = _made(tmp_path, "agent-ref-pg-being-made", owner=None, postmaster=None)
    old_but_serving = _made(tmp_path, "agent-ref-pg-old-live", owner=None, postmaster=os.getpid(), age=2 * 3600)
    removed = pg_support.sweep_stale(tmp_path)
    assert sorted(p.name for p in removed) == ["agent-ref-pg-empty-old", "agent-ref-pg-old"]
    assert not old.exists()
    assert fresh.exists()
    assert old_but_serving.exists()


def test_hy4_a_a_new_directory_sweeps_and_names_its_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_pid: int
) -> None:
    """``make_directory`` removes stale ones first and writes this process's pid into the new one [HY4-a]."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stale = _made(tmp_path, "agent-ref-pg-stale", owner=dead_pid, postmaster=None)
    made = pg_support.make_directory("agent-ref-pg-")
    assert not stale.exists()
    assert made.parent == tmp_path
    assert (made / pg_support.OWNER_FILE).read_text() == f"{os.getpid()}\n"
    assert not pg_support.is_stale(made)


@pytest.mark.parametrize("script", ["missing", "failing"])
def test_hy4_a_a_server_that_cannot_start_leaves_no_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str
) -> None:
    """The script missing or failing: the loud skip of [P4-a], and its directory removed [HY4-a]."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    monkeypatch.delenv(pg_support.URL_ENV, raising=False)
    monkeypatch.delenv("CI", raising=False)
    fake = tmp_path / "pg-test-server"
    if script == "failing":
        fake.write_text("#!/bin/sh\necho no server here >&2\nexit 3\n")
        fake.chmod(0o755)
    monkeypatch.setattr(pg_support, "SCRIPT", fake)
    for launcher in (pg_support.server, pg_support.cluster):
        with pytest.raises(pytest.skip.Exception, match="POSTGRESQL TESTS NOT RUN"):
            next(launcher())
    assert list(root.iterdir()) == []
