"""The page in a real browser (spec/server.md §6): Debian's chromium, driven by Playwright.

No browser is downloaded: Playwright launches ``/usr/bin/chromium`` (``scripts/system-deps``
installs it). Without chromium or Playwright the tests skip with a loud reason, except in
CI (``CI=true``), where they must run. Each test saves a screenshot under its tmp_path
and checks the page's own rebuilt transcript against the Python reconstructor's reading
of the run's stored log (nothing missing, nothing doubled), and the stream against the
strict validator.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import create_app
from agent_ref.server.streams import MemoryJournal
from browser.page_support import ask as _ask
from browser.page_support import page_transcripts as _page_transcripts
from browser.page_support import run_id as _run_id
from browser.page_support import stored_responses as _stored_responses
from envelope import reconstruct
from server_support import data_lines, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, MutableMapping

ROOT = Path(__file__).resolve().parents[2]
#: A 1x1 PNG, served for the fixture's image URL.
PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def test_spec_server_6_2_a_backend_tool_run_renders_and_matches_the_stream(page: Any, tmp_path: Path) -> None:
    """[S6.2-a] [S6.1-a]: a calculator run: agent subtree, collapsed thinking, the call with its result, the answer."""
    with running(create_app(store=MemoryStore(), model_factory=ScriptedModel)) as base:
        _ask(page, base, "What is 5 + (10 * 2)?")
        page.wait_for_selector("body[data-done='1']")
        page.screenshot(path=str(tmp_path / "backend-tool.png"), full_page=True)
        run_id = _run_id(page)
        (stored,) = _stored_responses(base, run_id, 1)
    assert _page_transcripts(page) == [reconstruct(stored).to_dict()]
    assert page.locator(".agent").count() == 1
    assert page.locator("details.thinking").count() == 2  # one per step
    assert page.locator("details.thinking[open]").count() == 0  # collapsed
    card = page.locator("[data-tool-use-id]")
    assert card.locator(".tool-name").inner_text() == "calculator"
    assert card.locator(".tool-result").inner_text().strip().endswith("25")
    assert "25" in page.locator(".text").last.inner_text()
    assert page.locator(".badge").inner_text() == "end_turn"
    assert page.evaluate("location.hash") == f"#run={run_id}"


def test_spec_server_6_3_a_frontend_tool_confirm_round_trip(page: Any, tmp_path: Path) -> None:
    """[S6.3-a]: the pause opens a confirm dialog; clicking Confirm posts the result; the continuation renders in place."""
    with running(create_app(store=MemoryStore(), model_factory=ScriptedModel)) as base:
        _ask(page, base, "Please confirm: delete the temp files")
        dialog = page.locator("#confirm-dialog")
        dialog.wait_for(state="visible")
        assert "delete the temp files" in page.locator("#confirm-question").inner_text()
        assert page.locator(".badge").inner_text() == "waiting for you"
        page.screenshot(path=str(tmp_path / "frontend-tool-dialog.png"))
        dialog.locator("button.confirm").click()
        page.wait_for_selector("body[data-done='1']")
        page.screenshot(path=str(tmp_path / "frontend-tool.png"), full_page=True)
        run_id = _run_id(page)
        stored = _stored_responses(base, run_id, 2)
    assert _page_transcripts(page) == [reconstruct(lines).to_dict() for lines in stored]
    assert page.locator(".agent").count() == 1  # the continuation is drawn in the same subtree
    card = page.locator("[data-tool-use-id]").filter(has_text="confirm")
    assert card.locator(".tool-result").inner_text().strip().endswith("yes")
    assert page.locator(".badge").inner_text() == "end_turn"
    final_text = page.locator(".text").last.inner_text()
    assert final_text.strip()


def _fixture_lines(name: str) -> list[bytes]:
    return data_lines((ROOT / "fixtures" / "golden" / name / "input.sse").read_bytes())


def test_spec_server_6_2_b_multi_agent_stream_renders_separate_subtrees(page: Any, tmp_path: Path) -> None:
    """[S6.2-a]: a two-agent stream with no parent link (fixture, replayed by the server) gives two sibling subtrees.

    Nesting is proven on a real subagent run in ``test_page_subagents.py``.
    """
    parent, child = "7d0f8a52-5a3e-4c0b-9a57-1f2b3c4d5e6f", "c41d9e0a-2b7f-4e8a-b1c3-0d9e8f7a6b5c"
    lines = _fixture_lines("two_agents_lifecycle")
    assert_valid(lines, expect=["W165"])  # the golden fixture's own warning: its toolu_c1 call predates the stream
    journal = MemoryJournal()
    for line in lines:
        journal.append("fixture-run", 0, line)
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, journal=journal)
    # the fixture's image URL is served from here: no test reaches the network
    page.route("https://example.com/**", lambda route: route.fulfill(body=PNG_1PX, content_type="image/png"))
    with running(app) as base:
        page.goto(base + "/#run=fixture-run")
        page.wait_for_selector("body[data-done='1']")
        page.screenshot(path=str(tmp_path / "multi-agent-siblings.png"), full_page=True)
    assert _page_transcripts(page) == [reconstruct(lines).to_dict()]
    assert page.locator(".agents > .agent").count() == 2  # siblings, in order of first appearance
    assert page.locator(".agents > .agent").nth(0).get_attribute("data-agent") == parent
    assert page.locator(".agents > .agent").nth(1).get_attribute("data-agent") == child
    assert page.locator(f".agent[data-agent='{child}'] img").count() == 1  # the child's tool result image


def _dropping(app: Any, marker: bytes) -> Callable[..., Awaitable[None]]:
    """ASGI wrapper that breaks the first /agent/run response right after the event holding ``marker``."""
    dropped = {"done": False}

    async def wrapped(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/agent/run" or dropped["done"]:
            await app(scope, receive, send)
            return

        async def cut(message: MutableMapping[str, Any]) -> None:
            await send(message)
            if message["type"] == "http.response.body" and marker in message.get("body", b""):
                dropped["done"] = True
                raise ConnectionResetError("test: the connection drops mid-run")

        await app(scope, receive, cut)

    return wrapped


def test_spec_server_6_4_a_dropped_connection_resumes_with_nothing_missing_or_doubled(
    page: Any, tmp_path: Path, allowed_errors: list[str]
) -> None:
    """[S6.4-a]: the server's connection breaks after the tool call; the page reconnects with Last-Event-ID and ends equal to the stored stream."""
    allowed_errors.append("ERR_INCOMPLETE_CHUNKED_ENCODING")  # the drop itself, as the browser reports it
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel)
    with running(_dropping(app, b'"type":"tool_call"'), log_level="critical") as base:
        _ask(page, base, "What is 5 + (10 * 2)?")
        page.wait_for_selector("body[data-done='1']")
        page.screenshot(path=str(tmp_path / "reconnected.png"), full_page=True)
        run_id = _run_id(page)
        (stored,) = _stored_responses(base, run_id, 1)
        reconnects = page.evaluate("() => window.agentRef.turns[0].responses[0].reconnects")
    assert reconnects >= 1  # the drop really happened and was resumed
    assert _page_transcripts(page) == [reconstruct(stored).to_dict()]
    assert page.locator(".badge").inner_text() == "end_turn"
    assert page.locator("[data-tool-use-id]").count() == 1
    assert page.locator("[role=alert]:visible").count() == 0


