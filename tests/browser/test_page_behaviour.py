"""How the page behaves around the stream (spec/server.md §6.5 to §6.7), in Debian's chromium.

Auto-scroll on a page taller than the window (and not when the user scrolled up to read),
a server that does not answer (nothing listening, then a real ``agent-ref serve`` started
later on the same port), and a server with a token (a wrong one asks again and keeps
the prompt). Every stream the tests read back goes through the strict validator.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from agent_ref import MemoryStore, ScriptedModel, Tool, tool
from agent_ref.run.subagents import demo_subagents
from agent_ref.server.app import ServerConfig, create_app
from agent_ref.tools.demo import confirm, evaluate
from browser.agent_server import agent_serve
from browser.page_support import ask, page_transcripts, run_id, stored_responses
from envelope import reconstruct
from server_support import running

if TYPE_CHECKING:
    from pathlib import Path

TOKEN = "s3cret-token-for-the-page"
#: A tall first answer: two researchers, each inside its spawning call.
TALL = "Research tides and volcanoes in parallel"


class Turnstile:
    """A ``calculator`` that stops until the test lets one call through (each wait bounded: 30 s)."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)
        self.go = threading.Semaphore(0)

    def tools(self) -> list[Tool]:
        """The turnstile ``calculator`` and the frontend ``confirm``."""
        gate = self

        @tool(name="calculator")
        def calculator(expression: str) -> str:
            """Evaluate an arithmetic expression, once the test lets the call through.

            Args:
                expression: The expression.
            """
            gate.entered.release()
            if not gate.go.acquire(timeout=30):
                raise TimeoutError("the test never let the call through")
            return str(evaluate(expression))

        return [calculator, confirm]

    def wait_entered(self) -> None:
        """Until a call is inside the tool (the page then shows the call, the stream is open)."""
        assert self.entered.acquire(timeout=30), "no calculator call arrived"


def _distance_to_end(page: Any) -> float:
    distance: float = page.evaluate(
        "() => { const e = document.scrollingElement; return e.scrollHeight - e.clientHeight - e.scrollTop; }"
    )
    return distance


def _visible_above_composer(page: Any, locator: Any) -> bool:
    """The element's bottom is on screen, under the sticky header and above the composer."""
    box = locator.bounding_box()
    assert box is not None
    top: float = page.evaluate("() => document.querySelector('.top').getBoundingClientRect().bottom")
    bottom: float = page.evaluate("() => document.querySelector('#composer').getBoundingClientRect().top")
    end = box["y"] + box["height"]
    return bool(top < end <= bottom + 1)


def _last_answer(page: Any, turn: int) -> Any:
    return page.locator(".turn").nth(turn).locator(".agents > .agent > .blocks > .text").last


def _answer_drawn(page: Any, turn: int, text: str) -> None:
    """Wait until the turn's last answer shows ``text``: the page draws on the next animation
    frame, and ``data-done`` is set when the run ends, which can come first."""
    page.locator(".turn").nth(turn).locator(".agents > .agent > .blocks > .text", has_text=text).wait_for()


