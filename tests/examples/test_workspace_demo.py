"""``examples/workspace_demo.py``: the scripted model fixes a failing test in the sandbox, undo puts it back (§WD1).

The demo's run is validated strictly; the model's script is also driven with stand-in
``Read``/``Edit``/``Bash`` tools for the branches the demo does not take (a failed call, a
test that already passes).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from examples.workspace_demo import BUGGY, COMMAND, FIXED, PROMPT, run_demo

from agent_ref import Agent, ScriptedModel
from agent_ref.tools.core import tool
from agent_ref.tools.sandbox import sandbox_problem
from conftest import ROOT
from examples import workspace_demo

if TYPE_CHECKING:
    from collections.abc import Callable

    from validating import ValidatedSink


def _need_sandbox() -> None:
    problem = sandbox_problem()
    if problem is not None:
        pytest.skip(f"no bubblewrap sandbox here: {problem}")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _exit_code(text: str) -> str:
    return [line for line in text.splitlines() if line.startswith("[exit code ")][-1]


def test_spec_WD1_b_the_demo_fails_the_test_fixes_it_and_undo_restores_the_file(
    tmp_path: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WD1-a] [WD1-b] Read, Bash (fails), Edit, Bash (passes) in the sandbox; the step's diff; undo byte-exact."""
    _need_sandbox()
    sink = validated_sink()
    root = tmp_path / "ws"
    root.mkdir()
    run = asyncio.run(run_demo(root, sink=sink.append))
    assert run.lines[-1] == b"[DONE]"
    assert [name for name, _ in run.calls] == ["Read", "Bash", "Edit", "Bash"]
    assert run.calls[1][1]["command"] == COMMAND
    names = [name for name, _ in run.results]
    assert names == ["Read", "Bash", "Edit", "Bash"]
    read, failed, edited, passed = (text for _, text in run.results)
    assert "self.assertEqual(add(2, 3), 5)" in read  # the test, really read
    assert "FAILED (failures=1)" in failed
    assert _exit_code(failed) == "[exit code 1]"
    assert "updated successfully" in edited
    assert "\nOK" in passed
    assert _exit_code(passed) == "[exit code 0]"
    assert "UNSANDBOXED" not in failed + passed
    assert run.answer.endswith("I edited calc.py and the test passes now.")
    assert BUGGY.encode() in run.before
    assert FIXED.encode() in run.edited
    assert run.edited == run.before.replace(BUGGY.encode(), FIXED.encode())
    assert f"-    {BUGGY}\n+    {FIXED}\n" in run.diff
    assert "test_calc" not in run.diff
    assert "__pycache__" not in run.diff
    assert run.undone == (run.edit_step,)
    assert run.restored == run.before
    assert (root / "calc.py").read_bytes() == run.before
    assert not (root / "__pycache__").exists()


