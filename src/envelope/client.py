"""A Python client for envelope streams: ``async with connect(url) as run`` and a sync twin.

Owns: reading one run of an envelope server over HTTP (``httpx2``, the ``check``
extra's client): the first request (``POST`` with a JSON body, or ``GET``), every
response the run takes read as one recording (a frontend-tool continuation is the next
response), resumption of a body cut short with ``GET {api}runs/{run}/stream`` and
``Last-Event-ID`` with backoff, the check that event ids follow one another, the
frontend-tool round trip (``answer()``) and ``stop()``. The decisions are in
``spec/client.md`` (``[CL…]``), after the JavaScript client's (spec/server.md §7).

Does not own: decoding and rebuilding (``SSEReader``, ``decode``, ``Reconstructor``),
or the server. Not part of the sans-I/O codec: an edge module, like ``check``.
``connect_sync`` runs the same code on a private event loop, so there is one client.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ._client_foreign import PROTOCOLS, ForeignStream, protocol_of_event, protocol_of_headers
from ._decoder import decode
from ._errors import EnvelopeError
from ._reconstruct import Reconstructor
from ._sse import SSEReader
from ._types import AwaitingFrontendTools, MetaInit

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping

    import httpx2

    from ._client_foreign import Protocol
    from ._reconstruct import Transcript
    from ._sse import SSEEvent
    from ._types import Envelope

__all__ = [
    "Backoff",
    "ClientError",
    "HTTPError",
    "IncompleteError",
    "ResumeError",
    "Run",
    "SyncRun",
    "connect",
    "connect_sync",
]

_DONE: Final = "[DONE]"
#: Lines applied before the reconstructor is fed (``feed_many``, the fast path): a line the
#: reconstructor refuses is raised at most this many lines later, or when the transcript is read.
_FEED_BATCH: Final = 256


class ClientError(EnvelopeError):
    """A run that could not be read to its end."""


class HTTPError(ClientError):
    """A non-2xx answer [CL1-b].

    Attributes:
        status: the HTTP status.
        type: the server's error ``type`` (``{"error": {"type": ...}}``), else ``None``.
    """

    def __init__(self, status: int, type: str | None, message: str) -> None:
        super().__init__(f"HTTP {status}" + (f" {type}" if type else "") + (f": {message}" if message else ""))
        self.status = status
        self.type = type


class ResumeError(ClientError):
    """Resuming failed: retries used up, or the events resumed at the wrong place (spec CL2-b, CL2-c)."""


class IncompleteError(ClientError):
    """An AG-UI or UI message stream that ended before its terminator (not resumed) [CL4-c]."""


@dataclass(frozen=True)
class Backoff:
    """Waits between resumptions: ``initial * factor**k`` seconds, at most ``maximum`` [CL2-b].

    ``k`` counts the attempts since the last one that brought a new event; after
    ``retries`` of them in a row the run gives up with ``ResumeError``.
    """

    initial: float = 0.25
    factor: float = 2.0
    maximum: float = 4.0
    retries: int = 5

    def delay(self, attempt: int) -> float:
        return float(min(self.initial * self.factor**attempt, self.maximum))


class _Cut(Exception):
    """A body that ended or broke before ``[DONE]``."""


class Run:
    """One run being read; made by ``connect``. Iterate it for envelopes (``[DONE]`` left out).

    Attributes:
        run_id: from ``X-Run-Id`` or ``meta_init``'s ``run_id`` [CL1-c].
        agent_uuid: from ``X-Agent-Uuid`` or the first ``meta_init``.
        protocol: ``envelope``, ``agui`` or ``vercel``: the caller's, else the first
            response's (``None`` until it is known) [CL4-a].
        pending: the frontend tools the run waits for (``awaiting_frontend_tools``), else ``None``.
        done: the run is over (its last response ended with ``[DONE]`` and no pause).
    """

    def __init__(
        self,
        client: httpx2.AsyncClient,
        url: str,
        body: object,
        headers: Mapping[str, str] | Callable[[], Mapping[str, str]] | None,
        api: str | None,
        backoff: Backoff,
        keep_transcript: bool,
        protocol: Protocol | None = None,
        resume: str | None = None,
    ) -> None:
        self._client = client
        self._url = url
        self._body = body
        self._headers = headers
        self._api = api
        self._resume_url = resume
        self._backoff = backoff
        self._reconstructor: Reconstructor | None = Reconstructor() if keep_transcript else None
        #: Lines applied but not yet fed to the reconstructor: fed in one ``feed_many`` when the
        #: transcript is asked for, at ``[DONE]`` and every ``_FEED_BATCH`` lines.
        self._unfed: list[str] = []
        self._continuation: asyncio.Future[httpx2.Response] | None = None
        self._response_index: int | None = None
        self._last_seq: int | None = None
        #: The id the next event must have once one was seen (``run:response:seq``) [CL2-c].
        self._next_id: str | None = None
        #: The response being read ended in awaiting_frontend_tools (answered or not).
        self._paused = False
        self.run_id: str | None = None
        self.agent_uuid: str | None = None
        self.protocol: Protocol | None = protocol
        self.pending: list[dict[str, Any]] | None = None
        self.done = False

    @property
    def transcript(self) -> Transcript:
        """The transcript of everything read so far (all responses, one recording) [CL1-a]."""
        if self._reconstructor is None:
            raise ClientError("connect(..., keep_transcript=False) keeps no transcript")
        self._feed()
        return self._reconstructor.transcript()

    def _feed(self) -> None:
        """Feed the lines applied so far to the reconstructor (its errors are raised here)."""
        if self._unfed and self._reconstructor is not None:
            lines, self._unfed = self._unfed, []
            self._reconstructor.feed_many(lines)

    def _request_headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        base = self._headers() if callable(self._headers) else (self._headers or {})
        return {**base, **(extra or {})}

    async def __aiter__(self) -> AsyncGenerator[Envelope, None]:
        """Each envelope of every response of the run, in order, each once [CL2-a]."""
        response = await self._open_first()
        while True:
            self._paused = False
            async for env in self._read_response(response):
                yield env
            if not self._paused:  # answer() may have cleared `pending` already
                self.done = True
                return
            if self.protocol != "envelope":
                return  # [CL4-d]: continued by the caller's next request of that protocol
            # [CL3-a]: paused; answer() posts the results and hands over the continuation.
            response = await self._handover()
            self._continuation = None

    def _handover(self) -> asyncio.Future[httpx2.Response]:
        """The continuation's response, set by ``answer()`` (whichever of the two comes first makes it)."""
        if self._continuation is None:
            self._continuation = asyncio.get_running_loop().create_future()
        return self._continuation

    async def _open_first(self) -> httpx2.Response:
        method = "GET" if self._body is None else "POST"
        request = self._client.build_request(
            method, self._url, json=self._body, headers=self._request_headers({"accept": "text/event-stream"})
        )
        response = await self._client.send(request, stream=True)
        await _check(response)  # [CL2-b]: the first request of a response is never retried
        return response

    async def _read_response(self, response: httpx2.Response) -> AsyncIterator[Envelope]:
        """One response, in the run's protocol: its first event decides when nothing else did [CL4-a]."""
        self._last_seq = None
        self._next_id = None
        self._response_index = None
        self._learn_headers(response)
        if self.protocol is None:
            named = protocol_of_headers(response.headers)
            if named is not None and named not in PROTOCOLS:
                await response.aclose()
                raise ClientError(named)
            if named == "vercel":
                self.protocol = "vercel"
        events = _events(response)
        try:
            first: SSEEvent | None = None
            if self.protocol is None:
                try:
                    first = await anext(events)
                except (StopAsyncIteration, _transport_errors()):
                    first = None  # cut before its first event: read (and resumed) as an envelope stream
                self.protocol = "envelope" if first is None else protocol_of_event(first.data)
            if self.protocol == "envelope":
                async for env in self._read_envelope(events, first):
                    yield env
            else:
                async for env in self._read_foreign(self.protocol, events, first):
                    yield env
        finally:
            await events.aclose()

    async def _read_envelope(
        self, events: AsyncGenerator[SSEEvent, None], first: SSEEvent | None
    ) -> AsyncIterator[Envelope]:
        """An envelope response, resumed across cuts until its ``[DONE]`` [CL2-a]."""
        failures = 0
        try:
            while True:
                progressed = False
                try:
                    if first is not None:
                        event, first = first, None
                        progressed = True
                        env = self._apply(event.id, event.data)
                        if env is None:
                            return
                        yield env
                    async for event in events:
                        env = self._apply(event.id, event.data)
                        progressed = True
                        if env is None:
                            return
                        yield env
                    raise _Cut("the body ended before [DONE]")
                except (_Cut, _transport_errors()) as exc:
                    await events.aclose()
                    failures = 0 if progressed else failures + 1
                    if failures >= self._backoff.retries or self.run_id is None:
                        raise ResumeError(f"the stream was cut and could not be resumed: {exc}") from None
                    await asyncio.sleep(self._backoff.delay(failures))  # [CL2-b]
                    response = await self._resume(failures)
                    if response.status_code == 204:  # [CL2-a]: the last event we applied was [DONE]
                        return
                    events = _events(response)
        finally:
            await events.aclose()

    async def _read_foreign(
        self, protocol: Protocol, events: AsyncGenerator[SSEEvent, None], first: SSEEvent | None
    ) -> AsyncIterator[Envelope]:
        """An AG-UI or UI message stream response through its converter, not resumed [CL4-b] [CL4-c]."""
        stream = ForeignStream(protocol)
        broke: str | None = None
        try:
            if first is not None:
                for line in stream.feed(first.data):
                    env = self._apply(None, line.decode())
                    if env is not None:
                        yield env
            async for event in events:
                for line in stream.feed(event.data):
                    env = self._apply(None, line.decode())
                    if env is not None:
                        yield env
        except _transport_errors() as exc:
            broke = str(exc) or type(exc).__name__
        if stream.finished and broke is None:
            return
        for line in stream.close():  # what was held of the open blocks: nothing read is dropped
            env = self._apply(None, line.decode())
            if env is not None:
                yield env
        because = f" (the connection broke: {broke})" if broke else ""
        raise IncompleteError(f"{stream.unfinished()}{because}; AG-UI and UI message streams are not resumed")

    async def _resume(self, failures: int) -> httpx2.Response:
        """``GET {api}runs/{run}/stream`` (or ``resume``) after the last event applied [CL2-a]."""
        assert self.run_id is not None
        if self._resume_url is not None:
            url = self._resume_url.replace("{run_id}", self.run_id)
        elif self._api is not None:
            url = f"{self._api}runs/{self.run_id}/stream"
        else:
            raise ResumeError(f"the stream was cut and {self._url!r} names no API root to resume at: pass resume=")
        extra: dict[str, str] = {"accept": "text/event-stream"}
        params: dict[str, str] = {}
        if self._last_seq is not None:
            extra["last-event-id"] = f"{self.run_id}:{self._response_index}:{self._last_seq}"
        elif self._response_index is not None:
            params["response"] = str(self._response_index)
        # Merged into the URL's own query (a resume link's ``?token=``): httpx2 replaces the
        # query with ``params=`` when it is given, even empty [CL2-a].
        if params:
            url += ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
        request = self._client.build_request("GET", url, headers=self._request_headers(extra))
        try:
            response = await self._client.send(request, stream=True)
        except _transport_errors() as exc:
            raise _Cut(str(exc)) from None
        if response.status_code >= 500:
            await response.aclose()
            raise _Cut(f"HTTP {response.status_code} on resume (attempt {failures})")
        await _check(response)
        return response

    def _learn_headers(self, response: httpx2.Response) -> None:
        self.run_id = response.headers.get("x-run-id", self.run_id)
        self.agent_uuid = response.headers.get("x-agent-uuid", self.agent_uuid)
        index = response.headers.get("x-response-index")
        if index is not None and index.isdigit():
            self._response_index = int(index)

    def _check_id(self, event_id: str) -> None:
        """An id that is not the one expected: the first of a response, or a fault [CL2-c]."""
        parts = event_id.split(":")
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            raise ResumeError(f"event id {event_id!r} is not run:response:seq")
        run, index, seq = parts[0], int(parts[1]), int(parts[2])
        expected = 0 if self._last_seq is None else self._last_seq + 1
        if (self.run_id is not None and run != self.run_id) or (
            self._response_index is not None and index != self._response_index
        ):
            raise ResumeError(f"event id {event_id!r} is of another run or response")
        if seq != expected:
            raise ResumeError(f"event id {event_id!r}: expected sequence {expected}")
        self.run_id, self._response_index, self._last_seq = run, index, seq
        self._next_id = f"{run}:{index}:{seq + 1}"

    def _apply(self, event_id: str | None, data: str) -> Envelope | None:
        """Check the event's id follows the last one [CL2-c]; apply it. ``None`` for ``[DONE]``."""
        if event_id:
            if event_id == self._next_id:  # the common case: the id one past the last, as made
                assert self._last_seq is not None
                self._last_seq += 1
                self._next_id = f"{self.run_id}:{self._response_index}:{self._last_seq + 1}"
            else:
                self._check_id(event_id)
        if self._reconstructor is not None:
            self._unfed.append(data)
            if len(self._unfed) >= _FEED_BATCH or data == _DONE:
                self._feed()
        if data == _DONE:
            return None
        env = decode(data)
        if isinstance(env, MetaInit) and env.final and (self.run_id is None or self.agent_uuid is None):
            payload = _json(env.delta)
            if isinstance(payload, dict) and isinstance(payload.get("run_id"), str) and self.run_id is None:
                self.run_id = payload["run_id"]
            if self.agent_uuid is None:
                self.agent_uuid = env.agent  # the first agent is the run's [CL1-c]
        if isinstance(env, AwaitingFrontendTools) and env.final and (self.agent_uuid in (None, env.agent)):
            pending = self._pending_of(env.agent) if self._reconstructor is not None else _json(env.delta)
            self.pending = pending if isinstance(pending, list) else None
            self._paused = self.pending is not None
        return env

    def _pending_of(self, agent: str) -> Any:
        assert self._reconstructor is not None
        self._feed()
        blocks = self._reconstructor.transcript().to_dict()["agents"].get(agent, {"blocks": []})["blocks"]
        return blocks[-1].get("data") if blocks and blocks[-1]["type"] == "awaiting_frontend_tools" else None

    def _api_root(self) -> str:
        if self._api is None:
            raise ClientError(f"cannot tell the API root of {self._url!r}: pass api=")
        return self._api

    async def answer(self, tool_results: list[dict[str, Any]]) -> None:
        """Answer the paused run's frontend tools; the iteration goes on with the continuation [CL3-a].

        Args:
            tool_results: ``[{"tool_use_id", "content", "is_error"?}]``.

        Raises:
            ClientError: the run is not paused.
            HTTPError: the server refused (422, 409): the run stays paused.
        """
        if self.pending is None:
            raise ClientError("the run is not waiting for frontend tools")
        if self.protocol != "envelope":
            raise ClientError(
                f"answer() continues an envelope server's run; a {self.protocol} run is continued by a new "
                "request of that protocol carrying the tool messages [CL4-d]"
            )
        body = {"agent_uuid": self.agent_uuid, "tool_results": tool_results}
        headers = self._request_headers({"accept": "text/event-stream"})
        request = self._client.build_request("POST", f"{self._api_root()}tool_results", json=body, headers=headers)
        response = await self._client.send(request, stream=True)
        await _check(response)
        self.pending = None
        self._handover().set_result(response)  # the iteration takes it after the pause's [DONE]

    async def stop(self) -> dict[str, Any]:
        """``POST {api}runs/{run}/stop``: the server's JSON answer [CL3-b]."""
        if self.run_id is None:
            raise ClientError("the run id is not known yet")
        url = f"{self._api_root()}runs/{self.run_id}/stop"
        request = self._client.build_request("POST", url, headers=self._request_headers(), json={})
        response = await self._client.send(request)
        await _check(response)
        data = response.json()
        return data if isinstance(data, dict) else {"answer": data}


