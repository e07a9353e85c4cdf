"""Benchmark: migrating the real legacy capture, repeated to about 4 MB.

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_migrate.py --benchmark-only``
or ``PYTHONPATH=src python benchmarks/bench_migrate.py`` for the ratio alone. The
baseline is plain reading of the same bytes in the same 64 KiB pieces (decoding them as
UTF-8), so the ratio says what the migration costs over touching the input at all.
"""

from __future__ import annotations

import time
from pathlib import Path

from envelope import XmlMigrator

CAPTURE = Path(__file__).resolve().parents[1].parent / "shared" / "corpus" / "upstream" / "legacy_xml_sse_capture.txt"
PIECE = 64 * 1024


def corpus_input(target: int = 4 * 1024 * 1024) -> bytes:
    """The capture's records (without [DONE]) repeated to about ``target`` bytes, then [DONE]."""
    raw = CAPTURE.read_bytes()
    body = raw[: raw.rindex(b"data: [DONE]")]
    head, rest = body.split(b"\n\n", 1)  # keep one meta_init, repeat the blocks after it
    times = max(1, target // len(rest))
    return head + b"\n\n" + rest * times + b"data: [DONE]\n\n"


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


def test_bench_migrate(benchmark: object) -> None:
    data = corpus_input()
    benchmark.group = "migrate"  # type: ignore[attr-defined]  # pytest-benchmark fixture
    benchmark(migrate, data)  # type: ignore[operator]  # pytest-benchmark fixture


def test_bench_plain_read(benchmark: object) -> None:
    data = corpus_input()
    benchmark.group = "migrate"  # type: ignore[attr-defined]  # pytest-benchmark fixture
    benchmark(plain, data)  # type: ignore[operator]  # pytest-benchmark fixture


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
