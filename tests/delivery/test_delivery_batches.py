"""A producer that needs no acknowledgement per line journals in batches (spec delivery [D3.6-d]).

The journals here are real ``FileJournal``s under the test's directory; where one must
stop, it waits on a ``threading.Event`` the test sets, so what the tests see is decided
by order (what has been called when), never by the machine's speed.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
from typing import TYPE_CHECKING

import pytest

from envelope.delivery import FileJournal, JournalFailedError, JournalUnavailableError, LiveStream
from envelope.delivery._offloop import OffLoopJournal
from streams import text_response
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def _data(events: Sequence[bytes]) -> list[bytes]:
    """The envelope lines of framed SSE events (their ``data:`` field)."""
    out = []
    for event in events:
        for field in event.split(b"\n"):
            if field.startswith(b"data: "):
                out.append(field[len(b"data: ") :])
    return out


async def _wait_for(event: threading.Event) -> None:
    """Let the loop run until the journal's thread set ``event`` (bounded: a hang fails, not blocks)."""
    for _ in range(30_000):
        if event.is_set():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the journal was never called")


class _Gated(FileJournal):
    """A ``FileJournal`` that records each batch it is handed and holds the first until ``gate`` is set."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.batches: list[int] = []
        self.entered = threading.Event()
        self.gate = threading.Event()

    def append_upto(self, run_id: str, response: int, lines: Sequence[bytes]) -> tuple[int, Exception | None]:
        self.batches.append(len(lines))
        self.entered.set()
        assert self.gate.wait(30)
        return super().append_upto(run_id, response, lines)


def test_spec_delivery_3_6_d_put_waits_only_once_a_batch_waits(tmp_path: Path) -> None:
    """[D3.6-d]: ``put`` returns at once until ``batch`` lines wait; nothing is sent before it is journaled."""
    lines = text_response(words=600)

    async def scenario() -> tuple[int, int, list[bytes], _Gated]:
        journal = _Gated(tmp_path)
        stream = LiveStream("run-1", 0, journal, batch=256)
        done = 0

        async def produce() -> None:
            nonlocal done
            for line in lines:
                await stream.put(line)
                done += 1

        producer = asyncio.ensure_future(produce())
        await _wait_for(journal.entered)
        held, sent_while_held = done, len(stream.events)
        journal.gate.set()
        await producer
        await stream.flushed()
        return held, sent_while_held, [e async for e in stream.follow()], journal

    held, sent_while_held, events, journal = asyncio.run(scenario())
    assert held == 255  # the 256th put waits for the journal; the 255 before it did not
    assert sent_while_held == 0  # the journal holds the first batch: nothing is sent
    assert journal.batches[0] == 256
    assert sum(journal.batches) == len(lines)
    assert len(journal.batches) <= len(lines) // 256 + 2  # batches, not a call per line
    assert _data(events) == lines
    assert journal.read("run-1", 0) == lines
    assert_valid(_data(events))


class _Fills(FileJournal):
    """A ``FileJournal`` whose disk fills after ``room`` lines: the batch that crosses it writes a prefix."""

    def __init__(self, root: Path, room: int) -> None:
        super().__init__(root)
        self.room = room

    def append_upto(self, run_id: str, response: int, lines: Sequence[bytes]) -> tuple[int, Exception | None]:
        fit = min(self.room, len(lines))
        written, error = super().append_upto(run_id, response, lines[:fit]) if fit else (0, None)
        self.room -= written
        if error is None and written < len(lines):
            error = JournalUnavailableError("No space left on device", public="the server's storage is unavailable")
        return written, error


def test_spec_delivery_3_6_d_a_batch_failing_part_way_sends_its_journaled_prefix(tmp_path: Path) -> None:
    """[D3.6-d]: the lines of a batch journaled before the failure are sent, then the closing lines; ``put`` raises."""
    lines = text_response(words=400)

    async def scenario() -> tuple[list[bytes], int, FileJournal]:
        journal = _Fills(tmp_path, room=300)
        stream = LiveStream("run-1", 0, journal, batch=256)
        accepted = 0

        async def produce() -> None:
            nonlocal accepted
            for line in lines:
                await stream.put(line)
                accepted += 1
            await stream.flushed()

        with pytest.raises(JournalFailedError, match="No space left on device"):
            await produce()
        return [e async for e in stream.follow()], accepted, journal

    events, accepted, journal = asyncio.run(scenario())
    sent = _data(events)
    assert sent[:300] == lines[:300]  # the journaled prefix of the batch that failed, in order
    assert b"server_unavailable" in b"".join(sent[300:])  # then the closing lines (JOURNAL_LOST), not the refused lines
    assert journal.read("run-1", 0) == lines[:300]  # what was sent was journaled first (the closing lines aside)
    assert 300 <= accepted <= 300 + 256  # the failure reached the producer within a batch of the line that failed
    assert_valid(sent)


def test_spec_delivery_3_6_d_file_journal_counts_the_whole_lines_a_short_write_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[D3.6-d]: ``FileJournal.append_upto`` is one write; when the disk fills within it, the whole lines written count."""
    lines = text_response(words=20)
    journal = FileJournal(tmp_path)
    assert journal.append_upto("run-1", 0, lines[:2]) == (2, None)
    real_write = os.write
    cut = len(b"\n".join(lines[2:7])) + 1 + 5  # five whole lines and five bytes of the sixth

    def filling(fd: int, data: bytes | memoryview) -> int:
        nonlocal cut
        if cut <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n: int = real_write(fd, bytes(data[:cut]))
        cut -= n
        return n

    monkeypatch.setattr(os, "write", filling)
    written, error = journal.append_upto("run-1", 0, lines[2:])
    monkeypatch.undo()
    assert written == 5
    assert isinstance(error, JournalUnavailableError)
    assert journal.read("run-1", 0) == lines[:7]  # the cut sixth line is not read back
    assert journal.append_upto("run-1", 0, lines[7:]) == (len(lines) - 7, None)  # space is back: the cut tail goes
    assert journal.read("run-1", 0) == lines


