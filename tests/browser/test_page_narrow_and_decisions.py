"""The page at a phone's width, an edited and a denied approval, and the offline banner (issue 37).

At 390 px: the status pill keeps to one line, the placeholders of the prompt box and of
the box for the working run are not clipped while a run streams, and the deny message
field is as wide as the dialog. An approval edited on the page shows, in the call's card,
the input that ran (envelope-v1 §4.6-a) and what the model asked; a denied one is shown
as denied, not as a result. With the server unreachable and no run, the box for the
working run is hidden. Each state is saved as a screenshot in the test's folder. The stored
responses go through the strict validator (``stored_responses``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from browser.agent_server import agent_serve
from browser.page_support import ask, run_id, stored_responses
from envelope import reconstruct

if TYPE_CHECKING:
    from pathlib import Path

PHONE = {"width": 390, "height": 800}

#: The lines a text node takes (distinct tops of its line boxes).
_LINES = """(sel) => {
  const range = document.createRange();
  range.selectNodeContents(document.querySelector(sel));
  return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
}"""
#: The width a field's placeholder needs, and the width its box gives it.
_PLACEHOLDER = """(sel) => {
  const el = document.querySelector(sel);
  const style = getComputedStyle(el);
  const ctx = document.createElement("canvas").getContext("2d");
  ctx.font = `${style.fontWeight} ${style.fontSize} ${style.fontFamily}`;
  const room = el.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return [ctx.measureText(el.placeholder).width, room];
}"""


def _phone(page: Any) -> None:
    page.set_viewport_size(PHONE)


def test_page_at_390px_keeps_the_pill_and_the_placeholders_whole(page: Any, tmp_path: Path) -> None:
    """While a paced run streams at 390 px: a one-line pill, both placeholders within their boxes [PG-c]."""
    _phone(page)
    with agent_serve(tmp_path / "agents.db", "--pace", "0.5") as base:
        ask(page, base, "What is 5 + (10 * 2)?")
        page.wait_for_selector("#stop:not([hidden])")
        page.wait_for_selector("#inbox:not([hidden])")
        page.wait_for_selector("body[data-state='streaming']")
        page.screenshot(path=str(tmp_path / "streaming-390.png"))
        assert page.evaluate(_LINES, "#status") == 1
        for field in ("#prompt", "#inbox-text"):
            needed, room = page.evaluate(_PLACEHOLDER, field)
            assert needed <= room, f"{field}: the placeholder needs {needed:.0f} px, the box gives {room:.0f}"
        header = page.evaluate("() => document.querySelector('.top').scrollWidth <= window.innerWidth")
        assert header, "the header is wider than the window"
        page.locator("#stop").click()
        page.wait_for_selector("body[data-done='1']")


def test_page_shows_the_edited_input_that_ran_and_a_denial_as_denied(page: Any, tmp_path: Path) -> None:
    """At 390 px the deny field spans the dialog; an edited approval's card shows what ran; a denial is marked [PG-a] [PG-b] [PG-c]."""
    _phone(page)
    with agent_serve(tmp_path / "agents.db", "--permission-mode", "auto", "--allow", "spawn_subagent") as base:
        ask(page, base, "What is 6 * 7?")
        dialog = page.locator("#approval-dialog")
        dialog.wait_for(state="visible")
        page.screenshot(path=str(tmp_path / "approval-390.png"))
        assert page.evaluate(_LINES, "#status") == 1  # "waiting for you"
        message = page.locator("#approval-message").bounding_box()
        form = page.locator("#approval-input").bounding_box()
        assert message["width"] >= form["width"] - 1, (message, form)  # as wide as the input above it
        page.locator("#approval-input").fill('{"expression": "6 * 8"}')
        dialog.locator("button.confirm").click()
        page.wait_for_selector("body[data-done='1']")
        card = page.locator(".turn >> nth=0 >> .tool[data-edited='true']")
        assert card.locator(".tool-head code").inner_text() == '{"expression":"6 * 8"}'
        assert '{"expression":"6 * 7"}' in card.locator(".tool-edit").inner_text()
        assert card.locator(".tool-result").inner_text().strip().endswith("48")
        first, second = stored_responses(base, run_id(page), 2)
        calls = [b for b in reconstruct([*first, *second]).to_dict()["agents"].popitem()[1]["blocks"]]
        edits = [b for b in calls if b.get("edit")]
        assert [e["input"] for e in edits] == [{"expression": "6 * 8"}]  # what the card shows is the record's

        page.fill("#prompt", "What is 6 * 7?")
        page.click("#send")
        dialog.wait_for(state="visible")
        page.locator("#approval-message").fill("not today")
        dialog.locator("button.decline").click()
        page.wait_for_selector("body[data-done='2']")
        page.screenshot(path=str(tmp_path / "denied-390.png"), full_page=True)
        denied = page.locator(".turn >> nth=1 >> .tool[data-denied='true']")
        assert denied.locator(".tool-result.denied").inner_text() == "denied: not today"
        assert denied.locator(".tool-result:not(.denied)").count() == 0
        assert json.loads(json.dumps(page.evaluate("() => window.agentRef.turns.length"))) == 2


def test_page_offline_with_no_run_hides_the_box_for_the_working_run(
    page: Any, tmp_path: Path, allowed_errors: list[str]
) -> None:
    """The server gone and a prompt sent: the banner shows; the "add something while the agent works" box does not [PG-c]."""
    allowed_errors.append("ERR_CONNECTION_REFUSED")
    _phone(page)
    with agent_serve(tmp_path / "agents.db") as base:
        page.goto(base + "/")
        page.wait_for_selector("body[data-ready='true']")
    page.fill("#prompt", "What is 5 + (10 * 2)?")
    page.click("#send")
    page.locator("#offline").wait_for(state="visible")
    page.screenshot(path=str(tmp_path / "offline-390.png"))
    assert not page.locator("#inbox").is_visible()
    assert page.evaluate(_LINES, "#status") == 1  # "server unreachable"
    page.locator("#offline-cancel").click()
