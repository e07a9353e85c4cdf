"""The agent-ref console script as a new user meets it (issue 13 §1; spec/cli-agent-ref.md).

Every test runs the installed console script in a subprocess, as a shell would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agent_ref
from agent_ref_support import sse_lines
from validating import assert_valid

SCRIPT = Path(sys.executable).parent / "agent-ref"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}


def _cli(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=_env(), timeout=120, check=False
    )


def _closed_pipe(*args: str, cwd: Path) -> tuple[int, str]:
    """Run with stdout a pipe whose reader is already gone (``| head -0``)."""
    proc = subprocess.Popen(
        [str(SCRIPT), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=_env(), text=True
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    return proc.wait(timeout=120), err


def test_spec_rc3_a_output_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`run ... | head`, `log ... | head`: exit 141, no error message; the run is stored closed [RC3-a] [RC1-a]."""
    status, err = _closed_pipe("run", "What is 5 + (10 * 2)?", cwd=tmp_path)
    assert status == 141, err
    assert err.startswith("agent-ref: started run ")
    assert "error" not in err
    assert "Traceback" not in err
    run_id = err.split()[3]
    listing = json.loads(_cli("runs", "--format", "json", cwd=tmp_path).stdout)
    assert [a["status"] for a in listing["agents"]] == ["idle"]  # closed in the store, not stuck running
    log = _cli("log", run_id, cwd=tmp_path)
    assert log.returncode == 0, log.stderr
    assert_valid(sse_lines(log.stdout))  # the stored response is complete
    status, err = _closed_pipe("log", run_id, cwd=tmp_path)
    assert (status, err) == (141, "")


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (("log", "some-run"), "agent-ref.db: error: no such database"),
        (("runs",), "agent-ref.db: error: no such database"),
        (("abandon", "some-agent"), "agent-ref.db: error: no such database"),
        (("resume", "some-agent", "--results", "-"), "agent-ref.db: error: no such database"),
        (("log", "x", "--db", "."), ".: error: is a directory"),
    ],
)
def test_spec_rc2_a_missing_files_are_clear_errors(args: tuple[str, ...], where: str, tmp_path: Path) -> None:
    """A missing or wrong database: one line WHERE: error: WHAT; WHAT TO DO, exit 2 [RC2-a]."""
    done = _cli(*args, cwd=tmp_path, stdin="[]")
    assert done.returncode == 2
    assert done.stderr.startswith(where)
    assert "; " in done.stderr  # what to do
    assert done.stderr.count("\n") == 1
    assert done.stdout == ""


def test_spec_rc2_a_unknown_ids_and_unreadable_results(tmp_path: Path) -> None:
    """Unknown run or agent ids, a results file that is missing or not JSON: exit 2 [RC2-a]."""
    assert _cli("run", "hello", cwd=tmp_path).returncode == 0
    cases = [
        (("log", "no-such-run"), "run no-such-run: error: no envelope log"),
        (("abandon", "no-such-agent"), "agent no-such-agent: error: not in agent-ref.db"),
        (("resume", "a", "--results", "missing.json"), "missing.json: error: no such file"),
        (("resume", "a", "--results", "."), ".: error: is a directory"),
    ]
    for args, start in cases:
        done = _cli(*args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith(start), done.stderr
        assert "Traceback" not in done.stderr
    (tmp_path / "bad.json").write_text("[{", encoding="utf-8")
    bad = _cli("resume", "a", "--results", "bad.json", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith("bad.json:1:")


def test_spec_rc1_b_version(tmp_path: Path) -> None:
    """`agent-ref --version` [RC1-b]."""
    done = _cli("--version", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, f"agent-ref {agent_ref.__version__}\n")


@pytest.mark.parametrize("command", ["", "run", "resume", "log", "runs", "abandon"])
def test_spec_rc4_a_every_help_says_what_defaults_and_examples(command: str, tmp_path: Path) -> None:
    """Each --help: what it does, its defaults, an example; run's says how to ask for Claude [RC4-a]."""
    done = _cli(*([command] if command else []), "--help", cwd=tmp_path)
    assert done.returncode == 0
    text = done.stdout
    assert "example" in text
    assert "default" in text
    if command in ("", "run"):
        assert "offline" in text
        assert "ANTHROPIC_API_KEY" in text
        assert "--model" in text


def test_spec_rc5_a_human_output_reads_like_a_person_wrote_it(tmp_path: Path) -> None:
    """No dict repr, '1 model call', counts from 1 [RC5-a]."""
    done = _cli("run", "--pretty", "Hello there", cwd=tmp_path)
    assert done.returncode == 0
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("done (end_turn) · 1 model call · ")
    assert "{" not in last
    assert "tokens in" in last
    assert "after 1 model call," in done.stderr
    assert "step(s)" not in done.stderr


def test_spec_rc6_a_runs_json_is_stable(tmp_path: Path) -> None:
    """`runs --format json`: the documented keys [RC6-a] [R10.2-a]."""
    assert _cli("run", "Please confirm, then tell me what is 6 * 7", cwd=tmp_path).returncode == 0
    done = _cli("runs", "--format", "json", cwd=tmp_path)
    assert done.returncode == 0
    (row,) = json.loads(done.stdout)["agents"]
    assert set(row) == {
        "agent_uuid",
        "status",
        "run_id",
        "user_query",
        "owner",
        "owner_alive",
        "lease_expires_at",
        "updated_at",
    }
    assert (row["status"], row["owner_alive"]) == ("awaiting_frontend_tools", None)
    text = _cli("runs", cwd=tmp_path).stdout
    assert f"agent-ref abandon {row['agent_uuid']} --db agent-ref.db" in text
    gone = _cli("abandon", row["agent_uuid"], cwd=tmp_path)
    assert gone.returncode == 0, gone.stderr
    assert "abandoned" in gone.stderr
    log = _cli("log", row["run_id"], "--response", "1", cwd=tmp_path)  # the abandon's response, index 1
    assert log.returncode == 0, log.stderr
    assert_valid(sse_lines(log.stdout))
