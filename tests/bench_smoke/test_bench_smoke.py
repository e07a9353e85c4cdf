"""Smoke run of the benchmarks, so they cannot rot: every module imports, every benchmark
runs once on tiny inputs, ``envelope bench`` runs end to end, and the stdlib baseline
really is the seed's algorithm (it round-trips; only its bound fails).

No timing is asserted anywhere: speed targets live in ``envelope bench``'s report.
The peers and the chart need the ``bench`` extra (``pip install -e '.[dev,bench]'``);
without it these tests fail and say so, rather than skip.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.command import LEGACY_CAPTURE, read_capture, stage_in_child
from benchmarks.engine import Sizes, build_stage, legacy_input, run, run_one, seed_chunk_and_emit, validate_ours
from benchmarks.inputs import AGENTS, escape_payload, iter_sse

from envelope import Emitter, StreamValidator, XmlMigrator, decode
from envelope.cli import main

ROOT = Path(__file__).resolve().parents[2]
BENCH_MODULES = (
    "benchmarks.data",
    "benchmarks.bench_emit",
    "benchmarks.bench_read",
    "benchmarks.bench_validate",
    "benchmarks.bench_migrate",
    "benchmarks.compare",
    "benchmarks.load_server",
    "benchmarks.load_scaleout",
    "benchmarks.scaling",
    "benchmarks.agreement",
    "benchmarks.suite",
    "benchmarks.emit_ab",
    "benchmarks.emit_floor",
    "benchmarks.read_floor",
    "benchmarks.frame_ab",
    "benchmarks.publish",
)


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
        assert "StreamValidator" in text
        assert "XmlMigrator" in text
        assert "not installed" not in text
        assert "not found" not in text
    assert "### Targets" in md
    assert "each stage in its own process" in md
    # Labels follow --size-mb: 0.02 MiB makes the "10 MiB" payload 20 KiB, and the titles say so.
    assert "emit 20 KiB escape-heavy vs stdlib seed-literal" in md
    assert "10 MiB" not in md
    assert re.search(r"read \+ reconstruct: \d+ KiB SSE", md)
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_stage_in_its_own_process_matches_one_run_here() -> None:
    """``envelope bench`` runs each stage in a child; what comes back is the stage's own rows."""
    args = argparse.Namespace(size_mb=0.02, rounds=1, no_memory=True, legacy_capture=None)
    info, rows = stage_in_child("emit_small", args)
    here_info, here_rows = run_one("emit_small", Sizes.from_mb(0.02), 1, memory=False)
    assert info == here_info
    assert [(r.candidate, r.role, r.events, r.violations) for r in rows] == [
        (r.candidate, r.role, r.events, r.violations) for r in here_rows
    ]
    assert all(r.seconds is not None and r.seconds > 0 for r in rows if r.role != "peer" or not r.missing)


def test_in_process_runs_keep_no_stage_input() -> None:
    """The report keeps each stage's title, never its input: an earlier stage's data cannot
    weigh on a later stage's timing (the in-process mode's order effect)."""
    report = run(0.02, 1, memory=False, only=("emit_small", "read"))
    assert [type(s).__name__ for s in report.stages] == ["StageInfo", "StageInfo"]
    assert not report.isolated


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


def test_validate_and_migrate_stages(corpus: Path) -> None:
    """Both stages run at a tiny size, ours first, and their targets are checked."""
    capture = (corpus / "legacy_xml_sse_capture.txt").read_bytes()
    report = run(0.02, 1, memory=False, only=("validate", "migrate"), legacy_capture=capture)
    assert {row.stage for row in report.rows} == {"validate", "migrate"}
    for stage in ("validate", "migrate"):
        ours = report.row(stage, "ours")
        assert ours is not None
        assert ours.ratio == 1.0
        assert ours.mb_per_s > 0
    validate = report.named("validate", "ours: StreamValidator")
    assert validate is not None
    assert validate.candidate == "ours: StreamValidator"
    assert report.named("validate", "ours: StreamReader + Reconstructor") is not None
    targets = {t.name: t for t in report.targets}
    assert targets["validate vs read + reconstruct"].met is not None
    assert "(CPU; rounds " in targets["validate vs read + reconstruct"].measured  # per-round ratios, spread
    assert targets["migrate the legacy capture, repeated, vs stdlib html.parser tokenizer"].met is not None


