"""Keep-alive comments during silences only: ``with_keepalives`` (spec delivery §6.1-c).

Owns: interleaving ``: keep-alive`` comments with a stream's events, one after each
``seconds`` of silence, none while events flow. Does not own: the events themselves
(``LiveStream.follow``, replay), nor the HTTP response that carries them (``asgi.py``,
the reference server).

Why not sse-starlette's ``ping``: it sends a comment every ``ping`` seconds whatever
flows, so a stream writing a line every 0.1 s still carried a comment every period
(issue 37); a comment is only for a connection that would otherwise look idle.

Why one reading task and a small buffer (spec delivery [D6.1-d]): waiting for "the next
event or the end of the silence" without losing the event means the event is awaited
somewhere the timer cannot cancel. A task, a timer and a wait for every event cost five
times what sending the line does; one task for the whole stream, reading up to
``AHEAD`` events ahead, costs a task switch per ``AHEAD`` events while lines flow, and a
timer only when the buffer is empty.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

__all__ = ["AHEAD", "KEEPALIVE", "NO_PING", "with_keepalives"]

#: The comment sent after a silence (readers skip comments, spec §E2.1; WHATWG SSE "interpreting an event stream").
KEEPALIVE: Final = b": keep-alive\n\n"

#: An sse-starlette ``ping`` period that never fires (``0`` busy-loops in some 3.x releases).
NO_PING: Final = 2**31

#: The most events read ahead of the client (spec delivery [D6.1-d]).
AHEAD: Final = 64


async def with_keepalives(
    events: AsyncIterator[bytes],
    seconds: float,
    *,
    timer: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> AsyncIterator[bytes]:
    """``events``, with ``KEEPALIVE`` after every ``seconds`` without one (spec delivery §6.1-c).

    The silence is measured from the last thing sent (an event or a comment): the timer
    starts anew at each wait, so a stream whose events come more often than ``seconds``
    carries no comment at all. The events are read by one task of their own, at most
    ``AHEAD`` ahead of what was sent, never cancelled by the timer, so no event is lost or
    reordered; what ``events`` raises is raised here, in its place.

    Args:
        events: the stream's framed events.
        seconds: the silence before a comment.
        timer: ``await timer(seconds)`` ends when that silence has passed (``asyncio.sleep``;
            tests pass one they control).
    """
    feed = _Feed(events)
    buffer = feed.buffer
    try:
        while True:
            if buffer:  # the path of every event while lines flow: no await, no timer
                yield buffer.popleft()
                if feed.room is not None:
                    feed.make_room()
                continue
            if feed.end is None and not await feed.arrival(seconds, timer):
                yield KEEPALIVE
                continue
            if buffer:
                continue
            if isinstance(feed.end, StopAsyncIteration):
                return
            else:
                raise feed.end  # type: ignore[misc]  # not None: the loop above waited for it
    finally:
        await feed.close()
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()


class _Feed:
    """The events read ahead by one task: ``buffer``, then ``end`` (what ended them)."""

    def __init__(self, events: AsyncIterator[bytes]) -> None:
        self.buffer: collections.deque[bytes] = collections.deque()
        self.end: BaseException | None = None  # StopAsyncIteration: the events ended
        self._arrived: asyncio.Future[bool] | None = None  # the sender waits for an event
        self.room: asyncio.Future[None] | None = None  # the reader waits for room
        self._reader = asyncio.ensure_future(self._read(events))

    async def _read(self, events: AsyncIterator[bytes]) -> None:
        buffer = self.buffer
        try:
            async for event in events:
                buffer.append(event)
                if self._arrived is not None:
                    self._wake(True)
                if len(buffer) >= AHEAD:
                    self.room = asyncio.get_running_loop().create_future()
                    await self.room
            self.end = StopAsyncIteration()
        except BaseException as exc:  # handed to the sender, raised where the event would be
            self.end = exc
            if not isinstance(exc, Exception):
                raise
        finally:
            self._wake(True)

    def _wake(self, arrived: bool) -> None:
        waiter, self._arrived = self._arrived, None
        if waiter is not None and not waiter.done():
            waiter.set_result(arrived)

    def _expire(self, waiter: asyncio.Future[bool]) -> None:
        """This wait's silence ran out (a late timer of an earlier wait wakes nothing)."""
        if self._arrived is waiter:
            self._wake(False)

    def make_room(self) -> None:
        """An event was taken: the reader, waiting for room, goes on."""
        room, self.room = self.room, None
        if room is not None and not room.done():
            room.set_result(None)

    async def arrival(self, seconds: float, timer: Callable[[float], Awaitable[object]]) -> bool:
        """Wait for an event or the end (``True``), or for ``seconds`` of silence (``False``)."""
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[bool] = loop.create_future()
        self._arrived = waiter
        if timer is asyncio.sleep:  # no task: a timer handle of the loop
            handle = loop.call_later(seconds, self._expire, waiter)
            try:
                return await waiter
            finally:
                handle.cancel()
        silence = asyncio.ensure_future(timer(seconds))
        silence.add_done_callback(lambda _: self._expire(waiter))
        try:
            return await waiter
        finally:
            silence.cancel()

    async def close(self) -> None:
        """Stop the reader (an event it read and nobody sent is the client's to resume from)."""
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
