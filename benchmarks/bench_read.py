"""Read benchmarks: SSE bytes in 64 KiB reads -> events -> reconstruct, on the 4-agent stream.

The stream (100 MiB by default, ``--bench-size-mb``) is written to a file once and read
back in 64 KiB reads by every candidate, so no candidate holds it whole. Candidates are
the read functions of ``envelope._bench``: ours (``SSEReader`` -> ``Reconstructor``),
ours without the transcript (``SSEReader`` -> ``decode_lenient``), the ``json.loads`` +
dicts baseline, bare msgspec decoding of the same events, and a copy of each read.
One group; a few rounds each (a pass over 100 MiB takes seconds).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from benchmarks.data import READ_SIZE
from benchmarks.engine import read_copy, read_json_loads, read_msgspec, read_ours, read_ours_stream

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator
    from pathlib import Path

    from pytest_benchmark.fixture import BenchmarkFixture

READERS: dict[str, Callable[[Iterable[bytes]], int]] = {
    "ours": read_ours,
    "ours_stream": read_ours_stream,
    "json_loads": read_json_loads,
    "msgspec": read_msgspec,
    "copy": read_copy,
}


def _reads(path: Path) -> Iterator[bytes]:
    with path.open("rb") as f:
        while piece := f.read(READ_SIZE):
            yield piece


@pytest.mark.parametrize("candidate", list(READERS))
def test_read(benchmark: BenchmarkFixture, sse_file: Path, candidate: str) -> None:
    """One read candidate over the whole stream file."""
    reader = READERS[candidate]
    size = sse_file.stat().st_size
    benchmark.group = f"read: {size / 2**20:.1f} MiB SSE, 4 agents, 64 KiB reads"
    benchmark.extra_info["input_bytes"] = size
    count = benchmark.pedantic(reader, setup=lambda: ((_reads(sse_file),), {}), rounds=3, iterations=1)  # type: ignore[no-untyped-call]  # pytest-benchmark leaves it unannotated
    assert count > 0
