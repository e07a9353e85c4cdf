"""Spec §2: SSE framing and the incremental reader (WHATWG "interpreting an event stream")."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from envelope import DONE, DecodeError, Emitter, EncodeError, SSEEvent, SSEReader, frame
from streams import nasty_text


def _read_split(data: bytes, cuts: list[int], **kw: int) -> list[SSEEvent]:
    reader = SSEReader(**kw)
    events: list[SSEEvent] = []
    last = 0
    for cut in sorted(set(cuts)):
        events += reader.feed(data[last:cut])
        last = cut
    events += reader.feed(data[last:])
    reader.close()
    return events


@given(deltas=st.lists(nasty_text, max_size=8), data=st.data())
def test_spec_02_1_frame_then_read_is_identity_at_any_split(deltas: list[str], data: st.DataObject) -> None:
    """[2.1-a] framed envelope lines read back as the same data, however the bytes are split."""
    em = Emitter("agent-1", 120)
    lines = [line for d in deltas for line in em.streamed("text", d)] + [em.end("text")]
    stream = b"".join(frame(line) for line in lines) + DONE
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=20))
    events = _read_split(stream, cuts)
    assert [e.data.encode() for e in events] == [*lines, b"[DONE]"]
    byte_by_byte = _read_split(stream, list(range(len(stream))))
    assert byte_by_byte == events


def test_spec_02_1_frame_refuses_line_ends() -> None:
    """[2.1-b] a data line holding CR or LF would break the framing: refused with its offset."""
    with pytest.raises(EncodeError, match="byte offset 2") as info:
        frame(b'{"\ra')
    assert info.value.position.offset == 2
    with pytest.raises(EncodeError):
        frame(b"a\nb")
    assert frame(b"{}") == b"data: {}\n\n"


@given(
    fields=st.lists(
        st.tuples(
            st.sampled_from(["data", "event", "id", "retry", "other", ":"]),
            st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=10),
        ),
        max_size=12,
    ),
    ending=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    data=st.data(),
)
@example(fields=[("data", "x")], ending=b"\r", data=None)
def test_spec_02_3_line_endings_and_splits(
    fields: list[tuple[str, str]], ending: bytes, data: st.DataObject | None
) -> None:
    """[2.3-a] LF, CRLF and CR end lines alike, at any split, CR/LF pairs split included."""
    body = b""
    for name, value in fields:
        if name == ":":
            body += b":" + value.encode() + ending
        else:
            body += name.encode() + b": " + value.encode() + ending
    body += ending
    reference = _read_split(body.replace(ending, b"\n"), [])
    cuts = list(range(len(body))) if data is None else data.draw(st.lists(st.integers(0, len(body)), max_size=10))
    events = _read_split(body, cuts)
    assert [(e.data, e.event, e.id) for e in events] == [(e.data, e.event, e.id) for e in reference]


def test_spec_02_3_whatwg_field_rules() -> None:
    """[2.3-b] multi-line data, comments, event names, id persistence, retry, unknown fields."""
    stream = (
        b": a comment\n"
        b"event: update\nid: 7\ndata: first\ndata:second\ndata\n\n"
        b"data:  two spaces\nretry: 1500\nretry: x\nbogus: field\n\n"
        b"id\n\n"
        b"data: after reset\n\n"
        b"id: a\x00b\ndata: nul id ignored\n\n"
    )
    reader = SSEReader()
    events = reader.feed(stream)
    reader.close()
    assert [(e.data, e.event, e.id) for e in events] == [
        ("first\nsecond\n", "update", "7"),
        (" two spaces", "message", "7"),
        ("after reset", "message", ""),
        ("nul id ignored", "message", ""),
    ]
    assert reader.retry == 1500
    assert (events[0].line, events[0].offset) == (2, 12)
    assert events[1].line == 8


def test_spec_02_3_empty_data_dispatches_empty_string() -> None:
    """A ``data:`` line with no value still dispatches an event with empty data; no data: none."""
    reader = SSEReader()
    assert [e.data for e in reader.feed(b"data:\n\nevent: x\n\n")] == [""]


def test_spec_02_3_bom_is_stripped_only_at_start() -> None:
    reader = SSEReader()
    events = reader.feed(b"\xef\xbb")
    events += reader.feed(b"\xbfdata: x\n\ndata: \xef\xbb\xbfy\n\n")
    assert [e.data for e in events] == ["x", "\ufeffy"]


def test_spec_02_3_invalid_utf8_is_an_error_with_offset() -> None:
    """[2.3-c] invalid UTF-8 is refused with its byte offset, never replaced."""
    reader = SSEReader()
    reader.feed(b"data: ok\n\n")
    with pytest.raises(DecodeError, match="invalid UTF-8") as info:
        reader.feed(b"data: a\xffb\n\n")
    assert info.value.position.offset == 17
    assert info.value.position.line == 3


def test_spec_02_3_line_cap_bounds_memory() -> None:
    """[2.3-d] input with no line end cannot grow past the cap; long data across lines neither."""
    reader = SSEReader(max_line_bytes=64)
    reader.feed(b"data: " + b"x" * 50)
    with pytest.raises(DecodeError, match="longer than max_line_bytes=64"):
        reader.feed(b"y" * 20)
    reader = SSEReader(max_line_bytes=64)
    with pytest.raises(DecodeError, match="event data longer"):
        reader.feed(b"data: " + b"x" * 40 + b"\n" + b"data: " + b"x" * 40 + b"\n")
    reader = SSEReader(max_line_bytes=64)
    with pytest.raises(DecodeError, match="longer than max_line_bytes"):
        reader.feed(b"data: " + b"x" * 100 + b"\n")


def test_spec_02_3_close_inside_an_event_or_line() -> None:
    """[2.3-e] the input stopping inside a line or an event is an error, not a silent drop."""
    reader = SSEReader()
    reader.feed(b"data: x\n")
    with pytest.raises(DecodeError, match="inside an event") as info:
        reader.close()
    assert info.value.position.line == 1
    reader = SSEReader()
    reader.feed(b"data: x")
    with pytest.raises(DecodeError, match="inside a line"):
        reader.close()
    reader = SSEReader()
    reader.feed(b"data: x\n\n: trailing comment\n")
    assert reader.close() == []
    with pytest.raises(DecodeError, match="after close"):
        reader.feed(b"x")


def test_reader_accepts_empty_chunks() -> None:
    reader = SSEReader()
    assert reader.feed(b"") == []
    assert reader.feed(b"data: a\r") == []
    assert reader.feed(b"") == []
    assert reader.feed(b"\n") == []
    assert [e.data for e in reader.feed(b"\n")] == ["a"]