def test_migrate_stage_without_the_capture() -> None:
    """No capture: the stage's rows and target say so; nothing raises."""
    report = run(0.02, 1, memory=False, only=("migrate",), legacy_capture=None)
    rows = [r for r in report.rows if r.stage == "migrate"]
    assert rows
    assert all(r.seconds is None and "legacy capture not found" in r.missing for r in rows)
    target = next(t for t in report.targets if t.name.startswith("migrate"))
    assert target.met is None
    assert "legacy capture not found" in target.measured


def test_validate_stage_runs_the_stream_validator() -> None:
    """The stage's ours finds what a StreamValidator fed the same reads finds."""
    data = b"".join(iter_sse(Sizes.from_mb(0.02).read_bytes))
    reads = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    checker = StreamValidator()
    found = [v for piece in reads for v in checker.feed(piece)] + checker.close()
    assert validate_ours(reads) == len(found)


def test_legacy_input_is_the_capture_repeated(corpus: Path) -> None:
    capture = (corpus / "legacy_xml_sse_capture.txt").read_bytes()
    head = capture.split(b"\n\n", 1)[0]
    data = legacy_input(capture, 200_000)
    assert 200_000 - len(capture) < len(data) <= 200_000 + len(capture)
    assert data.startswith(head + b"\n\n")
    assert data.count(head) == 1  # one meta_init
    assert data.endswith(b"data: [DONE]\n\n")
    assert data.count(b"data: [DONE]") == 1
    migrator = XmlMigrator()
    lines = migrator.feed(data) + migrator.close()
    assert lines[-1] == b"[DONE]"
    once = XmlMigrator()
    assert len(lines) > 2 * len(once.feed(capture) + once.close())


def test_legacy_capture_lookup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command reads the capture for the migrate stage; a bad --legacy-capture is exit 2."""
    given = tmp_path / "capture.txt"
    given.write_bytes(b"data: <x>\n\n")
    assert read_capture(str(given)) == b"data: <x>\n\n"
    assert read_capture(None) == LEGACY_CAPTURE.read_bytes()
    assert LEGACY_CAPTURE.is_relative_to(ROOT / "fixtures"), "the default is the checkout's copy"
    status = main(
        ["bench", "--stage", "migrate", "--legacy-capture", str(tmp_path / "none.txt"), "--out", str(tmp_path)]
    )
    assert status == 2
    assert "No such file" in capsys.readouterr().err


def test_benchmark_stream_is_valid() -> None:
    """The generated 4-agent stream the read and validate stages use passes the validator clean."""
    from benchmarks.inputs import iter_sse

    from envelope import StreamValidator

    checker = StreamValidator("sse")
    found = [v for chunk in iter_sse(512 * 1024) for v in checker.feed(chunk)] + checker.close()
    assert [v.code for v in found] == []


def test_emit_ab_runs_on_tiny_inputs(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m benchmarks.emit_ab``: today's emitter against itself (HEAD), both workloads."""
    from benchmarks import emit_ab

    assert emit_ab.main(["--before", "HEAD", "--rounds", "2", "--small-count", "50", "--big-mb", "0.05"]) == 0
    printed = capsys.readouterr().out
    for text in ("emit_small", "emit_10m_escape", "before / bare msgspec", "after  / bare msgspec"):
        assert text in printed


@pytest.mark.parametrize(
    ("name", "args"),
    [("emit_floor", ["--big-mb", "0.05", "--rounds", "2"]), ("read_floor", ["--size-mb", "0.05", "--rounds", "2"])],
)
def test_floor_benchmarks_run_on_tiny_inputs(name: str, args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m benchmarks.emit_floor`` / ``read_floor``: each step's ratio printed, on tiny inputs."""
    module = importlib.import_module(f"benchmarks.{name}")
    assert module.main(args) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("build: ")
    assert re.search(r"^  ours +[0-9.]+x  \(q [0-9.]+-[0-9.]+", printed, re.M), printed  # ours, with its spread
