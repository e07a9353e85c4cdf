"""Migrate benchmarks: the ``migrate`` stage of ``envelope bench``, one candidate per benchmark.

Run: ``python -m pytest benchmarks/bench_migrate.py --benchmark-only`` (``--bench-size-mb``,
100 MiB by default; ``--bench-rounds``, 5). The input is the comparison run's: the real
legacy capture (``fixtures/corpus``) repeated to the read stream's size
(``engine.legacy_input``: its ``meta_init`` once, its other records repeated, then
``[DONE]``), in 64 KiB slices. Candidates: ours (``XmlMigrator``, warnings to a
callback as ``envelope migrate`` takes them), the reference its target is a ratio to
(the same bytes through the standard library's ``html.parser``, tokens counted), and the
floor, decoding each slice as UTF-8, so the ratio says what the migration costs over
touching the input at all.
A missing capture fails the suite (never a skip).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from benchmarks.suite import fresh_stage, time_candidate

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture

    from benchmarks.engine import Sizes

CANDIDATES = {
    "migrate": "ours: XmlMigrator",
    "stdlib_tokenizer": "stdlib html.parser tokenizer",
    "plain_read": "UTF-8 decode",
}


@pytest.mark.parametrize("candidate", list(CANDIDATES))
def test_migrate(benchmark: BenchmarkFixture, sizes: Sizes, rounds: int, candidate: str) -> None:
    """One migrate candidate over the repeated capture."""
    stage = fresh_stage("migrate", sizes)
    out = time_candidate(benchmark, stage, CANDIDATES[candidate], rounds)
    assert out > 0  # envelope lines written, tokens counted, or slices decoded
