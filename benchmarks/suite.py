"""What every pytest-benchmark suite shares: a fresh stage per benchmark, timed as ``envelope bench`` times it.

Owns: building the stage a benchmark measures (``fresh_stage``: the very stage of
``benchmarks.engine``, on the inputs of ``benchmarks.inputs``, built anew for each
benchmark so no earlier benchmark's data is alive), and timing one candidate of it
(``time_candidate``: ``rounds`` rounds of one pass each, the collector run before every
round as ``envelope bench`` does; pytest-benchmark's median is then the figure
``envelope bench`` reports). Does not own: the stages, candidates or inputs
(``benchmarks.engine``, ``benchmarks.inputs``), the options (``benchmarks/conftest.py``).

What still differs from ``envelope bench``: there, every stage runs in a fresh process
and a stage's candidates alternate round by round; here the candidates of one stage run
one after the other in one process. ``benchmarks/README.md`` compares the ratios both
give.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

import pytest

from benchmarks.engine import Candidate, Sizes, Stage, build_stage

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture


def fresh_stage(key: str, sizes: Sizes) -> Stage:
    """Stage ``key`` of ``envelope bench`` at ``sizes``, built now, after a full collection."""
    gc.collect()
    return build_stage(key, sizes)


def collect() -> None:
    """pytest-benchmark's ``setup`` before each round: a full collection, as ``envelope bench`` runs."""
    gc.collect()


def candidate(stage: Stage, name: str) -> Candidate:
    """The candidate of ``stage`` whose name starts with ``name``; a missing peer fails (never a skip)."""
    for cand in stage.candidates:
        if cand.name.startswith(name):
            if cand.run is None:
                pytest.fail(f"{cand.name}: {cand.missing} (install the bench extra: pip install -e '.[dev,bench]')")
            return cand
    raise KeyError(f"stage {stage.key} has no candidate {name!r}: {[c.name for c in stage.candidates]}")


def time_candidate(benchmark: BenchmarkFixture, stage: Stage, name: str, rounds: int) -> Any:
    """Time candidate ``name`` of ``stage``: ``rounds`` rounds, one pass each, gc before each.

    The benchmark's group is the stage's title; ``extra_info`` records the stage key,
    the candidate's full name and role and the input bytes, so a reader of
    ``--benchmark-json`` can compute the same ratios as ``envelope bench``.

    Returns:
        What the candidate's last pass returned (``stage.measure`` reads it).
    """
    cand = candidate(stage, name)
    assert cand.run is not None  # candidate() fails otherwise
    benchmark.group = stage.title
    benchmark.extra_info.update(
        stage=stage.key, candidate=cand.name, role=cand.role, input_bytes=stage.input_bytes, rounds=rounds
    )
    return benchmark.pedantic(cand.run, setup=collect, rounds=rounds, iterations=1)  # type: ignore[no-untyped-call]  # pytest-benchmark leaves it unannotated
