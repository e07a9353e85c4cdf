"""Live responses and their followers, and the closing lines of a response its writer could not end.

``LiveStream`` is one response being written in this process: each line is journaled,
then framed with its event id and handed to every follower, each of which sees every
line once, in order, from wherever it joined (spec delivery §2.2). ``closing_lines``
computes, from what a response holds, the lines that end it validly when its writer
failed or died (spec delivery §4).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Final

from envelope import Emitter, Reconstructor

from ._errors import JournalUnavailableError
from ._ids import DONE_LINE, EventFramer
from ._offloop import off_loop

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from ._journal import Journal

__all__ = ["BATCH", "JOURNAL_LOST", "SERVER_AGENT", "JournalFailedError", "LiveStream", "closing_lines"]


#: The lines ``LiveStream.put`` lets wait for the journal before its producer waits (spec delivery [D3.6-d]).
BATCH: Final = 256


class JournalFailedError(Exception):
    """A line could not be journaled; the live stream was ended for its followers (spec delivery §4.2-a).

    Attributes:
        cause: what the journal raised (``JournalUnavailableError`` when its database is down).
    """

    def __init__(self, message: str, cause: Exception) -> None:
        """Create the error."""
        super().__init__(message)
        self.cause = cause


#: The ``error`` payload of a response ended because the journal could not be written (spec delivery §4.2-a).
JOURNAL_LOST: Final = {
    "type": "server_unavailable",
    "message": "the server lost its database during this response; the run was stopped",
}


class LiveStream:
    """One response being written in this process, read by any number of followers.

    ``append`` journals the line first, then keeps its framed event and wakes the
    followers; ``follow(after)`` yields every event after ``after`` exactly once, then
    waits for more until ``[DONE]``. Lines are never dropped from a live stream, so a
    follower that joins late still gets everything (spec delivery §2.2-a).

    A journal that does I/O (a ``FileJournal``, a ``PostgresJournal``) is written off the
    event loop (spec delivery §3.6-b): ``append`` queues the line and returns, a task of
    the stream journals the queued lines in order, and each becomes visible to the
    followers only once its journal call returned, so the journal still precedes every
    send. ``await write(line)`` is ``append`` then waiting for it to be journaled (what an
    async producer calls, so that a journal failure reaches it at that line); ``await
    put(line)`` waits only once ``batch`` lines wait, so a producer's lines are journaled
    in batches (spec delivery [D3.6-d]). A ``MemoryJournal`` is written inline, as before.

    When the journal fails, the line is not sent; the stream is ended at once with the
    closing lines of spec delivery §4.1, which are sent without being journaled
    (``unjournaled``), and ``append`` (or ``write``) raises ``JournalFailedError``
    (spec delivery §4.2-a), then and on every later call.

    Attributes:
        run_id: the run.
        response: the response's index in the run (0 first, 1 after the first resume...).
        lines: the envelope lines sent so far (unframed), journaled or not.
        events: the same lines framed with their ids.
        done: ``[DONE]`` was sent (to the followers).
        unjournaled: how many lines at the end of ``lines`` the journal does not have.
        failure: the ``JournalFailedError`` that ended the stream, if one did.
    """

    def __init__(
        self,
        run_id: str,
        response: int,
        journal: Journal,
        *,
        max_bytes: int = 2048,
        max_pending: int = 8192,
        batch: int = BATCH,
    ) -> None:
        """See the class docstring.

        Args:
            run_id: the run.
            response: the response's index.
            journal: where each line is written before it is sent.
            max_bytes: bounds the closing lines the stream writes itself.
            max_pending: the most lines waiting for the journal; one more fails the stream
                (the journal is far slower than its producer).
            batch: the lines ``put`` lets wait for the journal before it waits too.
        """
        self.run_id = run_id
        self.response = response
        self.journal = journal
        self.max_bytes = max_bytes
        self.max_pending = max_pending
        self.batch = batch
        self.lines: list[bytes] = []
        self.events: list[bytes] = []
        self.done = False
        self.unjournaled = 0
        self.failure: JournalFailedError | None = None
        self._io = off_loop(journal)
        self._pending: list[bytes] = []  # appended, not journaled yet (journals with I/O only)
        self._closed = False  # [DONE] appended (journaled or not)
        self._writer: asyncio.Task[None] | None = None
        self._frame = EventFramer(run_id, response)
        self._waiters: list[asyncio.Future[None]] = []  # followers waiting for the next line
        self._on_done: list[Callable[[LiveStream], object]] = []

    def add_done_callback(self, callback: Callable[[LiveStream], object]) -> None:
        """Call ``callback(stream)`` once ``[DONE]`` is sent (at once if it was)."""
        if self.done:
            callback(self)
        else:
            self._on_done.append(callback)

    def _add(self, line: bytes) -> None:
        self.events.append(self._frame(len(self.lines), line))
        self.lines.append(line)
        if line == DONE_LINE:
            self.done = True
        if self._waiters:  # a line nobody waits for costs no wake-up (issue 26 §5)
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
        if self.done:
            callbacks, self._on_done = self._on_done, []
            for callback in callbacks:
                callback(self)

    def append(self, line: bytes) -> None:
        """Journal ``line``, frame it, and wake the followers (spec delivery §3.1-a: journal first).

        With a journal that does I/O, the line is queued and journaled by the stream's
        task (spec delivery §3.6-b); call it from a running event loop.

        Raises:
            JournalFailedError: the journal refused this line or an earlier one, or too
                many lines wait for it; the stream is now ended (its closing lines were
                sent, unjournaled).
            RuntimeError: the stream had ended already.
        """
        if self.failure is not None:
            raise self.failure
        if self._closed:
            raise RuntimeError(f"response {self.run_id}:{self.response} already ended with [DONE]")
        if line == DONE_LINE:
            self._closed = True
        if self._io.inline:
            try:
                self.journal.append(self.run_id, self.response, line)
            except Exception as exc:
                raise self._fail(exc) from exc
            self._add(line)
            return
        if len(self._pending) >= self.max_pending:
            slow = JournalUnavailableError(
                f"{len(self._pending)} lines of run {self.run_id} wait for the journal",
                public="the server's storage is too slow",
            )
            raise self._fail(slow)
        self._pending.append(line)
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def write(self, line: bytes) -> None:
        """``append(line)``, then wait until it is journaled and sent.

        Raises:
            JournalFailedError: as ``append``, or when the journal fails on this line.
            RuntimeError: the stream had ended already.
        """
        self.append(line)
        await self.flushed()

    async def put(self, line: bytes) -> None:
        """``append(line)``, waiting for the journal only once ``batch`` lines wait for it (spec delivery [D3.6-d]).

        What a producer that needs no acknowledgement per line calls (``Delivery``): the
        lines it makes while the journal writes a batch are journaled together in the
        next one, and it is held back once ``batch`` of them wait. The journal still
        precedes every send; a journal failure reaches the producer at a later ``put``
        (then every later one), at most ``batch`` lines after the line that failed.

        Raises:
            JournalFailedError: as ``append``, or the journal failed on a line put before.
            RuntimeError: the stream had ended already.
        """
        self.append(line)
        if len(self._pending) >= self.batch:
            await self.flushed()

    async def flushed(self) -> None:
        """Wait until every appended line is journaled and sent (or the stream failed).

        Raises:
            JournalFailedError: the journal failed (the stream is ended).
        """
        while self._writer is not None:
            await asyncio.shield(self._writer)
        if self.failure is not None:
            raise self.failure

    async def _write(self) -> None:
        """Journal the queued lines in order, in batches, then send them (spec delivery §3.6-b)."""
        try:
            while self._pending and self.failure is None:
                batch = list(self._pending)
                try:
                    kept, error = await self._io.append_upto(self.run_id, self.response, batch)
                except Exception as exc:
                    self._fail(exc)
                    return
                if self.failure is not None:  # ended meanwhile: the journaled lines are not sent
                    return
                del self._pending[:kept]
                for line in batch[:kept]:  # a journaled line is sent, also before a failed one
                    self._add(line)
                if error is not None:
                    self._fail(error)
                    return
        finally:
            self._writer = None

    def _fail(self, exc: Exception) -> JournalFailedError:
        """End the stream after a journal failure; the error that ``append`` raises from now on."""
        if self.failure is None:
            self.failure = JournalFailedError(f"cannot journal a line of run {self.run_id}: {exc}", exc)
            self._pending.clear()
            self._closed = True
            self._cut(JOURNAL_LOST)
        return self.failure

    def end(self, error: dict[str, str]) -> None:
        """End a response its run left open (spec delivery §4.1): its closing lines, journaled if the journal can.

        Never raises: if the journal fails on the way, the remaining lines are sent
        unjournaled (``unjournaled`` counts them). Nothing happens if the stream had ended
        (or its ``[DONE]`` is queued).
        """
        if self._closed or self.failure is not None:
            return
        for line in closing_lines([*self.lines, *self._pending], self.run_id, error, max_bytes=self.max_bytes):
            try:
                self.append(line)
            except JournalFailedError:
                return  # _cut ended it

    def _cut(self, error: dict[str, str]) -> None:
        """End the stream for its followers without the journal (spec delivery §4.2-a)."""
        if self.done:
            return
        tail = closing_lines(self.lines, self.run_id, error, max_bytes=self.max_bytes)
        for line in tail:
            self._add(line)
        self.unjournaled = len(tail)

    async def follow(self, after: int = -1) -> AsyncIterator[bytes]:
        """Yield the framed events with ``seq > after`` as they come, up to ``[DONE]``."""
        index = after + 1
        events = self.events
        while True:
            while index < len(events):
                yield events[index]
                index += 1
            if self.done:
                return
            # No await between the length check above and joining the waiters: a line
            # appended after the check wakes this follower.
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if not waiter.done() or waiter.cancelled():
                    with contextlib.suppress(ValueError):  # woken already: not in the list
                        self._waiters.remove(waiter)


#: The agent that reports a failure in a response that has no line yet (spec delivery §4.1-b).
SERVER_AGENT: Final = "server"


def closing_lines(
    lines: Sequence[bytes], run_id: str, error: dict[str, str], *, max_bytes: int = 2048, agent: str = SERVER_AGENT
) -> list[bytes]:
    """The lines that end a response its run could not end (spec delivery §4.1).

    For every agent of the response: close each block left open (the final marker of a
    streamed block, an empty final chunk of a buffered one, as the agent's own abort
    does), then, for each agent without a ``meta_final``: an ``error`` envelope with
    ``error`` as its payload and a ``meta_final`` with ``stop_reason: "error"``. Then
    ``[DONE]``. A response that already ended (``[DONE]``) gets nothing. A response with
    no envelope yet gets one agent, ``agent``, that says so: its ``meta_init``, the
    ``error`` and its ``meta_final`` (spec delivery §4.1-b: a failure before the first
    line is an error, never an empty success).

    Args:
        lines: the response's lines so far.
        run_id: the run, repeated in ``meta_final``.
        error: the ``error`` payload (``{"type", "message"}``).
        max_bytes: the line bound.
        agent: the agent of the error of a response that has no envelope yet.

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
    if not transcript.agents:  # spec delivery §4.1-b: nothing was sent yet; the error needs an agent
        init = {"format": "json", "user_query": "", "agent_uuid": agent, "model": "", "run_id": run_id}
        out += Emitter(agent, max_bytes).buffered("meta_init", json.dumps(init))
        rebuilt = Reconstructor()
        for line in out:
            rebuilt.feed(line)
        transcript = rebuilt.transcript()
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