def test_spec_server_6_5_a_new_content_keeps_the_last_answer_in_view_unless_the_user_scrolled_up(
    page: Any, tmp_path: Path
) -> None:
    """[S6.5-a]: once taller than the window the page follows new output; scrolled up, it stays put and offers a jump."""
    page.set_viewport_size({"width": 1000, "height": 640})
    gate = Turnstile()
    app = create_app(
        store=MemoryStore(),
        model_factory=ScriptedModel,
        tools=gate.tools(),
        agent_config={"subagents": demo_subagents()},
    )
    with running(app) as base:
        ask(page, base, TALL)
        page.wait_for_selector("body[data-done='1']")
        assert page.evaluate("() => document.scrollingElement.scrollHeight") > 640 + 300  # taller than the window
        assert _distance_to_end(page) <= 2
        assert _visible_above_composer(page, _last_answer(page, 0))
        # following: the answer that arrives after the tool call is brought into view
        page.fill("#prompt", "What is 5 + (10 * 2)?")
        page.click("#send")
        gate.wait_entered()
        gate.go.release()
        page.wait_for_selector("body[data-done='2']")
        _answer_drawn(page, 1, "25")
        assert "25" in _last_answer(page, 1).inner_text()
        assert _distance_to_end(page) <= 2
        assert _visible_above_composer(page, _last_answer(page, 1))
        page.screenshot(path=str(tmp_path / "followed.png"))
        # reading: the user scrolls up while the run waits for its tool; the answer must not pull them down
        page.fill("#prompt", "What is 6 * 7?")
        page.click("#send")
        gate.wait_entered()
        page.locator(".turn").nth(2).locator("[data-tool-use-id]").wait_for()  # the call is drawn
        page.mouse.move(500, 300)
        page.mouse.wheel(0, -700)
        page.wait_for_function("() => document.scrollingElement.scrollHeight - innerHeight - scrollY > 400")
        held = page.evaluate("() => scrollY")
        gate.go.release()
        page.wait_for_selector("body[data-done='3']")
        _answer_drawn(page, 2, "42")
        assert "42" in _last_answer(page, 2).inner_text()
        page.wait_for_timeout(300)  # two frames and more: a late render would have scrolled by now
        assert abs(page.evaluate("() => scrollY") - held) <= 1
        assert not _visible_above_composer(page, _last_answer(page, 2))
        jump = page.locator("#jump")
        assert jump.is_visible()
        page.screenshot(path=str(tmp_path / "scrolled-up.png"))
        jump.click()
        page.wait_for_function("() => document.scrollingElement.scrollHeight - innerHeight - scrollY <= 2")
        assert _visible_above_composer(page, _last_answer(page, 2))
        assert not jump.is_visible()
        runs = page.evaluate("() => window.agentRef.turns.map(t => t.responses[0].runId)")
        stored = [lines for run in runs for lines in stored_responses(base, run, 1)]
    assert page_transcripts(page) == [reconstruct(lines).to_dict() for lines in stored]


def test_spec_server_6_6_a_nothing_listening_shows_a_retry_state_and_cancel_gives_the_prompt_back(
    page: Any, tmp_path: Path, allowed_errors: list[str]
) -> None:
    """[S6.6-a]: no raw "Failed to fetch": a clear message, a countdown, attempts counted; Cancel puts the prompt back."""
    allowed_errors.append("ERR_CONNECTION_REFUSED")  # the browser's own log of each refused attempt
    with running(create_app(store=MemoryStore(), model_factory=ScriptedModel)) as base:
        page.goto(base + "/")
        page.wait_for_selector("body[data-ready='true']")
    # the server is gone: nothing listens on its port any more
    prompt = "What is 5 + (10 * 2)?"
    page.fill("#prompt", prompt)
    page.click("#send")
    banner = page.locator("#offline")
    banner.wait_for(state="visible")
    text = banner.inner_text()
    assert f"Cannot reach the agent server at {urlsplit(base).netloc}" in text
    assert "Retrying in" in text
    assert "attempt 2 of" in text
    assert page.locator("#status").inner_text() == "server unreachable"
    page.wait_for_selector("#offline[data-attempt='2']", timeout=15_000)  # it did retry, and says so
    assert "attempt 3 of" in banner.inner_text()
    assert "Failed to fetch" not in page.locator("body").inner_text()
    page.screenshot(path=str(tmp_path / "offline.png"))
    page.locator("#offline-cancel").click()
    assert page.locator("#prompt").input_value() == prompt
    assert not banner.is_visible()
    note = page.locator(".turn [role=alert]")
    assert "did not answer" in note.inner_text()
    assert "back in the box" in note.inner_text()
    assert page.locator("#status").inner_text() == "not sent"
    assert "Failed to fetch" not in page.locator("body").inner_text()
    page.screenshot(path=str(tmp_path / "offline-cancelled.png"))


