"""The server's stream bookkeeping: event ids, the write-through journal, live streams, closing lines.

Owns: what the agent server (``server.py``) needs to make every response resumable
(``spec/server.md`` §2, §3): the SSE event id of each line, a journal that holds every
line of every response *before* it is sent (so a replay after a reconnect or a crash
has everything the client may have seen), the in-process ``LiveStream`` that followers
read as the run writes it, and the lines that close a response a run could not end
itself (a crash, an internal error, a shutdown).
Does not own: HTTP (``server.py``), the agent loop and its store (``agent.py``,
``store.py``), the encoding of envelopes (``envelope``, used through its public API).

Framing happens once, here: ``LiveStream.append`` frames each line as
``id: <run>:<response>:<seq>`` + ``envelope.frame(line)``; the server hands those bytes
to the response unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from envelope import DONE, Emitter, EnvelopeError, Reconstructor, decode, frame

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

__all__ = [
    "DONE_LINE",
    "JOURNAL_LOST",
    "RUN_ID_PATTERN",
    "EventId",
    "FileJournal",
    "Journal",
    "JournalFailedError",
    "LiveStream",
    "MemoryJournal",
    "closing_lines",
    "event_id",
    "parse_event_id",
]

#: The terminator as the agent's sink receives it (``agent_ref.DONE_LINE``).
DONE_LINE: Final = b"[DONE]"

#: What a run id may look like in a URL or a file name (the agent writes UUID4s).
#: spec server §2.1-b: anything else is refused before it reaches the journal.
RUN_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")

EventId = tuple[str, int, int]


def event_id(run_id: str, response: int, seq: int) -> str:
    """The SSE ``id:`` of line ``seq`` of response ``response`` of run ``run_id`` (spec server §2.1-a)."""
    return f"{run_id}:{response}:{seq}"


def parse_event_id(text: str) -> EventId | None:
    """``(run_id, response, seq)`` from an ``id:`` value, or ``None`` when it is not one of ours."""
    parts = text.strip().split(":")
    if len(parts) != 3 or not RUN_ID_PATTERN.fullmatch(parts[0]):
        return None
    run_id, response, seq = parts
    if not (response.isascii() and response.isdigit() and seq.isascii() and seq.isdigit()):
        return None
    if len(response) > 9 or len(seq) > 12:
        return None
    return run_id, int(response), int(seq)


def frame_event(run_id: str, response: int, seq: int, line: bytes) -> bytes:
    """One SSE event: the ``id:`` line, then ``envelope.frame(line)`` (or ``DONE``)."""
    head = f"id: {event_id(run_id, response, seq)}\n".encode()
    return head + (DONE if line == DONE_LINE else frame(line))


class Journal(Protocol):
    """Where every line of every response is written before it is sent (spec server §3.1-a)."""

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """Add ``line`` at the end of response ``response`` of ``run_id``."""
        ...

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """The lines of that response so far, or ``None`` if it was never written."""
        ...

    def responses(self, run_id: str) -> int:
        """How many responses of the run the journal holds (0 for an unknown run)."""
        ...

    def unfinished(self) -> list[tuple[str, int]]:
        """``(run_id, response)`` of every response whose last line is not ``[DONE]``."""
        ...


class MemoryJournal:
    """A ``Journal`` in a dict: for tests and for a server that need not survive a restart.

    Bounded (spec server §3.1-d): a finished response (its ``[DONE]`` appended) is kept
    for ``keep_seconds`` and among the newest ``keep_finished``, then dropped; a replay of
    it then comes from the store's log, which holds every finished response. Responses
    still being written are always kept (there are as many as running runs).

    Args:
        keep_finished: the most finished responses kept.
        keep_seconds: how long a finished response is kept at most.
        clock: the time source (``time.monotonic``; tests pass their own).
    """

    def __init__(
        self,
        *,
        keep_finished: int = 256,
        keep_seconds: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create an empty journal."""
        if keep_finished < 0 or keep_seconds < 0:
            raise ValueError("keep_finished and keep_seconds must not be negative")
        self.keep_finished = keep_finished
        self.keep_seconds = keep_seconds
        self._clock = clock
        self._lines: dict[tuple[str, int], list[bytes]] = {}
        self._runs: dict[str, set[int]] = {}
        self._finished: OrderedDict[tuple[str, int], float] = OrderedDict()  # oldest first

    def __len__(self) -> int:
        """How many responses the journal holds now (finished or not)."""
        return len(self._lines)

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """See ``Journal.append``."""
        key = (run_id, response)
        self._lines.setdefault(key, []).append(line)
        self._runs.setdefault(run_id, set()).add(response)
        if line == DONE_LINE:
            self._finished[key] = self._clock()
        self._prune()

    def _prune(self) -> None:
        """Drop the finished responses past the count or the age bound."""
        oldest_kept = self._clock() - self.keep_seconds
        while self._finished:
            key, finished_at = next(iter(self._finished.items()))
            if len(self._finished) <= self.keep_finished and finished_at > oldest_kept:
                return
            del self._finished[key]
            del self._lines[key]
            held = self._runs[key[0]]
            held.discard(key[1])
            if not held:
                del self._runs[key[0]]

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """See ``Journal.read`` (``None`` for a response dropped already)."""
        self._prune()
        lines = self._lines.get((run_id, response))
        return list(lines) if lines is not None else None

    def responses(self, run_id: str) -> int:
        """See ``Journal.responses``: one more than the newest response held (0 if none is)."""
        self._prune()
        held = self._runs.get(run_id)
        return max(held) + 1 if held else 0

    def unfinished(self) -> list[tuple[str, int]]:
        """See ``Journal.unfinished``."""
        return [key for key, lines in self._lines.items() if not lines or lines[-1] != DONE_LINE]


