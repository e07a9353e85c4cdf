"""Issue 39's walk in chromium: the page opened on a run's link shows it to its owner only (spec server [OW1-b]).

One ``agent-ref serve --jwt-secret-file`` started as a user starts it; alice's run is started
over HTTP with her PyJWT token. The page opened at ``#run=ID`` with her token in its session
shows her run, as the server replays it (strict validator); with bob's it shows an error and
nothing of hers.
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Any

from browser.page_support import page_transcripts, stored_responses
from envelope import reconstruct
from principals_support import bearer, mint
from serve_cli_support import agent_ref_serve
from server_support import post
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

ALICE_SAYS = "alice-only-words: What is 2 + 2?"


def _open(page: Any, base: str, token: str, run_id: str) -> None:
    """The page at ``#run=run_id`` with ``token`` in its session, as the token dialog leaves it."""
    page.add_init_script(f"sessionStorage.setItem('agent-ref-token', {token!r})")
    page.goto(f"{base}/#run={run_id}")
    page.wait_for_selector("body[data-ready='true']")


def test_the_page_shows_alices_run_to_her_and_not_to_bob(
    browser: Any, page: Any, tmp_path: Path, allowed_errors: list[str]
) -> None:
    """[OW1-b]: alice's page rebuilds her run; bob's page on the same link says it is unknown and shows none of it."""
    allowed_errors.append("404 (Not Found)")  # the browser logs bob's refused request
    secret = secrets.token_hex(32).encode()
    (tmp_path / "jwt.secret").write_bytes(secret + b"\n")
    alice, bob = mint(secret, "alice"), mint(secret, "bob")
    flags = ("--db", str(tmp_path / "a.db"), "--jwt-secret-file", str(tmp_path / "jwt.secret"))
    with agent_ref_serve(*flags) as base:
        answer = post(base, "/agent/run", {"prompt": ALICE_SAYS}, headers=bearer(alice))
        assert answer.status_code == 200, answer.text
        assert_valid(answer.content)
        run_id = answer.headers["x-run-id"]
        (stored,) = stored_responses(base, run_id, 1, token=alice)  # strict validator inside
        _open(page, base, alice, run_id)
        page.wait_for_selector("body[data-state='idle']")
        hers = page_transcripts(page)
        other = browser.new_page()
        try:
            _open(other, base, bob, run_id)
            other.wait_for_selector("body[data-state='error']")
            bobs = page_transcripts(other)
            said = other.locator("body").inner_text()
        finally:
            other.close()
    assert hers == [reconstruct(stored).to_dict()]
    assert "alice-only-words" in page.locator("body").inner_text()
    assert "alice-only-words" not in said
    assert "unknown_run: no such run" in said  # the absent id's words: nothing says it exists
    assert all("alice-only-words" not in str(t) for t in bobs)
