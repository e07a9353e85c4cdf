"""A journal's calls off the event loop, each bounded in time: ``OffLoopJournal``, ``off_loop`` (spec delivery §3.6).

Owns: running a synchronous ``Journal``'s calls (file writes, database round trips) in
one worker thread of its own, awaited with a deadline, so an event loop never waits on
storage. Does not own: what the calls do (the journals), nor what a caller does with a
failure (``LiveStream``, ``Delivery``, the reference server).

Why one thread per journal and not a pool: the journals are not thread-safe (a
``FileJournal``'s open files, a ``PostgresJournal``'s single writer connection), and
their calls must keep their order (a response's lines in ``seq`` order). Why a deadline
with no cancellation: a thread blocked in ``write`` or in a socket read cannot be
interrupted; the caller stops waiting, the call finishes whenever the storage answers,
and meanwhile every new call fails at once (``JournalUnavailableError``) instead of
queueing behind it, so each request costs at most ``timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import threading
import time
import weakref
from typing import TYPE_CHECKING, Final, TypeVar

from ._errors import JournalUnavailableError

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ._journal import Journal

__all__ = ["DEFAULT_CALL_TIMEOUT", "OffLoopJournal", "off_loop"]

_T = TypeVar("_T")

#: Seconds a journal call may take before its caller gets ``JournalUnavailableError`` (spec delivery §3.6-a).
DEFAULT_CALL_TIMEOUT: Final = 5.0
#: The most queued appends handed to a journal's ``append_together`` at once (spec delivery [D3.4-f]).
TOGETHER: Final = 256

#: An append's ``(run_id, response, line)``.
_Line = tuple[str, int, bytes]


class _Queued:
    """A call waiting for the worker thread: ``run`` does it, ``finish`` hands an outcome found elsewhere."""

    __slots__ = ("finish", "lines", "prefix", "run")

    def __init__(
        self,
        run: Callable[[], None],
        finish: Callable[[bool, object], None],
        lines: list[_Line] | None,
        *,
        prefix: bool = False,
    ) -> None:
        self.run = run
        self.finish = finish
        self.lines = lines  # an append's lines (one response's, in order), or None for any other call
        self.prefix = prefix  # ``append_upto``: its outcome is (lines journaled, the failure or None)


def upto_outcome(errors: Sequence[Exception | None]) -> tuple[int, Exception | None]:
    """``append_upto``'s outcome from each line's (``None``: journaled): the lines before the first failure, and it."""
    failed = next((n for n, error in enumerate(errors) if error is not None), None)
    return (len(errors), None) if failed is None else (failed, errors[failed])


def _own_append_upto(journal: object) -> Callable[[str, int, Sequence[bytes]], tuple[int, Exception | None]] | None:
    """The journal's ``append_upto``, unless its class overrode ``append`` below it (spec delivery [D3.6-d]).

    A subclass that changes ``append`` (a wrapper counting, gating or checking lines)
    expects every line to pass through it; an ``append_upto`` it inherited would go round it.
    """
    upto = getattr(journal, "append_upto", None)
    if upto is None:
        return None
    mro = type(journal).__mro__
    owner = next((c for c in mro if "append_upto" in vars(c)), None)
    appender = next((c for c in mro if "append" in vars(c)), None)
    if owner is not None and appender is not None and not issubclass(owner, appender):
        return None
    return upto  # type: ignore[no-any-return]


_adapters: weakref.WeakKeyDictionary[object, OffLoopJournal] = weakref.WeakKeyDictionary()
_adapters_lock = threading.Lock()


def off_loop(journal: Journal) -> OffLoopJournal:
    """The ``OffLoopJournal`` of ``journal``: one per journal object, so its calls share one thread and one order."""
    if isinstance(journal, OffLoopJournal):
        return journal
    with _adapters_lock:
        adapter = _adapters.get(journal)
        if adapter is None:
            adapter = _adapters[journal] = OffLoopJournal(journal)
        return adapter


class OffLoopJournal:
    """A ``Journal``'s operations as coroutines that never block the event loop (spec delivery §3.6-a).

    A journal whose class sets ``blocks_on_io = False`` (``MemoryJournal``) is called
    inline: it does no I/O, and a thread hop would only cost time. Any other journal is
    called in this adapter's worker thread, and each call is awaited for at most
    ``timeout`` seconds. A call past its deadline raises ``JournalUnavailableError`` in its
    caller (it may still complete in the thread: a line may be journaled that its caller
    was told failed); until it returns, every other call fails at once the same way.

    Args:
        journal: the journal (``FileJournal``, ``PostgresJournal``, one of your own).
        timeout: seconds a call may take (``DEFAULT_CALL_TIMEOUT``; the journal's own
            ``call_timeout`` attribute, if it has one, wins).

    Attributes:
        inline: whether calls run on the loop (the journal does no I/O).
    """

    def __init__(self, journal: Journal, *, timeout: float | None = None) -> None:
        """See the class docstring."""
        self.journal = journal
        own = getattr(journal, "call_timeout", None)
        self.timeout = float(timeout if timeout is not None else own if own is not None else DEFAULT_CALL_TIMEOUT)
        if self.timeout <= 0:
            raise ValueError(f"a journal call timeout must be above 0 s, not {self.timeout:g}")
        self.inline = getattr(type(journal), "blocks_on_io", True) is False
        self._upto = _own_append_upto(journal)  # several lines at once (FileJournal: one write)
        self._calls: queue.SimpleQueue[_Queued] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._stuck_since: float | None = None  # a call past its deadline has not returned yet
        self._lock = threading.Lock()

    def _start(self) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                # A daemon: a call stuck on dead storage must not keep the process from exiting.
                self._thread = threading.Thread(target=self._work, name="envelope-journal", daemon=True)
                self._thread.start()

    def _work(self) -> None:
        together = getattr(self.journal, "append_together", None)
        later: _Queued | None = None
        while True:
            call, later = later or self._calls.get(), None
            if call.lines is None or together is None:
                call.run()
                continue
            batch = [call]
            count = len(call.lines)
            while count < TOGETHER:  # the appends queued behind it, up to the first other call
                try:
                    queued = self._calls.get_nowait()
                except queue.Empty:
                    break
                if queued.lines is None:
                    later = queued
                    break
                batch.append(queued)
                count += len(queued.lines)
            if len(batch) == 1:
                call.run()
                continue
            self._append_together(together, batch)

    @staticmethod
    def _append_together(together: Callable[[list[_Line]], list[Exception | None]], batch: list[_Queued]) -> None:
        """Appends of several responses at once (spec delivery [D3.4-f]): each caller gets its own line's outcome."""
        lines = [line for q in batch for line in q.lines or ()]
        try:
            errors = together(lines)
        except BaseException as exc:  # every line of the batch failed the same way
            errors = [exc if isinstance(exc, Exception) else JournalUnavailableError(str(exc))] * len(lines)
        at = 0
        for queued in batch:
            mine = errors[at : at + len(queued.lines or ())]
            at += len(mine)
            kept, error = upto_outcome(mine)
            if queued.prefix:  # append_upto: the lines before the first failure were journaled
                queued.finish(True, (kept, error))
            else:
                queued.finish(error is None, error)

    async def call(self, fn: Callable[..., _T], *args: object) -> _T:
        """``fn(*args)`` in the worker thread (inline for a journal without I/O), awaited at most ``timeout`` s.

        Raises:
            JournalUnavailableError: the call did not return in time, or an earlier one
                has not yet (the storage is not answering).
            Whatever ``fn`` raised.
        """
        return await self._call(fn, args, None)

    async def _call(
        self, fn: Callable[..., _T], args: tuple[object, ...], lines: list[_Line] | None, *, prefix: bool = False
    ) -> _T:
        if self.inline:
            return fn(*args)
        stuck = self._stuck_since
        if stuck is not None:
            raise self._not_answering(time.monotonic() - stuck)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()

        def settle(ok: bool, value: object) -> None:
            if future.done():
                return
            if ok:
                future.set_result(value)  # type: ignore[arg-type]  # value is fn's result when ok
            else:
                future.set_exception(value)  # type: ignore[arg-type]  # value is fn's exception when not ok

        returned = False

        def finish(ok: bool, result: object) -> None:
            nonlocal returned
            with self._lock:
                returned = True
                self._stuck_since = None
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for it
                loop.call_soon_threadsafe(settle, ok, result)

        def run() -> None:
            try:
                result: object = fn(*args)
                ok = True
            except BaseException as exc:  # handed to the caller as it is
                result, ok = exc, False
            finish(ok, result)

        self._start()
        self._calls.put(_Queued(run, finish, lines, prefix=prefix))
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.timeout)
        except TimeoutError:
            with self._lock:
                if not returned and self._stuck_since is None:
                    self._stuck_since = time.monotonic() - self.timeout
            future.add_done_callback(_retrieve)
            raise self._not_answering(self.timeout) from None

    def _not_answering(self, seconds: float) -> JournalUnavailableError:
        return JournalUnavailableError(
            f"the journal ({type(self.journal).__name__}) has not answered for {seconds:.1f} s",
            retry_after=max(1, math.ceil(self.timeout)),
            public="the server's storage is not answering",
        )

    async def append_many(self, run_id: str, response: int, lines: Sequence[bytes]) -> None:
        """``append_upto`` of every line, raising the failure that stopped it (one thread hop for a batch); with the
        journal's ``append_together``, beside the other appends queued with it (spec delivery [D3.4-f])."""
        _, error = await self.append_upto(run_id, response, lines)
        if error is not None:
            raise error

    async def append_upto(self, run_id: str, response: int, lines: Sequence[bytes]) -> tuple[int, Exception | None]:
        """``journal.append`` of each line, in order, up to the first that fails, in one call (spec delivery [D3.6-d]).

        Returns:
            How many of ``lines`` were journaled, and the exception of the one after them
            (``None`` when all were).

        Raises:
            JournalUnavailableError: the call did not return in time, or an earlier one has
                not yet (how many lines it journals is not known).
        """

        own = self._upto

        def work() -> tuple[int, Exception | None]:
            if own is not None:
                return own(run_id, response, lines)
            for n, line in enumerate(lines):
                try:
                    self.journal.append(run_id, response, line)
                except Exception as exc:  # the caller's to handle, with the lines journaled before it
                    return n, exc
            return len(lines), None

        return await self._call(work, (), [(run_id, response, line) for line in lines], prefix=True)

    async def append(self, run_id: str, response: int, line: bytes) -> None:
        """See ``Journal.append``. Appends of several responses queued together go to the journal's
        ``append_together`` in one call, where it has one (spec delivery [D3.4-f])."""
        await self._call(self.journal.append, (run_id, response, line), [(run_id, response, line)])

    async def read(self, run_id: str, response: int) -> list[bytes] | None:
        """See ``Journal.read``."""
        return await self.call(self.journal.read, run_id, response)

    async def responses(self, run_id: str) -> int:
        """See ``Journal.responses``."""
        return await self.call(self.journal.responses, run_id)

    async def unfinished(self) -> list[tuple[str, int]]:
        """See ``Journal.unfinished``."""
        return await self.call(self.journal.unfinished)


def _retrieve(future: asyncio.Future[_T]) -> None:
    """Mark a late call's outcome as read (asyncio logs an exception nobody read)."""
    if not future.cancelled():
        future.exception()
