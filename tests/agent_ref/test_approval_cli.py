"""Durable approval from the console script (spec/cli-agent-ref.md RC11; issue 29 "done when").

A run whose model calls an MCP tool over stdio and a backend tool that needs approval
pauses; ANOTHER process (``agent-ref resume --approve``, the command the pause printed)
approves it; the run finishes and its recording is one strictly valid stream. The model
is the embedded scripted model, whose generic prompt ("call TOOL with {json}") makes the calls.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_ref.cli.commands import PrettyPrinter
from agent_ref_support import envelopes, sse_lines
from envelope import Emitter
from mcp_support import SERVER_SCRIPT, calling_prompt
from validating import assert_valid

SCRIPT = Path(sys.executable).parent / "agent-ref"
CALLS: list[tuple[str, dict[str, Any]]] = [("mcp__io__echo", {"text": "hi"}), ("calculator", {"expression": "6 * 7"})]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
    )


def _setup(tmp_path: Path) -> list[str]:
    """The MCP config; the run's arguments (the scripted model's generic prompt calls CALLS)."""
    servers = {"io": {"command": sys.executable, "args": [str(SERVER_SCRIPT), "io"]}}
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return ["--mcp-config", ".mcp.json", "--db", str(tmp_path / "a.db")]


def _printed(err: str, flag: str) -> list[str]:
    """The resume command the pause printed (the line with ``flag``), without the program (RC11-d: a path or a name)."""
    (line,) = [x for x in err.splitlines() if " resume " in x and flag in x]
    argv = shlex.split(line)
    return argv[argv.index("resume") :]


def _paused(tmp_path: Path) -> tuple[str, str]:
    args = _setup(tmp_path)
    done = _cli("run", calling_prompt(CALLS), *args, "--permission-mode", "auto", "--allow", "mcp__*", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = sse_lines(done.stdout)
    assert_valid(lines)
    results = {e["name"]: e["delta"] for e in envelopes(lines) if e["type"] == "tool_result"}
    assert results == {"mcp__io__echo": "io echoes: hi"}  # the MCP tool ran; the calculator waits
    (pause,) = [e for e in envelopes(lines) if e["type"] == "awaiting_frontend_tools"]
    (element,) = json.loads(pause["delta"])
    assert element["name"] == "calculator"
    assert "approval" in element
    assert "needs approval" in done.stderr
    assert "waits for 1 call awaiting approval:" in done.stderr  # not "1 frontend tool call": a person approves it
    return element["tool_use_id"], done.stderr


def test_rc11_mcp_run_paused_for_approval_is_approved_by_another_process(tmp_path: Path) -> None:
    """The "done when" run: MCP over stdio + an approval, approved by `resume --approve` elsewhere [RC11-b] [RC11-c]."""
    call, err = _paused(tmp_path)
    argv = _printed(err, "--approve")
    assert argv[:2] == ["resume", argv[1]]
    assert "--approve" in argv
    assert call in argv
    assert argv[argv.index("--allow-tool") : argv.index("--allow-tool") + 2] == ["--allow-tool", "mcp__*"]
    done = _cli(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = sse_lines(done.stdout)
    assert_valid(lines)
    (result,) = [e for e in envelopes(lines) if e["type"] == "tool_result"]
    assert (result["id"], result["delta"]) == (call, "42")
    final = json.loads([e for e in envelopes(lines) if e["type"] == "meta_final"][-1]["delta"])
    assert final["stop_reason"] == "end_turn"
    run_id = err.split()[3]
    log = _cli("log", run_id, "--db", str(tmp_path / "a.db"), cwd=tmp_path)
    assert log.returncode == 0, log.stderr
    assert_valid(sse_lines(log.stdout))  # pause and resume, the whole run: one strictly valid stream


def test_rc11_b_deny_with_a_message_tells_the_model(tmp_path: Path) -> None:
    _, err = _paused(tmp_path)
    argv = [*_printed(err, "--deny"), "--message", "no arithmetic today"]
    done = _cli(*argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = sse_lines(done.stdout)
    assert_valid(lines)
    (result,) = [e for e in envelopes(lines) if e["type"] == "tool_result"]
    assert result["delta"] == "no arithmetic today"


def test_rc11_b_edited_input_runs_the_edit(tmp_path: Path) -> None:
    _, err = _paused(tmp_path)
    done = _cli(*_printed(err, "--approve"), "--input", '{"expression": "5 + 5"}', cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (result,) = [e for e in envelopes(sse_lines(done.stdout)) if e["type"] == "tool_result"]
    assert result["delta"] == "10"


def test_rc11_b_bad_answers_are_one_clear_line_and_change_nothing(tmp_path: Path) -> None:
    call, err = _paused(tmp_path)
    argv = _printed(err, "--approve")
    bad = _cli(*argv, "--input", "{not json", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--input: error: is not JSON" in bad.stderr
    assert "Traceback" not in bad.stderr
    wrong = _cli(*[("toolu_nope" if a == call else a) for a in argv], cwd=tmp_path)
    assert wrong.returncode == 2, wrong.stderr
    assert "toolu_nope" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    nothing = _cli("resume", argv[1], "--db", str(tmp_path / "a.db"), cwd=tmp_path)
    assert nothing.returncode == 2
    assert "--approve ID" in nothing.stderr
    done = _cli(*argv, cwd=tmp_path)  # still paused: the good answer works after the bad ones
    assert done.returncode == 0, done.stderr


def test_rc11_a_bad_permission_flags_are_refused() -> None:
    """A mode outside full/auto/ask is argparse's one-line error, exit 2 [RC11-a]."""
    done = _cli("run", "go", "--permission-mode", "sometimes", cwd=Path.cwd())
    assert done.returncode == 2
    assert "--permission-mode" in done.stderr


@pytest.mark.parametrize(
    ("approvals", "frontend", "said"),
    [(1, 0, "approval"), (0, 2, "frontend tools"), (1, 1, "frontend tools and approval")],
)
def test_pretty_pause_line_says_what_it_waits_for(approvals: int, frontend: int, said: str) -> None:
    """``--pretty`` names the pause by what answers it: an approval, a frontend tool, or both."""
    calls = [
        {"tool_use_id": f"toolu_a{i}", "name": "calculator", "input": {}, "approval": {"reason": "r"}}
        for i in range(approvals)
    ]
    calls += [{"tool_use_id": f"toolu_f{i}", "name": "confirm", "input": {}} for i in range(frontend)]
    out = io.StringIO()
    printer = PrettyPrinter(out, color=False)
    for line in Emitter("0f8fad5b-d9cb-469f-a165-70867728950e").buffered("awaiting_frontend_tools", json.dumps(calls)):
        printer(line)
    assert out.getvalue().rstrip("\n").endswith(f"⏸ waiting for {said}")
