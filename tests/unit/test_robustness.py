"""Any input, however broken, gives results or the library's own errors: never another exception."""

from __future__ import annotations

import contextlib
import json

from hypothesis import given
from hypothesis import strategies as st

from envelope import EnvelopeError, Reconstructor, SSEReader, StreamReader, decode

VALID = [
    b'{"type":"text","agent":"a","final":false,"delta":"he\\"llo"}',
    b'{"type":"tool_result","agent":"a","final":false,"id":"t","name":"n","delta":"x"}',
    b'{"type":"tool_result_image","agent":"a","final":false,"id":"t","name":"n","delta":"","src":"s","media_type":"m"}',
    b'{"type":"tool_result","agent":"a","final":true,"id":"t","name":"n","delta":""}',
    b'{"type":"text","agent":"a","final":true,"delta":""}',
    b'{"type":"citation","agent":"a","final":true,"delta":"c","citation_type":"char_location"}',
]


def _run(data: bytes, cuts: list[int]) -> None:
    reader = StreamReader()
    rec = Reconstructor()
    try:
        last = 0
        for cut in [*sorted(cuts), len(data)]:
            for raw in reader.feed(data[last:cut]):
                rec.feed(raw)
            last = max(last, cut)
        for raw in reader.close():
            rec.feed(raw)
        rec.close()
        rec.transcript().to_dict()
    except EnvelopeError:
        pass


@given(data=st.binary(max_size=400), cuts=st.lists(st.integers(0, 400), max_size=5))
def test_arbitrary_bytes_raise_only_envelope_errors(data: bytes, cuts: list[int]) -> None:
    _run(data, cuts)
    _run(b"data: " + data + b"\n\n", cuts)
    _run(b"{" + data, cuts)


@given(
    order=st.lists(st.integers(0, len(VALID) - 1), max_size=12),
    flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=4),
    sse=st.booleans(),
)
def test_mutated_streams_raise_only_envelope_errors(order: list[int], flips: list[tuple[int, int]], sse: bool) -> None:
    lines = [VALID[i] for i in order]
    data = bytearray(b"".join((b"data: " + x + b"\n\n") if sse else x + b"\n" for x in lines))
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    _run(bytes(data), [])


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_decode_any_json_value(value: object) -> None:
    with contextlib.suppress(EnvelopeError):
        decode(json.dumps(value))


@given(st.binary(max_size=300))
def test_sse_reader_any_bytes(data: bytes) -> None:
    reader = SSEReader(max_line_bytes=64)
    try:
        reader.feed(data)
        reader.close()
    except EnvelopeError:
        pass
