"""``Delivery`` finishes what its writer could not, and a failure before the first line is an error (issue 38 case 4).

[D4.1-b] [D4.3-a] [D3.6-a] [D3.6-b]. The journal is a real ``FileJournal`` (written off the
loop); a failing one is that journal with its ``append`` switched to raise as a full disk
does. Every stream is validated strictly.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from envelope import decode
from envelope.delivery import (
    DONE_LINE,
    SERVER_AGENT,
    FileJournal,
    JournalUnavailableError,
    LiveStream,
    MemoryJournal,
    OffLoopJournal,
    off_loop,
)
from envelope.delivery.asgi import Delivery
from server_support import data_lines, read_events, running
from streams import text_response
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence
    from pathlib import Path

    from starlette.requests import Request
    from starlette.responses import Response


class _Disk(FileJournal):
    """A ``FileJournal`` whose disk is full while ``full`` is set (its writes fail as ``ENOSPC`` makes them).

    ``room``: lines written before the disk fills by itself. The disk fills at a count of
    lines written, not at a point of the producer: the producer runs ahead of the journal
    by a batch (spec delivery [D3.6-d]). Every write of ``FileJournal`` goes through
    ``append_upto`` (``append`` too), so that is where the disk is full.
    """

    full = False
    room: int | None = None

    def append_upto(self, run_id: str, response: int, lines: Sequence[bytes]) -> tuple[int, Exception | None]:
        fit = 0 if self.full else len(lines) if self.room is None else min(self.room, len(lines))
        written, error = super().append_upto(run_id, response, lines[:fit]) if fit else (0, None)
        if self.room is not None:
            self.room -= written
        if error is None and written < len(lines):
            self.full = True
            error = JournalUnavailableError("No space left on device", public="the server's storage is unavailable")
        return written, error


class _App:
    """``GET /chat/{run_id}``: the lines of ``text_response()``; before line ``fill_at`` the disk fills (or the producer fails)."""

    def __init__(self, journal: FileJournal, *, fill_at: int | None = None, fail_at: int | None = None) -> None:
        self.journal = journal
        self.fill_at = fill_at
        self.fail_at = fail_at
        self.lines = text_response()
        self.delivery = Delivery(journal, keepalive_seconds=30)
        self.app = Starlette(routes=[Route("/chat/{run_id}", self.chat), self.delivery.route()])

    async def model(self) -> AsyncIterator[bytes]:
        if self.fill_at is not None and isinstance(self.journal, _Disk):
            self.journal.room = self.fill_at
        for n, line in enumerate(self.lines):
            if n == self.fail_at:
                raise RuntimeError("the model broke (not for the client)")
            yield line

    async def chat(self, request: Request) -> Response:
        return self.delivery.stream(request.path_params["run_id"], self.model())


def _types(lines: list[bytes]) -> list[tuple[str, str]]:
    return [(e["agent"], e["type"]) for e in (json.loads(line) for line in lines if line != DONE_LINE)]


def test_spec_delivery_4_3_a_a_killed_apps_response_is_closed_on_resume(tmp_path: Path) -> None:
    """[D4.3-a]: the app died mid-response; the restarted app's resume ends it with closing lines and [DONE], journaled."""
    lines = text_response()
    dead = FileJournal(tmp_path)
    for line in lines[:6]:  # what the killed app had journaled (and sent)
        dead.append("run-1", 0, line)
    dead.close()
    app = _App(FileJournal(tmp_path))
    with running(app.app) as base, httpx2.Client(timeout=30) as client:
        rest = client.get(base + "/streams/run-1", headers={"Last-Event-ID": "run-1:0:5"})
        assert rest.status_code == 200
        again = client.get(base + "/streams/run-1")
    got = data_lines(rest.content)
    assert got[-1] == DONE_LINE
    assert ("agent-1", "error") in _types(got)
    assert b"server_restarted" in b"".join(got)
    assert read_events(rest.content)[0].id == "run-1:0:6"
    journaled = FileJournal(tmp_path).read("run-1", 0)
    assert journaled == [*lines[:6], *got]  # the closing lines are in the journal, once
    assert data_lines(again.content) == journaled
    assert_valid(again.content)


def test_spec_delivery_4_3_a_recover_closes_every_dead_response_at_start(tmp_path: Path) -> None:
    """[D4.3-a]: ``recover()`` closes each unfinished response (not the finished one), and runs by itself first."""
    lines = text_response()
    dead = FileJournal(tmp_path)
    for run, cut in (("run-a", 3), ("run-b", 11), ("run-c", len(lines))):
        for line in lines[:cut]:
            dead.append(run, 0, line)
    dead.close()
    journal = FileJournal(tmp_path)
    delivery = Delivery(journal)
    assert sorted(asyncio.run(delivery.recover())) == [("run-a", 0), ("run-b", 0)]
    for run in ("run-a", "run-b", "run-c"):
        closed = journal.read(run, 0)
        assert closed is not None
        assert closed[-1] == DONE_LINE
        assert_valid(closed)
    assert journal.unfinished() == []
    assert asyncio.run(Delivery(journal).recover()) == []


