"""The page's send box while a run works, in Chromium (spec server [IN5-a]).

The run is held in a gated calculator (``server_support.Gate``) while the user types in
the send box; the model's next step sees the message (the stored run's history and its
answer show it). A 409 (the run past its last step) is a note and the text stays. Every
stored response the test reads passes the strict validator.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import create_app
from browser.page_support import ask, page_transcripts, run_id, stored_responses
from envelope import reconstruct
from server_support import Gate, running

if TYPE_CHECKING:
    from pathlib import Path

NOTE = "Also, what is 8 + 1?"


def test_send_box_reaches_the_working_run_and_shows_where_it_was_sent(page: Any, tmp_path: Path) -> None:
    """[IN5-a]: the box is offered while the run streams; a sent message is in the model's next step."""
    gate = Gate()
    store = MemoryStore()
    app = create_app(store=store, model_factory=ScriptedModel, tools=gate.tools())
    try:
        with running(app) as base:
            page.goto(base + "/")
            page.wait_for_selector("body[data-ready='true']")
            assert page.locator("#inbox").is_hidden()  # nothing streams: no box
            ask(page, base, "What is 5 + (10 * 2)?")
            assert gate.entered.wait(20), "the run never reached its tool"
            page.locator("#inbox").wait_for(state="visible", timeout=10_000)
            page.wait_for_selector("#inbox-send:not([disabled])", timeout=10_000)
            page.fill("#inbox-text", NOTE)
            page.click("#inbox-send")
            page.wait_for_selector("[data-sent='true']", timeout=10_000)
            assert page.locator("#inbox-text").input_value() == ""
            page.screenshot(path=str(tmp_path / "sent.png"), full_page=True)
            gate.opened.set()
            page.wait_for_selector("body[data-done='1']", timeout=30_000)
            assert page.locator("#inbox").is_hidden()  # the run ended: no box
            sent = page.locator("[data-sent='true']")
            assert sent.inner_text() == NOTE
            # shown where it was sent: after the first tool's result, before the model's next output
            order = page.evaluate(
                """() => [...document.querySelectorAll('.agent .blocks > *')].map(
                    e => e.dataset.sent ? 'sent' : (e.querySelector('.tool-result') ? 'result' : 'other'))"""
            )
            assert "sent" in order
            assert "result" in order[: order.index("sent")]
            assert order.index("sent") < len(order) - 1
            stopped = run_id(page)
            (stored,) = stored_responses(base, stopped, 1)  # the strict validator
            assert page_transcripts(page) == [reconstruct(stored).to_dict()]
            agent_uuid = json.loads(stored[0])["agent"]
            with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
                (record,) = pool.submit(asyncio.run, store.runs(agent_uuid)).result()
            user_texts = [
                b["text"]
                for m in record.messages
                if m["role"] == "user" and isinstance(m["content"], list)
                for b in m["content"]
                if b.get("type") == "text"
            ]
            assert NOTE in user_texts  # the model's next step had it
            assert "9" in record.final_text  # and answered it
    finally:
        gate.opened.set()


def test_a_refused_message_is_a_note_and_stays_in_the_box(page: Any, allowed_errors: list[str]) -> None:
    """[IN5-a]: the server answers 409 (the run past its last step): a clear note, the text kept, then in the prompt box."""
    allowed_errors.append("status of 409")  # the browser's own log of the refused POST
    gate = Gate()
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, tools=gate.tools())
    refusal = {"error": {"type": "not_accepting", "message": "past its last step"}}

    def refuse(route: Any) -> None:
        route.fulfill(status=409, content_type="application/json", body=json.dumps(refusal))

    try:
        with running(app) as base:
            page.route("**/agent/runs/*/messages", refuse)  # the page's handling of the server's 409
            ask(page, base, "What is 5 + (10 * 2)?")
            assert gate.entered.wait(20), "the run never reached its tool"
            page.wait_for_selector("#inbox-send:not([disabled])", timeout=10_000)
            page.fill("#inbox-text", "one more thing")
            page.click("#inbox-send")
            note = page.locator(".inbox-refused")
            note.wait_for(state="visible", timeout=10_000)
            assert note.inner_text() == "The run has finished; send it as a new prompt."
            assert page.locator("#inbox-text").input_value() == "one more thing"
            assert page.locator("[data-sent='true']").count() == 0
            gate.opened.set()
            page.wait_for_selector("body[data-done='1']", timeout=30_000)
            assert page.locator("#prompt").input_value() == "one more thing"  # ready to send as a new prompt
    finally:
        gate.opened.set()
