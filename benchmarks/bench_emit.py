"""Emit benchmarks: one pytest-benchmark group per stage, every candidate of ``envelope bench``.

Stages: 20-byte and 200-byte streamed deltas; buffered tool results of 100 KiB and
10 MiB, plain ASCII and escape-heavy. The candidates are the very ones the comparison
engine (``envelope._bench``) times: ours, the seed-literal stdlib baseline, AG-UI's
encoder, bare msgspec and a bytes copy, so the two tools cannot drift apart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from benchmarks.engine import build_stage

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture

    from benchmarks.data import Sizes
    from benchmarks.engine import Stage

EMIT_STAGES = ("emit_small", "emit_typical", "emit_100k_ascii", "emit_100k_escape", "emit_10m_ascii", "emit_10m_escape")
CANDIDATES = ("ours", "stdlib", "agui", "msgspec", "copy")
_PREFIX = {
    "ours": "ours",
    "stdlib": "stdlib",
    "agui": "AG-UI",
    "msgspec": "msgspec",
    "copy": "bytes copy",
}
_built: dict[tuple[str, Sizes], Stage] = {}


def stage_for(key: str, sizes: Sizes) -> Stage:
    """The engine's stage ``key`` at ``sizes``, built once per session."""
    if (key, sizes) not in _built:
        _built[(key, sizes)] = build_stage(key, sizes)
    return _built[(key, sizes)]


@pytest.mark.parametrize("candidate", CANDIDATES)
@pytest.mark.parametrize("stage_key", EMIT_STAGES)
def test_emit(benchmark: BenchmarkFixture, sizes: Sizes, stage_key: str, candidate: str) -> None:
    """One candidate on one emit stage; the group is the stage."""
    stage = stage_for(stage_key, sizes)
    cand = next(c for c in stage.candidates if c.name.startswith(_PREFIX[candidate]))
    if cand.run is None:
        pytest.skip(f"{cand.name}: {cand.missing}")
    benchmark.group = stage.title
    benchmark.extra_info["input_bytes"] = stage.input_bytes
    out = benchmark(cand.run)
    measured = stage.measure(out)
    benchmark.extra_info["lines"] = measured.events
    benchmark.extra_info["lines_over_bound"] = measured.violations
    if cand.role == "ours":
        assert measured.violations == 0, "ours wrote a line over the bound"
