"""Smoke run of the benchmarks, so they cannot rot: every module imports, every benchmark
runs once on tiny inputs, ``envelope bench`` runs end to end, and the stdlib baseline
really is the seed's algorithm (it round-trips; only its bound fails).

No timing is asserted anywhere: speed targets live in ``envelope bench``'s report.
The peers and the chart need the ``bench`` extra (``pip install -e '.[dev,bench]'``);
without it these tests fail and say so, rather than skip.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envelope import Emitter, decode
from envelope._bench import Sizes, build_stage, run, seed_chunk_and_emit
from envelope._bench_data import AGENTS, escape_payload, iter_sse
from envelope.cli import main

ROOT = Path(__file__).resolve().parents[2]
BENCH_MODULES = ("benchmarks.data", "benchmarks.bench_emit", "benchmarks.bench_read", "benchmarks.compare")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    return env


def test_bench_extra_installed() -> None:
    """The peers and the chart are importable: CI installs ``.[dev,bench]``."""
    for name in ("ag_ui.encoder", "matplotlib"):
        try:
            importlib.import_module(name)
        except ImportError:
            pytest.fail(f"{name} is missing: install the bench extra (pip install -e '.[dev,bench]')")


@pytest.mark.parametrize("name", BENCH_MODULES)
def test_benchmark_module_imports(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    module = importlib.import_module(name)
    assert module.__doc__


def test_every_benchmark_runs_once_on_tiny_inputs() -> None:
    """``pytest benchmarks --benchmark-disable`` runs each benchmark function exactly once."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "benchmarks",
            "--benchmark-disable",
            "--bench-size-mb",
            "0.02",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
        ],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert " passed" in out, out
    assert "skipped" not in out, out  # a missing peer is a failure here, not a quiet skip


def test_envelope_bench_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["bench", "--size-mb", "0.02", "--rounds", "1", "--out", str(tmp_path)])
    assert status == 0
    printed = capsys.readouterr().out
    md = (tmp_path / "bench.md").read_text(encoding="utf-8")
    for text in (printed, md):
        assert "stdlib seed-literal" in text
        assert "AG-UI EventEncoder" in text
        assert "msgspec" in text
        assert "json.loads" in text
        assert "not installed" not in text
    assert "### Targets" in md
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_envelope_bench_refuses_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--size-mb", "0", "--out", str(tmp_path)]) == 2
    assert main(["bench", "--rounds", "0", "--out", str(tmp_path)]) == 2
    assert main(["bench", "--stage", "nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--size-mb" in err
    assert "--rounds" in err
    assert "unknown stage nope" in err


def test_report_rows_and_targets() -> None:
    report = run(0.02, 1, memory=False, only=("emit_small", "read"))
    stages = {row.stage for row in report.rows}
    assert stages == {"emit_small", "read"}
    ours = report.row("emit_small", "ours")
    assert ours is not None
    assert ours.ratio == 1.0
    names = {t.name for t in report.targets}
    assert "emit 20 B deltas vs stdlib seed-literal" in names
    assert "read + reconstruct vs json.loads + dicts" in names


def test_seed_baseline_round_trips_and_counts_its_violations() -> None:
    """The baseline follows the seed: its deltas join to the payload, yet escapes break the bound."""
    payload = escape_payload(50_000)
    lines = seed_chunk_and_emit("tool_result", AGENTS[0], payload, extras={"id": "t1", "name": "n"})
    messages = [json.loads(line) for line in lines]
    assert "".join(m["delta"] for m in messages) == payload
    assert [m["final"] for m in messages] == [False] * (len(lines) - 1) + [True]
    assert list(messages[0]) == ["type", "agent", "final", "id", "name", "delta"]
    assert sum(len(line) > 2048 for line in lines) > 0
    ours = Emitter(AGENTS[0]).buffered("tool_result", payload, id="t1", name="n")
    assert all(len(line) <= 2048 for line in ours)
    assert "".join(decode(line).delta for line in ours) == payload


def test_seed_baseline_within_bound_on_plain_text() -> None:
    lines = seed_chunk_and_emit("text", AGENTS[1], "x" * 5000, final_on_last=False)
    assert all(len(line) <= 2048 for line in lines)
    assert not any(json.loads(line)["final"] for line in lines)


def test_read_candidates_agree_on_the_event_count() -> None:
    stage = build_stage("read", Sizes.from_mb(0.02))
    counted = [c for c in stage.candidates if c.run is not None and c.name != "bytes copy"]
    counts = {c.name: c.run() for c in counted if c.run is not None}
    assert len(counts) == 4
    events = b"".join(iter_sse(Sizes.from_mb(0.02).read_bytes)).count(b"\n\n")
    assert set(counts.values()) == {events}, counts
