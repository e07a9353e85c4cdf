"""The page draws a workspace run readably (spec server §PW1): Bash output and exit codes, Edit diffs, progress.

A server (``create_app`` on uvicorn) whose agent has the workspace tools and ``Bash`` in the
bubblewrap sandbox runs the scripted workspace demo (``examples/workspace_demo.py``'s
prompt, spec agent-ref [WD1-a]) from the page; a second run floods Bash's output (the
sandbox's cut note); a third, in ``ask`` mode, pauses an ``Edit`` for approval. The DOM is
checked (classes, the exit code text, the diff lines) and the stored responses go through
the strict validator. Without bwrap the tests skip with the sandbox's reason.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from examples.workspace_demo import BUGGY, COMMAND, FIXED, PROMPT, make_project

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import create_app
from agent_ref.tools.sandbox import bash_tools, sandbox_problem
from browser.page_support import ask, run_id, stored_responses
from server_support import running

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from pathlib import Path

#: Where the screenshot of the demo run is kept, for a person to look at (not compared).
SHOT = "workspace.png"


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    problem = sandbox_problem()
    if problem is not None:
        pytest.skip(f"no bubblewrap sandbox here: {problem}")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    root = tmp_path / "ws"
    root.mkdir()
    make_project(root)
    return root


def _served(root: Path, **config: Any) -> AbstractContextManager[str]:
    app = create_app(
        store=MemoryStore(),
        model_factory=ScriptedModel,
        tools=bash_tools(root),
        agent_config={"workspace": root, **config},
    )
    return running(app)


def _card(page: Any, name: str) -> Any:
    return page.locator(".tool", has=page.locator(f".tool-head .tool-name:text-is('{name}')"))


def test_spec_PW1_the_demo_run_shows_exit_codes_output_the_edit_as_a_diff_and_progress_in_its_call(
    page: Any, workspace: Path, tmp_path: Path
) -> None:
    """[PW1-a] [PW1-b] [PW1-c]: two Bash cards (exit 1 red, exit 0 green), the Edit's -/+ lines, progress inside."""
    with _served(workspace) as base:
        ask(page, base, PROMPT)
        page.wait_for_selector(".final")
        page.screenshot(path=str(tmp_path / SHOT), full_page=True)
        (stored,) = stored_responses(base, run_id(page), 1)
    assert b'"name":"Bash"' in b"".join(stored)
    bash = _card(page, "Bash")
    assert bash.count() == 2
    codes = [bash.nth(i).locator(".tool-result.shell .exit-code") for i in range(2)]
    assert [c.inner_text() for c in codes] == ["exit code 1", "exit code 0"]
    assert [c.get_attribute("data-exit-code") for c in codes] == ["1", "0"]
    assert [c.get_attribute("class") for c in codes] == ["exit-code fail", "exit-code ok"]
    first = bash.nth(0).locator(".shell-output").inner_text()
    assert "AssertionError: -1 != 5" in first
    assert "FAILED (failures=1)" in first
    assert "[exit code" not in first  # the exit code is drawn apart, not in the output
    assert bash.nth(0).locator(".tool-head code").inner_text() == json.dumps(
        {"command": COMMAND, "description": "Run the test"}, separators=(",", ":")
    )
    edit = _card(page, "Edit")
    assert edit.locator(".tool-change .diff-line.del").all_inner_texts() == [f"-{BUGGY}"]
    assert edit.locator(".tool-change .diff-line.add").all_inner_texts() == [f"+{FIXED}"]
    assert edit.locator(".tool-change .diff-line.file").all_inner_texts() == ["--- calc.py", "+++ calc.py"]
    # progress the sandbox streamed while each Bash ran is inside its card, none left as a loose status line
    for i in range(2):
        news = bash.nth(i).locator(".tool-progress .status[data-kind='tool_progress']")
        assert news.count() >= 1
        assert news.first.inner_text() == "Bash: Run the test"
    assert page.locator(".agent > .blocks > .status[data-kind='tool_progress']").count() == 0
    assert page.locator(".block.error").count() == 0


