"""`agent-ref tools --workspace DIR` lists and calls Bash, BashOutput, KillShell (spec cli-agent-ref [WM1-c])."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agent_ref.cli.commands import main
from agent_ref.run.options import AgentOptions
from agent_ref.tools.demo import default_tools
from sandbox_support import need_bwrap
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _results(text: str) -> list[dict[str, object]]:
    """The ``tool_result`` envelopes of the printed stream, after checking it strictly."""
    assert_valid(text)
    lines = [event.removeprefix("data: ").encode() for event in text.split("\n\n") if event]
    assert_valid(lines)
    assert lines[-1] == b"[DONE]"
    return [json.loads(x) for x in lines if b'"tool_result"' in x]


def test_spec_WM1_c_tools_lists_what_the_agent_has_with_the_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[WM1-c] The listing is the tools `AgentOptions(workspace=)` gives, Bash and its two included."""
    assert main(["tools", "--workspace", str(tmp_path)]) == 0
    listed = [t["name"] for t in json.loads(capsys.readouterr().out)]

    assert listed == [t.name for t in AgentOptions(tools=default_tools(), workspace=tmp_path).tools]
    assert {"Bash", "BashOutput", "KillShell"} <= set(listed)


def test_spec_WM1_c_tools_call_runs_bash_unsandboxed_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[WM1-c] `tools call Bash --workspace DIR --unsandboxed-bash` runs in DIR on the host and says so."""
    command = json.dumps({"command": "pwd && echo made > b.txt"})
    argv = ["tools", "call", "Bash", "--workspace", str(tmp_path), "--unsandboxed-bash", "--input", command]
    assert main(argv) == 0
    (result,) = _results(capsys.readouterr().out)
    assert result["name"] == "Bash"
    assert str(result["delta"]).startswith(f"{tmp_path.resolve()}\n[exit code 0]")
    assert "UNSANDBOXED" in str(result["delta"])
    assert (tmp_path / "b.txt").read_text() == "made\n"
    assert main(["tools", "call", "KillShell", "--workspace", str(tmp_path), "--input", '{"shell_id": "bash_9"}']) == 1
    (killed,) = _results(capsys.readouterr().out)
    assert "bash_9" in str(killed["delta"])


def test_spec_WM1_c_tools_call_runs_bash_in_the_sandbox(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[WM1-c] Without the opt-in the call runs in bubblewrap: the workspace writable, no UNSANDBOXED note."""
    need_bwrap()
    command = json.dumps({"command": "echo inside > c.txt && cat c.txt"})
    assert main(["tools", "call", "Bash", "--workspace", str(tmp_path), "--input", command]) == 0
    (result,) = _results(capsys.readouterr().out)
    assert result["delta"] == "inside\n[exit code 0]"
    assert (tmp_path / "c.txt").read_text() == "inside\n"


def test_spec_WM1_c_unsandboxed_bash_without_a_workspace_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """[WM1-c] As for run (RCW2-b): `--unsandboxed-bash` alone exits 2 with one line."""
    assert main(["tools", "--unsandboxed-bash"]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "--unsandboxed-bash: error: there is no Bash without --workspace; pass --workspace DIR too"
    ]
