"""A full tmpfs and a read-only bind mount under a ``FileJournal`` served by ``Delivery`` (issue 38 cases 2 and 4).

[D3.3-b] [D4.1-b] [D4.3-a] [D5.1-b]. Real file systems, mounted by the test (root only;
skipped with the reason elsewhere), always unmounted in ``finally``. The app runs in this
process, so its descriptors are counted in ``/proc/self/fd`` before and after hundreds of
failed writes. Every stream is validated strictly.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from typing import TYPE_CHECKING

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from envelope.delivery import DONE_LINE, FileJournal
from envelope.delivery.asgi import Delivery
from server_support import data_lines, running
from streams import text_response
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator
    from pathlib import Path

    from starlette.requests import Request
    from starlette.responses import Response

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs or a read-only bind mount needs root")


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, timeout=30)


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True, timeout=30)


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    try:
        yield path
    finally:
        _umount(path)


def _fill(path: Path) -> Path:
    """Fill the file system under ``path`` to the last byte; return the filler."""
    filler = path / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):  # big blocks, then the last bytes
            with contextlib.suppress(OSError):
                while os.write(fd, b"\0" * size):
                    pass
    finally:
        os.close(fd)
    return filler


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _app(journal: FileJournal) -> Starlette:
    delivery = Delivery(journal, keepalive_seconds=30)

    async def model() -> AsyncIterator[bytes]:
        for line in text_response(words=6):
            yield line

    async def chat(request: Request) -> Response:
        return delivery.stream(request.path_params["run_id"], model())

    return Starlette(routes=[Route("/chat/{run_id}", chat), delivery.route()])


def test_spec_delivery_3_3_b_a_full_tmpfs_leaks_no_descriptor_and_recovers(tmp_path: Path) -> None:
    """[D3.3-b] [D4.1-b]: 300 runs on a full tmpfs each get an error stream; no fd is kept; once space is back, runs work."""
    with _tmpfs(tmp_path / "small", "256k") as disk:
        journal = FileJournal(disk / "streams")
        with running(_app(journal)) as base, httpx2.Client(timeout=30) as client:
            first = client.get(base + "/chat/warm")  # the client's connection and the server's tasks exist
            assert data_lines(first.content) == text_response(words=6)
            filler = _fill(disk)
            before = _fds()
            for n in range(300):
                answer = client.get(f"{base}/chat/run{n}")
                assert answer.status_code == 200
                if n % 50 == 0:
                    assert_valid(answer.content)
                    assert b"server_unavailable" in answer.content
                    assert data_lines(answer.content)[-1] == DONE_LINE
            after = _fds()
            assert after <= before + 2, f"{after - before} descriptors more after 300 failed writes"
            assert client.get(base + "/streams/run7").status_code == 404  # its first line never landed
            filler.unlink()  # space is back: the same server and journal write again
            again = client.get(base + "/chat/back")
            assert data_lines(again.content) == text_response(words=6)
            assert_valid(again.content)
            assert journal.read("back", 0) == text_response(words=6)


def test_spec_delivery_4_3_a_a_read_only_remount_mid_run_is_closed_once_writable(tmp_path: Path) -> None:
    """[D4.3-a] [D5.1-b]: the journal's directory goes read-only: new runs get an error stream, resumes still
    replay what is journaled, and once writable a response cut by the remount is closed as its client saw it."""
    real = tmp_path / "real"
    real.mkdir()
    view = tmp_path / "view"
    view.mkdir()
    _mount("--bind", str(real), str(view))
    try:
        journal = FileJournal(view)
        with running(_app(journal)) as base, httpx2.Client(timeout=30) as client:
            done = client.get(base + "/chat/done")
            assert data_lines(done.content) == text_response(words=6)
            cut = FileJournal(view)
            for line in text_response(words=6)[:4]:  # a response another app instance was writing, then killed
                cut.append("cut", 0, line)
            cut.close()
            _mount("-o", "remount,ro,bind", str(view))
            before = _fds()
            for n in range(200):
                answer = client.get(f"{base}/chat/ro{n}")
                assert answer.status_code == 200
                if n % 50 == 0:
                    assert b"server_unavailable" in answer.content
                    assert_valid(answer.content)
            assert _fds() <= before + 2
            replay = client.get(base + "/streams/done")
            assert data_lines(replay.content) == text_response(words=6)  # reading still works
            refused = client.get(base + "/streams/cut", headers={"Last-Event-ID": "cut:0:3"})
            assert refused.status_code == 503  # it must be closed in the journal first, which is read-only
            assert int(refused.headers["retry-after"]) >= 1
            assert str(tmp_path) not in refused.text
            _mount("-o", "remount,rw,bind", str(view))
            rest = client.get(base + "/streams/cut", headers={"Last-Event-ID": "cut:0:3"})
            assert rest.status_code == 200
            got = data_lines(rest.content)
            assert got[-1] == DONE_LINE
            assert b"server_restarted" in rest.content
            whole = client.get(base + "/streams/cut")
        assert data_lines(whole.content) == [*text_response(words=6)[:4], *got]
        assert_valid(whole.content)
    finally:
        _umount(view)
