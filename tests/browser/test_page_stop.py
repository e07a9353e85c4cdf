"""The page's Stop button in Chromium (spec server §6.8-a, §1.4).

The run is held in a gated calculator (``server_support.Gate``); the user clicks Stop;
the page reads the run's closing lines on its own stream and draws the stop. The page's
transcript is the Python reconstructor's reading of the stored run, which passes the
strict validator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import create_app
from browser.page_support import ask, page_transcripts, run_id, stored_responses
from envelope import reconstruct
from server_support import Gate, running

if TYPE_CHECKING:
    from pathlib import Path


def test_spec_server_6_8_a_stop_button_stops_a_streaming_run(page: Any, tmp_path: Path) -> None:
    """[S6.8-a]: Stop shows while the run streams; a click ends it as aborted; the button goes away."""
    gate = Gate()
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, tools=gate.tools())
    try:
        with running(app) as base:
            ask(page, base, "What is 5 + (10 * 2)?")
            assert gate.entered.wait(20), "the run never reached its tool"
            stop = page.locator("#stop")
            stop.wait_for(state="visible", timeout=10_000)
            page.screenshot(path=str(tmp_path / "stop-offered.png"))
            stop.click()
            page.wait_for_selector("body[data-done='1']", timeout=20_000)
            page.screenshot(path=str(tmp_path / "stopped.png"), full_page=True)
            stopped = run_id(page)
            (stored,) = stored_responses(base, stopped, 1)  # the strict validator
            assert page.locator("#stop").is_hidden()
            assert page.locator(".badge").inner_text() == "aborted"
            assert page_transcripts(page) == [reconstruct(stored).to_dict()]
            card = page.locator("[data-tool-use-id]")
            assert "cancelled" in card.locator(".tool-result").inner_text()
    finally:
        gate.opened.set()


def test_spec_server_6_8_a_no_stop_button_when_nothing_streams(page: Any) -> None:
    """[S6.8-a]: before a run and after it ended, there is no Stop button to press."""
    with running(create_app(store=MemoryStore(), model_factory=ScriptedModel)) as base:
        page.goto(base + "/")
        page.wait_for_selector("body[data-ready='true']")
        assert page.locator("#stop").is_hidden()
        ask(page, base, "What is 5 + (10 * 2)?")
        page.wait_for_selector("body[data-done='1']", timeout=20_000)
        assert page.locator("#stop").is_hidden()
