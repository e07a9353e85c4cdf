"""Emit benchmarks: one pytest-benchmark group per emit stage of ``envelope bench``, every candidate.

Run: ``python -m pytest benchmarks/bench_emit.py --benchmark-only`` (``--bench-size-mb``,
``--bench-rounds``). Stages: 20-byte and 200-byte streamed deltas; buffered tool results
of 100 KiB and 10 MiB, plain ASCII and escape-heavy. The stages, inputs and candidates
are the very ones ``envelope bench`` times (``benchmarks.engine``): ours, the
seed-literal stdlib baseline, AG-UI's encoder, bare msgspec and a bytes copy, so the
two tools cannot drift apart. Every benchmark builds its stage anew and runs the
collector before each round (``benchmarks.suite``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from benchmarks.suite import fresh_stage, time_candidate

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture

    from benchmarks.engine import Sizes

EMIT_STAGES = ("emit_small", "emit_typical", "emit_100k_ascii", "emit_100k_escape", "emit_10m_ascii", "emit_10m_escape")
#: Test id -> the stage's candidate name (its start).
CANDIDATES = {"ours": "ours", "stdlib": "stdlib", "agui": "AG-UI", "msgspec": "msgspec", "copy": "bytes copy"}


@pytest.mark.parametrize("candidate", list(CANDIDATES))
@pytest.mark.parametrize("stage_key", EMIT_STAGES)
def test_emit(benchmark: BenchmarkFixture, sizes: Sizes, rounds: int, stage_key: str, candidate: str) -> None:
    """One candidate on one emit stage; the group is the stage."""
    stage = fresh_stage(stage_key, sizes)
    out = time_candidate(benchmark, stage, CANDIDATES[candidate], rounds)
    measured = stage.measure(out)
    benchmark.extra_info["lines"] = measured.events
    benchmark.extra_info["lines_over_bound"] = measured.violations
    assert measured.events > 0
    if candidate == "ours":
        assert measured.violations == 0, "ours wrote a line over the bound"
