"""A full or read-only filesystem under the journal or the SQLite file (issue 38 cases 1 and 10).

[S3.5-a] [S3.4-b] [R5.5-e]

Real faults: a small tmpfs mounted for the test (root only; skipped with the reason
otherwise), remounted read-only or filled with a file until it has no byte left, and
always unmounted at the end. The server is ``create_app`` with the ``agent-ref serve``
pair, a ``SQLiteStore`` and a ``FileJournal``, served on loopback.

- The journal on the faulty mount, the database on a roomy disk: the answer to a pause
  is refused ``503`` and not taken; once there is room (or the mount is writable again)
  the same answer is accepted, the model replies, and the stream is strictly valid.
- The database on the faulty mount: ``503`` with ``Retry-After``, never a ``409``, and the
  file's name is nowhere in the answer; the next request once there is room works.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import create_app
from agent_ref.server.streams import FileJournal
from agent_ref_support import meta
from server_support import data_lines, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

CONFIRM = "Please confirm: delete the temp files"
#: The database's file name: a client must never read it.
SECRET_NAME = "secret-customer-name"


@contextlib.contextmanager
def _tmpfs(where: Path, size: str = "4m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` for the block; skipped (with why) when it cannot be mounted."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs these as root)")
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)  # still busy: detach


def _remount(where: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(where)], check=True, capture_output=True)


def _fill(where: Path) -> Path:
    """Write a file into ``where`` until the filesystem has no room left; return it (delete it to free the room)."""
    filler = where / "filler"
    chunk = b"\0" * 65536
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        while True:  # the last bytes, a few at a time
            try:
                os.write(fd, b"\0" * 512)
            except OSError:
                break
    finally:
        os.close(fd)
    return filler


def _assert_refused(answer: Any) -> None:
    """``503`` with ``Retry-After``, naming neither the database nor a path."""
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["retry-after"]) >= 1
    assert SECRET_NAME not in answer.text
    assert "/" not in answer.json()["error"]["message"], answer.text


def _pending_id(body: bytes) -> str:
    awaiting: Any = meta(data_lines(body), "awaiting_frontend_tools")  # a list for this block
    (pending,) = awaiting
    return str(pending["tool_use_id"])


def _answers(state: Any, tool_use_id: str) -> int:
    """How many ``tool_result`` blocks of the context answer ``tool_use_id``."""
    return sum(
        1
        for message in state.messages
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id
    )


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_spec_server_3_5_a_the_answer_a_faulty_journal_refused_is_accepted_once_it_has_room(
    tmp_path: Path, fault: str
) -> None:
    """[S3.5-a]: the journal on a read-only or full mount: 503, the pause kept; afterwards the same answer streams."""
    db = tmp_path / "agents.db"  # a roomy disk
    with _tmpfs(tmp_path / "journal") as mount:
        store = SQLiteStore(db)
        app = create_app(store=store, model_factory=ScriptedModel, journal=FileJournal(mount / "agents.db.streams"))
        with running(app) as base:
            first = post(base, "/agent/run", {"prompt": CONFIRM})
            assert first.status_code == 200
            assert_valid(first.content)
            agent_uuid = first.headers["x-agent-uuid"]
            pending = _pending_id(first.content)
            answer = {"agent_uuid": agent_uuid, "tool_results": [{"tool_use_id": pending, "content": "yes"}]}

            filler = None
            if fault == "read-only":
                _remount(mount, "ro")
            else:
                filler = _fill(mount)
            try:
                _assert_refused(post(base, "/agent/tool_results", answer))
                _assert_refused(post(base, "/agent/tool_results", answer))  # a retry while it lasts: the same
            finally:
                if filler is not None:
                    filler.unlink()
                else:
                    _remount(mount, "rw")

            state = asyncio.run(store.load(agent_uuid))
            assert state is not None
            assert state.status == "awaiting_frontend_tools"
            assert _answers(state, pending) == 0  # not taken

            again = post(base, "/agent/tool_results", answer)
            assert again.status_code == 200, again.text
            assert_valid(again.content)
            lines = data_lines(again.content)
            assert meta(lines, "meta_final")["stop_reason"] == "end_turn"  # the model replied
            assert b'"type":"text"' in b"".join(lines)
            state = asyncio.run(store.load(agent_uuid))
            assert state is not None
            assert state.status == "idle"
            assert _answers(state, pending) == 1  # taken once, by the retry


@pytest.mark.parametrize("fault", ["read-only", "full"])
def test_spec_server_3_4_b_a_failing_sqlite_file_is_503_naming_nothing(tmp_path: Path, fault: str) -> None:
    """[S3.4-b]: the SQLite file on a read-only or full mount: 503 + Retry-After, no path; then it serves again."""
    with _tmpfs(tmp_path / "db") as mount:
        store = SQLiteStore(mount / f"{SECRET_NAME}.db")
        app = create_app(store=store, model_factory=ScriptedModel)
        with running(app) as base:
            first = post(base, "/agent/run", {"prompt": "hello"})
            assert first.status_code == 200
            agent_uuid = first.headers["x-agent-uuid"]
            filler = None
            if fault == "read-only":
                _remount(mount, "ro")
            else:
                filler = _fill(mount)
            try:
                _assert_refused(post(base, "/agent/run", {"prompt": "hello"}))  # a new agent
                _assert_refused(post(base, "/agent/run", {"prompt": "hello", "agent_uuid": agent_uuid}))
            finally:
                if filler is not None:
                    filler.unlink()
                else:
                    _remount(mount, "rw")
            again = post(base, "/agent/run", {"prompt": "hello", "agent_uuid": agent_uuid})
            assert again.status_code == 200, again.text
            assert_valid(again.content)
