"""Benchmark: migrating the real legacy capture, repeated to the read stream's size.

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_migrate.py --benchmark-only``
(the input is ``--bench-size-mb``, 100 MiB by default as in the issue's target; the
smoke test runs it at 0.02) or ``PYTHONPATH=src python benchmarks/bench_migrate.py`` for
the ratio alone on 4 MiB. The input is ``envelope._bench.legacy_input``, as in the
``migrate`` stage of ``envelope bench``: the capture's ``meta_init`` once, its other
records repeated, then ``[DONE]``. The baseline is plain reading of the same bytes in
the same 64 KiB pieces (decoding them as UTF-8), so the ratio says what the migration
costs over touching the input at all. A missing capture fails the suite (never a skip).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from benchmarks.engine import legacy_input
from envelope import XmlMigrator

if TYPE_CHECKING:
    from benchmarks.data import Sizes

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "corpus" / "legacy_xml_sse_capture.txt"
PIECE = 64 * 1024


def corpus_input(target: int = 4 * 1024 * 1024) -> bytes:
    """The capture repeated to about ``target`` bytes (see ``legacy_input``)."""
    return legacy_input(CAPTURE.read_bytes(), target)


def migrate(data: bytes) -> int:
    m = XmlMigrator()
    n = 0
    for at in range(0, len(data), PIECE):
        n += len(m.feed(data[at : at + PIECE]))
    return n + len(m.close())


def plain(data: bytes) -> int:
    n = 0
    for at in range(0, len(data), PIECE):
        n += len(data[at : at + PIECE].decode("utf-8", "ignore"))
    return n


@pytest.fixture(scope="module")
def legacy(sizes: Sizes) -> bytes:
    if not CAPTURE.is_file():
        pytest.fail(f"the legacy capture is missing: {CAPTURE} (fixtures/corpus)")
    return corpus_input(sizes.read_bytes)


def _group(data: bytes) -> str:
    return f"migrate: legacy capture repeated to {len(data) / 2**20:.1f} MiB, 64 KiB reads"


def test_bench_migrate(benchmark: object, legacy: bytes) -> None:
    benchmark.group = _group(legacy)  # type: ignore[attr-defined]  # pytest-benchmark fixture
    lines = benchmark.pedantic(migrate, args=(legacy,), rounds=3, iterations=1)  # type: ignore[attr-defined]  # pytest-benchmark fixture
    assert lines > 0


def test_bench_plain_read(benchmark: object, legacy: bytes) -> None:
    benchmark.group = _group(legacy)  # type: ignore[attr-defined]  # pytest-benchmark fixture
    chars = benchmark.pedantic(plain, args=(legacy,), rounds=3, iterations=1)  # type: ignore[attr-defined]  # pytest-benchmark fixture
    assert chars > 0


def _best(fn: object, data: bytes, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        fn(data)  # type: ignore[operator]  # a callable taking bytes
        best = min(best, time.perf_counter() - start)
    return best


if __name__ == "__main__":
    data = corpus_input()
    mb = len(data) / 1e6
    t_mig, t_plain = _best(migrate, data), _best(plain, data)
    print(
        f"input {mb:.1f} MB: migrate {mb / t_mig:.1f} MB/s, plain read {mb / t_plain:.1f} MB/s, "
        f"ratio {t_mig / t_plain:.0f}x slower than plain reading"
    )
