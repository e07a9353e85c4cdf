"""Growth of ``AnthropicTranslator`` on its worst shapes: n against 10n in one run (issue 18 §5).

No absolute time is asserted: each shape is timed at n and at 10n in the same process
(best of three), and the ratio must stay far below the 100 a quadratic cost would give.
The bound of 40 is loose on purpose (shared CI machines, and the collector's passes over
many live objects: 10,000 text blocks measured 14x to 21x 1,000 of them, gc on); linear
work gives about 10. A ratio over the bound is measured again (three times in all) before
the test fails: one noisy measurement passes on a retry, a quadratic cost fails all three.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from envelope.anthropic import AnthropicTranslator

if TYPE_CHECKING:
    from collections.abc import Callable

RATIO = 40


def _best(run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - began)
    return best


def _feed(events: list[dict[str, Any]]) -> Callable[[], object]:
    def run() -> object:
        t = AnthropicTranslator("a")
        lines = [line for event in events for line in t.feed(event)]
        lines += t.finish()
        return t.finalize(), lines

    return run


START: dict[str, Any] = {"type": "message_start", "message": {"id": "m", "model": "claude-sonnet-4-6"}}
END: list[dict[str, Any]] = [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, {"type": "message_stop"}]


def _tool_input(n: int, *, cut: bool = False) -> list[dict[str, Any]]:
    """One tool call whose input is about ``n`` bytes, in 16-byte deltas (cut before its end if ``cut``)."""
    payload = json.dumps({"rows": [{"k": i, "v": "x\u00e9\\"} for i in range(n // 20)]})
    if cut:
        payload = payload[: len(payload) - 9]
    events: list[dict[str, Any]] = [
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "n"}},
    ]
    for i in range(0, len(payload), 16):
        part = {"type": "input_json_delta", "partial_json": payload[i : i + 16]}
        events.append({"type": "content_block_delta", "index": 0, "delta": part})
    return [*events, {"type": "content_block_stop", "index": 0}, *END]


def _many_blocks(n: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [START]
    for i in range(n):
        events.append({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}})
        text = {"type": "text_delta", "text": f"block {i} "}
        events.append({"type": "content_block_delta", "index": i, "delta": text})
        events.append({"type": "content_block_stop", "index": i})
    return [*events, *END]


def _many_citations(n: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    for i in range(n):
        citation = {"type": "char_location", "cited_text": f"quote {i}", "document_index": 0}
        citation |= {"start_char_index": i, "end_char_index": i + 7, "document_title": "Doc"}
        events.append(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "citations_delta", "citation": citation}}
        )
        events.append({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "cited. "}})
    return [*events, {"type": "content_block_stop", "index": 0}, *END]


def _many_text_deltas(n: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        START,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    text = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "word \u00e9 "}}
    events += [text] * n
    return [*events, {"type": "content_block_stop", "index": 0}, *END]


@pytest.mark.parametrize(
    ("shape", "make", "n"),
    [
        ("tool input in 16-byte deltas, 100 KB vs 1 MB", _tool_input, 100_000),
        ("tool input cut by max_tokens, 100 KB vs 1 MB", lambda n: _tool_input(n, cut=True), 100_000),
        ("text blocks, 1,000 vs 10,000", _many_blocks, 1_000),
        ("citations of one text block, 500 vs 5,000", _many_citations, 500),
        ("text deltas of one block, 10,000 vs 100,000", _many_text_deltas, 10_000),
    ],
)
def test_translator_grows_linearly(shape: str, make: Callable[[int], list[dict[str, Any]]], n: int) -> None:
    small_events, large_events = make(n), make(10 * n)
    seen: list[str] = []
    for _ in range(3):  # a ratio over the bound is measured again: noise passes once, quadratic never
        small, large = _best(_feed(small_events)), _best(_feed(large_events))
        if large / small < RATIO:
            return
        seen.append(f"{small:.4f}s at n, {large:.4f}s at 10n, ratio {large / small:.1f}")
    raise AssertionError(f"{shape}: {'; '.join(seen)}")
