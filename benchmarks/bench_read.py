"""Read benchmarks: the ``read`` stage of ``envelope bench``, one candidate per benchmark.

Run: ``python -m pytest benchmarks/bench_read.py --benchmark-only`` (``--bench-size-mb``,
100 MiB by default; ``--bench-rounds``, 5). The input is the comparison run's: the
4-agent SSE stream of ``benchmarks.inputs``, in memory, read in 64 KiB slices; the
candidates are the stage's own (``benchmarks.engine``): ours (``StreamReader`` ->
``Reconstructor``, transcript kept), ours streaming (``SSEReader`` -> decode), the
``json.loads`` + dicts baseline, bare msgspec decoding and a copy of each read. Every
benchmark builds the stream anew and runs the collector before each round
(``benchmarks.suite``), so its figures do not depend on what ran before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from benchmarks.suite import fresh_stage, time_candidate

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture

    from benchmarks.engine import Sizes

#: Test id -> the stage's candidate name (its start).
CANDIDATES = {
    "ours": "ours: StreamReader + Reconstructor",
    "ours_stream": "ours: SSEReader + decode",
    "json_loads": "json.loads + dicts",
    "msgspec": "msgspec bare decode",
    "copy": "bytes copy",
}


@pytest.mark.parametrize("candidate", list(CANDIDATES))
def test_read(benchmark: BenchmarkFixture, sizes: Sizes, rounds: int, candidate: str) -> None:
    """One read candidate over the whole stream."""
    stage = fresh_stage("read", sizes)
    out = time_candidate(benchmark, stage, CANDIDATES[candidate], rounds)
    events = stage.measure(out).events
    if candidate == "copy":
        assert out == -(-stage.input_bytes // (64 * 1024))  # one per 64 KiB read
    else:
        assert out == events  # every candidate consumed every event of the stream