async def _check(response: httpx2.Response) -> None:
    if 200 <= response.status_code < 300:
        return
    raw = await response.aread()
    await response.aclose()
    kind: str | None = None
    message = raw[:200].decode("utf-8", "replace")
    with contextlib.suppress(ValueError):
        error = json.loads(raw).get("error", {})
        kind = error.get("type") if isinstance(error.get("type"), str) else None
        message = error.get("message", message) if isinstance(error.get("message"), str) else message
    raise HTTPError(response.status_code, kind, message)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


async def _events(response: httpx2.Response) -> AsyncGenerator[SSEEvent, None]:
    """The SSE events of a body (the codec's reader: WHATWG rules, bounded lines); closes it when done."""
    reader = SSEReader()
    try:
        async for chunk in response.aiter_bytes():
            for event in reader.feed(chunk):
                yield event
        for event in reader.close():
            yield event
    finally:
        await response.aclose()


def _transport_errors() -> type[Exception]:
    import httpx2

    return httpx2.TransportError


def _api_of(url: str) -> str | None:
    """``…/agent/`` of a run's URL, else ``None`` (then ``answer``, ``stop`` need ``api=``) [CL1-a]."""
    marker = "/agent/"
    cut = url.find(marker)
    return None if cut < 0 else url[: cut + len(marker)]