class FileJournal:
    """A ``Journal`` in a directory: one append-only file per response, one line per envelope.

    Each ``append`` is one unbuffered ``os.write`` of ``line + b"\\n"`` (envelope lines
    hold no LF, spec §2.1-b), so what was written survives the *process* being killed
    (the kernel has it); it does not ``fsync``, so it does not survive the machine
    losing power (spec server §3.1-b says so). File names are ``<run>.<response>.log``;
    run ids are checked against ``RUN_ID_PATTERN`` first.

    Args:
        directory: created if missing.
    """

    def __init__(self, directory: str | Path) -> None:
        """See the class docstring."""
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fds: dict[tuple[str, int], int] = {}

    def _path(self, run_id: str, response: int) -> Path:
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        return self.directory / f"{run_id}.{response}.log"

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """See ``Journal.append``; the file is closed after ``[DONE]``."""
        key = (run_id, response)
        fd = self._fds.get(key)
        if fd is None:
            path = self._path(run_id, response)
            self._drop_cut_tail(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._fds[key] = fd
        os.write(fd, line + b"\n")
        if line == DONE_LINE:
            os.close(self._fds.pop(key))

    @staticmethod
    def _drop_cut_tail(path: Path) -> None:
        """Before appending to a file a killed process wrote: cut a last line it left without its LF."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        if data and not data.endswith(b"\n"):
            with path.open("r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """See ``Journal.read``. A last line cut by a crash (no LF) is left out."""
        try:
            data = self._path(run_id, response).read_bytes()
        except FileNotFoundError:
            return None
        lines = data.split(b"\n")
        return lines[:-1]  # the part after the last LF is empty, or a line cut mid-write

    def responses(self, run_id: str) -> int:
        """See ``Journal.responses``."""
        count = 0
        while self._path(run_id, count).exists():
            count += 1
        return count

    def unfinished(self) -> list[tuple[str, int]]:
        """See ``Journal.unfinished``."""
        out: list[tuple[str, int]] = []
        for path in sorted(self.directory.glob("*.log")):
            run_id, _, response = path.name[: -len(".log")].rpartition(".")
            if not RUN_ID_PATTERN.fullmatch(run_id) or not response.isdigit():
                continue
            lines = self.read(run_id, int(response)) or []
            if not lines or lines[-1] != DONE_LINE:
                out.append((run_id, int(response)))
        return out

    def close(self) -> None:
        """Close the files of responses still being written (their runs were ended elsewhere)."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class JournalFailedError(Exception):
    """A line could not be journaled; the live stream was ended for its followers (spec server §3.3-d).

    Attributes:
        cause: what the journal raised (``UnavailableError`` when its database is down).
    """

    def __init__(self, message: str, cause: Exception) -> None:
        """Create the error."""
        super().__init__(message)
        self.cause = cause


#: The ``error`` payload of a response ended because the journal could not be written (spec server §3.3-d).
JOURNAL_LOST: Final = {
    "type": "server_unavailable",
    "message": "the server lost its database during this response; the run was stopped",
}


class LiveStream:
    """One response being written by a run in this process, read by any number of followers.

    ``append`` journals the line first, then keeps its framed event and wakes the
    followers; ``follow(after)`` yields every event after ``after`` exactly once, then
    waits for more until ``[DONE]``. Lines are never dropped from a live stream, so a
    follower that joins late still gets everything (spec server §3.2-a).

    When the journal fails, the line is not sent; the stream is ended at once with the
    closing lines of spec server §3.3-a, which are sent without being journaled
    (``unjournaled``), and ``append`` raises ``JournalFailedError`` (spec server §3.3-d).

    Attributes:
        run_id: the run.
        response: the response's index in the run (0 first, 1 after the first resume...).
        agent_uuid: the agent that runs it.
        lines: the envelope lines so far (unframed), journaled or not.
        events: the same lines framed with their ids.
        done: ``[DONE]`` was appended.
        unjournaled: how many lines at the end of ``lines`` the journal does not have.
    """

    def __init__(self, run_id: str, response: int, agent_uuid: str, journal: Journal, *, max_bytes: int = 2048) -> None:
        """See the class docstring; ``max_bytes`` bounds the closing lines the stream writes itself."""
        self.run_id = run_id
        self.response = response
        self.agent_uuid = agent_uuid
        self.journal = journal
        self.max_bytes = max_bytes
        self.lines: list[bytes] = []
        self.events: list[bytes] = []
        self.done = False
        self.unjournaled = 0
        self._changed = asyncio.Event()

    def _add(self, line: bytes) -> None:
        self.events.append(frame_event(self.run_id, self.response, len(self.lines), line))
        self.lines.append(line)
        if line == DONE_LINE:
            self.done = True
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def append(self, line: bytes) -> None:
        """Journal ``line``, frame it, and wake the followers (spec server §3.1-a: journal first).

        Raises:
            JournalFailedError: the journal refused the line; the stream is now ended
                (its closing lines were sent, unjournaled).
            RuntimeError: the stream had ended already.
        """
        if self.done:
            raise RuntimeError(f"response {self.run_id}:{self.response} already ended with [DONE]")
        try:
            self.journal.append(self.run_id, self.response, line)
        except Exception as exc:
            self._cut(JOURNAL_LOST)
            raise JournalFailedError(f"cannot journal a line of run {self.run_id}: {exc}", exc) from exc
        self._add(line)

    def end(self, error: dict[str, str]) -> None:
        """End a response its run left open (spec server §3.3-a): its closing lines, journaled if the journal can.

        Never raises: if the journal fails on the way, the remaining lines are sent
        unjournaled (``unjournaled`` counts them). Nothing happens if the stream had ended.
        """
        if self.done:
            return
        for line in closing_lines(self.lines, self.run_id, error, max_bytes=self.max_bytes):
            try:
                self.append(line)
            except JournalFailedError:
                return  # _cut ended it

    def _cut(self, error: dict[str, str]) -> None:
        """End the stream for its followers without the journal (spec server §3.3-d)."""
        tail = closing_lines(self.lines, self.run_id, error, max_bytes=self.max_bytes)
        for line in tail:
            self._add(line)
        self.unjournaled = len(tail)

    async def follow(self, after: int = -1) -> AsyncIterator[bytes]:
        """Yield the framed events with ``seq > after`` as they come, up to ``[DONE]``."""
        index = after + 1
        while True:
            changed = self._changed
            while index < len(self.events):
                yield self.events[index]
                index += 1
            if self.done:
                return
            await changed.wait()


def stream_agent(lines: Sequence[bytes]) -> str | None:
    """The agent of the response: the ``agent`` of its first envelope line."""
    for line in lines:
        if line != DONE_LINE:
            try:
                return decode(line).agent
            except EnvelopeError:
                return None
    return None


def closing_lines(lines: Sequence[bytes], run_id: str, error: dict[str, str], *, max_bytes: int = 2048) -> list[bytes]:
    """The lines that end a response its run could not end (spec server §3.3).

    For every agent of the response: close each block left open (the final marker of a
    streamed block, an empty final chunk of a buffered one, as the agent's own abort
    does), then, for each agent without a ``meta_final``: an ``error`` envelope with
    ``error`` as its payload and a ``meta_final`` with ``stop_reason: "error"``. Then
    ``[DONE]``. A response that already ended (``[DONE]``) gets nothing.

    Args:
        lines: the response's lines so far.
        run_id: the run, repeated in ``meta_final``.
        error: the ``error`` payload (``{"type", "message"}``).
        max_bytes: the line bound.

    Returns:
        The lines to append, ``[DONE]`` last; empty if the response had ended.
    """
    rebuilt = Reconstructor()
    for line in lines:
        rebuilt.feed(line)
    if rebuilt.done:
        return []
    transcript = rebuilt.transcript()
    out: list[bytes] = []
    for agent, blocks in transcript.agents.items():
        emitter = Emitter(agent, max_bytes)
        for block in blocks:
            if block.complete:
                continue
            if block.type in ("text", "thinking"):
                out.append(emitter.end(block.type))  # type: ignore[arg-type]  # narrowed just above
            elif block.type in ("tool_call", "server_tool_call", "tool_result", "server_tool_result"):
                out += emitter.buffered(block.type, "", id=block.id or "", name=block.name or "")  # type: ignore[arg-type]  # narrowed just above
            else:
                out += emitter.buffered(block.type, "")  # type: ignore[arg-type]  # the JSON-payload types
        if any(b.type == "meta_final" for b in blocks):  # the agent was ending: its own meta_final stands
            continue
        out += emitter.buffered("error", json.dumps(error, ensure_ascii=False))
        meta = {"stop_reason": "error", "total_steps": 0, "cumulative_usage": {}, "run_id": run_id}
        out += emitter.buffered("meta_final", json.dumps(meta))
    out.append(DONE_LINE)
    return out
