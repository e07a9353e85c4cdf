"""Offline replay of recorded Anthropic streams through the real SDK client, and recording them.

Owns: reading a recording (a JSON array of stream events, as in
``fixtures/corpus/anthropic_events_*.json``), turning events back into the
API's wire SSE bytes, and serving those bytes to a real ``anthropic.AsyncAnthropic``
through an ``httpx2.MockTransport`` (the HTTP library the installed SDK is built on),
one recorded API call per request, in order. So ``client.messages.stream(...)`` runs
the SDK's own SSE decoding, event parsing and accumulation with no network and no key.
Also ``record()``, which writes such a file from a live call (needs ANTHROPIC_API_KEY;
no test uses it).

Does not own: translating events to envelopes (``envelope.anthropic``). This module is
in ``agent_ref``, not ``envelope``, because it needs ``httpx2`` and the SDK, and
``envelope`` stays sans-I/O (STYLE §1). Both are imported where a client is made, not at
import: reading a recording (``load_events``, what ``agent-ref --replay`` checks first)
needs neither, and the SDK's import takes seconds.

Recordings are SDK model dumps, not wire data: ``content_block_stop`` carries a
``content_block`` snapshot, ``message_stop`` the accumulated ``message``, and text
blocks an SDK-only ``parsed_output``. ``wire_event()`` strips exactly those, so the
SDK parses what the API would really send. Derived events (``text``, ``input_json`` …)
that a recording of ``messages.stream()`` may hold are not wire events and are dropped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from envelope.anthropic import DERIVED_EVENTS

if TYPE_CHECKING:
    from collections.abc import Sequence

    import httpx2
    from anthropic import AsyncAnthropic

__all__ = [
    "ReplayError",
    "ReplayServer",
    "load_events",
    "record",
    "replay_client",
    "split_calls",
    "sse_body",
    "wire_event",
]

#: Placeholder credential for the offline client: the SDK wants one, the mock never checks it.
OFFLINE_API_KEY: Final = "offline-replay-no-key"
#: Base URL of the offline client; no request leaves the process.
OFFLINE_BASE_URL: Final = "http://replay.invalid"
_SDK_ONLY_BLOCK_FIELDS: Final = ("parsed_output",)


class ReplayError(ValueError):
    """A recording that cannot be replayed: not a JSON array of event objects, or no calls in it.

    Attributes:
        where: the file, with ``:LINE:COLUMN`` when the error has a position (counted from
            1, as editors do); ``None`` when no file is involved.
        what: what is wrong, without the place.
    """

    def __init__(self, what: str, *, where: str | None = None) -> None:
        """``str(error)`` is ``WHERE: WHAT``, or ``WHAT`` alone."""
        super().__init__(f"{where}: {what}" if where else what)
        self.where = where
        self.what = what


def load_events(path: str | Path) -> list[dict[str, Any]]:
    """Read a recording: a JSON array of stream event objects.

    Args:
        path: the file.

    Returns:
        The events, in file order.

    Raises:
        ReplayError: the file is not UTF-8 JSON, or not an array of objects each with a
            string ``type``.
        OSError: the file cannot be read.
    """
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Byte offsets count from 0 and say so (spec/cli-agent-ref.md RC5-b).
        raise ReplayError(f"not UTF-8 text (byte offset {exc.start}): not a recording", where=str(path)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReplayError(f"not JSON: {exc.msg}", where=f"{path}:{exc.lineno}:{exc.colno}") from None
    if not isinstance(data, list):
        raise ReplayError(f"expected a JSON array of events, got {_json_kind(data)}", where=str(path))
    for i, event in enumerate(data):
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ReplayError(f"event {i} (counted from 0) is not an object with a string 'type'", where=str(path))
    return data


def _json_kind(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "null"


def split_calls(events: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split a recording into API calls, each starting at its ``message_start``.

    Events before the first ``message_start`` (for example an ``error`` event of a call
    that failed at once) form a call of their own.

    Args:
        events: the events of one or more calls.

    Returns:
        One list of events per call; empty for no events.
    """
    calls: list[list[dict[str, Any]]] = []
    for event in events:
        if event.get("type") == "message_start" or not calls:
            calls.append([])
        calls[-1].append(event)
    return calls


