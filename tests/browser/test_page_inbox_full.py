"""The page's send box when the run's inbox is full, in Chromium (spec server [IB1-e]).

A real server with a bound of one waiting message; the run is held in a gated
calculator. The first message is accepted (202); the second is the server's own ``429
inbox_full``: a note that says the inbox is full and when to send again, the text kept in
the box. Every stored response the test reads passes the strict validator.
"""

from __future__ import annotations

from typing import Any

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import ServerConfig, create_app
from agent_ref.store.sessions import InboxBounds
from browser.page_support import ask, run_id, stored_responses
from server_support import Gate, running


def test_spec_server_ib1_e_a_full_inbox_is_a_note_and_the_text_stays(page: Any, allowed_errors: list[str]) -> None:
    """[IB1-e]: 429 from the server: "Not sent yet: the run's inbox is full …", the text still in the box."""
    allowed_errors.append("status of 429")  # the browser's own log of the refused POST
    gate = Gate()
    config = ServerConfig(inbox_bounds=InboxBounds(max_messages=1, max_bytes=1000, max_message_bytes=500))
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, tools=gate.tools(), config=config)
    try:
        with running(app) as base:
            page.goto(base + "/")
            page.wait_for_selector("body[data-ready='true']")
            ask(page, base, "What is 5 + (10 * 2)?")
            assert gate.entered.wait(20), "the run never reached its tool"
            page.wait_for_selector("#inbox-send:not([disabled])", timeout=10_000)
            page.fill("#inbox-text", "first")
            page.click("#inbox-send")
            page.wait_for_selector("[data-sent='true']", timeout=10_000)
            page.wait_for_selector("#inbox-send:not([disabled])", timeout=10_000)
            page.fill("#inbox-text", "second")
            page.click("#inbox-send")
            note = page.locator(".inbox-full")
            note.wait_for(state="visible", timeout=10_000)
            text = note.inner_text()
            assert text.startswith(
                "Not sent yet: the run's inbox is full; the text is still in the box, send it again in 2 s."
            ), text
            assert "--inbox-messages 1" in text  # the server's message says which bound
            assert page.locator("#inbox-text").input_value() == "second"
            assert page.locator("[data-sent='true']").count() == 1
            gate.opened.set()
            page.wait_for_selector("body[data-done='1']", timeout=30_000)
            stored_responses(base, run_id(page), 1)  # the strict validator
    finally:
        gate.opened.set()
