"""Smoke test of ``benchmarks/bench_anthropic.py``: it imports, and its input is what it claims."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import TYPE_CHECKING

from envelope import reconstruct
from envelope.anthropic import AnthropicTranslator

if TYPE_CHECKING:
    from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_anthropic.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_anthropic", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_benchmark_input_translates_to_one_tool_call_of_its_size() -> None:
    bench = _load()
    events = bench.tool_input_events(5_000)
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    assert all(len(e["delta"]["partial_json"]) <= bench.DELTA_SIZE for e in deltas)
    text = "".join(e["delta"]["partial_json"] for e in deltas)
    assert len(text) >= 5_000
    assert bench.translate(events) > 1
    t = AnthropicTranslator(bench.AGENT)
    lines = [line for e in events for line in t.feed(e)]
    (block,) = reconstruct(lines).to_dict()["agents"][bench.AGENT]["blocks"]
    assert block["type"] == "tool_call"
    assert block["input"] == json.loads(text)
