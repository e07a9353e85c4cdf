"""A line that arrives in pieces is held as pieces and judged as if it came whole (issue 18 §1).

The growth tests (tests/growth) check the cost; these check that holding pieces changed
no verdict and no position, whatever the split.
"""

from __future__ import annotations

import pytest

from envelope import DecodeError, RawLine, SSEReader, StreamReader

LINE = b'{"type":"text","agent":"a","final":true,"delta":"x"}'


def _outcome(reader: StreamReader | SSEReader, pieces: list[bytes]) -> tuple[list[object], str | None]:
    out: list[object] = []
    try:
        for piece in pieces:
            out += reader.feed(piece)
        out += reader.close()
    except DecodeError as exc:
        return out, str(exc)
    return out, None


def _splits(data: bytes) -> list[list[bytes]]:
    """The data whole, in one-byte pieces, and cut once at every position."""
    return [[data], [data[i : i + 1] for i in range(len(data))], *([data[:i], data[i:]] for i in range(len(data)))]


@pytest.mark.parametrize("fmt", ["jsonl", "auto"])
def test_a_json_line_at_the_bound_ending_in_crlf_is_accepted_at_any_split(fmt: str) -> None:
    # The CR of a CRLF is not part of the line: a held line one byte over the bound that
    # ends in CR may still end within it (it used to be refused when the LF came later).
    data = LINE + b"\r\n" + LINE + b"\n"
    for pieces in _splits(data):
        got, error = _outcome(StreamReader(fmt, max_line_bytes=len(LINE)), pieces)  # type: ignore[arg-type]
        assert error is None, pieces
        assert got == [RawLine(LINE.decode(), 1, 0), RawLine(LINE.decode(), 2, len(LINE) + 2)]


@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        ("jsonl", LINE + b"\n" + LINE + b"x\r\n"),
        ("jsonl", LINE + b"\n" + LINE + b"\rx"),
        ("jsonl", LINE + b"\n" + LINE + b"xy"),
        ("sse", b"data: " + LINE + b"\n\ndata: " + LINE + b"\n\n"),
        ("sse", b"data: x\r\rdata: " + LINE + b"yy\r\n\r\n"),
    ],
)
def test_over_long_lines_give_one_error_at_any_split(fmt: str, data: bytes) -> None:
    bound = len(LINE) if fmt == "jsonl" else len(LINE) + 5
    whole = _outcome(StreamReader(fmt, max_line_bytes=bound), [data])  # type: ignore[arg-type]
    assert whole[1] is not None
    assert "longer than max_line_bytes" in whole[1]
    # The error (message and position) is the same at every split. The lines returned
    # before it are not compared: a feed that raises returns none of its own.
    for pieces in _splits(data):
        assert _outcome(StreamReader(fmt, max_line_bytes=bound), pieces)[1] == whole[1], pieces  # type: ignore[arg-type]
    if fmt == "sse":
        sse_whole = _outcome(SSEReader(max_line_bytes=bound), [data])[1]
        for pieces in _splits(data):
            assert _outcome(SSEReader(max_line_bytes=bound), pieces)[1] == sse_whole, pieces


def test_leading_blank_bytes_then_content_at_any_split() -> None:
    data = b"\xef\xbb\xbf \r\n\t\n" + LINE + b"\n[DONE]\n"
    for pieces in _splits(data):
        reader = StreamReader()
        got, error = _outcome(reader, pieces)
        assert error is None
        assert reader.format == "jsonl"
        assert got == [RawLine(LINE.decode(), 3, 8), RawLine("[DONE]", 4, 9 + len(LINE))]
    reader = StreamReader(max_line_bytes=10)
    assert [reader.feed(b"\n") for _ in range(10)] == [[]] * 10
    with pytest.raises(DecodeError, match="no content in the first bytes"):
        reader.feed(b"\n")
