"""``Reconstructor.feed_many``'s prefix fast path (issue 31 §3) against ``feed`` per line.

``_feed_run`` reads a ``final: false`` text or thinking line whose bytes are exactly a
known prefix (type, agent, ``final: false`` as this codec encodes them), one JSON string
and ``}`` by decoding the string alone. These properties feed lines built to sit on
either side of that shape (whitespace, a field after the delta, trailing bytes, bad
escapes, invalid UTF-8, a lone surrogate, the block closed or over its limit, after
``[DONE]``, a new response) and require the same transcript, open blocks, ``done``,
envelope count and error as ``feed`` one line at a time, compiled and pure, under fixed
seeds as well as hypothesis' own draws.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from envelope import EnvelopeError, Reconstructor

PREFIXES = [
    b'{"type":"text","agent":"a","final":false,"delta":',
    b'{"type":"thinking","agent":"a","final":false,"delta":',
    b'{"type":"text","agent":"agent-\xce\xb2","final":false,"delta":',
    b'{"type":"text","agent":"b\\"q","final":false,"delta":',
]
#: What may follow a prefix: the fast path's shape, near misses, and lines that must fail.
TAILS = [
    b'"hello"}',
    b'""}',
    b'"he\\"llo \\u00e9 \\ud83d\\ude00"}',
    b'"\xe6\xbc\xa2"}',
    b'"x" }',
    b' "x"}',
    b'"x",\n"url":1}',
    b'"x","delta":"y"}',
    b'"x"}}',
    b'"x"} ',
    b'"x\\q"}',
    b'"\\ud800"}',
    b'"\xff"}',
    b'"x}',
    b"5}",
    b'"' + b"z" * 60 + b'"}',
    b'"\\u0000\\u00e9\\u20ac\\/\\b\\f\\r"}',
    b'"\\uD83D\\uDE00"}',
    b'"\\udfff"}',
    b'"\\u00G0"}',
    b'"\\u00e"}',
    b'"\x01"}',
    b'"\xed\xa0\x80"}',
]
#: A block with an id and a name (a tool result): its continuation lines end with them.
TOOL_PREFIX = b'{"type":"tool_result","agent":"a","final":false,"delta":'
TOOL_STRINGS = [
    b'"out"',
    b'""',
    b'"\\n\\t\\u00e9"',
    b'"\\ud83d\\ude00"',
    b'"\\ud800"',
    b'"\xff"',
    b'"x" ',
    b'"' + b"y" * 60 + b'"',
]
TOOL_ENDS = [
    b',"id":"t1","name":"read_file"}',
    b',"id":"t2","name":"read_file"}',
    b',"id":"t1"}',
    b',"name":"read_file"}',
    b',"id":"t1","name":"grep"}',
    b"}",
    b',"id":"t1","name":"read_file","is_error":true}',
    b',"name":"read_file","id":"t1"}',
    b',"id":"t1","name":"read_file"} ',
]
OTHER = [
    b'{"type":"text","agent":"a","final":true,"delta":"end"}',
    b'{"type":"thinking","agent":"a","final":true,"delta":""}',
    b'{"type":"text","agent":"agent-\xce\xb2","final":true,"delta":""}',
    b'{"type":"text","agent":"a","final":false,"delta":"via the slow path","id":"i"}',
    b'{"type":"meta_init","agent":"a","final":true,"delta":"{}"}',
    b"[DONE]",
    '{"type":"text","agent":"a","final":false,"delta":"a str line"}',
]
TOOL_OTHER = [
    b'{"type":"tool_result","agent":"a","final":true,"delta":"","id":"t1","name":"read_file"}',
    b'{"type":"tool_result","agent":"a","final":true,"delta":"done"}',
]

lines = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(PREFIXES), st.sampled_from(TAILS)).map(lambda pt: pt[0] + pt[1]),
        st.sampled_from(OTHER),
        st.tuples(st.sampled_from(TOOL_STRINGS), st.sampled_from(TOOL_ENDS)).map(
            lambda se: TOOL_PREFIX + se[0] + se[1]
        ),
        st.sampled_from(TOOL_OTHER),
    ),
    max_size=30,
)


def _outcome(rec: Reconstructor, error: EnvelopeError | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "transcript": rec.transcript().to_dict(),
        "open": rec.open_blocks(),
        "done": rec.done,
        "error": None if error is None else (type(error), str(error), error.position, error.field, error.section),
    }
    try:
        rec.feed(b"{")  # the next envelope's index shows the count of lines seen
    except EnvelopeError as exc:
        out["next"] = exc.position.index
    return out


def _one_by_one(batch: list[bytes | str], limit: int) -> dict[str, Any]:
    rec = Reconstructor(max_block_bytes=limit)
    try:
        for line in batch:
            rec.feed(line)
    except EnvelopeError as exc:
        return _outcome(rec, exc)
    return _outcome(rec, None)


def _many(batches: list[list[bytes | str]], limit: int) -> dict[str, Any]:
    rec = Reconstructor(max_block_bytes=limit)
    try:
        for batch in batches:
            rec.feed_many(batch)
    except EnvelopeError as exc:
        return _outcome(rec, exc)
    return _outcome(rec, None)


@seed(31)
@settings(max_examples=400)
@given(stream=lines, split=st.integers(0, 30), limit=st.sampled_from([40, 100, 10_000]))
@example(
    stream=[PREFIXES[0] + b'"open"}', PREFIXES[0] + b'"x" }', PREFIXES[0] + b'"\\ud800"}', OTHER[0]],
    split=1,
    limit=10_000,
)
@example(stream=[PREFIXES[0] + b'"open"}', PREFIXES[0] + b'"' + b"z" * 60 + b'"}'], split=1, limit=40)
@example(stream=[PREFIXES[0] + b'"open"}', OTHER[5], PREFIXES[0] + b'"after done"}'], split=2, limit=10_000)
def test_feed_many_equals_feed_on_lines_around_the_fast_path(stream: list[bytes | str], split: int, limit: int) -> None:
    """[7.8-a] the same outcome, in one batch or two (the second meets prefixes learnt in the first)."""
    expected = _one_by_one(stream, limit)
    assert _many([stream], limit) == expected
    assert _many([stream[:split], stream[split:]], limit) == expected


@seed(7)
@settings(max_examples=200)
@given(stream=lines)
def test_feed_many_equals_feed_under_another_seed(stream: list[bytes | str]) -> None:
    """[7.8-a] as above, one batch per line and the default limits."""
    assert _many([[line] for line in stream], 10_000) == _one_by_one(stream, 10_000)
