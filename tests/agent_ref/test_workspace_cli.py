"""`--workspace DIR` on run and serve, and `agent-ref tools [call]` (spec cli-agent-ref RCW1, RCT1)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agent_ref.cli.commands import _parser, main
from validating import assert_valid
from workspace_support import replay_calls

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def _sse_lines(text: str) -> list[bytes]:
    """The data of each SSE event in ``text`` (every event is one ``data:`` line)."""
    assert_valid(text)
    return [event.removeprefix("data: ").encode() for event in text.split("\n\n") if event]


def test_spec_RCT1_a_tools_lists_the_agents_tools_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[RCT1-a] [WM1-c] `agent-ref tools` prints name, description and input_schema; `--workspace` adds the eight."""
    assert main(["tools"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "calculator" in [t["name"] for t in plain]
    assert "Read" not in [t["name"] for t in plain]
    assert main(["tools", "--workspace", str(tmp_path)]) == 0
    listed = json.loads(capsys.readouterr().out)
    names = ["Read", "Write", "Edit", "Glob", "Grep", "Bash", "BashOutput", "KillShell"]
    assert [t["name"] for t in listed][-8:] == names
    assert all(set(t) == {"name", "description", "input_schema"} for t in listed)


def test_spec_RCT1_b_tools_call_runs_one_call_and_prints_its_envelopes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[RCT1-b] `tools call NAME --input JSON` prints the tool_result envelopes as strictly valid SSE; 1 on an error."""
    (tmp_path / "a.txt").write_text("hello\n")
    assert main(["tools", "call", "Read", "--workspace", str(tmp_path), "--input", '{"file_path": "a.txt"}']) == 0
    out = capsys.readouterr().out
    lines = _sse_lines(out)
    assert_valid(lines)
    (result,) = [json.loads(line) for line in lines if b'"tool_result"' in line]
    assert (result["type"], result["name"], result["delta"]) == ("tool_result", "Read", "1\thello")
    edit = '{"file_path": "a.txt", "old_string": "hello", "new_string": "bye"}'
    assert main(["tools", "call", "Edit", "--workspace", str(tmp_path), "--input", edit]) == 0
    assert (tmp_path / "a.txt").read_text() == "bye\n"  # permissions as full: no approval asked
    capsys.readouterr()
    outside = '{"file_path": "/etc/hostname"}'
    assert main(["tools", "call", "Read", "--workspace", str(tmp_path), "--input", outside]) == 1
    lines = _sse_lines(capsys.readouterr().out)
    assert_valid(lines)
    assert "outside the workspace" in json.loads(lines[-2])["delta"]
    assert lines[-1] == b"[DONE]"


def test_spec_RCT1_b_bad_calls_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[RCT1-b] An unknown tool, a missing NAME, input that is not a JSON object: exit 2, one line, no traceback."""
    for argv, said in [
        (["tools", "call", "Nope"], "Nope: error: is not a backend tool"),
        (["tools", "call"], "needs the tool's NAME"),
        (["tools", "call", "Read", "--workspace", str(tmp_path), "--input", "{oops"], "--input: error: is not JSON"),
        (["tools", "call", "Read", "--workspace", str(tmp_path), "--input", "[1]"], "is a JSON list, not an object"),
        (["tools", "--workspace", str(tmp_path / "none")], "is not a directory; pass --workspace an existing"),
    ]:
        assert main(argv) == 2, argv
        captured = capsys.readouterr()
        assert said in captured.err, (argv, captured.err)
        assert captured.err.count("\n") == 1
        assert "Traceback" not in captured.err


def test_spec_RCW1_a_run_with_workspace_gives_the_model_the_tools(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[RCW1-a] `run --workspace DIR`: a recorded model reads a file there; serve takes the same flag."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "n.txt").write_text("note\n")
    replay = tmp_path / "replay.json"
    events = [event for call in replay_calls([("Read", {"file_path": "n.txt"})]) for event in call]
    replay.write_text(json.dumps(events))
    db = str(tmp_path / "a.db")
    assert main(["run", "read it", "--replay", str(replay), "--workspace", str(work), "--db", db]) == 0
    lines = _sse_lines(capsys.readouterr().out)
    assert_valid(lines)
    results = [json.loads(line) for line in lines if line.startswith(b"{") and b'"tool_result"' in line]
    assert [(r["name"], r["delta"]) for r in results] == [("Read", "1\tnote")]
    assert main(["run", "x", "--workspace", str(tmp_path / "none"), "--db", db]) == 2
    assert "is not a directory" in capsys.readouterr().err
    serve = _parser().parse_args(["serve", "--workspace", str(work)])
    assert serve.workspace == work


def test_spec_RCW1_b_rule_flags_take_the_sdk_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[RCW1-b] `--allow 'Write(src/**)'` lets a Write under src run in auto mode; elsewhere it waits."""
    work = tmp_path / "work"
    work.mkdir()
    replay = tmp_path / "replay.json"
    calls = [("Write", {"file_path": "src/a.py", "content": "a\n"}), ("Write", {"file_path": "b.py", "content": "b\n"})]
    replay.write_text(json.dumps([event for call in replay_calls(calls) for event in call]))
    db = str(tmp_path / "a.db")
    argv = ["run", "w", "--replay", str(replay), "--workspace", str(work), "--db", db, "--permission-mode", "auto"]
    assert main([*argv, "--allow", "Write(src/**)"]) == 0
    assert (work / "src" / "a.py").read_text() == "a\n"
    assert not (work / "b.py").exists()
    assert "awaiting" in capsys.readouterr().out


def test_spec_RCW2_a_run_with_workspace_gives_bash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """[RCW2-a] `run --workspace DIR`: a recorded Bash call runs (sandboxed, or refused naming apt-get without bwrap)."""
    from agent_ref.tools.sandbox import sandbox_problem

    work = tmp_path / "work"
    work.mkdir()
    replay = tmp_path / "replay.json"
    calls = [("Bash", {"command": "echo hi > hi.txt"})]
    replay.write_text(json.dumps([event for call in replay_calls(calls) for event in call]))
    db = str(tmp_path / "a.db")
    assert main(["run", "sh", "--replay", str(replay), "--workspace", str(work), "--db", db]) == 0
    lines = _sse_lines(capsys.readouterr().out)
    (result,) = [json.loads(line) for line in lines if line.startswith(b"{") and b'"tool_result"' in line]
    assert result["name"] == "Bash"
    if sandbox_problem() is None:
        assert "[exit code 0]" in result["delta"]
        assert (work / "hi.txt").read_text() == "hi\n"
    else:  # the other branch is the next test's, with bwrap hidden on purpose
        assert "apt-get install bubblewrap" in result["delta"]
        assert not (work / "hi.txt").exists()


def test_spec_RCW2_b_unsandboxed_bash_opts_in_and_needs_a_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """[RCW2-b] `--unsandboxed-bash` with bwrap hidden: the command runs, the stream says the mode; alone: exit 2."""
    empty = tmp_path / "no-bwrap"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    work = tmp_path / "work"
    work.mkdir()
    replay = tmp_path / "replay.json"
    calls = [("Bash", {"command": "echo hi > hi.txt"})]
    replay.write_text(json.dumps([event for call in replay_calls(calls) for event in call]))
    db = str(tmp_path / "a.db")
    argv = ["run", "sh", "--replay", str(replay), "--workspace", str(work), "--db", db]
    assert main([*argv, "--unsandboxed-bash"]) == 0
    lines = _sse_lines(capsys.readouterr().out)
    assert (work / "hi.txt").read_text() == "hi\n"
    statuses = [json.loads(line) for line in lines if line.startswith(b"{") and b'"meta_status"' in line]
    sandbox = [json.loads(s["delta"]) for s in statuses if '"sandbox"' in s["delta"]]
    assert [s["mode"] for s in sandbox] == ["unsandboxed"]
    assert main(["run", "x", "--unsandboxed-bash", "--db", db]) == 2
    err = capsys.readouterr().err
    assert "--unsandboxed-bash: error: there is no Bash without --workspace" in err
    assert err.count("\n") == 1
    serve = _parser().parse_args(["serve", "--workspace", str(work), "--unsandboxed-bash"])
    assert serve.unsandboxed_bash is True