def test_spec_PW1_a_a_flooded_output_shows_the_sandboxs_cut_note(page: Any, workspace: Path) -> None:
    """[PW1-a]: the head, the cut note marked as such, the tail, and the exit code."""
    call = {"command": "seq 1 40000", "description": "Count far"}
    with _served(workspace) as base:
        ask(page, base, f"call Bash with {json.dumps(call)}")
        page.wait_for_selector(".final")
        stored_responses(base, run_id(page), 1)
    card = _card(page, "Bash")
    note = card.locator(".shell-output .cut-note")
    assert note.count() == 1
    assert note.inner_text().startswith("[agent-ref: output cut: ")
    output = card.locator(".shell-output").inner_text()
    assert output.startswith("1\n2\n3\n")
    assert output.rstrip().endswith("39999\n40000")
    assert card.locator(".exit-code.ok").inner_text() == "exit code 0"


def test_spec_PW1_b_an_edit_awaiting_approval_shows_its_diff_in_the_dialog(page: Any, workspace: Path) -> None:
    """[PW1-b]: in ask mode the Edit pauses; the dialog's reason draws the unified diff it would make, coloured."""
    call = {"file_path": "calc.py", "old_string": BUGGY, "new_string": FIXED}
    with _served(workspace, permission_mode="ask") as base:
        ask(page, base, f"call Edit with {json.dumps(call)}")
        page.locator("#approval-dialog").wait_for(state="visible")
        reason = page.locator("#approval-reason")
        assert reason.locator(".diff-line.del").all_inner_texts() == [f"-    {BUGGY}"]
        assert reason.locator(".diff-line.add").all_inner_texts() == [f"+    {FIXED}"]
        assert reason.locator(".diff-line.hunk").count() == 1
        page.locator("#approval-dialog button.decline").click()
        page.wait_for_function("() => window.agentRef.turns[0].responses.length === 2")
        page.wait_for_function("() => window.agentRef.turns[0].responses[1].rebuilt.done")
        stored_responses(base, run_id(page), 2)
    assert BUGGY in (workspace / "calc.py").read_text()  # denied: not edited


def test_spec_PW1_c_progress_is_drawn_in_the_call_while_it_runs(page: Any, workspace: Path) -> None:
    """[PW1-c]: a Bash that waits on a file shows its streamed last line inside its card before any result."""
    command = "echo started; while [ ! -e go ]; do sleep 0.05; done; echo finished"
    call = {"command": command, "description": "Wait for go", "timeout": 60000}
    with _served(workspace) as base:
        ask(page, base, f"call Bash with {json.dumps(call)}")
        card = _card(page, "Bash")
        try:
            card.locator(".tool-progress .status[data-kind='tool_progress']", has_text="Bash: started").wait_for()
            assert card.locator(".tool-result").count() == 0  # still running: the line is news, not the result
            assert page.locator(".agent > .blocks > .status[data-kind='tool_progress']").count() == 0
        finally:
            (workspace / "go").touch()  # the command ends whatever was seen
        page.wait_for_selector(".final")
        stored_responses(base, run_id(page), 1)
    assert card.locator(".shell-output").inner_text() == "started\nfinished\n"
    assert card.locator(".exit-code.ok").inner_text() == "exit code 0"
    assert card.locator(".tool-progress .status").first.inner_text() == "Bash: Wait for go"


def test_spec_PW1_a_b_a_write_shows_its_content_and_a_timed_out_command_its_end(page: Any, workspace: Path) -> None:
    """[PW1-b]: a Write's content as + lines; [PW1-a]: a command killed at its timeout, the timeout and end in the foot."""
    write = {"file_path": "notes/todo.txt", "content": "one\ntwo\n"}
    slow = {"command": "echo begun; sleep 30", "timeout": 300}
    with _served(workspace) as base:
        ask(page, base, f"call Write with {json.dumps(write)} call Bash with {json.dumps(slow)}")
        page.wait_for_selector(".final")
        stored_responses(base, run_id(page), 1)
    assert (workspace / "notes" / "todo.txt").read_text() == "one\ntwo\n"
    change = _card(page, "Write").locator(".tool-change")
    assert change.locator(".diff-line.add").all_inner_texts() == ["+one", "+two"]
    assert change.locator(".diff-line.file").all_inner_texts() == ["+++ notes/todo.txt"]
    assert change.locator(".diff-line.del").count() == 0
    bash = _card(page, "Bash")
    assert bash.locator(".shell-output").inner_text() == "begun\n"
    notes = bash.locator(".shell-foot > *")
    assert notes.first.inner_text().startswith("timed out after 300 ms")
    assert bash.locator(".shell-foot .exit-code.ok").count() == 0
    assert "SIGKILL" in bash.locator(".shell-foot").inner_text()  # killed by it (or 137 = 128+9, said so)
    assert "[timed out" not in bash.locator(".shell-output").inner_text()
