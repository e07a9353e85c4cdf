"""Smoke run of the scaling benchmark (``python -m benchmarks.scaling``) at tiny sizes.

Checks the output's shape (every path at every size and agent count, the server at each
load level, the fit, the files), that the generated inputs are what the report says
(the N-agent stream valid under the strict validator, with N agents; the migrate input
byte for byte the comparison run's ``legacy_input``), and that the growth fit reads a
known exponent back. No timing is asserted anywhere.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks import scaling
from benchmarks.engine import legacy_input

from envelope import DONE, MetaFinal, MetaInit, StreamReader, decode, frame
from validating import assert_valid

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _scaling(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.scaling", *args],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_scaling_runs_end_to_end_at_tiny_sizes(tmp_path: Path) -> None:
    """The one command, tiny: every point present, the files written, the server streams valid."""
    proc = _scaling(
        "--sizes",
        "20KB,60KB",
        "--agents",
        "1,3",
        "--agents-size",
        "30KB",
        "--repeat",
        "2",
        "--server-runs",
        "3",
        "--server-concurrency",
        "1,2",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "scaling.json").read_text(encoding="utf-8"))
    points = doc["points"]
    paths = ("baseline", "read", "read-stream", "validate", "migrate")
    for target in (20_000, 60_000):
        got = sorted(p["path"] for p in points if p["sweep"] == "size" and p["target_bytes"] == target)
        assert got == sorted(paths)
    for agents in (1, 3):
        got = sorted(p["path"] for p in points if p["sweep"] == "agents" and p["agents"] == agents)
        assert got == sorted(("baseline", "read", "read-stream", "validate"))
    for p in points:
        assert p["repeats"] == 2
        assert len(p["all_seconds"]) == 2
        assert p["seconds"] > 0
        assert p["cpu_seconds"] >= 0
        assert p["peak_rss"] > 0
        assert p["input_bytes"] >= p["target_bytes"] or p["path"] == "migrate"
        if p["path"] == "validate":
            assert p["result"] == 0, p  # the generated streams are valid
    # Every read path reads the same events from the same input.
    for sweep, key in (("size", "target_bytes"), ("agents", "agents")):
        for value in {p[key] for p in points if p["sweep"] == sweep}:
            events = {p["result"] for p in points if p["sweep"] == sweep and p[key] == value and "read" in p["path"]}
            assert len(events) == 1, (sweep, value, events)
    assert [s["concurrency"] for s in doc["server"]] == [1, 2]
    for s in doc["server"]:
        assert s["valid"] == s["runs"] == 3
        assert s["lines"] > 0
        assert s["lines_per_s"] > 0
    assert set(doc["fits"]) == set(paths)
    md = (tmp_path / "scaling.md").read_text(encoding="utf-8")
    for heading in ("### Input size", "### How cost grows with size", "### Interleaved agents", "### Server"):
        assert heading in md
    assert md in proc.stdout
    assert str(tmp_path) not in md  # the recorded command leaves out --out
    assert (tmp_path / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "args",
    [
        ("--sizes", "0KB"),
        ("--sizes", "lots"),
        ("--agents", "0"),
        ("--paths", "read,nope"),
        ("--repeat", "0"),
    ],
)
def test_scaling_refuses_bad_options(args: tuple[str, ...], tmp_path: Path) -> None:
    proc = _scaling(*args, "--no-server", "--out", str(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "error:" in proc.stderr
    assert not (tmp_path / "scaling.json").exists()


@pytest.mark.parametrize("agents", [1, 7, 40])
def test_agents_stream_is_valid_and_has_that_many_agents(agents: int) -> None:
    buf = io.BytesIO()
    written = scaling.write_agents_sse(buf, agents, 40_000)
    data = buf.getvalue()
    assert written == len(data)
    assert data.endswith(DONE)
    assert_valid(data)
    reader = StreamReader()
    lines = [e.data for e in [*reader.feed(data), *reader.close()] if e.data != "[DONE]"]
    envelopes = [decode(line) for line in lines]
    seen = {e.agent for e in envelopes}
    assert seen == set(scaling.agent_ids(agents, seed=20_240_611))
    for agent in seen:
        own = [e for e in envelopes if e.agent == agent]
        assert isinstance(own[0], MetaInit)
        assert isinstance(own[-1], MetaFinal)


def test_agents_stream_interleaves_agents() -> None:
    """With several agents, the lines of one agent are not all in one run."""
    lines = list(scaling.agents_lines(5, 60_000))
    agents = [decode(line).agent for line in lines]
    switches = sum(a != b for a, b in itertools.pairwise(agents))
    assert switches > 5 * 4


def test_agents_stream_is_deterministic() -> None:
    first = b"".join(frame(line) for line in scaling.agents_lines(3, 20_000))
    again = b"".join(frame(line) for line in scaling.agents_lines(3, 20_000))
    assert first == again


@pytest.mark.parametrize("size", [1, 50_000, 300_000])
def test_legacy_input_written_is_the_comparison_runs(size: int) -> None:
    capture = scaling.LEGACY_CAPTURE.read_bytes()
    buf = io.BytesIO()
    written = scaling.write_legacy(buf, capture, size)
    assert buf.getvalue() == legacy_input(capture, size)
    assert written == len(buf.getvalue())


@pytest.mark.parametrize(
    ("text", "value"),
    [("1MB", 10**6), ("1GB", 10**9), ("64KB", 64_000), ("2.5MB", 2_500_000), ("1234", 1234), ("10 mb", 10**7)],
)
def test_parse_size(text: str, value: int) -> None:
    assert scaling.parse_size(text) == value


@pytest.mark.parametrize("text", ["0", "-1MB", "MB", "0.5B"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        scaling.parse_size(text)


def _point(size: int, cpu: float, rss: int) -> scaling.Point:
    return scaling.Point("size", "read", 4, size, size, cpu, cpu, rss, 1, 1)


@pytest.mark.parametrize("exponent", [1.0, 1.5, 0.5])
def test_fit_reads_the_exponent_back(exponent: float) -> None:
    sizes = [10**6, 10**7, 10**8, 10**9]
    points = [_point(n, 1e-3 * (n / 1e6) ** exponent, 20 * 2**20) for n in sizes]
    got = scaling.fit(points)
    assert got["time_exponent"] == pytest.approx(exponent)
    assert got["ms_per_mb_spread"] == pytest.approx(100 ** abs(exponent - 1))
    assert got["rss_growth"] == pytest.approx(1.0)


def test_fit_needs_two_sizes() -> None:
    assert scaling.fit([_point(10**6, 0.01, 1)]) == {
        "time_exponent": None,
        "ms_per_mb_spread": None,
        "rss_growth": None,
    }


def test_child_measures_one_point(tmp_path: Path) -> None:
    """The fresh-process side: the read path over a file counts its events."""
    path = tmp_path / "in.sse"
    with path.open("wb") as out:
        scaling.write_sse(out, 30_000)
    data = path.read_bytes()
    doc = scaling.run_child("read", str(path))
    assert doc["result"] == data.count(b"\n\n")
    assert doc["peak_rss"] > 0
    assert scaling.run_child("validate", str(path))["result"] == 0


def test_recorded_command_leaves_out_where_files_went() -> None:
    """The report names the measuring options, never a machine's path (``--out``)."""
    argv = ["--max-size", "1GB", "--out", "/somewhere/out", "--repeat", "2", "--out=/x"]
    assert scaling._without_out(argv) == ["--max-size", "1GB", "--repeat", "2"]