class _Counted(FileJournal):
    """A subclass that changes ``append`` only: every line must still pass through it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.seen: list[bytes] = []

    def append(self, run_id: str, response: int, line: bytes) -> None:
        self.seen.append(line)
        super().append(run_id, response, line)


def test_spec_delivery_3_6_d_a_subclass_overriding_append_sees_every_line(tmp_path: Path) -> None:
    """[D3.6-d]: an ``append_upto`` inherited from below an overridden ``append`` is not used."""
    lines = text_response(words=300)

    async def scenario() -> list[bytes]:
        journal = _Counted(tmp_path)
        stream = LiveStream("run-1", 0, journal)
        for line in lines:
            await stream.put(line)
        await stream.flushed()
        assert journal.read("run-1", 0) == lines
        return journal.seen

    assert asyncio.run(scenario()) == lines


class _Together(FileJournal):
    """A journal with ``append_together`` that refuses one line of one run; its first ``read`` holds the worker."""

    def __init__(self, root: Path, refuse: tuple[str, bytes]) -> None:
        super().__init__(root)
        self.refuse = refuse
        self.calls: list[int] = []
        self.entered = threading.Event()
        self.gate = threading.Event()

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        self.entered.set()
        assert self.gate.wait(30)
        return super().read(run_id, response)

    def append_together(self, lines: Sequence[tuple[str, int, bytes]]) -> list[Exception | None]:
        self.calls.append(len(lines))
        out: list[Exception | None] = []
        failed: set[tuple[str, int]] = (
            set()
        )  # as the protocol says: a response's lines after its failed one are not tried
        for run_id, response, line in lines:
            if (run_id, line) == self.refuse or (run_id, response) in failed:
                failed.add((run_id, response))
                out.append(JournalUnavailableError("refused"))
                continue
            super().append(run_id, response, line)
            out.append(None)
        return out


def test_spec_delivery_3_6_d_append_upto_beside_other_responses_keeps_its_own_prefix(tmp_path: Path) -> None:
    """[D3.6-d] with [D3.4-f]: batches of two responses queued together are one ``append_together``; each gets its own count."""
    a, b = text_response(words=5), text_response(words=6)
    journal = _Together(tmp_path, refuse=("run-a", a[3]))

    async def scenario() -> list[tuple[int, Exception | None]]:
        io = OffLoopJournal(journal)
        holding = asyncio.ensure_future(io.call(journal.read, "run-0", 0))
        await _wait_for(journal.entered)
        first = asyncio.ensure_future(io.append_upto("run-a", 0, a))
        second = asyncio.ensure_future(io.append_upto("run-b", 0, b))
        await asyncio.sleep(0)  # both queued behind the held call
        journal.gate.set()
        await holding
        return [await first, await second]

    (kept_a, error_a), (kept_b, error_b) = asyncio.run(scenario())
    assert journal.calls == [len(a) + len(b)]  # one call for both batches
    assert kept_a == 3
    assert isinstance(error_a, JournalUnavailableError)
    assert (kept_b, error_b) == (len(b), None)
    assert journal.read("run-a", 0) == a[:3]
    assert journal.read("run-b", 0) == b
