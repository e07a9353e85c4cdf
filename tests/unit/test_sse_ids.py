"""SSE ``id:`` fields (issue 15's resumable streams): readers accept them, never route by them [2.3-b].

A producer that supports resumption with ``Last-Event-ID`` puts ``id: <n>`` before each
event's ``data:`` line. The ids serve the browser's reconnection only: every reader here
must give the same envelope lines and the same transcript with them as without them, and
``SSEEvent.id`` carries the last event id in force at each event.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envelope import Reconstructor, SSEReader, StreamReader, frame

A = "a"
LINES = [
    json.dumps({"type": "text", "agent": A, "final": False, "delta": f"part {i} "}, separators=(",", ":")).encode()
    for i in range(5)
] + [b'{"type":"text","agent":"a","final":true,"delta":""}']


def _stream(with_ids: bool, line_end: bytes = b"\n") -> bytes:
    out = b""
    for n, line in enumerate(LINES, start=1):
        event = (b"id: %d\n" % n if with_ids else b"") + frame(line)
        out += event.replace(b"\n", line_end)
    done = (b"id: %d\n" % (len(LINES) + 1) if with_ids else b"") + b"data: [DONE]\n\n"
    return out + done.replace(b"\n", line_end)


def _transcript(data: bytes, cuts: list[int], batch: bool) -> object:
    reader = StreamReader()
    rec = Reconstructor()
    last = 0
    for cut in [*sorted(cuts), len(data)]:
        piece = data[last:cut]
        last = max(last, cut)
        if batch:
            rec.feed_many(reader.feed_batch(piece))
        else:
            for raw in reader.feed(piece):
                rec.feed(raw)
    rec.feed_many(reader.close())
    return rec.transcript().to_dict()


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n", b"\r"])
def test_spec_02_3_b_ids_change_nothing_the_reconstructor_sees(line_end: bytes) -> None:
    """[2.3-b] `id` sets the last event id and nothing else: the same transcript with ids as without."""
    plain = _transcript(_stream(False, line_end), [], False)
    for batch in (False, True):
        assert _transcript(_stream(True, line_end), [], batch) == plain


@given(cuts=st.lists(st.integers(0, 2000), max_size=6), batch=st.booleans())
def test_ids_at_any_split(cuts: list[int], batch: bool) -> None:
    assert _transcript(_stream(True), cuts, batch) == _transcript(_stream(False), [], False)


def test_sse_event_exposes_the_last_event_id() -> None:
    reader = SSEReader()
    events = reader.feed(_stream(True))
    assert [e.id for e in events] == [str(n) for n in range(1, len(LINES) + 2)]
    assert reader.last_event_id == str(len(LINES) + 1)
    # The id persists until another id field changes it (WHATWG), and an empty one clears it.
    events = reader.feed(b"data: x\n\nid\ndata: y\n\n")
    assert [e.id for e in events] == [str(len(LINES) + 1), ""]


def test_stream_reader_lines_are_the_data_of_events_with_ids() -> None:
    reader = StreamReader()
    got = reader.feed(_stream(True)) + reader.close()
    assert [r.data.encode() for r in got] == [*LINES, b"[DONE]"]
    # An event's position is where its first field starts: the id line (spec §2.3).
    assert [r.line for r in got] == [1 + 3 * n for n in range(len(LINES) + 1)]