def test_spec_WD1_b_python_examples_workspace_demo_prints_what_happened(tmp_path: Path) -> None:
    """[WD1-b] `python examples/workspace_demo.py` in a subprocess: each call, the answer, the diff, the undo."""
    _need_sandbox()
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path / "c")}
    done = subprocess.run(
        [sys.executable, "examples/workspace_demo.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "> Read test_calc.py" in out
    assert "> Edit calc.py" in out
    assert out.count(f"> Bash {COMMAND}") == 2
    assert "[exit code 1]" in out
    assert "[exit code 0]" in out
    assert f"+    {FIXED}" in out
    assert "calc.py is byte for byte as before." in out


def test_spec_WD1_c_no_sandbox_the_demo_says_why_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """[WD1-c] Without a working bwrap the demo prints the sandbox's reason (with the install hint) and exits 2."""
    monkeypatch.setattr(workspace_demo, "sandbox_problem", lambda: "bubblewrap (bwrap) is not on PATH; install it")
    assert workspace_demo.main([]) == 2
    err = capsys.readouterr().err
    assert "workspace_demo: bubblewrap (bwrap) is not on PATH; install it" in err


# ---------------------------------------------------------------- the script's other branches, stand-in tools


def _stand_ins(bash_says: list[str], *, edit_fails: bool = False) -> tuple[list[Any], list[tuple[str, dict[str, Any]]]]:
    seen: list[tuple[str, dict[str, Any]]] = []

    @tool(name="Read")
    def read(file_path: str) -> str:
        """Read a file."""
        seen.append(("Read", {"file_path": file_path}))
        return "     1\tassert add(2, 3) == 5"

    @tool(name="Edit")
    def edit(file_path: str, old_string: str, new_string: str) -> str:
        """Edit a file."""
        seen.append(("Edit", {"file_path": file_path, "old_string": old_string, "new_string": new_string}))
        if edit_fails:
            raise ValueError(f"old_string not found in {file_path}")
        return "updated"

    @tool(name="Bash")
    def bash(command: str, description: str | None = None) -> str:
        """Run a command."""
        seen.append(("Bash", {"command": command}))
        assert description == "Run the test"
        return bash_says.pop(0)

    return [read, edit, bash], seen


def _answer(lines: list[bytes]) -> str:
    texts = [json.loads(line) for line in lines if line != b"[DONE]"]
    return "".join(e["delta"] for e in texts if e["type"] == "text")


def test_spec_WD1_a_the_four_calls_come_one_a_step_with_the_prompts_inputs(
    validated_sink: Callable[..., ValidatedSink],
) -> None:
    """[WD1-a] Read T, Bash C, Edit F OLD->NEW, Bash C, each in its own model step; a last non-zero exit is said."""
    tools, seen = _stand_ins(["FAILED\n[exit code 1]", "still FAILED\n[exit code 3]"])
    model = ScriptedModel()
    sink = validated_sink()
    asyncio.run(Agent(model, tools=tools).run(PROMPT, sink.append))
    assert seen == [
        ("Read", {"file_path": "test_calc.py"}),
        ("Bash", {"command": COMMAND}),
        ("Edit", {"file_path": "calc.py", "old_string": BUGGY, "new_string": FIXED}),
        ("Bash", {"command": COMMAND}),
    ]
    assert len(model.requests) == 5  # four steps of one call, then the answer
    assert "the test still fails (exit code 3)" in _answer(sink)


def test_spec_WD1_a_a_failed_call_stops_the_script_and_says_which(
    validated_sink: Callable[..., ValidatedSink],
) -> None:
    """[WD1-a] An is_error result (the Edit's) ends it: no second run, an answer naming the tool and why."""
    tools, seen = _stand_ins(["FAILED\n[exit code 1]"], edit_fails=True)
    sink = validated_sink()
    asyncio.run(Agent(ScriptedModel(), tools=tools).run(PROMPT, sink.append))
    assert [name for name, _ in seen] == ["Read", "Bash", "Edit"]
    said = _answer(sink)
    assert "I stopped: Edit failed:" in said
    assert "old_string not found in calc.py" in said


def test_spec_WD1_a_a_test_that_already_passes_changes_nothing(
    validated_sink: Callable[..., ValidatedSink],
) -> None:
    """[WD1-a] A first run that exits 0: no edit, "already passes"; without all three tools the prompt is not this demo."""
    tools, seen = _stand_ins(["OK\n[exit code 0]"])
    sink = validated_sink()
    asyncio.run(Agent(ScriptedModel(), tools=tools).run(PROMPT, sink.append))
    assert [name for name, _ in seen] == ["Read", "Bash"]
    assert "The test already passes, so I changed nothing" in _answer(sink)
    other = validated_sink()
    asyncio.run(Agent(ScriptedModel(), tools=tools[:2]).run(PROMPT, other.append))
    assert [name for name, _ in seen] == ["Read", "Bash"]  # no Bash offered: no call at all