def test_spec_server_2_2_a_page_reloaded_while_paused_asks_again_and_finishes(page: Any, tmp_path: Path) -> None:
    """[S2.2-a] [S6.3-a]: reload during the pause: the page reopens the run from #run=ID, asks again, and the run finishes."""
    with running(create_app(store=MemoryStore(), model_factory=ScriptedModel)) as base:
        _ask(page, base, "Please confirm: delete the temp files")
        page.locator("#confirm-dialog").wait_for(state="visible")
        run_id = _run_id(page)
        page.reload()
        dialog = page.locator("#confirm-dialog")
        dialog.wait_for(state="visible")
        assert page.locator(".user").inner_text() == "Please confirm: delete the temp files"
        dialog.locator("button.decline").click()
        page.wait_for_selector("body[data-done='1']")
        page.screenshot(path=str(tmp_path / "reloaded.png"), full_page=True)
        stored = _stored_responses(base, run_id, 2)
    assert _page_transcripts(page) == [reconstruct(lines).to_dict() for lines in stored]
    card = page.locator("[data-tool-use-id]").filter(has_text="confirm")
    assert card.locator(".tool-result").inner_text().strip().endswith("no")
    assert page.locator(".badge").inner_text() == "end_turn"


def _linked(lines: list[bytes], agent: str, link: dict[str, Any]) -> list[bytes]:
    """The fixture with ``link`` merged into ``agent``'s meta_init (the §E8.3.1 keys, for the cases real runs never make)."""
    out = []
    for line in lines:
        if line != b"[DONE]":
            env = json.loads(line)
            if env["type"] == "meta_init" and env["agent"] == agent:
                env["delta"] = json.dumps({**json.loads(env["delta"]), **link})
                line = json.dumps(env, separators=(",", ":")).encode()
        out.append(line)
    return out


@pytest.mark.parametrize("case", ["orphan", "refused"])
def test_spec_server_6_2_c_a_link_to_nothing_or_a_refused_link_drops_no_agent(
    page: Any, tmp_path: Path, case: str
) -> None:
    """[S6.2-a] [E8.3.1-c]: a call that is not in the stream leaves the child at the top marked; a refused link shows all flat with an error."""
    parent, child = "7d0f8a52-5a3e-4c0b-9a57-1f2b3c4d5e6f", "c41d9e0a-2b7f-4e8a-b1c3-0d9e8f7a6b5c"
    call: Any = "toolu_not_in_this_stream" if case == "orphan" else 7
    lines = _linked(_fixture_lines("two_agents_lifecycle"), child, {"parent_agent": parent, "parent_tool_use_id": call})
    assert_valid(lines, expect=["W165"])  # the fixture's own warning, as above
    journal = MemoryJournal()
    for line in lines:
        journal.append("linked-run", 0, line)
    page.route("https://example.com/**", lambda route: route.fulfill(body=PNG_1PX, content_type="image/png"))
    with running(create_app(store=MemoryStore(), model_factory=ScriptedModel, journal=journal)) as base:
        page.goto(base + "/#run=linked-run")
        page.wait_for_selector("body[data-done='1']")
        page.screenshot(path=str(tmp_path / f"link-{case}.png"), full_page=True)
    assert _page_transcripts(page) == [reconstruct(lines).to_dict()]
    tops = page.locator(".agents > .agent")
    assert [tops.nth(i).get_attribute("data-agent") for i in range(tops.count())] == [parent, child]
    marked = page.locator(f".agent[data-agent='{child}'] > .agent-head .orphan")
    refusal = page.locator(".agents > [role=alert]")
    if case == "orphan":
        assert marked.inner_text() == "· parent not shown"
        assert refusal.count() == 0
    else:
        assert marked.count() == 0
        assert "parent_tool_use_id must be a non-empty string" in refusal.inner_text()
