"""Keep-alive comments during silences only: ``with_keepalives`` (spec delivery §6.1-c).

Owns: interleaving ``: keep-alive`` comments with a stream's events, one after each
``seconds`` of silence, none while events flow. Does not own: the events themselves
(``LiveStream.follow``, replay), nor the HTTP response that carries them (``asgi.py``,
the reference server).

Why not sse-starlette's ``ping``: it sends a comment every ``ping`` seconds whatever
flows, so a stream writing a line every 0.1 s still carried a comment every period
(issue 37); a comment is only for a connection that would otherwise look idle.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

__all__ = ["KEEPALIVE", "NO_PING", "with_keepalives"]

#: The comment sent after a silence (readers skip comments, spec §E2.1; WHATWG SSE "interpreting an event stream").
KEEPALIVE: Final = b": keep-alive\n\n"

#: An sse-starlette ``ping`` period that never fires (``0`` busy-loops in some 3.x releases).
NO_PING: Final = 2**31


async def with_keepalives(
    events: AsyncIterator[bytes],
    seconds: float,
    *,
    timer: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> AsyncIterator[bytes]:
    """``events``, with ``KEEPALIVE`` after every ``seconds`` without one (spec delivery §6.1-c).

    The silence is measured from the last thing sent (an event or a comment): the timer
    starts anew after each, so a stream whose events come more often than ``seconds``
    carries no comment at all. The next event is awaited in a task of its own, never
    cancelled by the timer, so no event is lost or reordered.

    Args:
        events: the stream's framed events.
        seconds: the silence before a comment.
        timer: ``await timer(seconds)`` ends when that silence has passed (``asyncio.sleep``;
            tests pass one they control).
    """
    pending: asyncio.Task[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(_next(events))
            silence = asyncio.ensure_future(timer(seconds))
            try:
                await asyncio.wait((pending, silence), return_when=asyncio.FIRST_COMPLETED)
            finally:
                silence.cancel()
            if pending.done():
                done, pending = pending, None
                try:
                    event = done.result()
                except StopAsyncIteration:
                    return
                yield event
            else:
                yield KEEPALIVE
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration, Exception):
                await pending
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()


async def _next(events: AsyncIterator[bytes]) -> bytes:
    return await anext(events)
