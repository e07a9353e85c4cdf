"""``FileJournal`` when its writes fail: no descriptor kept, no half line kept, an empty file is no response.

[D3.3-b] [D3.3-c] [D5.1-b] (issue 38 cases 2 and 7). The failures here are injected at
``os.write`` (an ``OSError`` as a full disk gives it); ``tests/faults/test_file_journal_storage.py``
fills a real tmpfs and remounts a real directory read-only.
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

import httpx2
import pytest
from starlette.applications import Starlette

from envelope.delivery import DONE_LINE, FileJournal, JournalUnavailableError
from envelope.delivery.asgi import Delivery
from server_support import running

if TYPE_CHECKING:
    from pathlib import Path


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_spec_delivery_3_3_b_failed_writes_keep_no_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """[D3.3-b]: 500 failed appends (a full disk) leave as many descriptors open as before, and say why."""
    journal = FileJournal(tmp_path)
    journal.append("r1", 0, b'{"a":1}')  # a response being written: its file stays open
    before = _open_fds()

    def full(_fd: int, _data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    for n in range(500):
        with pytest.raises(JournalUnavailableError) as caught:
            journal.append(f"run{n}", 0, b'{"b":2}')
        assert "No space left on device" in str(caught.value)
        assert caught.value.public == "the server's storage is unavailable"
        assert str(tmp_path) not in caught.value.public
    with pytest.raises(JournalUnavailableError):
        journal.append("r1", 0, b'{"c":3}')
    assert _open_fds() <= before  # r1's own file was closed by its failure too
    monkeypatch.undo()
    assert not list(tmp_path.glob("run*.log")), "a response whose first line failed left a file"
    journal.append("r1", 0, DONE_LINE)  # storage is back: the same journal writes again
    assert journal.read("r1", 0) == [b'{"a":1}', DONE_LINE]
    assert _open_fds() < before


def test_spec_delivery_3_3_b_a_half_written_line_is_cut_before_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[D3.3-b]: a write cut short by a filling disk is retried for the rest; a failure then leaves no half line."""
    journal = FileJournal(tmp_path)
    journal.append("r1", 0, b'{"a":1}')
    real = os.write
    calls: list[int] = []

    def short_then_full(fd: int, data: bytes) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data)[:3])  # a short write: 3 bytes land
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(JournalUnavailableError):
        journal.append("r1", 0, b'{"half":true}')
    assert calls == [len(b'{"half":true}\n'), len(b'{"half":true}\n') - 3]
    monkeypatch.undo()
    assert journal.read("r1", 0) == [b'{"a":1}']  # the 3 bytes are not a line
    journal.append("r1", 0, DONE_LINE)
    assert (tmp_path / "r1.0.log").read_bytes() == b'{"a":1}\n[DONE]\n'


def test_spec_delivery_3_3_b_an_empty_file_is_no_response(tmp_path: Path) -> None:
    """[D3.3-b] [D5.1-b]: a response file with no whole line reads as none: not unfinished, a 404 on resume."""
    (tmp_path / "r1.0.log").write_bytes(b"")
    (tmp_path / "r2.0.log").write_bytes(b'{"cut')
    journal = FileJournal(tmp_path)
    assert journal.read("r1", 0) is None
    assert journal.read("r2", 0) is None
    assert journal.unfinished() == []
    delivery = Delivery(journal)
    with running(Starlette(routes=[delivery.route()])) as base, httpx2.Client(timeout=30) as client:
        for run in ("r1", "r2"):
            assert client.get(f"{base}/streams/{run}").status_code == 404
            assert client.get(f"{base}/streams/{run}", headers={"Last-Event-ID": f"{run}:0:0"}).status_code == 404


def test_spec_delivery_5_1_b_unreadable_journal_is_503_naming_nothing(tmp_path: Path) -> None:
    """[D5.1-b]: a journal that cannot be read makes a resume 503 with Retry-After, no path, no traceback."""
    journal = FileJournal(tmp_path / "streams")
    journal.append("r1", 0, b'{"a":1}')
    journal.close()
    (tmp_path / "streams" / "r1.0.log").unlink()
    (tmp_path / "streams" / "r1.0.log").mkdir()  # reading it fails with EISDIR
    delivery = Delivery(journal)
    with running(Starlette(routes=[delivery.route()])) as base, httpx2.Client(timeout=30) as client:
        answer = client.get(f"{base}/streams/r1", headers={"Last-Event-ID": "r1:0:0"})
    assert answer.status_code == 503
    assert int(answer.headers["retry-after"]) >= 1
    assert answer.json()["error"] == {"type": "storage_unavailable", "message": "the server's storage is unavailable"}
    assert str(tmp_path) not in answer.text


def test_spec_delivery_3_3_c_finished_responses_are_pruned(tmp_path: Path) -> None:
    """[D3.3-c]: past keep_finished or keep_seconds a finished file goes; unfinished ones stay; bounds survive restarts."""
    now = [1000.0]
    journal = FileJournal(tmp_path, keep_finished=3, keep_seconds=60, clock=lambda: now[0])
    journal.append("open", 0, b'{"a":1}')  # never finished: never pruned
    for n in range(5):
        journal.append(f"r{n}", 0, b'{"a":1}')
        journal.append(f"r{n}", 0, DONE_LINE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["open.0.log", "r2.0.log", "r3.0.log", "r4.0.log"]
    assert journal.read("r0", 0) is None
    journal.close()
    for name, age in (("r2", 120), ("r3", 30), ("r4", 10)):  # a restart judges by the files' times
        os.utime(tmp_path / f"{name}.0.log", (now[0] - age, now[0] - age))
    FileJournal(tmp_path, keep_finished=3, keep_seconds=60, clock=lambda: now[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["open.0.log", "r3.0.log", "r4.0.log"]
    now[0] += 45
    again = FileJournal(tmp_path, keep_finished=None, keep_seconds=60, clock=lambda: now[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["open.0.log", "r4.0.log"]
    assert again.unfinished() == [("open", 0)]
    with pytest.raises(ValueError, match="negative"):
        FileJournal(tmp_path, keep_finished=-1)
