"""The README's two commands set up only what changed, and say what they do (issue 25 §6).

``scripts/venv-install`` (what ``scripts/demo`` and ``scripts/test`` call) runs in a copy
of the repository's build inputs whose ``.venv/bin/python`` records ``pip`` calls instead
of installing (every other use runs the real interpreter), so each case shows whether an
install would run and why, in seconds. The ``SUITES NOT RUN`` section (``tests/skip_summary.py``)
runs in a pytest of its own on a throwaway suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from validating import assert_valid

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The build inputs and scripts, with a ``.venv`` whose pip only logs what it was asked."""
    root = tmp_path / "repo"
    root.mkdir()
    for name in ("pyproject.toml", "setup.py", "scripts"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name)
        else:
            shutil.copy2(source, root / name)
    shutil.copytree(
        ROOT / "src", root / "src", ignore=shutil.ignore_patterns("*.so", "_speedups.json", "__pycache__", "*.egg-info")
    )
    venv = root / ".venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(
        textwrap.dedent(
            f"""\
            #!/usr/bin/env bash
            if [ "$1 $2" = "-m pip" ]; then
                echo "$*" >> "{tmp_path}/pip.log"
                # what an editable install with mypyc writes into the tree
                printf 'compiled' > "{root}/src/envelope/_sse.fake.so"
                exit 0
            fi
            exec "{sys.executable}" "$@"
            """
        )
    )
    (venv / "envelope").write_text(f'#!/usr/bin/env bash\nexec "{BIN / "envelope"}" "$@"\n')
    (venv / "agent-ref").write_text(f'#!/usr/bin/env bash\nexec "{BIN / "agent-ref"}" "$@"\n')
    for exe in venv.iterdir():
        exe.chmod(0o755)
    return root


def _install(repo: Path, *args: str, **env: str) -> tuple[list[str], str]:
    """Run ``scripts/venv-install``; the pip calls it made, and what it said on stderr."""
    log = repo.parent / "pip.log"
    log.unlink(missing_ok=True)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ENVELOPE_")} | env
    done = subprocess.run(
        ["bash", str(repo / "scripts" / "venv-install"), *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""  # stdout stays the caller's (the demo's stream)
    assert done.stderr.startswith("setup: ")
    return (log.read_text().splitlines() if log.exists() else []), done.stderr


def test_install_runs_only_when_its_inputs_change(repo: Path) -> None:
    """First install; nothing changed: no pip; an edited hot module, a removed .so, ENVELOPE_PURE: pip again."""
    calls, said = _install(repo, "dev,bench")
    assert calls == ["-m pip install --quiet -e .[dev,bench]"]
    assert "installing .[dev,bench] into .venv (first install into .venv)" in said
    assert said.count("\n") == 2  # what it starts, then how long it took: one line each

    calls, said = _install(repo, "dev,bench")
    assert (calls, said) == ([], "setup: .venv is up to date (nothing changed since the last install)\n")
    assert _install(repo)[0] == []  # the demo's plain install is covered by the extras'

    hot = repo / "src" / "envelope" / "_sse.py"
    hot.write_text(hot.read_text() + "\n# an edit\n")
    calls, said = _install(repo, "dev,bench")
    assert calls == ["-m pip install --quiet -e .[dev,bench]"]  # recompiled: no stale .so is tested
    assert "src/ changed since the last install" in said
    assert _install(repo, "dev,bench")[0] == []

    (repo / "src" / "envelope" / "_sse.fake.so").unlink()  # `git clean -fdX`, say
    calls, said = _install(repo)
    assert calls == ["-m pip install --quiet -e .[dev,bench]"]  # the extras installed before are kept
    assert "compiled modules under src/ changed or went away" in said

    calls, said = _install(repo, "dev,bench", ENVELOPE_PURE="1")
    assert calls == ["-m pip install --quiet -e .[dev,bench]"]
    assert "a pure-Python build (ENVELOPE_PURE=1)" in said

    (repo / "pyproject.toml").write_text((repo / "pyproject.toml").read_text() + "\n")
    assert _install(repo, "dev,bench", ENVELOPE_PURE="1")[0] != []


def test_install_adds_a_missing_extra(repo: Path) -> None:
    """The demo's install (no extras) does not stand for the tests' (dev, bench)."""
    assert _install(repo)[0] == ["-m pip install --quiet -e ."]
    calls, said = _install(repo, "dev,bench")
    assert calls == ["-m pip install --quiet -e .[dev,bench]"]
    assert "the dev extra is not installed yet" in said or "the bench extra is not installed yet" in said


def test_demo_stdout_is_the_stream_alone(repo: Path) -> None:
    """`scripts/demo`: the set-up line on stderr, a strictly valid SSE stream on stdout."""
    _install(repo, "agent")  # what scripts/demo asks for (issue 28: the agent is an extra)
    done = subprocess.run(
        ["bash", str(repo / "scripts" / "demo")],
        capture_output=True,
        cwd=repo,
        # as _install ran it: ENVELOPE_* (CI sets ENVELOPE_REQUIRE_COMPILED) are inputs of the stamp
        env={k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY" and not k.startswith("ENVELOPE_")},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(b"setup: .venv is up to date")
    assert done.stdout.startswith(b"data: {")
    assert_valid(done.stdout)
    path = repo / "demo.sse"
    path.write_bytes(done.stdout)
    checked = subprocess.run(
        [str(BIN / "envelope"), "validate", "--strict", str(path)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_suites_not_run_are_listed_above_the_summary_line(tmp_path: Path) -> None:
    """A run without chromium names the skipped suite, why, and what installs it, right above pytest's last line."""
    suite = tmp_path / "browser"
    suite.mkdir()
    (suite / "test_fake.py").write_text(
        textwrap.dedent(
            """\
            import pytest

            def test_a():
                pytest.skip("BROWSER TESTS DID NOT RUN: chromium is not installed (apt-get install -y chromium)")

            def test_b():
                pytest.skip("BROWSER TESTS DID NOT RUN: chromium is not installed (apt-get install -y chromium)")

            def test_quiet():
                pytest.skip("an ordinary skip")

            def test_ok():
                pass
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "skip_summary", "-p", "no:cacheprovider", "browser"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout
    lines = done.stdout.strip().splitlines()
    header = next(i for i, line in enumerate(lines) if "SUITES NOT RUN" in line)
    assert lines[header + 1] == (
        "browser (2 tests): BROWSER TESTS DID NOT RUN: chromium is not installed (apt-get install -y chromium)"
    )
    assert "sudo ./scripts/system-deps" in lines[header + 2]
    assert "CI=true" in lines[header + 2]
    assert header + 3 == len(lines) - 1  # then pytest's own summary line, last
    assert "1 passed, 3 skipped" in lines[-1]
    assert "ordinary skip" not in "\n".join(lines[header:])
