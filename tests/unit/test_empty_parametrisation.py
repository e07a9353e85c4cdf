"""A parametrisation over an empty glob is an error, not zero tests (``conftest.py``'s hook).

Each test runs pytest in a child process on a small test file of its own, with this
suite's ``conftest.py`` loaded as a plugin, and reads the child's exit status.
"""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

from conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

_TEST_FILE = """
from pathlib import Path

import pytest

@pytest.mark.parametrize("case", sorted(Path({folder!r}).glob("*.jsonl")))
def test_case(case):
    assert case.exists()

def test_other():
    pass
"""


def _pytest(tmp_path: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_glob.py").write_text(_TEST_FILE.format(folder=str(folder)), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env_path = str(ROOT / "tests")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "test_glob.py"],
        cwd=tmp_path,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_an_empty_glob_stops_the_run_naming_the_test(tmp_path: Path) -> None:
    done = _pytest(tmp_path, tmp_path / "no_such_folder")
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error, not 0
    assert "parametrised over no value (an empty glob?): test_glob.py::test_case" in done.stdout + done.stderr
    assert "passed" not in done.stdout


def test_a_glob_that_finds_files_runs_them(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    for name in ("a.jsonl", "b.jsonl"):
        (cases / name).write_text("[DONE]\n", encoding="utf-8")
    done = _pytest(tmp_path, cases)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
