"""Stage plumbing: one streamed response (``_Response``) and a subagent's part of one (``_NestedResponse``).

Owns: checking (a ``Reconstructor``), logging and sending each line, staging the closing
lines until the state is saved (spec ``spec/agent-ref.md`` §4.4), and what a failing sink
means (``_ClientGone``, §5.5-c). Does not own: which lines are sent (the stages).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final

from envelope import Reconstructor

if TYPE_CHECKING:
    from envelope import Profile

from ..store.core import LogBatch

log = logging.getLogger("agent_ref")

#: What the sink receives last in every response: the SSE terminator's data (spec §7.1).
DONE_LINE: Final = b"[DONE]"

#: Receives each encoded envelope line (unframed JSON), then ``b"[DONE]"``. May be async.
Sink = Callable[[bytes], Awaitable[None] | None]


class _ClientGone(Exception):
    """The sink raised: the client is gone. The run is closed in the store, then ``error`` re-raised."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class _NothingSent(_ClientGone):
    """The sink refused to keep a response's first line: nobody saw anything of it (spec agent-ref [R5.5-e]).

    Raised only for a response marked ``refusable`` (a user's run or resume that can be
    taken back): the loop ends without closing the run, and the agent puts the state it
    had before the claim back in the store, then re-raises ``error``.
    """


def _nowhere(line: bytes) -> None:
    """The sink of a response nobody reads (``abandon`` without a sink, a recovery)."""


class _Response:
    """One streamed response: checks, logs, and sends lines; stages the closing ones."""

    def __init__(
        self, sink: Sink, agent: str, run_id: str, index: int, max_bytes: int, profile: Profile = "default"
    ) -> None:
        self._setup(sink, agent, run_id, index, max_bytes, profile)

    def _setup(
        self, sink: Sink, agent: str, run_id: str, index: int, max_bytes: int, profile: Profile = "default"
    ) -> None:
        self.nested = False
        self.sink = sink
        self.max_bytes = max_bytes
        #: The producer's profile (envelope-v1 §10): the bound rule its lines keep.
        self.profile: Profile = profile
        self.agent = agent
        self.run_id = run_id
        self.index = index
        self.checker = Reconstructor()
        self.lines: list[bytes] = []
        self.staged: list[bytes] = []
        #: The client is gone: lines are still checked and logged, no longer sent (spec §5.5-c).
        self.gone = False
        #: Lines the sink took; while 0, a sink failure is a refusal of the whole response.
        self.delivered = 0
        #: A first line the sink refuses is ``_NothingSent``: the caller takes the response back ([R5.5-e]).
        self.refusable = False

    async def _deliver(self, line: bytes) -> None:
        if self.gone:
            return
        try:
            result = self.sink(line)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            self.gone = True
            # [R5.5-e]: a sink that refused to keep the first line takes the response back; a
            # reader that went away (a closed pipe, a dropped connection) is §5.5-c, kept as ever
            if self.delivered == 0 and self.refusable and not isinstance(exc, ConnectionError):
                raise _NothingSent(exc) from exc
            raise _ClientGone(exc) from exc
        self.delivered += 1

    async def send(self, lines: Sequence[bytes]) -> None:
        for line in lines:
            self.checker.feed(line)
            self.lines.append(line)
            await self._deliver(line)

    async def send_one(self, line: bytes) -> None:
        """``send`` for one line: the sink of a nested (subagent) response."""
        await self.send([line])

    def stage(self, lines: Sequence[bytes]) -> None:
        for line in lines:
            self.checker.feed(line)
            self.lines.append(line)
            self.staged.append(line)

    async def flush(self) -> None:
        staged, self.staged = self.staged, []
        for line in staged:
            try:
                await self._deliver(line)
            except _ClientGone as exc:
                raise exc.error from None  # already stored: only the caller needs to know

    def batch(self) -> LogBatch:
        return LogBatch(run_id=self.run_id, response=self.index, start=0, lines=list(self.lines))

    def block_count(self) -> int:
        return len(self.checker.transcript().agents.get(self.agent, ()))


class _NestedResponse(_Response):
    """A subagent's part of its parent's response (spec §13.3): its lines go to the parent's ``send``.

    It is not a response of its own (no ``[DONE]``), so it does not pass through
    ``_Response.__init__``: the parent's response, which carries these lines, is the one
    checked, logged and validated as a whole.
    """

    def __init__(
        self, parent: _Response, agent: str, run_id: str, index: int, max_bytes: int, profile: Profile = "default"
    ) -> None:
        self._setup(parent.send_one, agent, run_id, index, max_bytes, profile)
        self.nested = True