def _strip_block(block: Any) -> Any:
    if isinstance(block, dict):
        return {k: v for k, v in block.items() if k not in _SDK_ONLY_BLOCK_FIELDS}
    return block


def wire_event(event: dict[str, Any]) -> dict[str, Any] | None:
    """The event as the API sends it, without the SDK's snapshots; ``None`` for a derived event.

    Args:
        event: one recorded event.

    Returns:
        A new dict, or ``None`` when the event is one ``messages.stream()`` derives.
    """
    kind = event.get("type")
    if kind in DERIVED_EVENTS:
        return None
    out = dict(event)
    if kind == "content_block_stop":
        out.pop("content_block", None)
    elif kind == "message_stop":
        out.pop("message", None)
    elif kind == "content_block_start" and "content_block" in out:
        out["content_block"] = _strip_block(out["content_block"])
    elif kind == "message_start" and isinstance(out.get("message"), dict):
        message = dict(out["message"])
        if isinstance(message.get("content"), list):
            message["content"] = [_strip_block(b) for b in message["content"]]
        out["message"] = message
    return out


def sse_body(events: Sequence[dict[str, Any]]) -> bytes:
    """The wire SSE bytes of events: ``event: <type>\\ndata: <json>\\n\\n`` per event.

    The ``event:`` name is the event's ``type``, as the API sends it; the SDK's
    stream reader dispatches on it (an ``error`` event makes it raise).

    Args:
        events: recorded events (snapshots and derived events are removed).

    Returns:
        The response body.
    """
    parts: list[bytes] = []
    for event in events:
        wire = wire_event(event)
        if wire is None:
            continue
        data = json.dumps(wire, ensure_ascii=False, separators=(",", ":"))
        parts.append(f"event: {wire['type']}\ndata: {data}\n\n".encode())
    return b"".join(parts)


