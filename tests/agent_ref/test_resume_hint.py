"""The resume command a pause prints works from the user's shell (spec/cli-agent-ref.md RC11-d).

``./scripts/demo`` starts ``.venv/bin/agent-ref`` from a shell whose ``PATH`` has no venv;
the printed line is run here as a person would paste it, by ``bash`` with such a ``PATH``,
from another directory. Every stream goes through the strict validator.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from agent_ref_support import sse_lines
from validating import assert_valid

SCRIPT = Path(sys.executable).parent / "agent-ref"
PROMPT = "Please confirm, then tell me what is 6 * 7"
#: A shell's PATH with no venv on it (only the system's directories).
BARE_PATH = "/usr/local/bin:/usr/bin:/bin"


def _env(path: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "AGENT_REF_TOKEN", "VIRTUAL_ENV")}
    env["PATH"] = path
    return env


def _pause(tmp_path: Path, argv: list[str], path: str) -> str:
    """Run ``argv run PROMPT`` to its pause; the line of stderr that holds the resume command."""
    done = subprocess.run(
        [*argv, "run", PROMPT, "--db", str(tmp_path / "a.db")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(path),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert_valid(sse_lines(done.stdout))
    (line,) = [x for x in done.stderr.splitlines() if " resume " in x]
    return line.strip()


def test_spec_RC11_d_the_printed_resume_works_in_a_shell_without_the_venv(tmp_path: Path) -> None:
    """Started as ``.venv/bin/agent-ref`` with no venv on PATH, the printed line runs as pasted [RC11-d]."""
    assert not any((Path(d) / "agent-ref").exists() for d in BARE_PATH.split(":"))  # else this proves nothing
    line = _pause(tmp_path, [str(SCRIPT)], BARE_PATH)
    assert line.startswith("echo "), line
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        ["bash", "-c", line],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=_env(BARE_PATH),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # a bare `agent-ref` was "command not found" (127)
    lines = sse_lines(done.stdout)
    assert_valid(lines)
    assert lines[-1] == b"[DONE]"
    program = shlex.split(line.split(" | ", 1)[1])[0]
    assert Path(program).is_absolute()
    assert Path(program).samefile(SCRIPT)


def test_spec_RC11_d_the_bare_name_when_path_finds_this_program(tmp_path: Path) -> None:
    """With the venv on PATH, ``agent-ref`` is this very program, and the line says just that [RC11-d]."""
    line = _pause(tmp_path, [str(SCRIPT)], f"{SCRIPT.parent}:{BARE_PATH}")
    assert " | agent-ref resume " in line, line


def test_spec_RC11_d_python_m_agent_ref_prints_the_interpreter(tmp_path: Path) -> None:
    """Started as ``python -m agent_ref``, the line starts that interpreter the same way [RC11-d]."""
    line = _pause(tmp_path, [sys.executable, "-m", "agent_ref"], BARE_PATH)
    assert f" | {shlex.join([sys.executable, '-m', 'agent_ref'])} resume " in line, line
