"""Many followers of one response, one reader: ``SharedFollows`` (spec delivery [D3.4-e]).

Owns: sharing one underlying follow of a response (an async iterator of ``(seq, line)``,
such as the database reads of ``PostgresJournal``) among every follower of that response
in one event loop, so that a thousand browsers watching one run cost one reader (one
database connection, one read per wake-up) and not a thousand.
Does not own: where the lines come from (the ``source`` callable), or what ends a
response (the source ends, after ``[DONE]`` or when its writer is gone).

A feed starts with a response's first follower and reads it from its first line; each
follower takes the lines after its own ``after`` from what the feed has read, then waits
for more. The feed keeps the response's lines while anyone follows it (the response's own
size, once per process, as a live response in memory does) and stops when its last
follower leaves or its source ends; a follower that comes after that starts a new one.
A source's failure reaches every follower of the feed as an exception of the same type.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from ._ids import DONE_LINE

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable

__all__ = ["SharedFollows"]

_Key = tuple[asyncio.AbstractEventLoop, str, int]


class _Feed:
    """One reader of one response and the lines it has read so far (index = ``seq``)."""

    def __init__(self, source: AsyncGenerator[tuple[int, bytes], None]) -> None:
        self.lines: list[bytes] = []
        self.ended = False
        self.error: BaseException | None = None
        self.followers = 0
        self.changed = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._read(source))

    def _wake(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()

    async def _read(self, source: AsyncGenerator[tuple[int, bytes], None]) -> None:
        try:
            async for _seq, line in source:
                self.lines.append(line)
                self._wake()
        except Exception as exc:  # handed to every follower, as their own
            self.error = exc
        finally:
            with contextlib.suppress(Exception):
                await source.aclose()
            self.ended = True
            self._wake()


def _again(error: BaseException) -> BaseException:
    """A new exception like ``error``, for one follower (one object raised in many tasks would share its traceback)."""
    try:
        return type(error)(*error.args)
    except Exception:  # an exception type that cannot be built again from its args
        return error


class SharedFollows:
    """Followers of a response share one reader of it per event loop (spec delivery [D3.4-e]).

    Args:
        source: ``source(run_id, response)``, the underlying follow of a whole response
            from its first line (``after=-1``): an async iterator of ``(seq, line)`` in
            order, ending after ``[DONE]`` or when the response will get no more lines.
    """

    def __init__(self, source: Callable[[str, int], AsyncGenerator[tuple[int, bytes], None]]) -> None:
        """See the class docstring."""
        self._source = source
        self._feeds: dict[_Key, _Feed] = {}

    def feeds(self) -> int:
        """How many responses are being read now (for tests and measurements)."""
        return len(self._feeds)

    async def follow(self, run_id: str, response: int, after: int = -1) -> AsyncIterator[tuple[int, bytes]]:
        """Yield ``(seq, line)`` of a response for ``seq > after``, as the shared reader reads them.

        Raises:
            Exception: what the source raised, as an exception of the same type and text.
        """
        key = (asyncio.get_running_loop(), run_id, response)
        feed = self._feeds.get(key)
        if feed is None or feed.ended:
            feed = self._feeds[key] = _Feed(self._source(run_id, response))
        feed.followers += 1
        try:
            seq = after + 1
            while True:
                changed = feed.changed
                while seq < len(feed.lines):
                    line = feed.lines[seq]
                    yield seq, line
                    if line == DONE_LINE:
                        return
                    seq += 1
                if feed.ended:
                    if feed.error is not None:
                        raise _again(feed.error)
                    return
                await changed.wait()
        finally:
            feed.followers -= 1
            if feed.followers == 0:
                if self._feeds.get(key) is feed:
                    del self._feeds[key]
                if not feed.ended:
                    feed.task.cancel()
