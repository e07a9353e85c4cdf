"""The page resumes a run with its link, never with the bearer (spec server [RL2-e], issue 39 §3).

One ``agent-ref serve --jwt-secret-file`` started as a user starts it; alice's PyJWT token is
in the page's session, as the token dialog leaves it. The page is served through a TCP
proxy of the test (``proxy_support.AnswerCuttingProxy``) that cuts the answer of the run's
``POST /agent/run`` once, a few events in, so the request heads the server was sent are
read from the proxy: the page's resumption is ``?token=`` of its run with no
``Authorization``, and its transcript is what ``envelope`` rebuilds from the stored stream
(strict validator). A link the server refuses is put in the page's way by rewriting the
first resumption's URL (Playwright's ``route``) to an expired or a forged link: the expired
one is refreshed once (``POST .../link`` with the bearer) and the run read to its end; the
forged one ends the turn with an error. The token dialog never opens and the token stays.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import pytest

from agent_ref.server.links import link_keys
from browser.page_support import page_transcripts, stored_responses
from envelope import reconstruct
from envelope.delivery import mint as mint_link
from principals_support import mint
from proxy_support import AnswerCuttingProxy
from serve_cli_support import agent_ref_serve

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

PROMPT = "What is 5 + (10 * 2)?"
#: Bytes of the run's first answer (its head is about 500) the proxy passes before it cuts: a few events in.
CUT = 2000
#: Records whether the page ever opened a modal dialog (the token dialog is its only one).
WATCH_MODAL = """
const showModal = HTMLDialogElement.prototype.showModal;
HTMLDialogElement.prototype.showModal = function () {
  window.modalOpened = (window.modalOpened || []).concat(this.id);
  return showModal.call(this);
};
"""
_LINE = re.compile(r"(get|post) (\S+) http/1\.1\r\n")


class Served:
    """A JWT server behind the cutting proxy, alice's token, and the page's session holding it."""

    def __init__(self, base: str, secret: bytes, proxy: AnswerCuttingProxy) -> None:
        self.base = base
        self.secret = secret
        self.proxy = proxy
        self.alice = mint(secret, "alice")

    @property
    def page_url(self) -> str:
        return f"http://127.0.0.1:{self.proxy.port}/"

    def heads(self) -> list[tuple[str, str, str]]:
        """``(method, target, head)`` of every request of a run the proxy passed on (lower-cased; not the runs list's)."""
        out = []
        for head in self.proxy.requests():
            line = _LINE.match(head)
            assert line is not None, head
            if line.group(2).startswith("/agent/") and line.group(2) != "/agent/runs":  # [PL1-b] reads the list
                out.append((line.group(1), line.group(2), head))
        return out

    def ask(self, page: Any) -> None:
        """Open the page with alice's token in its session, send the prompt, wait for the turn's end."""
        page.add_init_script(f"sessionStorage.setItem('agent-ref-token', {self.alice!r})")
        page.add_init_script(WATCH_MODAL)
        page.goto(self.page_url)
        page.wait_for_selector("body[data-ready='true']")
        page.fill("#prompt", PROMPT)
        page.click("#send")
        # the turn's end, or the token dialog (a page that would wait there for the user fails at once)
        page.wait_for_function("() => document.body.dataset.done === '1' || (window.modalOpened || []).length > 0")

    def stored(self, page: Any) -> list[bytes]:
        """The page's run as the server replays it (strict validator inside)."""
        run_id: str = page.evaluate("() => window.agentRef.turns[0].responses[0].runId")
        (lines,) = stored_responses(self.base, run_id, 1, token=self.alice)
        return lines


@pytest.fixture
def allowed_errors() -> list[str]:
    """The browser reports the proxy's cut of the POST's answer as a console error."""
    return ["net::ERR_INCOMPLETE_CHUNKED_ENCODING"]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """``agent-ref serve --jwt-secret-file`` (scripted model) behind the proxy that cuts the run's POST once."""
    secret = secrets.token_hex(32).encode()
    (tmp_path / "jwt.secret").write_bytes(secret + b"\n")
    flags = ("--db", str(tmp_path / "a.db"), "--jwt-secret-file", str(tmp_path / "jwt.secret"))
    with agent_ref_serve(*flags) as base:
        host, port = base.removeprefix("http://").split(":")
        proxy = AnswerCuttingProxy(host, int(port), "POST /agent/run ", CUT)
        try:
            yield Served(base, secret, proxy)
        finally:
            proxy.close()


def _streams(heads: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [h for h in heads if h[0] == "get" and "/stream" in h[1]]


def _token_untouched(page: Any, served: Served) -> None:
    """No modal dialog opened and the session still holds alice's token."""
    assert page.evaluate("() => window.modalOpened || []") == []
    assert page.evaluate("() => sessionStorage.getItem('agent-ref-token')") == served.alice


def _bad_link(served: Served, run_id: str, kind: str) -> str:
    """An expired link of the run (the server's own key, minted ten minutes ago), or a forged one."""
    if kind == "expired":
        keys = list(link_keys(None, served.secret.decode()))  # [RL3-a]: the key derived from the JWT secret
        return mint_link(keys, run_id, ttl=300, now=time.time() - 600)
    return mint_link([b"a key this server never held"], run_id, ttl=300)


def _swap_first_link(page: Any, served: Served, kind: str) -> list[str]:
    """Rewrite the page's first linked GET to carry a ``kind`` link; the list gets ``[sent, put]``."""
    swapped: list[str] = []

    def handle(route: Any) -> None:
        if swapped:
            route.continue_()
            return
        parts = urlsplit(route.request.url)
        run_id = parts.path.split("/")[3]
        bad = _bad_link(served, run_id, kind)
        swapped.extend([parse_qs(parts.query)["token"][0], bad])
        route.continue_(url=urlunsplit(parts._replace(query=f"token={bad}")))

    page.route(re.compile(r"/agent/runs/[^/]+/stream\?token="), handle)
    return swapped


def _cut_post(served: Served, heads: list[tuple[str, str, str]]) -> tuple[str, str, str]:
    """The run's one POST, sent with alice's bearer, and cut by the proxy."""
    assert served.proxy.made == 1, "the proxy cut the run's first answer"
    posts = [h for h in heads if h[1] == "/agent/run"]
    assert len(posts) == 1
    assert f"authorization: bearer {served.alice.lower()}" in posts[0][2]
    return posts[0]


def test_rl2_e_the_page_resumes_with_the_link_and_no_bearer(page: Any, served: Served) -> None:
    """[RL2-e]: the POST had the bearer; the page's resumption is ``?token=`` with no Authorization; same transcript."""
    served.ask(page)
    assert page.evaluate("() => document.body.dataset.state") == "idle"
    stored = served.stored(page)
    heads = served.heads()
    _cut_post(served, heads)
    run_id = page.evaluate("() => window.agentRef.turns[0].responses[0].runId")
    assert [h[0] for h in heads] == ["post", "get"]
    (resumed,) = _streams(heads)
    assert resumed[1].startswith(f"/agent/runs/{run_id}/stream?token=")
    assert "\r\nauthorization:" not in resumed[2]
    assert "\r\nlast-event-id: " in resumed[2]  # a few events had arrived before the cut
    assert page.evaluate("() => window.agentRef.turns[0].responses[0].reconnects") == 1
    assert page_transcripts(page) == [reconstruct(stored).to_dict()]
    _token_untouched(page, served)


def test_rl2_e_an_expired_link_is_refreshed_once_and_the_page_goes_on(
    page: Any, served: Served, allowed_errors: list[str]
) -> None:
    """[RL2-e] [RL2-b]: GET with the expired link (401), POST .../link with the bearer, GET with the new link; no dialog."""
    allowed_errors.append("401 (Unauthorized)")  # the browser logs the refused GET
    swapped = _swap_first_link(page, served, "expired")
    served.ask(page)
    assert page.evaluate("() => document.body.dataset.state") == "idle"
    stored = served.stored(page)
    heads = served.heads()
    _cut_post(served, heads)
    kinds = [(m, "link" if t.endswith("/link") else t.split("?")[0].rsplit("/", 1)[-1]) for m, t, _ in heads]
    assert kinds == [("post", "run"), ("get", "stream"), ("post", "link"), ("get", "stream")], kinds
    first, second = _streams(heads)
    assert first[1].endswith(f"?token={swapped[1].lower()}")
    assert second[1] != first[1]  # the refreshed link (minted in the same second, it may equal the POST's)
    assert f"authorization: bearer {served.alice.lower()}" in heads[2][2]
    assert all("\r\nauthorization:" not in h[2] for h in (first, second))
    assert page_transcripts(page) == [reconstruct(stored).to_dict()]
    _token_untouched(page, served)


def test_rl2_e_a_forged_link_is_an_error_in_the_turn_and_no_dialog(
    page: Any, served: Served, allowed_errors: list[str]
) -> None:
    """[RL2-e]: a forged link is refused 401 ``token_bad_signature``: no refresh, an error, the token kept."""
    allowed_errors.append("401 (Unauthorized)")
    _swap_first_link(page, served, "forged")
    served.ask(page)
    assert page.evaluate("() => document.body.dataset.state") == "error"
    served.stored(page)  # the run itself went on on the server: strictly valid
    heads = served.heads()
    _cut_post(served, heads)
    assert [h[0] for h in heads] == ["post", "get"]  # no refresh of a forged link
    assert "\r\nauthorization:" not in heads[1][2]
    said = page.locator(".turn .error").inner_text()
    assert "token_bad_signature" in said or "401" in said, said
    assert "token=" not in said  # the link stays out of the error's text
    _token_untouched(page, served)