def test_spec_delivery_4_1_b_a_failure_before_the_first_line_is_an_error(tmp_path: Path) -> None:
    """[D4.1-b]: a producer that fails first, or a journal that refuses the first line, gives an error, not [DONE] alone."""
    broken = _App(FileJournal(tmp_path / "a"), fail_at=0)
    full = _App(_Disk(tmp_path / "b"), fill_at=0)
    for app in (broken, full):
        with running(app.app) as base, httpx2.Client(timeout=30) as client:
            answer = client.get(base + "/chat/run-1")
        assert answer.status_code == 200
        got = data_lines(answer.content)
        assert _types(got) == [(SERVER_AGENT, "meta_init"), (SERVER_AGENT, "error"), (SERVER_AGENT, "meta_final")]
        assert got[-1] == DONE_LINE
        assert b"model broke" not in answer.content
        assert_valid(answer.content)
    assert b"server_unavailable" in full_content(full)
    assert json.loads(decode(data_lines(_once(broken))[1]).delta)["type"] == "internal_error"


def full_content(app: _App) -> bytes:
    with running(app.app) as base, httpx2.Client(timeout=30) as client:
        return client.get(base + "/chat/run-2").content


def _once(app: _App) -> bytes:
    with running(app.app) as base, httpx2.Client(timeout=30) as client:
        return client.get(base + "/chat/run-3").content


def test_spec_delivery_4_3_a_a_full_disk_mid_response_is_closed_once_space_is_back(tmp_path: Path) -> None:
    """[D4.3-a] [D4.2-a]: the disk fills at line 5: the client's stream ends validly; a resume then is 503,
    and once space is back the journal is closed as the client saw it, and a reconnect gets the rest."""
    journal = _Disk(tmp_path)
    app = _App(journal, fill_at=5)
    with running(app.app) as base, httpx2.Client(timeout=30) as client:
        live = client.get(base + "/chat/run-1")
        seen = data_lines(live.content)
        assert seen[:5] == app.lines[:5]
        assert b"server_unavailable" in live.content
        assert seen[-1] == DONE_LINE
        assert_valid(live.content)
        refused = client.get(base + "/streams/run-1", headers={"Last-Event-ID": "run-1:0:4"})
        assert refused.status_code == 503
        assert refused.json()["error"]["message"] == "the server's storage is unavailable"
        journal.full, journal.room = False, None  # space is back
        rest = client.get(base + "/streams/run-1", headers={"Last-Event-ID": "run-1:0:4"})
        assert rest.status_code == 200
        assert data_lines(rest.content) == seen[5:]  # the same closing lines the client saw, now journaled
        whole = client.get(base + "/streams/run-1")
    assert data_lines(whole.content) == seen
    assert_valid(whole.content)
    assert journal.read("run-1", 0) == seen


def test_spec_delivery_3_6_b_lines_are_journaled_before_followers_see_them(tmp_path: Path) -> None:
    """[D3.6-b]: with a journal that does I/O, ``append`` returns at once; a line is sent only once it is journaled."""
    gate = threading.Event()
    entered = threading.Event()

    class _Slow(FileJournal):
        def append(self, run_id: str, response: int, line: bytes) -> None:
            entered.set()
            assert gate.wait(30)
            super().append(run_id, response, line)

    async def scenario() -> tuple[list[int], list[bytes]]:
        journal = _Slow(tmp_path)
        stream = LiveStream("run-1", 0, journal)
        seen_before: list[int] = []
        lines = text_response()
        for line in lines:
            stream.append(line)  # queued: the loop goes on
        while not entered.is_set():
            await asyncio.sleep(0.001)
        seen_before.append(len(stream.events))  # nothing sent while the journal holds the first line
        assert journal.read("run-1", 0) is None
        gate.set()
        await stream.flushed()
        events = [e async for e in stream.follow()]
        return seen_before, [*events, *(journal.read("run-1", 0) or [])]

    before, out = asyncio.run(scenario())
    assert before == [0]
    assert out[len(text_response()) :] == text_response()  # the journal has every line the followers got


def test_spec_delivery_3_6_a_a_stuck_journal_costs_a_bounded_error(tmp_path: Path) -> None:
    """[D3.6-a]: a call past its deadline raises JournalUnavailableError; later calls fail at once until it returns."""
    release = threading.Event()

    class _Stuck(FileJournal):
        call_timeout = 0.2

        def read(self, run_id: str, response: int) -> list[bytes] | None:
            if run_id == "stuck":
                assert release.wait(30)
            return super().read(run_id, response)

    async def scenario() -> list[str]:
        io = off_loop(_Stuck(tmp_path))
        assert isinstance(io, OffLoopJournal)
        assert io is off_loop(io.journal)  # one adapter per journal
        outcomes: list[str] = []
        for run in ("stuck", "other"):
            try:
                await io.read(run, 0)
                outcomes.append("answered")
            except JournalUnavailableError as exc:
                outcomes.append(exc.public)
        release.set()
        while True:  # the stuck call returns; the journal answers again
            try:
                assert await io.read("other", 0) is None
                break
            except JournalUnavailableError:
                await asyncio.sleep(0.01)
        outcomes.append("answered")
        return outcomes

    assert asyncio.run(scenario()) == [
        "the server's storage is not answering",
        "the server's storage is not answering",
        "answered",
    ]
    assert off_loop(MemoryJournal()).inline
    with pytest.raises(ValueError, match="above 0"):
        OffLoopJournal(MemoryJournal(), timeout=0)
