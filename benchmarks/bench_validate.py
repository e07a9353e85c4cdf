"""Validate benchmarks: the ``validate`` stage of ``envelope bench``, plus the validator on lines.

Run: ``python -m pytest benchmarks/bench_validate.py --benchmark-only`` (``--bench-size-mb``,
100 MiB by default; ``--bench-rounds``, 5). Groups:

* ``validate: ... SSE (the read stream), 64 KiB reads``: the stage of ``envelope bench``
  on its input (the 4-agent SSE stream of ``benchmarks.inputs``, in memory, 64 KiB
  slices): ``StreamValidator`` and the read path it is measured against
  (``StreamReader`` -> ``Reconstructor``); the target is 1.2x the read path's time (issue 43 §2).
* ``validate-lines``: ``Validator`` and ``Reconstructor`` fed the envelope lines of
  the same 4-agent stream (at most 4 MiB of them), no SSE.

Every benchmark builds its input anew and runs the collector before each round
(``benchmarks.suite``), so its figures do not depend on what ran before it.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING

import pytest

from benchmarks.inputs import stream_lines
from benchmarks.suite import collect, fresh_stage, time_candidate
from envelope import Reconstructor, Validator

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture

    from benchmarks.engine import Sizes

MAX_LINES_BYTES = 4 * 1024 * 1024  # at most 4 MiB of envelope lines per round in validate-lines

CANDIDATES = {"validate": "ours: StreamValidator", "read_reconstruct": "ours: StreamReader + Reconstructor"}


@pytest.mark.parametrize("candidate", list(CANDIDATES))
def test_validate_read_stream(benchmark: BenchmarkFixture, sizes: Sizes, rounds: int, candidate: str) -> None:
    """The validator, and the read path it is measured against, over the read stream."""
    stage = fresh_stage("validate", sizes)
    out = time_candidate(benchmark, stage, CANDIDATES[candidate], rounds)
    if candidate == "validate":
        assert out == 0  # the generated stream is valid: no violation
    else:
        assert out == stage.measure(out).events


def _lines(sizes: Sizes) -> list[bytes]:
    gc.collect()
    return [*stream_lines(min(MAX_LINES_BYTES, sizes.read_bytes)), b"[DONE]"]


def _validate_lines(lines: list[bytes]) -> int:
    checker = Validator()
    count = 0
    for line in lines:
        count += len(checker.feed(line))
    return count + len(checker.close())


def _reconstruct_lines(lines: list[bytes]) -> int:
    rebuilder = Reconstructor()
    for line in lines:
        rebuilder.feed(line)
    return len(rebuilder.close())


LINE_CANDIDATES = {"validate": _validate_lines, "reconstruct": _reconstruct_lines}


@pytest.mark.parametrize("candidate", list(LINE_CANDIDATES))
def test_validate_lines(benchmark: BenchmarkFixture, sizes: Sizes, rounds: int, candidate: str) -> None:
    """``Validator`` or ``Reconstructor`` over the same envelope lines, one line per ``feed``."""
    lines = _lines(sizes)
    benchmark.group = "validate-lines"
    benchmark.extra_info.update(stage="validate-lines", candidate=candidate, lines=len(lines))
    out = benchmark.pedantic(  # type: ignore[no-untyped-call]  # pytest-benchmark leaves it unannotated
        LINE_CANDIDATES[candidate], args=(lines,), setup=collect, rounds=rounds, iterations=1
    )
    assert out == 0  # no violation; no block left open
