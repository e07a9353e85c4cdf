"""Smoke run of ``python -m benchmarks.bench_grep`` on a tiny tree: it builds, searches, prints its table.

No timing is asserted; with ``rg`` on PATH the two searches' outputs are compared by the benchmark itself.
"""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

from benchmarks import bench_grep

if TYPE_CHECKING:
    import pytest


def test_bench_grep_runs_every_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_grep.main(["--files", "120", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "mode" not in line]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == list(bench_grep.MODES)
    if shutil.which("rg") is None:
        assert all("(rg not on PATH)" in row for row in rows)
    else:
        assert all(row.count("|") == 5 and "differ" not in row for row in rows)
