"""Codec bugs the validator's property tests found, pinned."""

from __future__ import annotations

from envelope import SSEReader, StreamValidator


def test_sse_reader_takes_a_chunk_that_is_only_the_bom() -> None:
    # Found by test_arbitrary_bytes: feed(b"\xef\xbb\xbf") raised IndexError.
    reader = SSEReader()
    assert reader.feed(b"\xef\xbb\xbf") == []
    assert reader.feed(b"data: x\n\n")[0].offset == 3
    split = SSEReader()
    assert split.feed(b"\xef\xbb") == []
    assert split.feed(b"\xbf") == []
    assert split.feed(b"data: y\n\n")[0].data == "y"
    assert split.close() == []


def test_forced_sse_validation_of_a_bom_only_input() -> None:
    checker = StreamValidator("sse")
    found = checker.feed(b"\xef\xbb\xbf") + checker.close()
    assert [v.code for v in found] == ["E167"]
