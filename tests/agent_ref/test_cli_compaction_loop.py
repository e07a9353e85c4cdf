"""`agent-ref run --compact-threshold N` and `--loop-limit N` (spec/cli-agent-ref.md RC8).

Every test runs the installed console script in a subprocess, and every stream it
writes passes the strict validator and ``envelope validate --strict``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from validating import assert_valid

BIN = Path(sys.executable).parent
SCRIPT = BIN / "agent-ref"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
    )


def _types(stdout: str) -> list[str]:
    return [json.loads(line[6:])["type"] for line in stdout.splitlines() if line.startswith("data: {")]


def _strict(stdout: str, tmp_path: Path) -> None:
    assert_valid(stdout.encode())
    path = tmp_path / "out.sse"
    path.write_text(stdout)
    done = subprocess.run(
        [str(BIN / "envelope"), "validate", "--strict", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_spec_RC8_a_compact_threshold_compacts_a_long_run(tmp_path: Path) -> None:
    """[RC8-a] A low threshold: a long "keep calculating" run is summarised mid-run."""
    done = _cli("run", "--compact-threshold", "300", "--max-steps", "8", "keep calculating", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    types = _types(done.stdout)
    assert "meta_compaction" in types
    compaction = next(json.loads(line[6:]) for line in done.stdout.splitlines() if '"type":"meta_compaction"' in line)
    assert json.loads(compaction["delta"])["strategy"] == "summarise"
    _strict(done.stdout, tmp_path)


def test_spec_RC8_a_no_compaction_without_the_flag(tmp_path: Path) -> None:
    """[RC8-a] Without ``--compact-threshold`` the same run is never compacted (default: off)."""
    done = _cli("run", "--max-steps", "8", "keep calculating", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "meta_compaction" not in _types(done.stdout)
    _strict(done.stdout, tmp_path)


@pytest.mark.parametrize(("flags", "stop"), [((), "loop_detected"), (("--loop-limit", "0"), "max_steps")])
def test_spec_RC8_b_loop_limit_default_and_off(flags: tuple[str, ...], stop: str, tmp_path: Path) -> None:
    """[RC8-b] The loop guard is on at 3 by default; ``--loop-limit 0`` turns it off."""
    done = _cli("run", *flags, "--max-steps", "5", "keep repeating", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"agent-ref: {stop} after" in done.stderr
    _strict(done.stdout, tmp_path)


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--loop-limit", "1", "--loop-limit: error: 1 is not a limit; pass N >= 2, or 0 to turn it off\n"),
        ("--loop-limit", "-2", "--loop-limit: error: -2 is not a limit; pass N >= 2, or 0 to turn it off\n"),
        ("--compact-threshold", "0", "--compact-threshold: error: 0 is not a token count; pass N >= 1\n"),
    ],
)
def test_spec_RC8_c_bad_values_are_exit_2(flag: str, value: str, message: str, tmp_path: Path) -> None:
    """[RC8-c] A value that is no limit is an RC2-style error, exit 2, nothing on stdout."""
    done = _cli("run", flag, value, "hello", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", message)


@pytest.mark.parametrize("command", ["run", "resume"])
def test_spec_RC8_help_names_both_flags_and_defaults(command: str, tmp_path: Path) -> None:
    """[RC4-a] ``--help`` of run and resume names both flags with their defaults."""
    text = " ".join(_cli(command, "--help", cwd=tmp_path).stdout.split())
    assert "--compact-threshold N" in text
    assert "(seed 001's compactor; default: off)" in text
    assert "--loop-limit N" in text
    assert "0 turns it off (default: 3)" in text


def test_spec_RC8_d_the_printed_resume_command_repeats_the_flags(tmp_path: Path) -> None:
    """[RC8-d] The resume command printed at a pause repeats both flags when given."""
    done = _cli(
        "run",
        "--compact-threshold",
        "5000",
        "--loop-limit",
        "4",
        "Please confirm, then tell me what is 6 * 7",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "--compact-threshold 5000 --loop-limit 4" in done.stderr
    _strict(done.stdout, tmp_path)


def test_spec_RC5_a_pretty_shows_the_compaction_boundary(tmp_path: Path) -> None:
    """[RC5-a] `--pretty` dropped meta_compaction (issue 24 §7): the boundary now has its own line."""
    done = _cli("run", "--pretty", "--compact-threshold", "300", "--max-steps", "8", "keep calculating", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    compacted = [line for line in lines if line.startswith("── context compacted")]
    assert len(compacted) >= 1, done.stdout
    assert compacted[0].startswith("── context compacted (auto, summarise): ")
    assert "→ 1 messages, " in compacted[0]
    assert compacted[0].endswith(" tokens before ──")
    # the line sits where the stream has it: after the calculator results before it, before the rest
    assert 0 < lines.index(compacted[0]) < len(lines) - 1
    run_id = done.stderr.split("started run ", 1)[1].split()[0]
    log = _cli("log", run_id, cwd=tmp_path)  # the stream the pretty view showed, strictly valid
    assert log.returncode == 0, log.stderr
    assert _types(log.stdout).count("meta_compaction") == len(compacted)
    _strict(log.stdout, tmp_path)
