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
from envelope.delivery._keepalive import AHEAD
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


def _gated(timers: _Timers) -> tuple[asyncio.Queue[bytes], AsyncIterator[bytes]]:
    """Events the test puts in the queue (``b"end"`` ends them), with keep-alives on ``timers``."""
    gate = asyncio.Queue[bytes]()

    async def events() -> AsyncIterator[bytes]:
        while (event := await gate.get()) != b"end":
            yield event

    return gate, with_keepalives(events(), 15.0, timer=timers.timer)


def test_spec_delivery_6_1_c_no_keepalive_while_events_flow() -> None:
    """[D6.1-c]: 200 events that come before any silence ends carry no comment; each restarts the silence."""

    async def scenario() -> tuple[list[bytes], _Timers]:
        timers = _Timers()
        gate, stream = _gated(timers)
        out: list[bytes] = []
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
        gate, stream = _gated(timers)
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


def test_spec_delivery_6_1_d_events_ready_cost_no_timer_each() -> None:
    """[D6.1-d]: 1,000 events that are ready at once start a silence timer only when the read-ahead runs dry."""

    async def scenario() -> tuple[list[bytes], _Timers]:
        timers = _Timers()

        async def events() -> AsyncIterator[bytes]:
            for n in range(1000):
                yield b"event %d" % n

        return [e async for e in with_keepalives(events(), 15.0, timer=timers.timer)], timers

    out, timers = asyncio.run(scenario())
    assert out == [b"event %d" % n for n in range(1000)]
    assert timers.started <= 1000 // AHEAD + 2  # a wait per read-ahead, not per event (was 1,001)


def test_spec_delivery_6_1_d_reads_at_most_ahead_events_ahead() -> None:
    """[D6.1-d]: a client that takes nothing holds at most ``AHEAD`` events read for it; they come in order."""

    async def scenario() -> tuple[list[int], list[bytes]]:
        read = 0
        taken = 0
        ahead: list[int] = []

        async def events() -> AsyncIterator[bytes]:
            nonlocal read
            for n in range(10 * AHEAD):
                read += 1
                ahead.append(read - taken)
                yield b"event %d" % n

        stream = with_keepalives(events(), 15.0, timer=_Timers().timer)
        out = []
        for _ in range(3):
            out.append(await anext(stream))
            taken += 1
            for _ in range(100):  # the reader runs as far as it may while the client takes nothing
                await asyncio.sleep(0)
        async for event in stream:
            out.append(event)
            taken += 1
        return ahead, out

    ahead, out = asyncio.run(scenario())
    assert max(ahead) == AHEAD  # it reads ahead as far as it may, never further
    assert out == [b"event %d" % n for n in range(10 * AHEAD)]


def test_spec_delivery_6_1_d_an_error_of_the_events_comes_in_its_place() -> None:
    """[D6.1-d]: what the events raise is raised after the events before it, not before them."""

    async def scenario() -> tuple[list[bytes], BaseException | None]:
        async def events() -> AsyncIterator[bytes]:
            for n in range(3 * AHEAD):
                yield b"event %d" % n
            raise ValueError("the producer broke")

        out: list[bytes] = []
        try:
            async for event in with_keepalives(events(), 15.0, timer=_Timers().timer):
                out.append(event)
        except ValueError as exc:
            return out, exc
        return out, None

    out, error = asyncio.run(scenario())
    assert out == [b"event %d" % n for n in range(3 * AHEAD)]
    assert isinstance(error, ValueError)
    assert str(error) == "the producer broke"


def test_spec_delivery_6_1_d_a_late_timer_of_an_earlier_wait_sends_nothing() -> None:
    """[D6.1-d]: the timer of a wait an event ended may finish during the next wait; it does not end that one."""

    async def scenario() -> list[bytes]:
        timers = _Timers()
        gate, stream = _gated(timers)
        out: list[bytes] = []
        waiting = asyncio.ensure_future(anext(stream))
        while timers.started < 1:
            await asyncio.sleep(0)
        gate.put_nowait(b"a")  # ends the first wait; its timer is cancelled and finishes later
        out.append(await waiting)
        waiting = asyncio.ensure_future(anext(stream))  # the second wait starts before that
        for _ in range(100):
            await asyncio.sleep(0)
        assert not waiting.done()  # the first timer's end did not end this silence
        gate.put_nowait(b"b")
        out.append(await waiting)
        gate.put_nowait(b"end")
        out += [e async for e in stream]
        return out

    assert asyncio.run(scenario()) == [b"a", b"b"]


def test_spec_delivery_6_1_d_a_client_that_leaves_stops_the_reader_and_closes_the_events() -> None:
    """[D6.1-d]: closing the stream cancels its reading task and closes the events it read from."""

    async def scenario() -> tuple[bool, int]:
        closed = False
        read = 0

        async def events() -> AsyncIterator[bytes]:
            nonlocal closed, read
            try:
                while True:
                    read += 1
                    yield b"event"
                    await asyncio.sleep(0)
            finally:
                closed = True

        stream = with_keepalives(events(), 15.0, timer=_Timers().timer)
        await anext(stream)
        await stream.aclose()  # type: ignore[attr-defined]
        before = read
        for _ in range(100):
            await asyncio.sleep(0)
        return closed, read - before

    closed, read_after = asyncio.run(scenario())
    assert closed
    assert read_after == 0
