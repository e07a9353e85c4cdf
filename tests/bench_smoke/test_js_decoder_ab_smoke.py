"""Smoke run of ``benchmarks/js_decoder_ab.mjs`` at a tiny size (seconds): its report's shape, never timings.

The harness alternates the bare ``JSON.parse`` loop, the loop keeping each delta (the
second reference) and each decoder build given; every candidate must be reported against
both references. Nothing asserts a speed: ratios are judged in docs/benchmarks.md.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest
from benchmarks import delivery

from conftest import ROOT
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

SCRIPT = ROOT / "benchmarks" / "js_decoder_ab.mjs"
RATIO = r"\d+\.\d\dx \(q \d+\.\d\d-\d+\.\d\d\)"


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        message = "NODE NOT INSTALLED: benchmarks/js_decoder_ab.mjs was not run"
        if os.environ.get("CI") == "true":  # CI must run it (scripts/system-deps installs node)
            pytest.fail(message)
        pytest.skip(message)
    return node


def test_every_candidate_is_reported_against_both_references(tmp_path: Path) -> None:
    lines = delivery.bench_lines(200, agents=4)
    assert_valid(lines)
    stream = tmp_path / "lines.txt"
    stream.write_bytes(b"".join(line + b"\n" for line in lines))
    decoder = str(ROOT / "js" / "envelope-decoder.mjs")
    done = subprocess.run(
        [_node(), "--expose-gc", str(SCRIPT), str(stream), "2", decoder],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = done.stdout.splitlines()
    assert re.match(rf"node v\d+\.\d+\.\d+, {len(lines)} lines, 2 rounds;", report[0]), report
    names = ["JSON.parse loop", "JSON.parse loop, deltas kept", decoder]
    assert len(report) == 1 + len(names), report
    for name, row in zip(names, report[1:], strict=True):
        assert re.fullmatch(rf"  {re.escape(name)}: {RATIO}; over the deltas-kept loop {RATIO}", row), row
    assert report[1].startswith("  JSON.parse loop: 1.00x (q 1.00-1.00)")
    assert report[2].endswith("over the deltas-kept loop 1.00x (q 1.00-1.00)")


def test_a_decoder_that_does_not_finish_the_stream_is_refused(tmp_path: Path) -> None:
    lines = delivery.bench_lines(60, agents=2)[:-1]  # no [DONE]: the harness must say the stream did not end
    assert_valid([*lines, b"[DONE]"])
    stream = tmp_path / "lines.txt"
    stream.write_bytes(b"".join(line + b"\n" for line in lines))
    done = subprocess.run(
        [_node(), "--expose-gc", str(SCRIPT), str(stream), "1", str(ROOT / "js" / "envelope-decoder.mjs")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert "the stream did not end" in done.stderr
