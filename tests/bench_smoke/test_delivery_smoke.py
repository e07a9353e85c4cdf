"""Smoke run of ``python -m benchmarks.delivery`` at tiny sizes (seconds): shapes and streams, never timings.

Every body the benchmark's candidates delivered goes through the strict validator (and
the benchmark itself refuses a body that differs from the bare endpoint's); the
follower must have received every line; the node part must have timed every candidate
every round. Nothing asserts a speed: the goals are judged by the benchmark's own
report, on a quiet machine.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from benchmarks import delivery

from conftest import ROOT
from envelope import Reconstructor
from server_support import data_lines
from validating import assert_valid


def test_bench_lines_is_a_valid_stream_of_the_asked_size() -> None:
    lines = delivery.bench_lines(400, agents=3)
    assert 350 <= len(lines) <= 450
    assert_valid(lines)
    rebuilt = Reconstructor()
    for line in lines:
        rebuilt.feed(line)
    assert sorted(rebuilt.transcript().agents) == ["agent-0", "agent-1", "agent-2"]


def test_every_part_runs_tiny(pg_url: str) -> None:
    """Memory, file and PostgreSQL journals against bare; the PostgreSQL follower; the node decoder."""
    if shutil.which("node") is None:
        message = "NODE NOT INSTALLED: the JavaScript part of benchmarks/delivery.py was not run"
        if os.environ.get("CI") == "true":  # CI must run every part (scripts/system-deps installs node)
            pytest.fail(message)
        pytest.skip(message)
    result = delivery.run(
        lines=60, rounds=2, follower_lines=30, gap_ms=0.5, js_lines=200, js_rounds=2, js_min_ms=0, pg_url=pg_url
    )
    assert result["not_run"] == {}
    rows = result["delivery"]
    assert list(rows) == ["bare", "memory", "file", "postgres"]
    for row in rows.values():
        assert len(row.wall) == len(row.cpu) == 2
        assert_valid(row.body)
        assert data_lines(row.body) == delivery.bench_lines(60)
    assert re.findall(rb"^id: r00001:0:(\d+)$", rows["postgres"].body, re.M)[-1] == str(result["lines"] - 1).encode()
    follower = result["follower"]
    assert follower["lines"] == len(follower["latency"]) == len(follower["append"]) > 0
    js = result["js"]
    assert js["lines"] == len(delivery.bench_lines(200, agents=4))
    assert sorted(js["times"]) == sorted(
        ["JSON.parse loop", "Reconstructor.feed per line", "SSEReader + Reconstructor, SSE body in 64 KiB reads"]
    )
    assert all(len(times) == 2 for times in js["times"].values())
    assert (js["passes"], js["warmup"]) == (3, 2)  # js_min_ms=0: --repeat's 3 passes a round (spec JD2-a)
    text = delivery.report(result)
    for label in ("Delivery, memory journal", "Delivery, file journal", "Delivery, postgres journal", "p95"):
        assert label in text


def test_a_body_that_differs_from_bare_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark checks what it times: a Delivery that sent other bytes stops the run."""
    lines = delivery.bench_lines(40)
    monkeypatch.setattr(delivery, "_delivery_app", lambda _journal, _lines: delivery._bare_app([b"data: x\n\n"]))
    with pytest.raises(AssertionError, match="differs from the bare endpoint"):
        delivery.measure_delivery(lines, 1, None)


def test_the_command_line_runs_without_postgres_or_node() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.delivery", "--lines", "40", "--rounds", "1", "--no-postgres", "--no-js"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "| Delivery, memory journal |" in done.stdout
    assert "postgres journal" not in done.stdout
