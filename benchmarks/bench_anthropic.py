"""Benchmark: a large tool input streamed in small ``input_json_delta`` events.

Owns: showing that translating a tool input is linear in its size (the partial JSON is
gathered as a list of strings and parsed once at block stop, never per delta). Sizes
100 KB and 1 MB are timed in one ``group``; compare their means: a linear translator
gives a ratio near 10, a re-parse per delta near 100. Not a test: no assertion on time.

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_anthropic.py --benchmark-only``.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from envelope.anthropic import AnthropicTranslator

AGENT = "0b6c7f1e-3a55-4d5e-9c1a-5b8f2f7d9e10"
#: Bytes per input_json_delta, about what the API sends for tool input.
DELTA_SIZE = 16
SIZES = {"100KB": 100_000, "1MB": 1_000_000}


def tool_input_events(size: int, seed: int = 3) -> list[dict[str, Any]]:
    """One API call whose tool_use input is a JSON object of about ``size`` bytes, in small deltas."""
    rng = random.Random(seed)
    words = ["alpha", "beta", 'quo"te', "naïve", "line\nbreak", "tab\t", "🏔", "x" * 12]
    rows: list[str] = []
    total = 0
    while total < size:
        row = " ".join(rng.choice(words) for _ in range(8))
        rows.append(row)
        total += len(row) + 4
    text = json.dumps({"path": "big.txt", "rows": rows})
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {"id": "msg_bench", "model": "claude-sonnet-4-6", "usage": {"input_tokens": 1}},
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_bench", "name": "write_file", "input": {}},
        },
    ]
    events += [
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": text[i : i + DELTA_SIZE]},
        }
        for i in range(0, len(text), DELTA_SIZE)
    ]
    events += [
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    return events


def translate(events: list[dict[str, Any]]) -> int:
    """Feed every event; return the number of lines (so the work cannot be skipped)."""
    t = AnthropicTranslator(AGENT)
    n = 0
    for event in events:
        n += len(t.feed(event))
    t.close()
    t.finalize()
    return n


@pytest.mark.parametrize("label", list(SIZES))
def test_tool_input_translation(benchmark: Any, label: str) -> None:
    events = tool_input_events(SIZES[label])
    benchmark.group = "anthropic: tool input in 16-byte deltas"
    benchmark.extra_info["deltas"] = len(events) - 5
    lines = benchmark(translate, events)
    assert lines > 1
