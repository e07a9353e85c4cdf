"""Smoke runs of ``benchmarks/delivery_js.mjs`` at a tiny size (seconds): how a round is made, never timings.

The published JS row (spec JD2) alternates the candidates pass by pass, sums each one's
passes of a round, chooses the number of passes from the bare loop's time, and throws
warm-up rounds away. What is checked is the harness's own account of that and its refusal
of bad arguments; nothing asserts a speed.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from typing import TYPE_CHECKING, Any

import pytest
from benchmarks import delivery

from conftest import ROOT
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

SCRIPT = ROOT / "benchmarks" / "delivery_js.mjs"
NAMES = ["JSON.parse loop", "Reconstructor.feed per line", "SSEReader + Reconstructor, SSE body in 64 KiB reads"]


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        message = "NODE NOT INSTALLED: benchmarks/delivery_js.mjs was not run"
        if os.environ.get("CI") == "true":  # CI must run it (scripts/system-deps installs node)
            pytest.fail(message)
        pytest.skip(message)
    return node


def _stream(tmp_path: Path) -> Path:
    lines = delivery.bench_lines(120, agents=4)
    assert_valid(lines)
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_node(), "--expose-gc", str(SCRIPT), *args], capture_output=True, text=True, timeout=300, check=False
    )


def _result(*args: str) -> dict[str, Any]:
    done = _run(*args)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_spec_jd2_a_passes_reach_the_least_time_and_warm_up_rounds_are_thrown_away(tmp_path: Path) -> None:
    """[JD2-a]: enough passes that the bare loop's add up to MIN_MS, never below REPEAT; only ROUNDS reported."""
    path = _stream(tmp_path)
    result = _result(str(path), "3", "2", "20", "1")
    assert (result["gc"], result["warmup"], result["repeat"]) == (True, 1, 2)
    assert result["passes"] == max(2, math.ceil(20 / result["one_pass_ms"]))
    assert result["passes"] * result["one_pass_ms"] >= 20
    assert sorted(result["times"]) == sorted(result["cpu"]) == sorted(NAMES)
    assert all(len(v) == 3 for v in [*result["times"].values(), *result["cpu"].values()])
    floor = _result(str(path), "2", "5", "0", "0")  # no least time: REPEAT passes, no warm-up
    assert (floor["passes"], floor["warmup"]) == (5, 0)
    assert all(len(v) == 2 for v in floor["times"].values())


@pytest.mark.parametrize(("args", "said"), [((), "usage"), (("2", "x"), "REPEAT"), (("2", "3", "-1"), "MIN_MS")])
def test_spec_jd2_a_bad_arguments_are_refused_by_name(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    """[JD2-a]: a count that is not a whole number is refused, naming the argument; no JSON is printed."""
    done = _run(*((str(_stream(tmp_path)), *args) if args else ()))
    assert done.returncode != 0
    assert done.stdout == ""
    assert said in done.stderr


def test_spec_jd2_b_the_report_says_how_the_js_row_was_measured() -> None:
    """[JD2-b]: rounds, passes, alternation and summing, the collection and the warm-up are in the heading."""
    times = {name: [10.0 * (1 + k / 10), 11.0, 12.0, 10.5] for k, name in enumerate(NAMES)}
    js = {"node": "v0", "lines": 100, "repeat": 3, "passes": 9, "warmup": 2, "gc": True, "times": times}
    bare = delivery.Row("bare", wall=[1.0], cpu=[1.0], lines=1)
    text = delivery.report({"lines": 1, "rounds": 1, "repeat": 1, "not_run": {}, "delivery": {"bare": bare}, "js": js})
    assert (
        "100 lines, 4 rounds of 9 passes per candidate, alternated pass by pass (each one's passes of a round"
        " summed, the heap collected before each pass; 2 warm-up rounds thrown away)"
    ) in text
    row = next(line for line in text.splitlines() if line.startswith("| Reconstructor.feed per line |"))
    assert row.endswith("| <= 1.3x | yes |")
