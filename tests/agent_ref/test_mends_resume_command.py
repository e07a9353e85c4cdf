"""The resume command a pause prints carries every agent option of the run (spec cli-agent-ref [WM1-b])."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import TYPE_CHECKING

import pytest

from agent_ref.cli.commands import _parser, _resume_command, main
from agent_ref_support import sse_lines
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace cache under this test's directory, never the user's ``~/.cache``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


NOT_DEFAULT = [
    "--model", "claude-x", "--replay", "rec.json",
    "--max-steps", "3", "--max-tokens", "99", "--max-budget-usd", "0.5", "--max-bytes", "4096",
    "--profile", "seed", "--thinking", "1024", "--subagents", "none", "--checkpoints",
    "--memory", "mem", "--memory-store", "notes", "--workspace", "ws", "--unsandboxed-bash",
    "--files-dir", "files",
    "--compact-threshold", "5000", "--loop-limit", "7", "--max-tool-result-bytes", "100",
    "--mcp-config", "m.json", "--permission-mode", "auto",
    "--allow", "Read", "--allow", "Bash(git status:*)", "--deny", "Write(secret/**)", "--ask", "Edit",
]  # fmt: skip


def _shared_dests() -> set[str]:
    """The options ``run`` and ``resume`` both take, by dest (the agent's options and rules)."""
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    run, resume = sub.choices["run"], sub.choices["resume"]
    dests = {a.dest for a in run._actions if a.option_strings} & {a.dest for a in resume._actions if a.option_strings}
    return dests - {"help", "db", "verbose", "pretty"}


def test_spec_WM1_b_every_option_resume_shares_with_run_is_carried() -> None:
    """[WM1-b] Each shared option set to a non-default value reads back equal from the printed command."""
    args = _parser().parse_args(["run", "x", "--db", "a.db", *NOT_DEFAULT])
    defaults = _parser().parse_args(["run", "x"])
    shared = _shared_dests()
    assert {d for d in shared if getattr(args, d) == getattr(defaults, d)} == set()  # the list covers them all
    argv = shlex.split(_resume_command(args, "AGENT"))
    back = _parser().parse_args(argv[argv.index("resume") :])
    assert back.agent_uuid == "AGENT"
    assert back.results == "-"
    assert {d: getattr(back, d) for d in shared} == {d: getattr(args, d) for d in shared}
    plain = shlex.split(_resume_command(defaults, "AGENT"))
    assert plain[plain.index("resume") :] == ["resume", "AGENT", "--db", defaults.db, "--results", "-"]


def test_spec_WM1_b_the_printed_approval_of_a_workspace_edit_runs_the_edit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """[WM1-b] Pasting the approve command of a `--workspace` run runs the Edit (it was "unknown tool 'Edit'")."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("hello\n")
    edit = '{"file_path": "a.txt", "old_string": "hello", "new_string": "bye"}'
    flags = ["--db", "cli.db", "--workspace", "ws", "--permission-mode", "auto", "--allow", "Read"]
    assert main(["run", f"call Edit with {edit}", *flags]) == 0
    captured = capsys.readouterr()
    assert_valid(sse_lines(captured.out))
    (line,) = [x for x in captured.err.splitlines() if " resume " in x and "--approve" in x]
    argv = shlex.split(line)
    assert (tmp_path / "ws" / "a.txt").read_text() == "hello\n"
    assert main(argv[argv.index("resume") :]) == 0
    lines = sse_lines(capsys.readouterr().out)
    assert_valid(lines)
    results = [json.loads(x) for x in lines if b'"tool_result"' in x]
    assert [r["name"] for r in results] == ["Edit"]
    assert "unknown tool" not in results[0]["delta"]
    assert (tmp_path / "ws" / "a.txt").read_text() == "bye\n"
