"""Validate vs reconstruct (pytest-benchmark).

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_validate.py --benchmark-only``.
Groups:

* ``validate: ... MiB SSE, 4 agents, 64 KiB reads``: the read stream of ``bench_read``
  (``--bench-size-mb``, 100 MiB by default) read back in 64 KiB reads by
  ``StreamValidator`` and by the read path (``SSEReader`` -> ``Reconstructor``): the
  ``validate`` stage of ``envelope bench``, whose target is 1.5x the read path's time.
* ``validate-lines``: ``Validator`` and ``Reconstructor`` on the same list of envelope
  lines of one corpus-shaped agent (``validate_data``), up to 4 MiB.
* ``validate-bytes``: the same stream as SSE bytes, reading included.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from benchmarks.data import READ_SIZE
from benchmarks.engine import read_ours, validate_ours
from benchmarks.validate_data import sse_chunks, stream_lines
from envelope import Reconstructor, StreamReader, StreamValidator, Validator

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path

    from pytest_benchmark.fixture import BenchmarkFixture

    from benchmarks.data import Sizes

MAX_SIZE = 4 * 1024 * 1024  # at most 4 MB of envelope lines per round for the line groups


@pytest.fixture(scope="module")
def lines(sizes: Sizes) -> list[bytes]:
    return list(stream_lines(min(MAX_SIZE, sizes.read_bytes)))


@pytest.fixture(scope="module")
def chunks(sizes: Sizes) -> list[bytes]:
    return list(sse_chunks(min(MAX_SIZE, sizes.read_bytes)))


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


def _validate_bytes(chunks: list[bytes]) -> int:
    checker = StreamValidator()
    count = 0
    for chunk in chunks:
        count += len(checker.feed(chunk))
    return count + len(checker.close())


def _reconstruct_bytes(chunks: list[bytes]) -> int:
    reader = StreamReader()
    rebuilder = Reconstructor()
    for chunk in chunks:
        for raw in reader.feed(chunk):
            rebuilder.feed(raw)
    reader.close()
    return len(rebuilder.close())


@pytest.mark.benchmark(group="validate-lines")
def test_validate_lines(benchmark: BenchmarkFixture, lines: list[bytes]) -> None:
    assert benchmark(_validate_lines, lines) == 0


@pytest.mark.benchmark(group="validate-lines")
def test_reconstruct_lines(benchmark: BenchmarkFixture, lines: list[bytes]) -> None:
    assert benchmark(_reconstruct_lines, lines) == 0


@pytest.mark.benchmark(group="validate-bytes")
def test_validate_sse_bytes(benchmark: BenchmarkFixture, chunks: list[bytes]) -> None:
    assert benchmark(_validate_bytes, chunks) == 0


@pytest.mark.benchmark(group="validate-bytes")
def test_reconstruct_sse_bytes(benchmark: BenchmarkFixture, chunks: list[bytes]) -> None:
    assert benchmark(_reconstruct_bytes, chunks) == 0


def _reads(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while piece := f.read(READ_SIZE):
            yield piece


READ_STREAM: dict[str, Callable[[Iterable[bytes]], int]] = {
    "validate": validate_ours,
    "read_reconstruct": read_ours,
}


@pytest.mark.parametrize("candidate", list(READ_STREAM))
def test_validate_read_stream(benchmark: BenchmarkFixture, sse_file: Path, candidate: str) -> None:
    """The validator, and the read path it is measured against, over the read stream file."""
    run = READ_STREAM[candidate]
    size = sse_file.stat().st_size
    benchmark.group = f"validate: {size / 2**20:.1f} MiB SSE, 4 agents, 64 KiB reads"
    benchmark.extra_info["input_bytes"] = size
    count = benchmark.pedantic(run, setup=lambda: ((_reads(sse_file),), {}), rounds=3, iterations=1)  # type: ignore[no-untyped-call]  # pytest-benchmark leaves it unannotated
    events = sum(piece.count(b"\n\n") for piece in _reads(sse_file))
    if candidate == "validate":
        # the violations found: a few (the generator writes some payloads that are not
        # JSON: E140/E141), never one per event
        assert count < events // 10
    else:
        assert count > 0
