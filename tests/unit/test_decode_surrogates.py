"""An escaped lone surrogate in a complete line is named, with its byte (spec §6.4; issue 18 §3).

msgspec reports a high surrogate followed by anything but a low one as "Input data was
truncated", which read "the line ends inside a value" although the line was complete.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from envelope import DecodeError, Reconstructor, decode

HEAD = b'{"type":"text","agent":"a","final":true,"delta":"x'


@pytest.mark.parametrize(
    ("tail", "escape"),
    [
        (rb'\ud800y"}', r"\ud800"),
        (rb'\ud800"}', r"\ud800"),
        (rb'\udc00"}', r"\udc00"),
        (rb'\uDBFF\u0041"}', r"\uDBFF"),
        (rb'\ud800\ud800"}', r"\ud800"),
    ],
)
def test_spec_06_4_a_lone_surrogate_is_named_with_its_byte(tail: bytes, escape: str) -> None:
    """[6.4-a] a decoder refuses a lone surrogate: the error says so and where, for decode and the reconstructor."""
    line = HEAD + tail
    with pytest.raises(DecodeError) as strict:
        decode(line)
    assert strict.value.message == f"not JSON this library reads: an escaped lone surrogate {escape} in a string"
    assert strict.value.position.offset == len(HEAD)
    assert strict.value.section == "6.4"
    rec = Reconstructor()
    for form in (line, line.decode()):
        with pytest.raises(DecodeError, match="lone surrogate") as lenient:
            rec.feed(form)
        assert lenient.value.position.offset == len(HEAD)
        with pytest.raises(DecodeError, match="lone surrogate"):
            Reconstructor().feed_many([form])


def test_pairs_escaped_backslashes_and_cut_lines_are_not_lone_surrogates() -> None:
    assert decode(HEAD + rb'\ud83d\ude00"}').delta == "x\U0001f600"
    assert decode(HEAD + rb'\\ud800"}').delta == "x\\ud800"
    with pytest.raises(DecodeError, match="the line ends inside a value") as cut:
        decode(HEAD + rb"\ud800")
    assert cut.value.section == "3.1"


def test_msgspec_byte_is_said_once() -> None:
    with pytest.raises(DecodeError) as bad:
        decode(b'{"type":"text",}')
    assert "(byte" not in bad.value.message
    assert str(bad.value).startswith(f"byte offset {bad.value.position.offset}: not JSON")


@given(st.text(), st.integers(0, 0x7FF))
@example("ab", 0)
def test_any_string_with_one_surrogate_escape_inserted(text: str, unit: int) -> None:
    """A string whose code units include a lone surrogate is refused as such, nothing else."""
    body = text.encode("utf-8", "surrogatepass").replace(b"\\", b"\\\\").replace(b'"', b'\\"')
    body = bytes(b for b in body if b >= 0x20)
    line = HEAD + body + b"\\u%04x" % (0xD800 + unit) + b'z"}'
    with pytest.raises(DecodeError, match="lone surrogate") as caught:
        decode(line)
    assert caught.value.position.offset == len(HEAD) + len(body)
