"""The page's approval dialog round trip (spec server S1.2-d; spec/agent-ref.md §12.6).

``agent-ref serve --permission-mode auto`` pauses the embedded model's calculator call for
approval; the page shows the call's name, the reason and its input as editable JSON; the
user edits the input and approves; the run ends with the edited call's result. The stored
responses go through the strict validator (``stored_responses``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from browser.agent_server import agent_serve
from browser.page_support import ask, run_id, stored_responses

if TYPE_CHECKING:
    from pathlib import Path


def test_s1_2_d_the_page_approves_an_edited_call(page: Any, tmp_path: Path) -> None:
    """[S1.2-d]: the dialog names the call and the reason; the edited input is what runs."""
    with agent_serve(tmp_path / "agents.db", "--permission-mode", "auto", "--allow", "spawn_subagent") as base:
        ask(page, base, "What is 6 * 7?")
        dialog = page.locator("#approval-dialog")
        dialog.wait_for(state="visible")
        assert page.locator("#approval-name").inner_text() == "calculator"
        assert "calculator" in page.locator("#approval-reason").inner_text()
        assert json.loads(page.locator("#approval-input").input_value()) == {"expression": "6 * 7"}
        page.locator("#approval-input").fill('{"expression": "5 + 5"}')
        dialog.locator("button.confirm").click()
        page.wait_for_function("() => window.agentRef.turns[0].responses.length === 2")
        page.wait_for_function("() => window.agentRef.turns[0].responses[1].rebuilt.done")
        run = run_id(page)
        paused, second = stored_responses(base, run, 2)
        (pause,) = [
            json.loads(x)
            for x in paused
            if x != b"[DONE]" and b"awaiting_frontend_tools" in x and b"meta_status" not in x
        ]
        assert [c["approval"]["reason"] != "" for c in json.loads(pause["delta"])] == [True]
        results = [json.loads(x) for x in second if x != b"[DONE]" and json.loads(x)["type"] == "tool_result"]
        assert [r["delta"] for r in results] == ["10"]
        assert json.loads(second[-2])["type"] == "meta_final"


def test_s1_2_d_the_page_denies_with_a_message(page: Any, tmp_path: Path) -> None:
    """[S1.2-d]: Deny sends the message; the model sees it as the call's error result."""
    with agent_serve(tmp_path / "agents.db", "--permission-mode", "auto", "--allow", "spawn_subagent") as base:
        ask(page, base, "What is 6 * 7?")
        dialog = page.locator("#approval-dialog")
        dialog.wait_for(state="visible")
        page.locator("#approval-message").fill("not now")
        dialog.locator("button.decline").click()
        page.wait_for_function("() => window.agentRef.turns[0].responses.length === 2")
        page.wait_for_function("() => window.agentRef.turns[0].responses[1].rebuilt.done")
        _, second = stored_responses(base, run_id(page), 2)
        results = [json.loads(x) for x in second if x != b"[DONE]" and json.loads(x)["type"] == "tool_result"]
        assert [r["delta"] for r in results] == ["not now"]