@contextlib.asynccontextmanager
async def connect(
    url: str,
    *,
    body: object = None,
    headers: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
    timeout: float | None = 30.0,
    backoff: Backoff | None = None,
    api: str | None = None,
    keep_transcript: bool = True,
    transport: httpx2.AsyncBaseTransport | None = None,
    protocol: Protocol | None = None,
    resume: str | None = None,
) -> AsyncIterator[Run]:
    """Open a run: ``POST url`` with ``body`` as JSON, or ``GET url`` without [CL1-a].

    Args:
        url: ``…/agent/run`` (with ``body={"prompt": ...}``) or ``…/agent/runs/ID/stream``.
        body: the JSON body of a ``POST``; ``None`` for a ``GET``.
        headers: sent on every request (auth); a callable is asked before each one.
        timeout: seconds for connecting and between two reads (``None``: no limit) [CL1-b].
        backoff: the waits and retries of resumption.
        api: the API root (``…/agent/``); by default taken from ``url``.
        keep_transcript: keep the growing transcript (``run.transcript``); without it,
            memory does not grow with the stream [CL1-d].
        transport: an ``httpx2`` transport (tests, proxies).
        protocol: ``"envelope"``, ``"agui"`` or ``"vercel"``; by default the first
            response's headers, else its first event, tell [CL4-a].
        resume: the URL to resume an envelope stream at, ``{run_id}`` replaced by the run's
            id; by default ``{api}runs/{run_id}/stream`` [CL2-a].

    Yields:
        The ``Run``; iterate it for envelopes. The HTTP client closes on exit.
    """
    import httpx2

    from ._extras import MissingExtraError, missing, needs

    if missing("check"):
        raise MissingExtraError(needs("envelope.client", "check"))
    if protocol is not None and protocol not in PROTOCOLS:
        raise ClientError(f"protocol={protocol!r}: one of {', '.join(PROTOCOLS)}, or None to tell from the response")
    client = httpx2.AsyncClient(timeout=timeout, transport=transport)
    try:
        root = api or _api_of(url)
        yield Run(client, url, body, headers, root, backoff or Backoff(), keep_transcript, protocol, resume)
    finally:
        await client.aclose()


