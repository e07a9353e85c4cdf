"""``_cread.split_lines`` against ``SSEReader._split``, the pure path it stands in for (spec [RF1-a]).

Batches are drawn from pieces that sit on either side of the common case (events of one
``data: `` line, no LF inside, UTF-8, within the line bound): ``data:`` with no space, other
fields, comments, lone LFs, bytes that are not UTF-8 or are cut short, long lines. Both must
give the same lines and cut, or both ``None``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from envelope._sse import SSEReader

try:
    from envelope import _cread
except ImportError:  # pragma: no cover  # the pure build: no C to compare
    pytest.skip("envelope._cread is not built (no C compiler): the pure build runs", allow_module_level=True)

ATOMS = [
    b"data: ",
    b"data:",
    b"\n",
    b"\n\n",
    b"x",
    b"abcdefghij",
    b"\xc3\xa9",
    b"\xe6\xbc\xa2",
    b"\xf0\x9f\x98\x80",
    b"\xff",
    b"\xed\xa0\x80",
    b"\xc3",
    b"event: e",
    b": c",
    b"[DONE]",
    b"\x00",
    b'{"a":1}',
]
_EVENT = st.builds(lambda body, n: b"data: " + body * n + b"\n\n", st.sampled_from(ATOMS[4:]), st.integers(0, 9))
_BATCHES = st.lists(st.one_of(_EVENT, _EVENT, st.sampled_from(ATOMS)), max_size=14).map(
    lambda parts: b"data: " + b"".join(parts)
)


@seed(43)
@settings(max_examples=1500, deadline=None, database=None)
@given(data=_BATCHES, max_line=st.sampled_from([7, 12, 30, 1 << 20]))
def test_spec_rf1_a_split_lines_gives_what_the_pure_split_gives(data: bytes, max_line: int) -> None:
    """[RF1-a]: the same lines and cut, or ``None`` both, for a batch ``_batch`` would split."""
    want = SSEReader(max_line_bytes=max_line)._split(data)
    assert _cread.split_lines(data, max_line) == want


def test_spec_rf1_a_split_lines_cases() -> None:
    """[RF1-a] on the edges: an empty line, the bound met and passed, no blank line, a field."""
    assert _cread.split_lines(b"data: \n\ndata: ab\n\ndata: c", 8) == ([b"", b"ab"], 18)
    assert _cread.split_lines(b"data: abc\n\n", 9) == ([b"abc"], 11)
    assert _cread.split_lines(b"data: abc\n\n", 8) is None  # past max_line
    assert _cread.split_lines(b"data: abc\n", 100) is None  # no blank line yet
    assert _cread.split_lines(b"data: a\nid: 1\n\n", 100) is None  # another field
    assert _cread.split_lines(b"data: \xe6\xbc\n\n", 100) is None  # cut short
    assert _cread.split_lines(b"data: " + b"\xe6\xbc\xa2" * 9 + b"\n\n", 100) == ([b"\xe6\xbc\xa2" * 9], 35)
    with pytest.raises(TypeError):
        _cread.split_lines("data: a\n\n", 100)  # type: ignore[arg-type]
