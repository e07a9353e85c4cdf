"""[V2.3-b] The stream validator's verdict and positions do not depend on how the bytes are chunked.

Issue 12 §3: with CR-only line ends, an unreadable byte used to make the validator skip
to the next LF (losing the rest of a CR-only capture, then a bogus E167), and the line
numbers after it depended on where the chunks were cut. The property below compares a
whole feed with a cut one on inputs built from the bytes that matter to framing (CR,
LF, CRLF, invalid UTF-8, BOM, SSE fields, JSON lines) as well as arbitrary bytes, with a
reader cap small enough to make the reader refuse lines. It runs under the active
profile and, so that CI (derandomised) still explores, under four fixed seeds of its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from envelope import StreamValidator, Violation
from validator.test_validator_robustness import chunks

if TYPE_CHECKING:
    from collections.abc import Callable

#: Pieces that exercise line ends, resynchronisation and format detection.
ATOMS = st.sampled_from(
    [
        b"\r",
        b"\n",
        b"\r\n",
        b"\x80",
        b"\xc3",
        b"\xef\xbb\xbf",
        b" ",
        b"x",
        b":",
        b"data: ",
        b"data: {}",
        b"data: [DONE]",
        b"event: e",
        b"id: 1",
        b'{"type":"text","agent":"a","final":true,"delta":""}',
        b'data: {"type":"text","agent":"a","final":true,"delta":""}',
        b"[DONE]",
        b"y" * 70,
    ]
)
INPUTS = st.one_of(st.lists(ATOMS, max_size=24).map(b"".join), st.binary(max_size=300))
T = TypeVar("T", bound="Callable[..., None]")
CUTS = st.lists(st.integers(0, 10_000), min_size=1, max_size=6)


def run(data: bytes, cuts: list[int], cap: int = 64) -> list[Violation]:
    checker = StreamValidator(max_line_bytes=cap)
    found: list[Violation] = []
    for piece in chunks(data, cuts):
        found += checker.feed(piece)
    return found + checker.close()


def check(data: bytes, cuts: list[int]) -> None:
    assert run(data, cuts) == run(data, [])


#: The cases of issue 12 §3, and what the whole feed must report for them.
PINNED = [
    # line 1 is the bad byte (ended by CR), line 2 a NUL field (LF), line 3 an unended line
    (b"\x80\r\x00\n\x00", [("E100", 1), ("W112", 2), ("E110", 3)]),
    # a CR-only capture: the event after the bad line is read, so no E167 and no W161
    (b'data: {"a":1}\r\x80\r\rdata: [DONE]\r\r', [("E100", 2)]),
    # the event dispatched before the bad line (by a blank CR line) is not lost with it
    (b"data: x\r\r\x80\rdata: [DONE]\r\r", [("E101", 1), ("E100", 3)]),
    # the LF of a CRLF that ends the bad line goes with it
    (b"\x80\r\ndata: [DONE]\r\n\r\n", [("E100", 1)]),
]


@pytest.mark.parametrize(("data", "expected"), PINNED)
def test_pinned_cases_at_every_split_point(data: bytes, expected: list[tuple[str, int]]) -> None:
    whole = run(data, [])
    assert [(v.code, v.line) for v in whole] == expected
    for cut in range(len(data) + 1):
        assert run(data, [cut]) == whole, cut
        assert run(data, list(range(cut, len(data)))) == whole, cut  # byte by byte after the cut


def test_unreadable_line_then_nothing_readable_is_not_e167() -> None:
    """E167 says the input held nothing; after E100 it held something unreadable (spec validation §2.2)."""
    assert [v.code for v in run(b"data: \x80\n\n", [])] == ["E100"]
    assert [v.code for v in run(b"", [])] == ["E167"]


@given(INPUTS, CUTS)
@example(b"\x80\r\x00\n\x00", [1])
@example(b'data: {"a":1}\r\x80\r\rdata: [DONE]\r\r', [3])
@example(b"data: x\r\r\x80\rdata: [DONE]\r\r", [9])
def test_verdict_does_not_depend_on_chunking(data: bytes, cuts: list[int]) -> None:
    check(data, cuts)


def _seeded(n: int) -> Callable[[T], T]:
    """Run a property under seed ``n`` even in the derandomised CI profile (which ignores ``@seed``)."""

    def wrap(test: T) -> T:
        return seed(n)(settings(derandomize=False, max_examples=400)(test))

    return wrap


@_seeded(1)
@given(INPUTS, CUTS)
def test_verdict_does_not_depend_on_chunking_seed_1(data: bytes, cuts: list[int]) -> None:
    check(data, cuts)


@_seeded(2)
@given(INPUTS, CUTS)
def test_verdict_does_not_depend_on_chunking_seed_2(data: bytes, cuts: list[int]) -> None:
    check(data, cuts)


@_seeded(3)
@given(INPUTS, CUTS)
def test_verdict_does_not_depend_on_chunking_seed_3(data: bytes, cuts: list[int]) -> None:
    check(data, cuts)


@_seeded(4)
@given(INPUTS, CUTS)
def test_verdict_does_not_depend_on_chunking_seed_4(data: bytes, cuts: list[int]) -> None:
    check(data, cuts)
