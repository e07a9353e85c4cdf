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
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from envelope import DONE, Emitter, EnvelopeError, Reconstructor, decode, frame

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

__all__ = [
    "DONE_LINE",
    "RUN_ID_PATTERN",
    "EventId",
    "FileJournal",
    "Journal",
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
    """A ``Journal`` in a dict: for tests and for a server that need not survive a restart."""

    def __init__(self) -> None:
        """Create an empty journal."""
        self._lines: dict[tuple[str, int], list[bytes]] = {}

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """See ``Journal.append``."""
        self._lines.setdefault((run_id, response), []).append(line)

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """See ``Journal.read``."""
        lines = self._lines.get((run_id, response))
        return list(lines) if lines is not None else None

    def responses(self, run_id: str) -> int:
        """See ``Journal.responses``."""
        count = 0
        while (run_id, count) in self._lines:
            count += 1
        return count

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


class LiveStream:
    """One response being written by a run in this process, read by any number of followers.

    ``append`` journals the line first, then keeps its framed event and wakes the
    followers; ``follow(after)`` yields every event after ``after`` exactly once, then
    waits for more until ``[DONE]``. Lines are never dropped from a live stream, so a
    follower that joins late still gets everything (spec server §3.2-a).

    Attributes:
        run_id: the run.
        response: the response's index in the run (0 first, 1 after the first resume...).
        agent_uuid: the agent that runs it.
        lines: the envelope lines so far (unframed).
        events: the same lines framed with their ids.
        done: ``[DONE]`` was appended.
    """

    def __init__(self, run_id: str, response: int, agent_uuid: str, journal: Journal) -> None:
        """See the class docstring."""
        self.run_id = run_id
        self.response = response
        self.agent_uuid = agent_uuid
        self.journal = journal
        self.lines: list[bytes] = []
        self.events: list[bytes] = []
        self.done = False
        self._changed = asyncio.Event()

    def append(self, line: bytes) -> None:
        """Journal ``line``, frame it, and wake the followers (spec server §3.1-a: journal first)."""
        if self.done:
            raise RuntimeError(f"response {self.run_id}:{self.response} already ended with [DONE]")
        self.journal.append(self.run_id, self.response, line)
        self.events.append(frame_event(self.run_id, self.response, len(self.lines), line))
        self.lines.append(line)
        if line == DONE_LINE:
            self.done = True
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

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
