"""Benchmark inputs: fixed-seed, corpus-shaped deltas, payloads and SSE streams.

Owns: the names the suites use. The generators themselves live in
``envelope._bench_data`` so that ``envelope bench`` has them in an installed package;
this module re-exports them and adds the stage sizes the suites run at.
Does not own: timing (pytest-benchmark, ``envelope._bench``).
"""

from __future__ import annotations

from benchmarks.engine import READ_SIZE, Sizes, seed_chunk_and_emit
from benchmarks.inputs import AGENTS, ascii_payload, deltas, escape_payload, iter_sse, stream_lines, write_sse

__all__ = [
    "AGENTS",
    "READ_SIZE",
    "Sizes",
    "ascii_payload",
    "deltas",
    "escape_payload",
    "iter_sse",
    "seed_chunk_and_emit",
    "stream_lines",
    "write_sse",
]
