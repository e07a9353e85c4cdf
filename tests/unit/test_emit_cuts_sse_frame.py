"""``frame``'s CR/LF check (spec §2.1) after its speed-up (issue 31): same verdicts, same offsets.

``frame`` tests for the byte values 10 and 13 rather than the one-byte strings (a plain
byte search instead of a buffer of the needle per call). These properties pin what it
must keep doing, on whichever build the suite runs (compiled, and pure with
``ENVELOPE_PURE=1``): a CR or an LF at any offset of a line of any length is refused,
with the offset of the first one, and a line with neither is framed unchanged.
"""

from __future__ import annotations

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from envelope import EncodeError, frame

_NO_LINE_END = st.binary(max_size=300).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))


def _first_line_end(line: bytes) -> int:
    """The offset of the first CR or LF, found byte by byte (shares no code with ``frame``)."""
    for i, byte in enumerate(line):
        if byte in (10, 13):
            return i
    return -1


def test_a_cr_or_an_lf_at_every_offset_of_a_full_line_is_refused() -> None:
    """[2.1-b] each of CR, LF and CRLF, at every offset of a 2048-byte line, first to last."""
    base = b"x" * 2048
    for at in range(len(base)):
        for end in (b"\r", b"\n", b"\r\n"):
            line = base[:at] + end + base[at + len(end) :]
            with pytest.raises(EncodeError, match="cannot contain CR or LF") as info:
                frame(line)
            assert info.value.position.offset == at


@seed(31)
@settings(max_examples=300)
@given(before=_NO_LINE_END, after=st.binary(max_size=300), end=st.sampled_from([b"\r", b"\n"]))
def test_the_first_line_end_is_the_offset_named(before: bytes, after: bytes, end: bytes) -> None:
    """[2.1-b] any bytes around a CR or an LF: refused, naming the offset of the first one."""
    line = before + end + after
    with pytest.raises(EncodeError) as info:
        frame(line)
    assert info.value.position.offset == _first_line_end(line) == len(before)


@seed(2)
@settings(max_examples=300)
@given(line=st.binary(max_size=600))
def test_any_bytes_framed_or_refused_as_a_byte_by_byte_search_says(line: bytes) -> None:
    """[2.1-b] a line without CR or LF is framed as ``data: <line>`` and a blank line; else refused."""
    at = _first_line_end(line)
    if at < 0:
        assert frame(line) == b"data: " + line + b"\n\n"
    else:
        with pytest.raises(EncodeError) as info:
            frame(line)
        assert info.value.position.offset == at


@given(line=_NO_LINE_END)
def test_lines_without_line_ends_are_framed_unchanged(line: bytes) -> None:
    """[2.1-a] ``frame`` adds the ``data: `` prefix and the blank line, nothing else."""
    assert frame(line) == b"data: " + line + b"\n\n"
