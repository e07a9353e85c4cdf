"""``StreamReader.feed_batch`` + ``Reconstructor.feed_many`` give exactly what line-by-line feeding gives [7.8-a].

The batch path is only a faster way to do the same thing, so every property here
compares it with the plain path (``StreamReader.feed`` then ``Reconstructor.feed`` per
line) on the same input: the transcript, the open blocks, ``done``, the envelope count
(seen through the index of one more, bad, line), and, when the input is refused, the
error's class, message, position, field, key and section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from envelope import (
    DecodeError,
    Emitter,
    EnvelopeError,
    RawLine,
    Reconstructor,
    SequenceError,
    StreamReader,
    ValidationError,
    frame,
)
from streams import emit, specs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

AGENTS = ["a", "agent-β"]
TEXT = b'{"type":"text","agent":"a","final":false,"delta":"he\\"llo"}'
END = b'{"type":"text","agent":"a","final":true,"delta":""}'
#: Lines that take every branch of the inlined path and every reason to leave it.
LINES = [
    TEXT,
    END,
    b'{"type":"thinking","agent":"b","final":false,"delta":"hmm \xe6\xbc\xa2"}',
    b'{"type":"thinking","agent":"b","final":true,"delta":""}',
    b'{"type":"tool_result","agent":"a","final":false,"id":"t","name":"n","delta":"x"}',
    b'{"type":"tool_result","agent":"a","final":false,"id":"u","name":"n","delta":"y"}',
    b'{"type":"tool_result_image","agent":"a","final":false,"id":"t","name":"n","delta":"","src":"s","media_type":"m"}',
    b'{"type":"tool_result","agent":"a","final":true,"id":"t","name":"n","delta":"z"}',
    b'{"type":"citation","agent":"a","final":true,"delta":"c","citation_type":"char_location","document_index":1}',
    b'{"type":"meta_init","agent":"a","final":true,"delta":"{\\"format\\": \\"json\\"}"}',
    b'{"type":"tool_call","agent":"a","final":true,"id":"c1","name":"f","delta":"{}","extra":[1,{"x":null}]}',
    b'{"type":"mystery","agent":"a","final":true,"delta":""}',
    b'{"type":"text","agent":"a","final":"no","delta":""}',
    b'{"type":"text","agent":"a","final":false,"delta":"x","url":1e999}',
    b'{"type":"text","agent":"a","final":false,"delta":"x","id":5}',
    b'{"type":"text","agent":"a"',
    b"[DONE]",
]


class Outcome:
    """Everything observable after a run: the state, and the error if one stopped it."""

    def __init__(self, rec: Reconstructor, error: EnvelopeError | None) -> None:
        self.transcript = rec.transcript().to_dict()
        self.open = rec.open_blocks()
        self.done = rec.done
        self.error = None if error is None else _describe(error)
        # The next envelope's index shows the count of lines seen (refused ones included).
        try:
            rec.feed(b"{")
        except EnvelopeError as exc:
            self.next_index = exc.position.index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Outcome) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return f"Outcome({vars(self)!r})"


def _describe(error: EnvelopeError) -> tuple[Any, ...]:
    return (type(error), str(error), error.position, error.field, error.key, error.section)


def _cut(data: bytes, cuts: Iterable[int]) -> Iterator[bytes]:
    last = 0
    for cut in [*sorted(c % (len(data) + 1) for c in cuts), len(data)]:
        yield data[last:cut]
        last = cut


def _plain(data: bytes, cuts: list[int], **limits: int) -> Outcome:
    reader, rec = StreamReader(), Reconstructor(**limits)
    try:
        for piece in _cut(data, cuts):
            for raw in reader.feed(piece):
                rec.feed(raw)
        for raw in reader.close():
            rec.feed(raw)
    except EnvelopeError as exc:
        return Outcome(rec, exc)
    return Outcome(rec, None)


def _batched(data: bytes, cuts: list[int], **limits: int) -> Outcome:
    reader, rec = StreamReader(), Reconstructor(**limits)
    try:
        for piece in _cut(data, cuts):
            rec.feed_many(reader.feed_batch(piece))
        rec.feed_many(reader.close())
    except EnvelopeError as exc:
        return Outcome(rec, exc)
    return Outcome(rec, None)


def _sse(lines: Sequence[bytes]) -> bytes:
    return b"".join(frame(line) if line != b"[DONE]" else b"data: [DONE]\n\n" for line in lines)


@st.composite
def valid_streams(draw: st.DrawFn) -> list[bytes]:
    """Lines of one to three agents' blocks, interleaved keeping each agent's order."""
    per_agent: list[list[bytes]] = []
    for agent in draw(st.lists(st.sampled_from([*AGENTS, "c"]), min_size=1, max_size=3, unique=True)):
        em = Emitter(agent, max_bytes=draw(st.sampled_from([90, 2048])))
        lines: list[bytes] = []
        for spec in draw(st.lists(specs(["t1", "t2"], ["read", "write"]), max_size=4)):
            lines += emit(em, spec)
        per_agent.append(lines)
    order = draw(st.permutations([i for i, lines in enumerate(per_agent) for _ in lines]))
    taken = [0] * len(per_agent)
    out: list[bytes] = []
    for i in order:
        out.append(per_agent[i][taken[i]])
        taken[i] += 1
    if draw(st.booleans()):
        out.append(b"[DONE]")
    return out


limits = st.fixed_dictionaries(
    {},
    optional={"max_open_blocks": st.integers(0, 3), "max_block_bytes": st.integers(0, 40)},
)


@given(lines=valid_streams(), cuts=st.lists(st.integers(0, 10**6), max_size=6))
def test_valid_streams_rebuild_the_same(lines: list[bytes], cuts: list[int]) -> None:
    data = _sse(lines)
    assert _batched(data, cuts) == _plain(data, cuts)


@given(
    lines=valid_streams(),
    cuts=st.lists(st.integers(0, 10**6), max_size=6),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(b'\n\r\x00:{}",\\ a\xe6\xff')), max_size=4),
    extra=st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.sampled_from(
                [b": ping\n", b"event: x\n", b"id: 7\n", b"retry: 5\n", b"\n", b"data: [DONE]\n\n", b"\r\n"]
            ),
        ),
        max_size=3,
    ),
    limit=limits,
)
@example(lines=[TEXT, END, b"[DONE]", TEXT], cuts=[], flips=[], extra=[], limit={})
def test_mutated_streams_fail_the_same(
    lines: list[bytes],
    cuts: list[int],
    flips: list[tuple[int, int]],
    extra: list[tuple[int, bytes]],
    limit: dict[str, int],
) -> None:
    data = bytearray(_sse(lines))
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    for at, piece in extra:
        data[at % (len(data) + 1) : at % (len(data) + 1)] = piece
    assert _batched(bytes(data), cuts, **limit) == _plain(bytes(data), cuts, **limit)


def _lines_plain(lines: Sequence[bytes | str | RawLine], **limits: int) -> Outcome:
    rec = Reconstructor(**limits)
    try:
        for line in lines:
            rec.feed(line)
    except EnvelopeError as exc:
        return Outcome(rec, exc)
    return Outcome(rec, None)


def _lines_many(
    lines: Sequence[bytes | str | RawLine], wrap: Callable[[list[Any]], Iterable[Any]], **limits: int
) -> Outcome:
    rec = Reconstructor(**limits)
    try:
        rec.feed_many(wrap(list(lines)))
    except EnvelopeError as exc:
        return Outcome(rec, exc)
    return Outcome(rec, None)


@given(
    picks=st.lists(st.tuples(st.integers(0, len(LINES) - 1), st.sampled_from(["bytes", "str", "raw"])), max_size=25),
    wrap=st.sampled_from([list, tuple, iter]),
    limit=limits,
)
@example(picks=[(4, "bytes"), (6, "str"), (5, "raw")], wrap=list, limit={})  # id changes inside the block
@example(picks=[(0, "bytes"), (16, "bytes"), (1, "str")], wrap=iter, limit={})  # content after [DONE]
@example(
    picks=[(0, "bytes"), (16, "bytes"), (9, "str"), (0, "raw"), (1, "bytes")], wrap=list, limit={}
)  # next response
@example(picks=[(16, "bytes"), (9, "str"), (16, "raw"), (9, "bytes"), (0, "str")], wrap=tuple, limit={})
def test_any_lines_in_any_container(
    picks: list[tuple[int, str]], wrap: Callable[[list[Any]], Iterable[Any]], limit: dict[str, int]
) -> None:
    lines: list[bytes | str | RawLine] = []
    for n, (i, form) in enumerate(picks):
        line = LINES[i]
        lines.append(line if form == "bytes" else line.decode() if form == "str" else RawLine(line.decode(), n + 1, n))
    assert _lines_many(lines, wrap, **limit) == _lines_plain(lines, **limit)


# --------------------------------------------------------------------------- examples


def test_done_mid_batch_then_content_is_refused_at_its_index() -> None:
    rec = Reconstructor()
    with pytest.raises(SequenceError) as caught:
        rec.feed_many([TEXT, b"[DONE]", END, TEXT])
    assert caught.value.position.index == 2
    assert caught.value.section == "8.2-a"
    assert rec.done
    assert rec.transcript().to_dict()["agents"]["a"]["blocks"] == [
        {"type": "text", "complete": False, "content": 'he"llo', "citations": []}
    ]


def test_feed_many_after_done_refuses_the_first_line() -> None:
    rec = Reconstructor()
    rec.feed_many([b"[DONE]"])
    with pytest.raises(SequenceError) as caught:
        rec.feed_many([END])
    assert caught.value.position.index == 1


def test_error_mid_batch_applies_the_lines_before_it() -> None:
    data = _sse([TEXT, TEXT, b'{"type":"text","agent":"a","final":tru}', END])
    reader, rec = StreamReader(), Reconstructor()
    batch = reader.feed_batch(data)
    assert len(batch) == 4
    with pytest.raises(DecodeError) as caught:
        rec.feed_many(batch)
    at = 2 * (len(b"data: ") + len(TEXT) + 2)
    assert caught.value.position.line == 5
    assert caught.value.position.index == 2
    # The in-line offset of msgspec's complaint is added to the line's own offset.
    assert caught.value.position.offset is not None
    assert caught.value.position.offset > at
    plain = _plain(data, [])
    assert plain.error is not None
    assert str(caught.value) == plain.error[1]
    assert rec.transcript().to_dict()["agents"]["a"]["blocks"][0]["content"] == 'he"llohe"llo'


def test_unknown_type_mid_batch_is_feeds_error() -> None:
    lines = [TEXT, b'{"type":"mystery","agent":"a","final":true,"delta":""}']
    rec = Reconstructor()
    with pytest.raises(ValidationError, match="unknown envelope type 'mystery'") as caught:
        rec.feed_many(lines)
    assert caught.value.position.index == 1


def test_an_id_change_inside_a_block_is_feeds_error() -> None:
    rec = Reconstructor()
    with pytest.raises(SequenceError, match="differs from the open block's id") as caught:
        rec.feed_many([LINES[4], LINES[5]])
    assert caught.value.position.index == 1
    assert caught.value.section == "7.2-d"


def test_limits_are_checked_before_anything_changes() -> None:
    assert _lines_many([TEXT, TEXT, END], list, max_block_bytes=10) == _lines_plain(
        [TEXT, TEXT, END], max_block_bytes=10
    )
    two = [TEXT, b'{"type":"thinking","agent":"a","final":false,"delta":"x"}']
    assert _lines_many(two, list, max_open_blocks=1) == _lines_plain(two, max_open_blocks=1)
    assert _lines_plain(two, max_open_blocks=1).error is not None


def test_batch_is_a_sequence_of_the_same_raw_lines() -> None:
    data = b": hi\n" + _sse([TEXT, END]) + b"data: " + TEXT + b"\n\ndata: [DO"
    for cut in range(len(data) + 1):
        plain, fast = StreamReader(), StreamReader()
        want = plain.feed(data[:cut]) + plain.feed(data[cut:])
        first = fast.feed_batch(data[:cut])
        got = list(first) + list(fast.feed_batch(data[cut:]))
        assert got == want
    batch = StreamReader().feed_batch(_sse([TEXT, END, b"[DONE]"]))
    assert batch[-1] == RawLine("[DONE]", 5, 2 * (len(TEXT) + 8) + len(END) - len(TEXT))
    assert batch[0:2] == [RawLine(TEXT.decode(), 1, 0), RawLine(END.decode(), 3, len(TEXT) + 8)]
    with pytest.raises(IndexError):
        batch[3]


@given(
    data=st.binary(max_size=300),
    cuts=st.lists(st.integers(0, 300), max_size=4),
    sse=st.booleans(),
    max_line=st.sampled_from([10, 40, 2048]),
)
@example(data=TEXT + b"\n\ndata: \xff\n\n", cuts=[], sse=True, max_line=2048)
@example(data=b"a\n\ndata: " + b"x" * 40 + b"\n\n", cuts=[], sse=True, max_line=40)
@example(data=b"a\n\ndata: b\ndata: c\n\n", cuts=[3], sse=True, max_line=2048)
def test_feed_batch_gives_feeds_lines_and_errors(data: bytes, cuts: list[int], sse: bool, max_line: int) -> None:
    if sse:
        data = b"data: " + data
    plain, fast = StreamReader(max_line_bytes=max_line), StreamReader(max_line_bytes=max_line)
    want: list[RawLine] | tuple[Any, ...]
    got: list[RawLine] | tuple[Any, ...]
    try:
        want = [line for piece in _cut(data, cuts) for line in plain.feed(piece)] + plain.close()
    except EnvelopeError as exc:
        want = _describe(exc)
    try:
        got = [line for piece in _cut(data, cuts) for line in fast.feed_batch(piece)] + fast.close()
    except EnvelopeError as exc:
        got = _describe(exc)
    assert got == want


def test_empty_and_undetected_input() -> None:
    reader = StreamReader()
    assert len(reader.feed_batch(b"")) == 0
    assert len(reader.feed_batch(b"\n ")) == 0
    assert reader.format is None
    jsonl = StreamReader()
    assert list(jsonl.feed_batch(TEXT + b"\n")) == [RawLine(TEXT.decode(), 1, 0)]


def test_feed_many_applies_discarded_attempt_signals() -> None:
    """[7.8-a] with [7.7-a]: a discard signal inside a batch has the effect it has line by line."""
    agent = "abc"
    lines = [
        b'{"type":"text","agent":"abc","final":true,"delta":"kept"}',
        b'{"type":"text","agent":"abc","final":true,"delta":"dropped"}',
        b'{"type":"error","agent":"abc","final":true,"delta":"{\\"type\\":\\"attempt_discarded\\",\\"discard_blocks\\":1}"}',
        b'{"type":"text","agent":"abc","final":true,"delta":"again"}',
    ]
    one = Reconstructor()
    for line in lines:
        one.feed(line)
    many = Reconstructor()
    many.feed_many(lines)
    assert many.transcript() == one.transcript()
    assert [b.content for b in many.transcript().agents[agent] if b.type == "text"] == ["kept", "again"]