class SyncRun:
    """The sync twin of ``Run``: the same client, run on a private event loop [CL1-e]."""

    def __init__(self, runner: asyncio.Runner, run: Run) -> None:
        self._runner = runner
        self._run = run
        self._iterator = run.__aiter__()

    def __iter__(self) -> Iterator[Envelope]:
        async def step() -> Envelope:
            return await self._iterator.__anext__()

        while True:
            try:
                yield self._runner.run(step())
            except StopAsyncIteration:
                return

    def answer(self, tool_results: list[dict[str, Any]]) -> None:
        """As ``Run.answer``."""
        self._runner.run(self._run.answer(tool_results))

    def stop(self) -> dict[str, Any]:
        """As ``Run.stop``."""
        return self._runner.run(self._run.stop())

    # Run's state, each typed as Run's own (a ``__getattr__`` would hand the caller ``Any``).

    @property
    def transcript(self) -> Transcript:
        """As ``Run.transcript``."""
        return self._run.transcript

    @property
    def run_id(self) -> str | None:
        """As ``Run.run_id``."""
        return self._run.run_id

    @property
    def agent_uuid(self) -> str | None:
        """As ``Run.agent_uuid``."""
        return self._run.agent_uuid

    @property
    def protocol(self) -> Protocol | None:
        """As ``Run.protocol``."""
        return self._run.protocol

    @property
    def pending(self) -> list[dict[str, Any]] | None:
        """As ``Run.pending``."""
        return self._run.pending

    @property
    def done(self) -> bool:
        """As ``Run.done``."""
        return self._run.done


@contextlib.contextmanager
def connect_sync(
    url: str,
    *,
    body: object = None,
    headers: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None,
    timeout: float | None = 30.0,
    backoff: Backoff | None = None,
    api: str | None = None,
    keep_transcript: bool = True,
    transport: httpx2.AsyncBaseTransport | None = None,
    protocol: Protocol | None = None,
    resume: str | None = None,
) -> Iterator[SyncRun]:
    """``connect`` for code without an event loop: ``with connect_sync(url, body=...) as run``.

    Every argument is ``connect``'s, by the same name (a type checker sees each).
    """
    with asyncio.Runner() as runner:
        manager = connect(
            url,
            body=body,
            headers=headers,
            timeout=timeout,
            backoff=backoff,
            api=api,
            keep_transcript=keep_transcript,
            transport=transport,
            protocol=protocol,
            resume=resume,
        )
        run = runner.run(manager.__aenter__())
        try:
            yield SyncRun(runner, run)
        finally:
            runner.run(manager.__aexit__(None, None, None))
