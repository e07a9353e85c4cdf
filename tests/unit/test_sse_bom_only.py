"""Regression: a first chunk holding only the UTF-8 BOM (found by test_robustness)."""

from __future__ import annotations

from envelope import SSEReader


def test_bom_alone_then_an_event() -> None:
    reader = SSEReader()
    assert reader.feed(b"\xef\xbb\xbf") == []
    (event,) = reader.feed(b"data: x\n\n")
    assert event.data == "x"
    assert reader.close() == []