def test_spec_server_6_6_b_a_server_started_later_gets_the_prompt(
    page: Any, tmp_path: Path, allowed_errors: list[str]
) -> None:
    """[S6.6-a]: the server comes back on the same port while the page retries: the run goes through, valid and whole."""
    allowed_errors.append("ERR_CONNECTION_REFUSED")
    db = tmp_path / "agents.db"
    with agent_serve(db) as base:
        page.goto(base + "/")
        page.wait_for_selector("body[data-ready='true']")
    page.fill("#prompt", "What is 5 + (10 * 2)?")
    page.click("#send")
    page.locator("#offline").wait_for(state="visible")
    with agent_serve(db, port=urlsplit(base).port or 0) as again:
        assert again == base
        page.wait_for_selector("body[data-done='1']", timeout=60_000)  # the next attempt of the backoff
        (stored,) = stored_responses(base, run_id(page), 1)
    assert page_transcripts(page) == [reconstruct(stored).to_dict()]
    assert not page.locator("#offline").is_visible()
    assert page.locator(".badge").inner_text() == "end_turn"
    assert page.locator("[role=alert]:visible").count() == 0


def test_spec_server_6_7_a_a_wrong_token_asks_again_and_keeps_the_prompt(
    page: Any, tmp_path: Path, allowed_errors: list[str]
) -> None:
    """[S6.7-a] [S5.2-a]: 401: the styled dialog asks; a wrong token is refused and asked again; the right one runs the typed prompt."""
    allowed_errors.append("401 (Unauthorized)")  # the browser logs each refused request
    prompt = "What is 5 + (10 * 2)?"
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, config=ServerConfig(token=TOKEN))
    with running(app) as base:
        ask(page, base, prompt)
        dialog = page.locator("#token-dialog")
        dialog.wait_for(state="visible")
        assert not page.locator("#token-refused").is_visible()  # first time: no reproach
        page.fill("#token-input", "not-the-token")
        dialog.locator("button.confirm").click()
        page.locator("#token-refused").wait_for(state="visible")  # refused, asked again
        assert dialog.is_visible()
        assert page.locator("#token-input").input_value() == ""
        page.screenshot(path=str(tmp_path / "token-refused.png"))
        page.fill("#token-input", TOKEN)
        page.press("#token-input", "Enter")  # as a user does; it must not mean Cancel
        page.wait_for_selector("body[data-done='1']")
        (stored,) = stored_responses(base, run_id(page), 1, token=TOKEN)
    assert page_transcripts(page) == [reconstruct(stored).to_dict()]
    meta = page_transcripts(page)[0]["agents"]
    (root,) = meta.values()
    assert root["blocks"][0]["data"]["user_query"] == prompt  # the typed prompt is what ran
    assert page.locator(".user").inner_text() == prompt
    assert page.locator(".badge").inner_text() == "end_turn"
    assert page.evaluate("() => sessionStorage.getItem('agent-ref-token')") == TOKEN


def test_spec_server_6_7_b_cancelling_the_token_dialog_gives_the_prompt_back(
    page: Any, allowed_errors: list[str]
) -> None:
    """[S6.7-a]: cancelled, nothing runs; the prompt is back in the composer and the page says why."""
    allowed_errors.append("401 (Unauthorized)")
    prompt = "Please confirm: delete the temp files"
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, config=ServerConfig(token=TOKEN))
    with running(app) as base:
        ask(page, base, prompt)
        dialog = page.locator("#token-dialog")
        dialog.wait_for(state="visible")
        dialog.locator("button.decline").click()
        page.wait_for_selector("body[data-done='1']")
    assert page.locator("#prompt").input_value() == prompt
    assert "needs an access token" in page.locator(".turn [role=alert]").inner_text()
    assert page.locator("#status").inner_text() == "not sent"
    assert page.evaluate("() => location.hash") == ""  # no run was started
