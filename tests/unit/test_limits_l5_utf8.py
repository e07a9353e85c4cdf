"""spec/limits.md L5: invalid UTF-8 names its byte offset, in our words, on every read path.

Issue 37: msgspec 0.23 raises its own ``DecodeError``, with no offset, where 0.22 let
``UnicodeDecodeError`` through, and ``decode()`` lost the offset. These tests hold every
path to the same offset and the same words, whatever the installed msgspec does; none
matches a dependency's wording.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from envelope import (
    DecodeError,
    MigrationError,
    Position,
    Reconstructor,
    SSEReader,
    StreamReader,
    StreamValidator,
    Validator,
    XmlMigrator,
    decode,
)
from envelope._utf8 import utf8_fault

if TYPE_CHECKING:
    from collections.abc import Callable

#: Each kind of ill-formed sequence (Unicode Table 3-7), and the reason we give for it.
BAD: dict[str, tuple[bytes, str]] = {
    "never in UTF-8": (b"\xff", "byte 0xff never occurs in UTF-8"),
    "overlong lead": (b"\xc0\xaf", "byte 0xc0 never occurs in UTF-8"),
    "stray continuation": (b"\x80", "byte 0x80 continues a character that did not start"),
    "not continued": (b"\xe2A", "byte 0x41 cannot follow 0xe2 in a character"),
    "encoded surrogate": (b"\xed\xa0\x80", "byte 0xa0 cannot follow 0xed in a character"),
    "past U+10FFFF": (b"\xf4\x90\x80\x80", "byte 0x90 cannot follow 0xf4 in a character"),
    "cut at the end of the line": (b"\xe2\x82", "the bytes end inside the character that byte 0xe2 starts"),
}


def _line(bad: bytes) -> bytes:
    """A text envelope with ``bad`` inside its delta; a cut character ends the line (nothing after it)."""
    end = b"" if bad == BAD["cut at the end of the line"][0] else b'"}'
    return b'{"type":"text","agent":"a","final":true,"delta":"ok' + bad + end


def _raise(run: Callable[[], object]) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        run()
    return info.value


def _paths(line: bytes) -> dict[str, tuple[Callable[[], object], int]]:
    """Each read path of the codec given ``line``, and the byte offset its error must name."""
    at = line.index(b'"ok') + 3
    sse = b"data: " + line + b"\n\n"

    def many() -> None:
        Reconstructor().feed_many([line])

    return {
        "decode": (lambda: decode(line), at),
        "decode at a position": (lambda: decode(line, position=Position(line=4, offset=100)), 100 + at),
        "Reconstructor.feed": (lambda: Reconstructor().feed(line), at),
        "Reconstructor.feed_many": (many, at),
        "SSEReader": (lambda: SSEReader().feed(sse), 6 + at),
        "StreamReader, JSON lines": (lambda: StreamReader().feed(line + b"\n"), at),
        "StreamReader, SSE": (lambda: StreamReader().feed(sse), 6 + at),
    }


@pytest.mark.parametrize("kind", list(BAD))
def test_L5_a_every_reader_names_the_offset_and_our_reason(kind: str) -> None:
    """[L5-a] decode, the reconstructor and both readers: the byte of the fault, our words."""
    bad, reason = BAD[kind]
    line = _line(bad)
    for name, (run, at) in _paths(line).items():
        error = _raise(run)
        assert error.position.offset == at, name
        assert error.message == f"invalid UTF-8 ({reason})", name


@pytest.mark.parametrize("kind", list(BAD))
def test_L5_a_the_validator_and_migrator_name_the_offset_and_our_reason(kind: str) -> None:
    """[L5-a] the validator's E100 (line, stream) and the migrator's error: the same byte and words."""
    bad, reason = BAD[kind]
    line = _line(bad)
    at = line.index(b'"ok') + 3
    (finding,) = Validator().feed(line)
    assert (finding.code, finding.column) == ("E100", at + 1)
    assert finding.message == f"invalid UTF-8 at column {at + 1} ({reason})"
    stream = b"data: " + line + b"\n\n"
    codes = [(v.code, v.column, v.message) for v in StreamValidator().feed(stream)]
    assert codes[0] == ("E100", 6 + at + 1, f"invalid UTF-8 ({reason}); skipped to the next line")
    raw = b"data: <content-block-text>\n\ndata: ok" + bad + b"!\n\ndata: </content-block-text>\n\n"
    with pytest.raises(MigrationError) as info:
        XmlMigrator(agent="a").feed(raw)
    if kind == "cut at the end of the line":
        # A legacy record's text runs on into the next record (§M1.4): the cut character is
        # continued by "!", which cannot follow it.
        reason = "byte 0x21 cannot follow 0xe2 in a character"
    assert info.value.message == f"invalid UTF-8 ({reason})"
    assert info.value.position.offset == raw.index(b"ok" + bad) + 2


def test_L5_a_a_line_not_utf8_is_refused_as_such_whatever_else_is_wrong() -> None:
    """[L5-a] the UTF-8 fault wins over what the parser meets first (an unknown member, bad JSON)."""
    unknown = b'{"type":"text","agent":"a","final":true,"delta":"","zz":1,"x":"\xff"}'
    assert _raise(lambda: decode(unknown)).position.offset == unknown.index(b"\xff")
    not_json = b'{"type":"text",,"agent":"\xff"}'
    assert _raise(lambda: decode(not_json)).message.startswith("invalid UTF-8 (")


def test_L5_b_the_lenient_reading_checks_members_it_skips() -> None:
    """[L5-b] msgspec skips an unknown member without checking its UTF-8; ``feed`` does not.

    (``feed_many``'s inlined loop decodes with msgspec directly and is not held to this yet:
    its lines from ``StreamReader.feed_batch`` were checked by the SSE reader.)
    """
    line = b'{"type":"text","agent":"a","final":true,"delta":"x","later":"\xe2A"}'
    error = _raise(lambda: Reconstructor().feed(line))
    assert (error.position.offset, error.position.index) == (line.index(b"\xe2"), 0)
    assert error.message == "invalid UTF-8 (byte 0x41 cannot follow 0xe2 in a character)"


def test_L5_a_the_migrator_names_the_lead_byte_of_a_character_split_across_records() -> None:
    """[L5-a] a character begun in one legacy record and broken in the next: the offset of its first byte.

    Text runs on across raw records (§M1.4), so the decoder holds the lead byte. The
    offset was that of the next record's first text byte: the incremental decoder counts
    from the bytes it held.
    """
    raw = b"data: <content-block-text>\n\ndata: a\xe2\n\ndata: Ab\n\ndata: </content-block-text>\n\n"
    with pytest.raises(MigrationError) as info:
        XmlMigrator(agent="a").feed(raw)
    assert (info.value.position.line, info.value.position.offset) == (3, raw.index(b"\xe2"))
    assert info.value.message == "invalid UTF-8 (byte 0x41 cannot follow 0xe2 in a character)"


@given(st.binary(max_size=40))
@example(b"ok\xf0\x9f\x98")
@example(b"\xed\xbf\xbf")
def test_L5_a_the_offset_is_where_the_bytes_stop_being_utf8(data: bytes) -> None:
    """[L5-a] ``utf8_fault``: None exactly for UTF-8; otherwise all before it decodes, all from it does not."""
    fault = utf8_fault(data)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        assert fault is not None
        at, reason = fault
        data[:at].decode("utf-8")
        with pytest.raises(UnicodeDecodeError):
            data[at:].decode("utf-8")
        assert reason
    else:
        assert fault is None
