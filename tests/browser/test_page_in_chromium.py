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
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server import create_app
from agent_ref.server_streams import MemoryJournal
from envelope import reconstruct
from server_support import data_lines, get, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, MutableMapping

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
#: A 1x1 PNG, served for the fixture's image URL.
PNG_1PX = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
#: Where the README's screenshot comes from (written by the frontend test when set).
SCREENSHOT_ENV = "AGENT_REF_SCREENSHOT"


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the browser tests (scripts/system-deps, the dev extra)")
    pytest.skip(f"BROWSER TESTS DID NOT RUN: {reason}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium under Playwright, one per module."""
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if executable is None:
        _unavailable("chromium is not installed (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright; never `playwright install`)")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def allowed_errors() -> list[str]:
    """Console messages a test expects (a test that drops the connection expects the browser to say so)."""
    return []


@pytest.fixture
def page(browser: Any, allowed_errors: list[str]) -> Iterator[Any]:
    """A fresh page; console errors and page errors fail the test, unless the test allowed them."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: errors.append(f"console.error: {msg.text}") if msg.type == "error" else None)
    page.set_default_timeout(30_000)
    yield page
    context.close()
    unexpected = [e for e in errors if not any(a in e for a in allowed_errors)]
    assert not unexpected, "\n".join(unexpected)


def _page_transcripts(page: Any) -> list[dict[str, Any]]:
    """Each response's transcript as the page rebuilt it (JSON round trip)."""
    result: list[dict[str, Any]] = page.evaluate(
        "() => window.agentRef.turns.flatMap(t => t.responses.map(r => r.rebuilt.transcript()))"
    )
    return result


def _stored_responses(base: str, run_id: str, count: int) -> list[list[bytes]]:
    out = []
    for index in range(count):
        r = get(base, f"/agent/runs/{run_id}/stream", params={"response": str(index)})
        assert r.status_code == 200
        assert_valid(r.content)
        out.append(data_lines(r.content))
    return out


def _ask(page: Any, base: str, prompt: str) -> None:
    page.goto(base + "/")
    page.wait_for_selector("body[data-ready='true']")
    page.fill("#prompt", prompt)
    page.click("#send")


def _run_id(page: Any) -> str:
    run_id: str = page.evaluate("() => window.agentRef.turns[0].responses[0].runId")
    assert run_id
    return run_id


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
        shot = os.environ.get(SCREENSHOT_ENV)
        if shot:
            page.screenshot(path=shot, full_page=True)
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


def _nest(lines: list[bytes], child: str, parent: str, tool_use_id: str) -> list[bytes]:
    """The fixture with the child's meta_init naming its spawning call (spec server §6.2-a)."""
    out = []
    for line in lines:
        if line != b"[DONE]":
            env = json.loads(line)
            if env["type"] == "meta_init" and env["agent"] == child:
                data = json.loads(env["delta"])
                data["parent"] = {"agent": parent, "tool_use_id": tool_use_id}
                env["delta"] = json.dumps(data)
                line = json.dumps(env, separators=(",", ":")).encode()
        out.append(line)
    return out


@pytest.mark.parametrize("nested", [False, True], ids=["siblings", "nested"])
def test_spec_server_6_2_b_multi_agent_stream_renders_separate_subtrees(
    page: Any, tmp_path: Path, nested: bool
) -> None:
    """[S6.2-a]: a two-agent stream (fixture, replayed by the server) gives one subtree per agent; nested under the call when meta_init says so."""
    parent, child = "7d0f8a52-5a3e-4c0b-9a57-1f2b3c4d5e6f", "c41d9e0a-2b7f-4e8a-b1c3-0d9e8f7a6b5c"
    lines = _fixture_lines("two_agents_lifecycle")
    if nested:
        lines = _nest(lines, child, parent, "toolu_01")
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
        page.screenshot(path=str(tmp_path / f"multi-agent-{'nested' if nested else 'siblings'}.png"), full_page=True)
    assert _page_transcripts(page) == [reconstruct(lines).to_dict()]
    assert page.locator(f".agent[data-agent='{parent}']").count() == 1
    assert page.locator(f".agent[data-agent='{child}']").count() == 1
    inside = page.locator(f".agent[data-agent='{parent}'] [data-tool-use-id='toolu_01'] .agent[data-agent='{child}']")
    assert inside.count() == (1 if nested else 0)
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
    assert page.locator("[role=alert]").count() == 0


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
