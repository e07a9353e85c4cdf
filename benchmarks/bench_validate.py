"""Validate vs reconstruct on the same generated lines (pytest-benchmark).

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_validate.py --benchmark-only``.
Groups: ``validate-lines`` compares ``Validator`` with ``Reconstructor`` on the same
list of envelope lines; ``validate-bytes`` adds the reading of SSE bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from benchmarks.validate_data import sse_chunks, stream_lines
from envelope import Reconstructor, StreamReader, StreamValidator, Validator

if TYPE_CHECKING:
    from pytest_benchmark.fixture import BenchmarkFixture

SIZE = 4 * 1024 * 1024  # 4 MB of envelope lines per round
LINES = list(stream_lines(SIZE))
CHUNKS = list(sse_chunks(SIZE))


def _validate_lines() -> int:
    checker = Validator()
    count = 0
    for line in LINES:
        count += len(checker.feed(line))
    return count + len(checker.close())


def _reconstruct_lines() -> int:
    rebuilder = Reconstructor()
    for line in LINES:
        rebuilder.feed(line)
    return len(rebuilder.close())


def _validate_bytes() -> int:
    checker = StreamValidator()
    count = 0
    for chunk in CHUNKS:
        count += len(checker.feed(chunk))
    return count + len(checker.close())


def _reconstruct_bytes() -> int:
    reader = StreamReader()
    rebuilder = Reconstructor()
    for chunk in CHUNKS:
        for raw in reader.feed(chunk):
            rebuilder.feed(raw)
    reader.close()
    return len(rebuilder.close())


@pytest.mark.benchmark(group="validate-lines")
def test_validate_lines(benchmark: BenchmarkFixture) -> None:
    assert benchmark(_validate_lines) == 0


@pytest.mark.benchmark(group="validate-lines")
def test_reconstruct_lines(benchmark: BenchmarkFixture) -> None:
    assert benchmark(_reconstruct_lines) == 0


@pytest.mark.benchmark(group="validate-bytes")
def test_validate_sse_bytes(benchmark: BenchmarkFixture) -> None:
    assert benchmark(_validate_bytes) == 0


@pytest.mark.benchmark(group="validate-bytes")
def test_reconstruct_sse_bytes(benchmark: BenchmarkFixture) -> None:
    assert benchmark(_reconstruct_bytes) == 0
