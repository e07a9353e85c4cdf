"""``examples/fastapi_app.py`` (``Delivery`` + ``FileJournal``) killed with SIGKILL mid-response, then restarted.

[D4.3-a] (issue 38 case 4). The restarted app closes the dead response in its journal, so a
client resuming with ``Last-Event-ID`` gets closing lines and ``[DONE]``: the stream it
joins validates strictly (no E120, no W161), and a replay from the start is the same
lines. Every wait is bounded; loopback only.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import httpx2
import pytest

from conftest import ROOT
from envelope.delivery import DONE_LINE
from fault_support import wait_until
from server_support import data_lines, read_events
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

EXAMPLE = ROOT / "examples" / "fastapi_app.py"
ALICE = {"Authorization": "Bearer alice-demo-token"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class _App:
    """The example as its own process on a journal directory."""

    def __init__(self, journal_dir: Path, pace: float, key_file: Path) -> None:
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(EXAMPLE),
                "--port",
                str(self.port),
                "--pace",
                str(pace),
                "--journal-dir",
                str(journal_dir),
                "--link-key-file",
                str(key_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

        def answers() -> bool:
            if self.proc.poll() is not None:
                self.stop()
                pytest.fail(f"the example did not start (exit {self.proc.poll()})")
            try:
                httpx2.get(self.base + "/streams/none", timeout=2)
            except httpx2.TransportError:
                return False
            return True

        wait_until(answers, "the example's start", timeout=60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(20)
        if self.proc.stderr is not None:
            self.proc.stderr.close()


@pytest.fixture
def apps() -> Iterator[list[_App]]:
    started: list[_App] = []
    yield started
    for app in started:
        app.stop()


def test_spec_delivery_4_3_a_killed_mid_response_and_restarted(tmp_path: Path, apps: list[_App]) -> None:
    """[D4.3-a]: kill -9 after 5 events; the restarted app ends the response: closing lines, [DONE], valid, journaled."""
    journal_dir, key_file = tmp_path / "journal", tmp_path / "link.key"
    key_file.write_bytes(os.urandom(32).hex().encode())
    first = _App(journal_dir, pace=0.2, key_file=key_file)  # slow enough that the kill lands mid-response
    apps.append(first)
    started = httpx2.post(first.base + "/chat", params={"prompt": "hi"}, headers=ALICE, timeout=30)
    assert started.status_code == 201, started.text
    run, link = started.json()["run_id"], started.json()["stream"]
    got = b""
    with httpx2.Client(timeout=30) as client, client.stream("GET", first.base + link) as answer:
        assert answer.status_code == 200
        for chunk in answer.iter_bytes():
            got += chunk
            if len(read_events(got)) >= 5:
                os.kill(first.proc.pid, signal.SIGKILL)  # no shutdown, no cleanup
                break
    first.proc.wait(30)
    seen = read_events(got)[:5]
    journaled = (journal_dir / f"{run}.0.log").read_bytes().split(b"\n")[:-1]
    assert journaled[-1] != DONE_LINE, "the run ended before the kill; the test proves nothing"
    assert [e.data.encode() for e in seen] == journaled[:5]  # no line sent that the journal lacks

    second = _App(journal_dir, pace=0.01, key_file=key_file)  # the same key: the link outlives the process
    apps.append(second)
    with httpx2.Client(timeout=30) as client:
        rest = client.get(second.base + link, headers={"Last-Event-ID": seen[-1].id})
        assert rest.status_code == 200, rest.text
        whole = client.get(second.base + link)
    tail = read_events(rest.content)
    lines = [e.data.encode() for e in [*seen, *tail]]
    assert lines[-1] == DONE_LINE
    payloads = [json.loads(line) for line in lines[:-1]]
    assert {p["type"] for p in payloads} >= {"error", "meta_final"}
    assert [e.id for e in [*seen, *tail]] == [f"{run}:0:{n}" for n in range(len(lines))]
    joined = b"".join(f"id: {e.id}\ndata: {e.data}\n\n".encode() for e in [*seen, *tail])
    assert_valid(joined)  # strict: every block closed, [DONE] at the end
    assert data_lines(whole.content) == lines
    assert (journal_dir / f"{run}.0.log").read_bytes().split(b"\n")[:-1] == lines
