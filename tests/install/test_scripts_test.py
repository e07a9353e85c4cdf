"""``scripts/test`` runs every pass and reports every failure (issue 37).

It used to stop at the first failing pass (``set -e``), so a ruff finding hid the tests,
and a failing main pass hid the pure pass and the coverage floors. Here it runs in a copy
of the scripts whose ``.venv`` holds stand-ins for ruff, mypy and Python (and
``scripts/test-lowest``, for ``ENVELOPE_TEST_LOWEST=1``): each logs the pass it was asked for
and fails when the test says so. The real tools run in CI.
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
    *"-m pytest -n "*) pass=main ;;
    *"-m pytest"*) pass=serial ;;
    *"coverage combine"*) exit 0 ;;
    *"coverage report"*"src/envelope"*) pass=floor-envelope ;;
    *"coverage report"*) pass=floor-agent ;;
    *) echo "unexpected call: $tool $*" >&2; exit 99 ;;
esac
case "$pass" in
    main | pure | serial)
        touch "${COVERAGE_FILE:-.coverage}"
        case ",$FAIL," in *",$pass,"*) echo "1 failed, 2 passed in 0.01s"; exit 1 ;; esac
        echo "3 passed in 0.01s"
        exit 0 ;;
esac
case ",$FAIL," in *",$pass,"*) exit 1 ;; esac
exit 0
"""


LOWEST_STUB = r"""#!/usr/bin/env bash
echo "test-lowest $*" >> "$LOG"
echo "lowest: 5 passed in 0.01s"
case ",$FAIL," in *",lowest,"*) exit 3 ;; esac
exit 0
"""


def _run(tmp_path: Path, fail: str, *args: str, lowest: bool = False) -> tuple[int, list[str], list[str]]:
    """Run the copied ``scripts/test``; its exit status, the tools it called, its stdout lines."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "test", repo / "scripts" / "test")
    (repo / "scripts" / "venv-install").write_text("exit 0\n")  # the install is tested in tests/readme
    (repo / "scripts" / "test-lowest").write_text(LOWEST_STUB)
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("ruff", "mypy", "python"):
        (bin_dir / tool).write_text(STUB)
        (bin_dir / tool).chmod(0o755)
    log = tmp_path / "calls.log"
    log.touch()
    env = {**os.environ, "LOG": str(log), "FAIL": fail}
    env.pop("ENVELOPE_TEST_LOWEST", None)
    if lowest:
        env["ENVELOPE_TEST_LOWEST"] = "1"
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


#: ruff check, ruff format, mypy, the pure pass, the two main passes, the two floors.
ALL_PASSES = 8


def _summary(out: list[str]) -> list[str]:
    """The summary's lines, one per pass, without the closing count."""
    return [line.strip() for line in out[out.index("scripts/test: each pass") + 1 : -1]]


def _main_calls(calls: list[str]) -> tuple[list[str], list[str]]:
    """The parallel main pass's call(s) and the serial one's, as the stand-in logged them."""
    pytest_calls = [call for call in calls if " -m pytest" in call and "coverage run" not in call]
    return [c for c in pytest_calls if " -n " in c], [c for c in pytest_calls if " -n " not in c]


@pytest.mark.parametrize(
    "fail", ["ruff-check", "mypy", "main", "serial", "pure", "floor-envelope", "ruff-check,main,floor-agent"]
)
def test_every_pass_runs_after_a_failure_and_the_status_says_so(tmp_path: Path, fail: str) -> None:
    """A failing pass does not stop the others; the exit is non-zero; the summary names each pass."""
    status, calls, out = _run(tmp_path, fail)
    assert status != 0
    tools = [" ".join(call.split()[:3]) for call in calls]
    for expected in ("ruff check .", "ruff format --check", "mypy"):
        assert expected in tools
    assert sum("coverage run --rcfile" in call for call in calls) == 1  # the pure pass
    parallel, serial = _main_calls(calls)
    assert len(parallel) == 1
    assert len(serial) == 1
    assert sum("coverage report" in call and "--fail-under" in call for call in calls) == 2  # both floors
    failed = len(fail.split(","))
    summary = _summary(out)
    assert len(summary) == ALL_PASSES
    assert sum(line.startswith("FAILED") for line in summary) == failed
    assert out[-1] == f"checks: {ALL_PASSES - failed} passed, {failed} failed"