class ReplayServer:
    """Serves recorded API calls to the SDK, one per request, in order.

    Attributes:
        calls: the recorded calls not yet served, oldest first.
        requests: the JSON body of every request received, in order (for assertions).
    """

    def __init__(self, events_or_calls: Sequence[dict[str, Any]] | Sequence[Sequence[dict[str, Any]]]) -> None:
        """Create a server.

        Args:
            events_or_calls: a flat list of events (split on ``message_start``) or a
                list of calls, each a list of events.

        Raises:
            ReplayError: nothing to serve.
        """
        items = list(events_or_calls)
        if items and all(isinstance(item, dict) for item in items):
            calls = split_calls(items)  # type: ignore[arg-type]  # checked: every item is a dict
        else:
            calls = [list(call) for call in items]  # type: ignore[arg-type]  # a list of calls
        if not calls:
            raise ReplayError("no recorded call to replay")
        self.calls: list[list[dict[str, Any]]] = calls
        self.requests: list[Any] = []
        self._total = len(calls)
        #: The last call served, its number (from 1) and the index of its first event in the recording.
        self._served: tuple[list[dict[str, Any]], int, int] | None = None
        self._next_start = 0

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        """The ``MockTransport`` handler: the next recorded call as an SSE response.

        When every call has been served, answers 400 with an API-shaped error body, so
        the SDK raises ``BadRequestError`` (not retried) rather than hanging.
        """
        try:
            self.requests.append(json.loads(request.content or b"null"))
        except ValueError:
            self.requests.append(request.content)
        import httpx2

        if not self.calls:
            body = {"type": "error", "error": {"type": "invalid_request_error", "message": self._exhausted()}}
            return httpx2.Response(400, json=body, headers={"request-id": "req_replay_exhausted"})
        call = self.calls.pop(0)
        self._served = (call, self._total - len(self.calls), self._next_start)
        self._next_start += len(call)
        return httpx2.Response(
            200,
            content=sse_body(call),
            headers={"content-type": "text/event-stream", "request-id": f"req_replay_{len(self.requests)}"},
        )

    def _exhausted(self) -> str:
        """Why there is nothing left to serve, with the cause when the last call was cut.

        A call that stops before ``message_stop`` with no ``error`` event is a recording
        that ended early (cut while it was written, or truncated since): the SDK reports an
        incomplete stream, the agent retries, and the retry finds nothing. The message
        names that cause and where the call stops, so it is said without ``-v``.
        """
        message = "replay: no recorded call left"
        if self._served is None:
            return message
        call, number, start = self._served
        kinds = [event.get("type") for event in call]
        if "message_stop" in kinds or "error" in kinds:
            return f"{message} (all {self._total} served; the model asked for one more)"
        return (
            f"{message}: the recording ended early, its call {number} of {self._total} stops at event "
            f"{start + len(call) - 1} (counted from 0), a {kinds[-1]}, with no message_stop; "
            "the agent's retry of that call found nothing to replay"
        )

    def client(self, **kwargs: Any) -> AsyncAnthropic:
        """A real ``AsyncAnthropic`` whose HTTP client is served by this replay.

        Args:
            **kwargs: passed to ``AsyncAnthropic``; ``api_key``, ``base_url`` and
                ``max_retries`` (0) have offline defaults; ``http_client`` is ours.

        Returns:
            The client.
        """
        import httpx2
        from anthropic import AsyncAnthropic

        kwargs.setdefault("api_key", OFFLINE_API_KEY)
        kwargs.setdefault("base_url", OFFLINE_BASE_URL)
        kwargs.setdefault("max_retries", 0)
        kwargs["http_client"] = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return AsyncAnthropic(**kwargs)


def replay_client(
    events_or_calls: Sequence[dict[str, Any]] | Sequence[Sequence[dict[str, Any]]], **kwargs: Any
) -> AsyncAnthropic:
    """A real ``AsyncAnthropic`` that answers each request with the next recorded call.

    Example::

        client = replay_client(load_events("anthropic_events_0.json"))
        async with client.messages.stream(model="claude-sonnet-4-5", max_tokens=1024, messages=msgs) as s:
            async for event in s:
                ...

    Args:
        events_or_calls: see ``ReplayServer``.
        **kwargs: see ``ReplayServer.client``.

    Returns:
        The client. Use ``ReplayServer`` directly to inspect the requests it received.
    """
    return ReplayServer(events_or_calls).client(**kwargs)


async def record(path: str | Path, **create_kwargs: Any) -> list[dict[str, Any]]:
    """Make one live streaming call and write its events as a recording (needs ANTHROPIC_API_KEY).

    The file has the corpus format: each event the SDK's ``messages.stream()`` yields,
    as its JSON model dump, derived events left out (the stop events keep their
    snapshots, as in the corpus). Not used by tests.

    Args:
        path: where to write the JSON array.
        **create_kwargs: the ``messages.stream()`` arguments (``model``, ``max_tokens``,
            ``messages``, ``tools`` …).

    Returns:
        The recorded events.

    Raises:
        RuntimeError: ANTHROPIC_API_KEY is not set.
    """
    import os

    from anthropic import AsyncAnthropic

    if not os.environ.get("ANTHROPIC_API_KEY"):
        raise RuntimeError("record() makes a live API call and needs ANTHROPIC_API_KEY")
    events: list[dict[str, Any]] = []
    async with AsyncAnthropic() as client, client.messages.stream(**create_kwargs) as stream:
        async for event in stream:
            if event.type in DERIVED_EVENTS:
                continue
            events.append(event.model_dump(mode="json"))
    Path(path).write_text(json.dumps(events, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")
    return events
