"""The per-line fast paths of ``LiveStream`` (issue 26 §5): the same bytes, errors and wake-ups as before.

A live stream frames its lines with an ``EventFramer`` built once per response, and wakes
only the followers that wait; these tests hold it to ``frame_event`` byte for byte and to
the follower guarantees of spec delivery §2.2 when followers come and go.
"""

from __future__ import annotations

import asyncio
import collections.abc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envelope import Emitter, EncodeError
from envelope.delivery import DONE_LINE, LiveStream, MemoryJournal, frame_event
from envelope.delivery._ids import EventFramer
from server_support import data_lines
from validating import assert_valid

_RUN_IDS = st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)
_LINES = st.one_of(st.just(DONE_LINE), st.binary(max_size=60).filter(lambda b: b"\n" not in b and b"\r" not in b))


def _response(texts: list[str]) -> list[bytes]:
    """A valid response: meta_init, ``texts`` streamed as one text block, meta_final, [DONE]."""
    emitter = Emitter("ag-1", 2048)
    lines = [*emitter.buffered("meta_init", '{"format":"json","user_query":"q","agent_uuid":"ag-1","model":"m"}')]
    for text in texts:
        lines += emitter.streamed("text", text)
    lines.append(emitter.end("text"))
    lines += emitter.buffered("meta_final", '{"stop_reason":"end_turn","total_steps":1,"cumulative_usage":{}}')
    return [*lines, DONE_LINE]


@settings(max_examples=200)
@given(_RUN_IDS, st.integers(0, 10**9), st.lists(_LINES, max_size=12), st.integers(0, 10**12))
def test_the_framer_gives_frame_event_bytes(run_id: str, response: int, lines: list[bytes], start: int) -> None:
    """[D1.1-a]: the framer's event of any line (CR and LF aside) is ``frame_event``'s, ``id:`` line included."""
    framer = EventFramer(run_id, response)
    for seq, line in enumerate(lines, start=start):
        assert framer(seq, line) == frame_event(run_id, response, seq, line)


@settings(max_examples=50)
@given(_RUN_IDS, st.integers(0, 10**9), st.lists(st.text(max_size=30), max_size=8))
def test_a_live_stream_keeps_frame_event_bytes(run_id: str, response: int, texts: list[str]) -> None:
    """[D1.1-a]: each event a live stream keeps is ``frame_event`` of its line; the whole is a valid stream."""
    stream = LiveStream(run_id, response, MemoryJournal())
    for line in _response(texts):
        stream.append(line)
    assert stream.events == [frame_event(run_id, response, seq, line) for seq, line in enumerate(stream.lines)]
    assert_valid(b"".join(stream.events))


@pytest.mark.parametrize("line", [b'{"a":"x\ny"}', b'{"a":"x\ry"}', b"\r\n", b"abc\n"])
def test_the_framer_refuses_cr_and_lf_as_frame_event_does(line: bytes) -> None:
    """A line holding CR or LF would break the SSE framing: the same ``EncodeError`` (where and what) as before."""
    with pytest.raises(EncodeError) as old:
        frame_event("r", 0, 3, line)
    with pytest.raises(EncodeError) as new:
        EventFramer("r", 0)(3, line)
    assert str(new.value) == str(old.value)


def test_followers_that_leave_while_waiting_leave_no_waiter_and_others_go_on() -> None:
    """[D2.2-a]: followers cancelled or closed while waiting are forgotten; one that stays gets every line once."""

    async def scenario() -> tuple[list[bytes], int, int]:
        stream = LiveStream("r", 0, MemoryJournal())
        stream.append(lines[0])

        async def follower() -> list[bytes]:
            return [event async for event in stream.follow()]

        staying = asyncio.create_task(follower())
        leaving = [asyncio.create_task(follower()) for _ in range(5)]
        closed = stream.follow()
        assert await anext(closed) == stream.events[0]
        waiting = asyncio.ensure_future(anext(closed))
        await asyncio.sleep(0.01)  # every follower waits for the next line
        waiters_while_waiting = len(stream._waiters)
        for task in leaving:
            task.cancel()
        waiting.cancel()
        await asyncio.gather(*leaving, waiting, return_exceptions=True)
        assert isinstance(closed, collections.abc.AsyncGenerator)
        await closed.aclose()
        left_waiting = len(stream._waiters)  # the staying follower's alone
        for line in lines[1:]:
            await asyncio.sleep(0)
            stream.append(line)
        got = await asyncio.wait_for(staying, 10)
        return got, waiters_while_waiting, left_waiting

    lines = _response(["a", "b", "c"])
    got, waiting, left = asyncio.run(scenario())
    assert waiting == 7
    assert left == 1
    assert_valid(b"".join(got))
    assert data_lines(b"".join(got)) == lines


def test_a_follower_that_waits_is_woken_by_each_line() -> None:
    """A follower between lines gets each line as it is appended, not only at the end."""

    async def scenario() -> list[int]:
        stream = LiveStream("r", 0, MemoryJournal())
        seen: list[int] = []

        async def follower() -> None:
            async for _event in stream.follow():
                seen.append(len(stream.lines))

        task = asyncio.create_task(follower())
        for line in lines:
            await asyncio.sleep(0.001)
            stream.append(line)
        await asyncio.wait_for(task, 10)
        assert_valid(b"".join(stream.events))
        return seen

    lines = _response(["a", "b"])
    assert asyncio.run(scenario()) == list(range(1, len(lines) + 1))
