"""Small deliberately broken HTTP servers on 127.0.0.1 for ``envelope check``'s tests.

A ``ScriptServer`` answers each request with a script: the raw response head, then a
list of steps (bytes to send, or a pause in seconds), then either closing the
connection or holding it open for a while. It runs an asyncio loop in a thread of its
own (the check under test is a blocking client), listens on port 0, and stops by itself:
every connection is dropped after ``MAX_CONNECTION_SECONDS``, and ``stop()`` ends the loop.

Streams are built with the codec's ``Emitter`` and ``frame``, so a "good" stream is
valid by construction (and the tests validate what they serve anyway).
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from envelope import DONE, Emitter, frame

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from types import TracebackType

#: No connection of a test server lives longer than this, whatever its script says.
MAX_CONNECTION_SECONDS: Final = 20.0

AGENT: Final = "0b5c3e9e-7a51-4f6c-9a53-1d2f3e4a5b6c"

#: A head a browser stream wants: SSE type, no caching, no proxy buffering.
GOOD_HEAD: Final = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/event-stream; charset=utf-8\r\n"
    b"Cache-Control: no-cache\r\n"
    b"X-Accel-Buffering: no\r\n"
    b"Connection: close\r\n\r\n"
)


def head(status: str = "200 OK", **headers: str) -> bytes:
    """A response head with ``headers`` (``Content_Type`` is ``Content-Type``) and ``Connection: close``."""
    lines = [f"HTTP/1.1 {status}"] + [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join([*lines, "Connection: close"]) + "\r\n\r\n").encode()


@dataclass
class Script:
    """What the server sends for one request.

    Attributes:
        head: the status line and headers, ending in a blank line.
        steps: bytes to send, or a float: seconds to wait.
        hold: after the steps, seconds to keep the connection open before closing it.
    """

    head: bytes = GOOD_HEAD
    steps: Sequence[bytes | float] = ()
    hold: float = 0.0


@dataclass
class Request:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        """The body as JSON."""
        return json.loads(self.body)


@dataclass
class ScriptServer:
    """Serves ``routes[path]`` (or ``routes["*"]``) to each request; records the requests."""

    routes: dict[str, Script]
    requests: list[Request] = field(default_factory=list)
    port: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _stop: asyncio.Event | None = None

    def url(self, path: str = "/stream") -> str:
        """The URL of ``path`` on this server."""
        return f"http://127.0.0.1:{self.port}{path}"

    def __enter__(self) -> ScriptServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._main, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("test server did not start")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(MAX_CONNECTION_SECONDS + 5)

    def _main(self, ready: threading.Event) -> None:
        asyncio.run(self._serve(ready))

    async def _serve(self, ready: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        async with server:
            await self._stop.wait()
            server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await asyncio.wait_for(self._answer(reader, writer), MAX_CONNECTION_SECONDS)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the script's own end, a client that left, or the server stopping
        finally:
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raw = await reader.readuntil(b"\r\n\r\n")
        first, *rest = raw.decode("latin-1").split("\r\n")
        method, path, _ = first.split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in rest if h)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(Request(method, path, headers, body))
        script = self.routes.get(path) or self.routes["*"]
        writer.write(script.head)
        await writer.drain()
        for step in script.steps:
            if isinstance(step, bytes):
                writer.write(step)
                await writer.drain()
            else:
                await asyncio.sleep(step)
        if script.hold:
            await asyncio.sleep(script.hold)


def valid_lines(agent: str = AGENT, text: str = "The answer is 25.") -> list[bytes]:
    """The envelope lines of a complete, valid response of one agent (no warning either)."""
    em = Emitter(agent)
    init = {"format": "json", "user_query": "What is 5 + (10 * 2)?", "agent_uuid": agent, "model": "scripted"}
    final = {"stop_reason": "end_turn", "total_steps": 1}
    return [
        *em.buffered("meta_init", json.dumps(init)),
        *em.streamed("text", text),
        em.end("text"),
        *em.buffered("meta_final", json.dumps(final)),
    ]


def sse(lines: Sequence[bytes], *, done: bool = True) -> bytes:
    """``lines`` framed as SSE events, then ``[DONE]`` unless ``done`` is false."""
    return b"".join(frame(line) for line in lines) + (DONE if done else b"")


def paused_lines(agent: str = AGENT) -> list[bytes]:
    """A valid response that pauses on one frontend tool call, ``toolu_c`` (``confirm``)."""
    em = Emitter(agent)
    init = {"format": "json", "user_query": "please confirm", "agent_uuid": agent, "model": "scripted"}
    calls = [{"tool_use_id": "toolu_c", "name": "confirm", "input": {"question": "Go?"}}]
    return [
        *em.buffered("meta_init", json.dumps(init)),
        *em.buffered("tool_call", json.dumps({"question": "Go?"}), id="toolu_c", name="confirm"),
        *em.buffered("awaiting_frontend_tools", json.dumps(calls)),
    ]


def resumed_lines(agent: str = AGENT) -> list[bytes]:
    """The continuation of ``paused_lines``: a resumed ``meta_init`` (spec §8.4), the result, the end."""
    em = Emitter(agent)
    init = {
        "format": "json",
        "user_query": "please confirm",
        "agent_uuid": agent,
        "model": "scripted",
        "resume": {"tool_use_ids": ["toolu_c"]},
    }
    return [
        *em.buffered("meta_init", json.dumps(init)),
        *em.buffered("tool_result", "ok", id="toolu_c", name="confirm"),
        *em.streamed("text", "You confirmed."),
        em.end("text"),
        *em.buffered("meta_final", json.dumps({"stop_reason": "end_turn", "total_steps": 2})),
    ]


def chunks(data: bytes, size: int) -> Iterator[bytes]:
    """``data`` in pieces of ``size`` bytes."""
    for i in range(0, len(data), size):
        yield data[i : i + size]
