"""Smoke test of ``benchmarks/bench_openai.py``: it imports, its inputs are what it claims, it runs once.

No timing is asserted: the ratios are for a quiet machine (docs/benchmarks.md).
"""

from __future__ import annotations

import json

from benchmarks import bench_openai as bench

from envelope import reconstruct
from envelope.openai import ChatTranslator, ResponsesTranslator
from validating import assert_valid


def _blocks(lines: list[bytes]) -> list[dict[str, object]]:
    return list(reconstruct(lines).to_dict()["agents"][bench.AGENT]["blocks"])


def test_the_chat_input_rebuilds_what_the_sdk_accumulates() -> None:
    chunks = bench.typed_chat(bench.chat_chunks(3_000))
    final = bench.sdk_chat(chunks).choices[0].message
    t = ChatTranslator(bench.AGENT, meta=True)
    lines = [line for c in chunks for line in t.feed(c)] + t.finish()
    assert_valid([*lines, b"[DONE]"])
    blocks = [b for b in _blocks(lines) if b["type"] in ("text", "tool_call")]
    assert blocks[0]["content"] == final.content
    assert [b["input"] for b in blocks[1:]] == [json.loads(c.function.arguments) for c in final.tool_calls]
    assert bench.ours_chat(chunks) == len(lines) - 2  # without meta_init and meta_final


def test_the_responses_input_rebuilds_what_the_sdk_accumulates() -> None:
    events = bench.typed_responses(bench.responses_events(3_000))
    final = bench.sdk_responses(events)
    t = ResponsesTranslator(bench.AGENT, meta=True)
    lines = [line for e in events for line in t.feed(e)] + t.finish()
    assert_valid([*lines, b"[DONE]"])
    kinds = [b["type"] for b in _blocks(lines)]
    assert kinds == ["meta_init", "thinking", "text", "tool_call", "meta_final"]
    assert _blocks(lines)[2]["content"] == final.output[1].content[0].text
    assert bench.ours_responses(events) > 0


def test_ratios_run_once() -> None:
    found = bench.ratios(chars=2_000, rounds=1)
    assert set(found) == {"chat", "responses"}
    assert all(r > 0 for r in found.values())
