"""Smoke test of ``benchmarks/bench_client.py``: its bodies are valid, both reads give one transcript, it runs once.

No timing is asserted: the ratios are measured in one run and published in docs/client.md.
"""

from __future__ import annotations

from benchmarks import bench_client as bench

from envelope import reconstruct
from envelope.interop.agui import AguiToEnvelope
from server_support import data_lines
from validating import assert_valid


def test_the_envelope_body_is_valid_and_both_reads_agree() -> None:
    body = bench.envelope_body(0.2)
    assert_valid(body)
    ours, theirs = bench.client_read(body), bench.reconstruct_read(body)
    assert ours.done
    assert ours.to_dict() == theirs.to_dict() == reconstruct(data_lines(body)).to_dict()
    assert len(ours.agents) == 4


def test_the_agui_body_reads_as_its_conversion() -> None:
    body = bench.agui_body(0.2)
    ours, theirs = bench.client_read(body), bench.convert_read(body)
    assert ours.to_dict() == theirs.to_dict()
    texts = [b for blocks in ours.agents.values() for b in blocks if b.type == "text"]
    assert texts
    converted = AguiToEnvelope()
    lines = [line for e in data_lines(body) for line in converted.feed(e)] + converted.close()
    assert_valid(lines)


def test_ratios_run_once() -> None:
    found = bench.ratios(size_mb=0.1, rounds=2)
    assert set(found) == {"envelope", "agui"}
    assert all(r > 0 for r in found.values())