def test_the_main_pass_is_split_and_runs_every_test_once_under_coverage(tmp_path: Path) -> None:
    """The parallel pass leaves out exactly what the serial pass runs; both record coverage, appended."""
    status, calls, _out = _run(tmp_path, "")
    assert status == 0
    (parallel,), (serial,) = _main_calls(calls)
    for call in (parallel, serial):
        assert "--cov" in call.split()
        assert "--cov-append" in call.split()
    assert "--dist loadfile" in parallel
    ignored = [word.removeprefix("--ignore=") for word in parallel.split() if word.startswith("--ignore=")]
    ran_alone = serial.split()[serial.split().index("--cov-report=") + 1 :]
    assert ignored
    assert ignored == ran_alone
    assert "tests/faults" in ran_alone
    assert "tests/fleet" in ran_alone
    for path in ran_alone:
        assert (ROOT / path).exists(), f"the serial pass names {path}, which does not exist"
    # The serial pass comes after the parallel one, and both after the pure pass.
    order = [i for i, call in enumerate(calls) if " -m pytest" in call]
    assert [calls[i] for i in order] == [calls[order[0]], parallel, serial]


def test_all_passes_ok_exit_zero_and_the_last_pytest_line_stays_whole(tmp_path: Path) -> None:
    """All green: exit 0, every pass ok, and pytest's closing line is intact just before the summary."""
    status, _calls, out = _run(tmp_path, "")
    assert status == 0
    assert out[-1] == f"checks: {ALL_PASSES} passed, 0 failed"
    assert "3 passed in 0.01s" in out[: out.index("scripts/test: each pass")]


@pytest.mark.parametrize("fail", ["", "lowest", "lowest,pure"])
def test_the_lowest_job_runs_beside_the_early_passes_and_is_a_pass_of_the_summary(tmp_path: Path, fail: str) -> None:
    """``ENVELOPE_TEST_LOWEST=1``: the lowest job runs, its output is printed, its result counted."""
    status, calls, out = _run(tmp_path, fail, lowest=True)
    assert calls.count("test-lowest ") == 1
    assert "lowest: 5 passed in 0.01s" in out
    # Its output is printed after the pure pass and before the main passes.
    where = out.index("lowest: 5 passed in 0.01s")
    assert where < out.index("scripts/test: each pass")
    summary = _summary(out)
    assert len(summary) == ALL_PASSES + 1
    failed = len([name for name in fail.split(",") if name])
    if "lowest" in fail:
        assert "FAILED  lowest-versions job (scripts/test-lowest) (exit 3)" in summary
    else:
        assert "ok      lowest-versions job (scripts/test-lowest)" in summary
    assert out[-1] == f"checks: {ALL_PASSES + 1 - failed} passed, {failed} failed"
    assert (status != 0) == bool(failed)


def test_without_the_variable_the_lowest_job_does_not_run(tmp_path: Path) -> None:
    """A developer's ``scripts/test`` does not build .venv-lowest unasked."""
    _status, calls, out = _run(tmp_path, "")
    assert not any(call.startswith("test-lowest") for call in calls)
    assert not any("lowest-versions job" in line for line in out)


def test_tests_named_on_the_command_line_run_in_both_passes_without_the_floors(tmp_path: Path) -> None:
    """``scripts/test tests/x``: the pure and one main pass get the names; the floors are not run."""
    status, calls, out = _run(tmp_path, "", "tests/unit/test_api.py")
    assert status == 0
    runs = [call for call in calls if " -m pytest" in call]
    assert len(runs) == 2
    assert all(call.endswith("tests/unit/test_api.py") for call in runs)
    assert not any(" -n " in call for call in runs)
    assert not any("--fail-under" in call for call in calls)
    assert "not run coverage floors (tests named on the command line)" in [line.strip() for line in out]
    # ruff check, ruff format, mypy, the pure pass, the main pass.
    assert out[-1] == "checks: 5 passed, 0 failed"
