"""Smoke run of ``benchmarks/load_scaleout.py`` on tiny sizes, so it cannot rot (no timing asserted)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from benchmarks import load_scaleout

if TYPE_CHECKING:
    import pytest


def test_load_benchmark_runs_every_stream_valid_nothing_lost(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Two processes, six paused-and-resumed runs: all valid, every stored log equals what was received."""
    load_scaleout.load(argparse.Namespace(url=pg_url, processes=2, runs=6, concurrency=3, seed=3))
    report = json.loads(capsys.readouterr().out)
    assert (report["all_ok"], report["all_valid"], report["runs_whose_stored_log_differs"]) == (True, True, 0)


def test_follow_benchmark_runs(pg_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The follower benchmark measures all three ways on a few lines."""
    load_scaleout.follow(argparse.Namespace(url=pg_url, lines=5))
    assert set(json.loads(capsys.readouterr().out)) == {"notify", "poll_50ms", "poll_10ms"}
