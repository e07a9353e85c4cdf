"""Resumable SSE responses for Starlette (and FastAPI) apps: ``Delivery`` (spec delivery §6).

Install the extra that brings Starlette and sse-starlette:
``pip install 'envelope-stream[asgi]'``. This module is the only one of
``envelope.delivery`` that imports them.

``Delivery(journal)`` turns an async iterator of envelope lines into a streaming
response whose events carry ids (spec delivery §1.1-a), with keep-alive comments and the
headers that stop proxies buffering; ``resume`` answers a client that reconnects with
``Last-Event-ID`` (header, or ``last_event_id`` in the query). The lines are produced by
a task of their own, journaled as they come: a client that goes away stops reading, not
producing, so it can come back for the rest (spec delivery §6.1-a).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from typing import TYPE_CHECKING, Final, TypeAlias

from envelope._extras import import_failed

try:
    from sse_starlette import EventSourceResponse
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "asgi") from None  # pragma: no cover  # in a subprocess (tests/install)

from ._errors import JournalError, JournalUnavailableError, ResumeDenied, ResumeError
from ._ids import DONE_LINE, RUN_ID_PATTERN, caught_up, replay_events, resume_point
from ._keepalive import NO_PING, with_keepalives
from ._live import JOURNAL_LOST, JournalFailedError, LiveStream, closing_lines
from ._offloop import off_loop

if TYPE_CHECKING:
    from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Mapping

    from starlette.requests import Request

    from ._journal import Journal

    #: ``authorize(request, run_id)``: returns (``None`` or ``True``) to allow, returns
    #: ``False`` or raises ``ResumeDenied`` to refuse; sync or async (spec delivery §6.2).
    Authorize: TypeAlias = Callable[[Request, str], "bool | Awaitable[bool | None] | None"]

__all__ = ["AUTHORIZE_FAILED", "NO_BUFFERING", "PRODUCER_FAILED", "WRITER_GONE", "Delivery"]

log = logging.getLogger("envelope.delivery.asgi")

#: Headers of every stream: no cache, and no buffering by nginx-like proxies (spec delivery §6.1-b).
NO_BUFFERING: Final = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}

#: The ``error`` payload of a response whose producer raised or stopped before ``[DONE]``.
PRODUCER_FAILED: Final = {"type": "internal_error", "message": "the server failed during this response"}

#: The answer to a resume whose ``authorize`` hook raised (spec delivery [D6.2-c]): nothing of the exception.
AUTHORIZE_FAILED: Final = {"type": "internal_error", "message": "the server failed to check this request"}

#: The ``error`` payload of a response closed after its writer was gone (killed, restarted; spec delivery §4.3-a).
WRITER_GONE: Final = {
    "type": "server_restarted",
    "message": "the server stopped while sending this response; it did not finish",
}


class Delivery:
    """Streams of one app: their journal, the responses being written, and the SSE responses.

    Args:
        journal: where every line is written before it is sent.
        keepalive_seconds: seconds of silence before a ``: keep-alive`` comment.
        max_bytes: the line bound of the closing lines written for a failed producer.
        authorize: ``authorize(request, run_id)``, sync or async, called by ``resume``
            before anything of the run is read (spec delivery §6.2): return to allow;
            return ``False`` or raise ``ResumeDenied`` to refuse. ``query_token(keys)``
            is one that accepts a resume link's ``?token=``. ``None``: every client may
            resume every run (one user, or ids nobody can guess).
    """

    def __init__(
        self,
        journal: Journal,
        *,
        keepalive_seconds: float = 15.0,
        max_bytes: int = 2048,
        authorize: Authorize | None = None,
    ) -> None:
        """See the class docstring."""
        self.journal = journal
        self.authorize = authorize
        self.keepalive_seconds = keepalive_seconds
        self.max_bytes = max_bytes
        self.live: dict[tuple[str, int], LiveStream] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._io = off_loop(journal)
        #: The error each response this process ended without the journal was cut with (§4.2-a),
        #: so that its journal is closed later as its client saw it.
        self._cut: dict[tuple[str, int], dict[str, str]] = {}
        self._recovery: asyncio.Task[list[tuple[str, int]]] | None = None

    def start(self, run_id: str, lines: AsyncIterable[bytes], *, response: int = 0) -> LiveStream:
        """Produce ``lines`` into a new live response, in a task of its own; return that response.

        The task journals each line (spec delivery §3.1-a). If ``lines`` raises, or ends
        without ``[DONE]``, the response is ended with ``closing_lines`` (spec delivery
        §4.1-a); the error goes to the log, not to the client.

        Raises:
            ValueError: ``run_id`` is not a run id (spec delivery §1.1-b), or that
                response is being written already.
        """
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise ValueError(f"not a run id: {run_id[:80]!r} (letters, digits, '_' and '-', 1 to 128)")
        key = (run_id, response)
        if key in self.live:
            raise ValueError(f"response {run_id}:{response} is being written already")
        stream = LiveStream(run_id, response, self.journal, max_bytes=self.max_bytes)
        self.live[key] = stream
        task = asyncio.create_task(self._produce(stream, lines))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return stream

    async def _produce(self, stream: LiveStream, lines: AsyncIterable[bytes]) -> None:
        key = (stream.run_id, stream.response)
        try:
            await self._recovered()
            async for line in lines:
                await stream.put(line)  # journaled off the loop in batches, then sent (spec delivery [D3.6-d])
                if line == DONE_LINE or stream.done:  # [DONE] may still wait for the journal: nothing after it
                    break
        except JournalFailedError as exc:
            log.warning("response %s:%d was cut: %s", stream.run_id, stream.response, exc)
        except Exception:
            log.exception("the producer of response %s:%d failed", stream.run_id, stream.response)
        finally:
            stream.end(PRODUCER_FAILED)  # nothing if it ended with [DONE]
            with contextlib.suppress(JournalFailedError):
                await stream.flushed()
            if stream.failure is not None:
                self._cut[key] = JOURNAL_LOST  # closed in the journal by the next resume or start (§4.3-a)
            self.live.pop(key, None)

    async def recover(self) -> list[tuple[str, int]]:
        """Close every journaled response whose writer is gone, journaling its closing lines (spec delivery §4.3-a).

        A response is gone when the journal lists it unfinished and this process is not
        writing it (a ``PostgresJournal`` lists only responses no live process writes).
        Its closing lines are those of §4.1-a with the ``error`` its client was cut with
        (``JOURNAL_LOST``) if this process cut it, else ``WRITER_GONE``. Runs once by
        itself before the first stream is produced or resumed; call it from the app's
        startup to close them at once.

        Returns:
            The ``(run_id, response)`` pairs closed.

        Raises:
            JournalError: the journal failed (what was closed before stays closed).
        """
        closed: list[tuple[str, int]] = []
        for run_id, response in await self._io.unfinished():
            if (run_id, response) in self.live:
                continue
            lines = await self._io.read(run_id, response)
            if lines and await self._close_gone(run_id, response, lines):
                closed.append((run_id, response))
        if closed:
            log.warning("closed %d response(s) whose writer was gone", len(closed))
        return closed

    async def _recovered(self) -> None:
        """Run ``recover`` once (again after a failure); its failure is logged, never the caller's."""
        task = self._recovery
        if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
            task = self._recovery = asyncio.ensure_future(self.recover())
        try:
            await asyncio.shield(task)
        except JournalError as exc:
            log.warning("could not close the responses whose writer is gone: %s", exc)

    async def _close_gone(self, run_id: str, response: int, lines: list[bytes]) -> list[bytes] | None:
        """Journal the closing lines of a response whose writer is gone; its lines then, or ``None`` if it is written.

        With a shared journal (``claim``), only once this process holds the response;
        another live process writing it leaves it as it is.
        """
        claim = getattr(self.journal, "claim", None)
        if claim is not None and not await self._io.call(claim, run_id, response):
            return None
        error = self._cut.get((run_id, response), WRITER_GONE)
        tail = closing_lines(lines, run_id, error, max_bytes=self.max_bytes)
        await self._io.append_many(run_id, response, tail)
        self._cut.pop((run_id, response), None)
        return [*lines, *tail]

    def response(
        self, stream: LiveStream, *, after: int = -1, headers: Mapping[str, str] | None = None
    ) -> EventSourceResponse:
        """The SSE response following ``stream`` from the line after ``after``."""
        extra = {"X-Run-Id": stream.run_id, "X-Response-Index": str(stream.response), **(headers or {})}
        return self._sse(stream.follow(after), extra)

    def stream(
        self,
        run_id: str,
        lines: AsyncIterable[bytes],
        *,
        response: int = 0,
        headers: Mapping[str, str] | None = None,
    ) -> EventSourceResponse:
        """``start`` then ``response``: what an endpoint returns to stream ``lines`` resumably."""
        return self.response(self.start(run_id, lines, response=response), headers=headers)

    def _sse(self, events: AsyncIterator[bytes], headers: Mapping[str, str]) -> EventSourceResponse:
        return EventSourceResponse(
            with_keepalives(events, self.keepalive_seconds),  # spec delivery §6.1-c: during silences only
            headers={**NO_BUFFERING, **headers},
            ping=NO_PING,
            sep="\n",
        )

    async def resume(self, request: Request) -> Response:
        """Answer a reconnecting client of run ``request.path_params["run_id"]`` (spec delivery §2.3).

        The ``authorize`` hook, if any, runs first, before anything of the run is read
        (§6.2): refused is ``404`` as an unknown run, or the ``401``/``403`` it chose.
        ``Last-Event-ID`` (or ``?last_event_id=``) names the last event the client got:
        it gets the rest, live if the response is still being written here. Without an
        id, the run's newest response from its start. ``204`` when the client has the
        whole ended response; ``400`` for an id that is not one of this run or is past
        what was sent; ``404`` for an unknown run or response.
        """
        run_id = str(request.path_params.get("run_id", ""))
        if not RUN_ID_PATTERN.fullmatch(run_id):
            return _refused(404, "unknown_run", "no such run")
        refused = await self._authorized(request, run_id)  # spec delivery [D6.2-a]: before anything is read
        if refused is not None:
            return refused
        last = request.headers.get("last-event-id") or request.query_params.get("last_event_id")
        try:
            await self._recovered()
            if last:
                response, after = resume_point(last, run_id)
            else:
                live = [r for (run, r) in self.live if run == run_id]
                response, after = max([*live, await self._io.responses(run_id) - 1]), -1
                if response < 0:
                    return _unknown(run_id)
            stream = self.live.get((run_id, response))
            if stream is not None:
                if after >= len(stream.lines):
                    raise ResumeError(f"Last-Event-ID {last!r} is past what was sent")
                return self.response(stream, after=after)
            lines = await self._io.read(run_id, response)
            if not lines:  # never written, or a file whose first line failed: no response
                return _unknown(run_id)
            if lines[-1] != DONE_LINE and (run_id, response) not in self.live:
                # spec delivery §4.3-a: its writer is gone (killed, or cut by the journal): end it now
                lines = await self._close_gone(run_id, response, lines) or lines
            if caught_up(lines, after):
                return Response(status_code=204)
            events = replay_events(run_id, response, lines, after)
        except ResumeError as exc:
            return _refused(400, "invalid_last_event_id", str(exc))
        except JournalError as exc:  # spec delivery §5.1-b: 503 naming nothing; the details go to the log
            return _unavailable(exc)
        headers = {"X-Run-Id": run_id, "X-Response-Index": str(response)}
        return self._sse(_from_list(events, lines[-1] == DONE_LINE), headers)

    async def _authorized(self, request: Request, run_id: str) -> Response | None:
        """The answer refusing this resume, or ``None`` when ``authorize`` allows it (spec delivery §6.2)."""
        if self.authorize is None:
            return None
        try:
            verdict = self.authorize(request, run_id)
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except ResumeDenied as denied:
            if denied.status == 404:  # [D6.2-b]: the same answer as a run that does not exist
                return _unknown(run_id)
            answer = _refused(denied.status, denied.kind, denied.message)
            answer.headers.update(denied.headers)
            return answer
        except Exception:  # [D6.2-c]: the hook's failure is ours to log, never the client's to read
            log.exception("the authorize hook failed on a resume of run %s", run_id)
            return JSONResponse({"error": AUTHORIZE_FAILED}, status_code=500)
        if verdict is None or verdict is True:
            return None
        if verdict is False:
            return _unknown(run_id)
        log.error("the authorize hook returned %s, not None, True or False: refused", type(verdict).__name__)
        return JSONResponse({"error": AUTHORIZE_FAILED}, status_code=500)

    def route(self, path: str = "/streams/{run_id}") -> Route:
        """A ``GET`` route to ``resume`` (its path must hold ``{run_id}``)."""
        if "{run_id}" not in path:
            raise ValueError(f"the resume route's path must hold {{run_id}}: {path!r}")
        return Route(path, self.resume, methods=["GET"])

    async def aclose(self) -> None:
        """Cancel the producers still running (their responses get closing lines)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _from_list(events: list[bytes], ended: bool) -> AsyncIterator[bytes]:
    """Replayed events; a response left without ``[DONE]`` by a dead writer ends where its journal does."""
    for event in events:
        yield event
    if not ended:
        log.warning("replayed a response its writer left without [DONE]")


def _unavailable(exc: JournalError) -> JSONResponse:
    """A journal failure as the client sees it: 503 with ``Retry-After`` and the error's public text (§5.1-b)."""
    log.warning("refused a resume, the journal failed: %s", exc)
    retry = exc.retry_after if isinstance(exc, JournalUnavailableError) else 5
    answer = _refused(503, "storage_unavailable", exc.public)
    answer.headers["Retry-After"] = str(retry)
    return answer


def _unknown(run_id: str) -> JSONResponse:
    """The one answer to a run that is not here, or that the caller may not see (spec delivery [D6.2-b])."""
    return _refused(404, "unknown_run", f"no run {run_id} here")


def _refused(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)
