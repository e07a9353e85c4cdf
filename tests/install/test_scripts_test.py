"""``scripts/test`` runs every pass and reports every failure (issue 37).

It used to stop at the first failing pass (``set -e``), so a ruff finding hid the tests,
and a failing main pass hid the pure pass and the coverage floors. Here it runs in a copy
of the scripts whose ``.venv`` holds stand-ins for ruff, mypy and Python: each logs the
pass it was asked for and fails when the test says so. The real tools run in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

from conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

#: A stand-in for ruff, mypy and python: logs its arguments; fails when $FAIL names its pass.
STUB = r"""#!/usr/bin/env bash
tool="$(basename "$0")"
echo "$tool $*" >> "$LOG"
case "$tool $*" in
    "ruff check"*) pass=ruff-check ;;
    "ruff format"*) pass=ruff-format ;;
    mypy*) pass=mypy ;;
    *"-c "*) echo "_sse _decoder"; exit 0 ;;
    *"coverage run --rcfile"*) pass=pure ;;
    *"coverage run"*) pass=main ;;
    *"coverage combine"*) exit 0 ;;
    *"coverage report"*"src/envelope"*) pass=floor-envelope ;;
    *"coverage report"*) pass=floor-agent ;;
    *) echo "unexpected call: $tool $*" >&2; exit 99 ;;
esac
case "$pass" in
    main | pure)
        touch "${COVERAGE_FILE:-.coverage}"
        case ",$FAIL," in *",$pass,"*) echo "1 failed, 2 passed in 0.01s"; exit 1 ;; esac
        echo "3 passed in 0.01s"
        exit 0 ;;
esac
case ",$FAIL," in *",$pass,"*) exit 1 ;; esac
exit 0
"""


def _run(tmp_path: Path, fail: str, *args: str) -> tuple[int, list[str], list[str]]:
    """Run the copied ``scripts/test``; its exit status, the tools it called, its stdout lines."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "test", repo / "scripts" / "test")
    (repo / "scripts" / "venv-install").write_text("exit 0\n")  # the install is tested in tests/readme
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("ruff", "mypy", "python"):
        (bin_dir / tool).write_text(STUB)
        (bin_dir / tool).chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    env = {**os.environ, "LOG": str(log), "FAIL": fail}
    done = subprocess.run(
        ["bash", str(repo / "scripts" / "test"), *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, log.read_text().splitlines(), done.stdout.splitlines()


ALL_PASSES = 7


@pytest.mark.parametrize(
    "fail", ["ruff-check", "mypy", "main", "pure", "floor-envelope", "ruff-check,main,floor-agent"]
)
def test_every_pass_runs_after_a_failure_and_the_status_says_so(tmp_path: Path, fail: str) -> None:
    """A failing pass does not stop the others; the exit is non-zero; the summary names each pass."""
    status, calls, out = _run(tmp_path, fail)
    assert status != 0
    tools = [" ".join(call.split()[:3]) for call in calls]
    for expected in ("ruff check .", "ruff format --check", "mypy"):
        assert expected in tools
    assert sum("coverage run" in call for call in calls) == 2  # the main and the pure pass
    assert sum("coverage report" in call and "--fail-under" in call for call in calls) == 2  # both floors
    failed = len(fail.split(","))
    summary = [line.strip() for line in out[out.index("scripts/test: each pass") + 1 : -1]]
    assert len(summary) == ALL_PASSES
    assert sum(line.startswith("FAILED") for line in summary) == failed
    assert out[-1] == f"checks: {ALL_PASSES - failed} passed, {failed} failed"


def test_all_passes_ok_exit_zero_and_the_last_pytest_line_stays_whole(tmp_path: Path) -> None:
    """All green: exit 0, every pass ok, and pytest's closing line is intact just before the summary."""
    status, _calls, out = _run(tmp_path, "")
    assert status == 0
    assert out[-1] == f"checks: {ALL_PASSES} passed, 0 failed"
    assert "3 passed in 0.01s" in out[: out.index("scripts/test: each pass")]


def test_tests_named_on_the_command_line_run_in_both_passes_without_the_floors(tmp_path: Path) -> None:
    """``scripts/test tests/x``: both passes get the names; the floors (whole-suite figures) are not run."""
    status, calls, out = _run(tmp_path, "", "tests/unit/test_api.py")
    assert status == 0
    runs = [call for call in calls if "coverage run" in call]
    assert len(runs) == 2
    assert all(call.endswith("tests/unit/test_api.py") for call in runs)
    assert not any("--fail-under" in call for call in calls)
    assert "not run coverage floors (tests named on the command line)" in [line.strip() for line in out]
    assert out[-1] == f"checks: {ALL_PASSES - 2} passed, 0 failed"
