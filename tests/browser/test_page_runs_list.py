"""The page lists one's own runs and opens them (spec server §PL1, issue 39's done-when).

One ``agent-ref serve --jwt-secret-file`` started as a user starts it (scripted model) for
the module; each principal's runs are started over HTTP with their PyJWT token (each answer
through the strict validator), and each page holds one principal's token in its session,
as the token dialog leaves it. alice's and bob's pages list only their own runs, newest
first; clicking one of alice's rebuilds it as ``envelope`` rebuilds the stored stream; a run
started on the page is listed while it waits and again when it ends; the list's edges: no
runs, more than it shows, and a page the server refuses (no dialog, the token kept).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

import pytest

from browser.page_support import page_transcripts, run_id, stored_responses
from envelope import reconstruct
from principals_support import bearer, mint
from serve_cli_support import agent_ref_serve
from server_support import get, post
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

#: The list's bound (``RUNS_SHOWN`` in web/app.js, spec server [PL1-c]).
SHOWN = 20
#: Records whether the page ever opened a modal dialog (the token dialog is its only one).
WATCH_MODAL = """
const showModal = HTMLDialogElement.prototype.showModal;
HTMLDialogElement.prototype.showModal = function () {
  window.modalOpened = (window.modalOpened || []).concat(this.id);
  return showModal.call(this);
};
"""


class Server:
    """The module's server: its URL, the tokens of its principals, and starting runs as one."""

    def __init__(self, base: str, secret: bytes) -> None:
        self.base = base
        self.secret = secret
        self.tokens: dict[str, str] = {}

    def token(self, sub: str) -> str:
        return self.tokens.setdefault(sub, mint(self.secret, sub))

    def start(self, sub: str, prompt: str, agent_uuid: str | None = None) -> tuple[str, str]:
        """A run of ``sub`` (continuing ``agent_uuid``): its run id and agent, the answer strictly valid."""
        body = {"prompt": prompt} | ({"agent_uuid": agent_uuid} if agent_uuid else {})
        answer = post(self.base, "/agent/run", body, headers=bearer(self.token(sub)))
        assert answer.status_code == 200, answer.text
        assert_valid(answer.content)
        return answer.headers["x-run-id"], answer.headers["x-agent-uuid"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("runs-list")
    secret = secrets.token_hex(32).encode()
    (tmp / "jwt.secret").write_bytes(secret + b"\n")
    with agent_ref_serve("--db", str(tmp / "a.db"), "--jwt-secret-file", str(tmp / "jwt.secret")) as base:
        yield Server(base, secret)


def _open(page: Any, server: Server, token: str | None, hash_: str = "") -> None:
    """The page with ``token`` in its session (``None``: none), watched for modal dialogs."""
    if token is not None:
        page.add_init_script(f"sessionStorage.setItem('agent-ref-token', {token!r})")
    page.add_init_script(WATCH_MODAL)
    page.goto(f"{server.base}/{hash_}")
    page.wait_for_selector("body[data-ready='true']")


def _listed(page: Any, count: int) -> list[str]:
    """Open the list and wait until it shows ``count`` runs; their ids, top to bottom."""
    if not page.evaluate("() => document.querySelector('#runs').open"):
        page.click("#runs summary")
    page.wait_for_function(f"() => document.querySelectorAll('#runs-list li').length === {count}")
    ids: list[str] = page.evaluate("() => [...document.querySelectorAll('#runs-list li')].map(li => li.dataset.runId)")
    return ids


def _note(page: Any) -> str:
    text: str = page.evaluate(
        "() => document.querySelector('#runs-note').hidden ? '' : document.querySelector('#runs-note').textContent"
    )
    return text


def test_pl1_a_each_page_lists_only_its_own_runs_newest_first(
    browser: Any, page: Any, server: Server, tmp_path: Path
) -> None:
    """[PL1-a] [PL1-f]: alice sees her three runs newest first across conversations, each with its query; bob his one.

    alice's runs go conversation A, B, then A again: newest first is A's second, B's, A's
    first (grouped by conversation it would be A's two, then B's). The page's clock is set
    to 2 h 30 min after her newest run, so every line says "2 h ago".
    """
    a1, first_agent = server.start("alice", "alice-1: What is 2 + 2?")
    a3, _ = server.start("alice", "alice-3: What is 5 + (10 * 2)?")
    a2, _ = server.start("alice", "alice-2: and 3 + 3?", agent_uuid=first_agent)
    (b1, _) = server.start("bob", "bob-1: What is 2 + 2?")
    listed = get(server.base, "/agent/runs", headers=bearer(server.token("alice"))).json()["runs"]
    newest = max(r["updated_at"] for r in listed)
    page.clock.set_fixed_time(newest + 2.5 * 3600)  # Unix seconds
    _open(page, server, server.token("alice"))
    assert _listed(page, 3) == [a2, a3, a1]
    assert _note(page) == ""
    assert page.locator("#runs-count").inner_text() == "(3)"
    lines = page.locator("#runs-list li")
    assert lines.locator(".run-query").all_inner_texts() == [
        "alice-2: and 3 + 3?",
        "alice-3: What is 5 + (10 * 2)?",
        "alice-1: What is 2 + 2?",
    ]
    assert lines.locator(".run-time").all_inner_texts() == ["2 h ago"] * 3
    assert lines.first.locator(".run-status").inner_text() != ""
    assert lines.first.locator("a").get_attribute("title").startswith("alice-2: and 3 + 3?\nrun ")
    page.screenshot(path=str(tmp_path / "runs-list.png"))
    other = browser.new_context(viewport={"width": 1100, "height": 900})
    try:
        bobs = other.new_page()
        _open(bobs, server, server.token("bob"))
        assert _listed(bobs, 1) == [b1]
        said = bobs.locator("body").inner_text()
    finally:
        other.close()
    assert all(run[:8] not in said for run in (a1, a2, a3))
    assert "alice-" not in said


def test_pl1_f_a_long_query_is_cut_on_one_line_and_the_whole_listed_one_is_its_title(
    page: Any, server: Server, tmp_path: Path
) -> None:
    """[PL1-f] [OW2-b]: a prompt longer than the bound: one line (the text overflows, cut by CSS), the server's cut in the title."""
    prompt = "frank-1: What is 2 + 2? " + "and a long tail of words " * 20
    (run, _) = server.start("frank", prompt)
    _open(page, server, server.token("frank"))
    assert _listed(page, 1) == [run]
    query = page.locator("#runs-list li .run-query")
    shown = query.inner_text()
    assert shown.startswith("frank-1: What is 2 + 2? ")
    assert shown.endswith("\u2026")
    assert len(shown) == 200
    # Asked of the element in the page each time (bounded): the list is drawn again as runs change, so an
    # element found a moment before may be a detached one, with no size.
    page.wait_for_function(
        "() => { const el = document.querySelector('#runs-list li .run-query');"
        " return el !== null && el.scrollWidth > el.clientWidth && el.getClientRects().length === 1"
        " && getComputedStyle(el).textOverflow === 'ellipsis'; }",
        timeout=10_000,
    )
    assert page.locator("#runs-list li a").get_attribute("title").startswith(shown + "\nrun ")
    page.screenshot(path=str(tmp_path / "runs-list-long.png"))


def test_pl1_e_clicking_a_run_in_the_list_rebuilds_it(page: Any, server: Server) -> None:
    """[PL1-e]: a click on alice's oldest run opens it in place: the stored stream's transcript, strictly valid."""
    a1, _ = server.start("alice-e", "alice-e-1: What is 2 + 2?")
    a2, _ = server.start("alice-e", "alice-e-2: What is 5 + (10 * 2)?")
    _open(page, server, server.token("alice-e"))
    assert _listed(page, 2) == [a2, a1]
    page.click(f"#runs-list li[data-run-id='{a1}'] a")
    page.wait_for_selector("body[data-done='1']")
    assert page.evaluate("() => location.hash") == f"#run={a1}"
    assert page.evaluate("() => document.body.dataset.state") == "idle"
    (stored,) = stored_responses(server.base, a1, 1, token=server.token("alice-e"))  # strict validator
    assert page_transcripts(page) == [reconstruct(stored).to_dict()]
    assert page.locator(".turn .user").first.inner_text() == "alice-e-1: What is 2 + 2?"
    assert page.locator(f"#runs-list li[data-run-id='{a1}'] a").get_attribute("aria-current") == "true"


def test_pl1_b_a_run_of_the_page_is_listed_waiting_then_finished_and_no_other_opens_meanwhile(
    page: Any, server: Server
) -> None:
    """[PL1-b] [PL1-e]: paused, the page's run is listed waiting; a click on another run then opens nothing; its end is listed."""
    (older, _) = server.start("erin", "erin-1: What is 2 + 2?")
    _open(page, server, server.token("erin"))
    assert _listed(page, 1) == [older]
    page.fill("#prompt", "Please confirm: delete the temp files")
    page.click("#send")
    page.wait_for_selector("#confirm-dialog[open]")
    mine = run_id(page)
    page.click("#runs summary")  # closed; opened again below, which reads the list after the pause
    page.click("#runs summary")
    page.wait_for_selector(f"#runs-list li[data-run-id='{mine}'][data-status='awaiting_frontend_tools']")
    assert _listed(page, 2) == [mine, older]
    page.click(f"#runs-list li[data-run-id='{older}'] a")
    assert "wait for its end" in _note(page)
    assert page.evaluate("() => location.hash") == f"#run={mine}"
    page.click("#confirm-dialog .confirm")
    page.wait_for_selector("body[data-done='1']")
    page.wait_for_selector(f"#runs-list li[data-run-id='{mine}'][data-status='finished']")
    assert _listed(page, 2) == [mine, older]
    (stored,) = stored_responses(server.base, mine, 1, token=server.token("erin"))  # strict validator
    assert reconstruct(stored).to_dict()["agents"]


def test_pl1_c_the_list_shows_the_newest_twenty_and_says_how_many_more(page: Any, server: Server) -> None:
    """[PL1-c]: 21 runs: the newest 20 listed, the oldest left out, the note and the count say so."""
    runs = [server.start("dave", f"dave-{i}: What is 2 + 2?")[0] for i in range(SHOWN + 1)]
    _open(page, server, server.token("dave"))
    listed = _listed(page, SHOWN)
    assert listed == runs[::-1][:SHOWN]
    assert runs[0] not in listed
    assert _note(page) == f"1 older not shown (the list keeps the newest {SHOWN})."
    assert page.locator("#runs-count").inner_text() == f"({SHOWN + 1})"


def test_pl1_d_no_runs_and_a_refused_token_are_said_in_the_list(
    browser: Any, page: Any, server: Server, allowed_errors: list[str]
) -> None:
    """[PL1-d]: carol has none ("No runs yet"); a page with no token or a forged one: a line, no dialog, the token kept."""
    allowed_errors.append("401 (Unauthorized)")  # the browser logs the refused list requests
    _open(page, server, server.token("carol"))
    assert _listed(page, 0) == []
    page.wait_for_function("() => document.querySelector('#runs-count').textContent === '(0)'")
    assert _note(page).startswith("No runs yet")
    forged = mint(b"a secret this server never held, 32 bytes or more!", "carol")
    for token in (None, forged):
        context = browser.new_context()
        try:
            other = context.new_page()
            _open(other, server, token)
            other.click("#runs summary")
            other.wait_for_function("() => !document.querySelector('#runs-note').hidden")
            assert _note(other) == "Your runs are listed once the page has a token the server accepts."
            assert other.evaluate("() => window.modalOpened || []") == []
            assert other.evaluate("() => sessionStorage.getItem('agent-ref-token')") == token
            assert other.locator("#runs-list li").count() == 0
        finally:
            context.close()
