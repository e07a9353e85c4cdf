"""Keep-alive comments after a silence only, never on a fixed period (spec delivery §6.1-c, issue 37).

The timer is the test's own: each silence timer ends only when the test fires it, so
"time" passes exactly where the test says and nothing here depends on the machine's speed.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import httpx2
from starlette.applications import Starlette
from starlette.routing import Route

from envelope.delivery import DONE_LINE, KEEPALIVE, MemoryJournal, with_keepalives
from envelope.delivery.asgi import Delivery
from server_support import data_lines, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from starlette.requests import Request
    from starlette.responses import Response


class _Timers:
    """Silence timers that end only when the test fires the newest one."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0
        self._newest: asyncio.Event | None = None

    async def timer(self, seconds: float) -> None:
        assert seconds == 15.0
        self.started += 1
        self._newest = event = asyncio.Event()
        try:
            await event.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise

    def fire(self) -> None:
        assert self._newest is not None
        self._newest.set()


def test_spec_delivery_6_1_c_no_keepalive_while_events_flow() -> None:
    """[D6.1-c]: 200 events that come before any silence ends carry no comment; each restarts the silence."""

    async def scenario() -> tuple[list[bytes], _Timers]:
        timers = _Timers()
        gate = asyncio.Queue[bytes]()

        async def events() -> AsyncIterator[bytes]:
            while (event := await gate.get()) != b"end":
                yield event

        out: list[bytes] = []
        stream = with_keepalives(events(), 15.0, timer=timers.timer)
        for n in range(200):
            gate.put_nowait(b"event %d" % n)
            out.append(await anext(stream))
        gate.put_nowait(b"end")
        out += [e async for e in stream]
        return out, timers

    out, timers = asyncio.run(scenario())
    assert out == [b"event %d" % n for n in range(200)]
    assert KEEPALIVE not in out
    assert timers.started == 201  # one silence per wait, started anew after each event
    assert timers.cancelled == 201  # none ran out


def test_spec_delivery_6_1_c_one_keepalive_per_silence_in_order() -> None:
    """[D6.1-c]: each silence that runs out gives one comment, in its place; the event waited for is not lost."""

    async def scenario() -> list[bytes]:
        timers = _Timers()
        gate = asyncio.Queue[bytes]()

        async def events() -> AsyncIterator[bytes]:
            while (event := await gate.get()) != b"end":
                yield event

        stream = with_keepalives(events(), 15.0, timer=timers.timer)
        out: list[bytes] = []
        gate.put_nowait(b"a")
        out.append(await anext(stream))
        for _ in range(3):  # three silences in a row, each one comment
            waiting = asyncio.ensure_future(anext(stream))
            while timers.started < len(out) + 1:
                await asyncio.sleep(0)
            timers.fire()
            out.append(await waiting)
        gate.put_nowait(b"b")
        out.append(await anext(stream))
        gate.put_nowait(b"end")
        out += [e async for e in stream]
        return out

    assert asyncio.run(scenario()) == [b"a", KEEPALIVE, KEEPALIVE, KEEPALIVE, b"b"]


def test_spec_delivery_6_1_c_delivery_sends_keepalives_in_silences() -> None:
    """[D6.1-c]: a Delivery stream silent until its client has seen a comment gets one; the stream stays valid."""
    journal = MemoryJournal()
    delivery = Delivery(journal, keepalive_seconds=0.05)
    seen = asyncio.Event()
    lines = [
        b'{"type":"meta_init","agent":"a","delta":"{\\"format\\":\\"json\\",\\"user_query\\":\\"q\\",'
        b'\\"agent_uuid\\":\\"a\\",\\"model\\":\\"m\\"}","final":true}',
        b'{"type":"meta_final","agent":"a","delta":"{\\"stop_reason\\":\\"end_turn\\",\\"total_steps\\":1,'
        b'\\"cumulative_usage\\":{}}","final":true}',
        DONE_LINE,
    ]
    loop: list[asyncio.AbstractEventLoop] = []

    async def model() -> AsyncIterator[bytes]:
        yield lines[0]
        await seen.wait()  # silent until the client saw a keep-alive: an ordering, no clock
        yield lines[1]
        yield lines[2]

    async def chat(request: Request) -> Response:
        loop.append(asyncio.get_running_loop())
        return delivery.stream(request.path_params["run_id"], model())

    body = b""
    app = Starlette(routes=[Route("/chat/{run_id}", chat)])
    with (
        running(app) as base,
        httpx2.Client(timeout=30) as client,
        client.stream("GET", base + "/chat/run-1") as answer,
    ):
        for chunk in answer.iter_bytes():
            body += chunk
            if KEEPALIVE in body and not seen.is_set():
                loop[0].call_soon_threadsafe(seen.set)
    assert body.index(KEEPALIVE) > body.index(b"meta_init")
    assert data_lines(body) == lines
    assert_valid(body)
