"""Resume links of ``agent-ref serve`` (spec server §RL): one run's stream, in the query string only.

Every stream a test receives is validated strictly as raw SSE bytes.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import ServerConfig, create_app
from agent_ref.server.links import LINK_TTL_SECONDS, LinkKeyError, link_keys
from envelope.delivery import mint, verify
from server_support import get, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

TOKEN = "s3cret-bearer-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
KEYS = link_keys(None, TOKEN)


def _app(tmp_path: Path, **config: object) -> object:
    cfg = ServerConfig(token=TOKEN, link_keys=KEYS, **config)  # type: ignore[arg-type]
    return create_app(store=SQLiteStore(tmp_path / "a.db"), model_factory=ScriptedModel, config=cfg)


def test_a_run_answers_a_link_and_the_stream_takes_it_instead_of_the_bearer(tmp_path: Path) -> None:
    """The run's answer carries a link; the stream takes ``?token=`` alone; a link begets none [RL1-a] [RL1-b] [RL1-d]."""
    with running(_app(tmp_path)) as base:
        first = post(base, "/agent/run", {"prompt": "What is 2 + 2?"}, headers=BEARER)
        run_id = first.headers["x-run-id"]
        token = first.headers["x-resume-token"]
        followed = get(base, f"/agent/runs/{run_id}/stream?token={token}")
        no_bearer = get(base, f"/agent/runs/{run_id}/stream")
    assert first.status_code == 200
    assert_valid(first.content)
    expires = int(first.headers["x-resume-expires"])
    assert verify(KEYS, token, run_id) == expires
    assert 0 < expires - time.time() <= LINK_TTL_SECONDS  # [RL1-b]: five minutes at most
    assert followed.status_code == 200, followed.text
    assert_valid(followed.content)
    assert followed.content == first.content  # the whole response, replayed from its start
    assert "x-resume-token" not in followed.headers  # [RL1-d]: a link never renews itself
    assert no_bearer.status_code == 401


def test_a_link_grants_no_other_run_and_no_other_endpoint(tmp_path: Path) -> None:
    """Another run's link is 404; ``?token=`` on every other endpoint is ignored, so those stay 401 [RL1-a]."""
    with running(_app(tmp_path)) as base:
        one = post(base, "/agent/run", {"prompt": "What is 2 + 2?"}, headers=BEARER)
        two = post(base, "/agent/run", {"prompt": "hello there"}, headers=BEARER)
        run_one, run_two = one.headers["x-run-id"], two.headers["x-run-id"]
        token = one.headers["x-resume-token"]
        agent = one.headers["x-agent-uuid"]
        wrong_run = get(base, f"/agent/runs/{run_two}/stream?token={token}")
        q = f"?token={token}"
        elsewhere = {
            "messages": post(base, f"/agent/runs/{run_one}/messages{q}", {"text": "hi"}),
            "stop": post(base, f"/agent/runs/{run_one}/stop{q}", {}),
            "link": post(base, f"/agent/runs/{run_one}/link{q}", {}),
            "run": post(base, f"/agent/run{q}", {"prompt": "hi", "agent_uuid": agent}),
            "tool_results": post(base, f"/agent/tool_results{q}", {"agent_uuid": agent, "tool_results": []}),
        }
    assert wrong_run.status_code == 404
    assert wrong_run.json()["error"]["type"] == "unknown_run"
    for name, answer in elsewhere.items():
        assert answer.status_code == 401, (name, answer.status_code, answer.text)
        assert answer.json()["error"]["type"] == "unauthorized", name


def test_an_expired_forged_or_malformed_link_is_401_saying_which(tmp_path: Path) -> None:
    """Expired: 401 ``token_expired`` naming the refresh; forged and malformed say so, and nothing more [RL1-a]."""
    with running(_app(tmp_path)) as base:
        run_id = post(base, "/agent/run", {"prompt": "What is 2 + 2?"}, headers=BEARER).headers["x-run-id"]
        old = mint(KEYS, run_id, ttl=60, now=time.time() - 3600)
        good = mint(KEYS, run_id)
        forged = good[:-2] + ("AA" if not good.endswith("AA") else "BB")
        other_key = mint(b"another-key-of-sixteen-bytes", run_id)
        answers = {
            "token_expired": get(base, f"/agent/runs/{run_id}/stream?token={old}"),
            "token_bad_signature": get(base, f"/agent/runs/{run_id}/stream?token={forged}"),
            "token_bad_signature ": get(base, f"/agent/runs/{run_id}/stream?token={other_key}"),
            "token_malformed": get(base, f"/agent/runs/{run_id}/stream?token=e1.nope"),
        }
        with_bearer_too = get(base, f"/agent/runs/{run_id}/stream?token={old}", headers=BEARER)
    for kind, answer in answers.items():
        assert answer.status_code == 401, (kind, answer.text)
        error = answer.json()["error"]
        assert error["type"] == kind.strip()
    assert "expired" in answers["token_expired"].json()["error"]["message"]
    assert "/link" in answers["token_expired"].json()["error"]["message"]  # says how to get a new one
    assert with_bearer_too.status_code == 401  # [RL1-a]: a link given is judged alone, never a fallback


def test_post_link_refreshes_a_known_run_for_the_bearer(tmp_path: Path) -> None:
    """``POST /agent/runs/{id}/link``: a fresh link with the bearer; unknown run 404; without it 401 [RL1-e]."""
    with running(_app(tmp_path)) as base:
        run_id = post(base, "/agent/run", {"prompt": "What is 2 + 2?"}, headers=BEARER).headers["x-run-id"]
        fresh = post(base, f"/agent/runs/{run_id}/link", {}, headers=BEARER)
        unknown = post(base, "/agent/runs/run-no-such/link", {}, headers=BEARER)
        anonymous = post(base, f"/agent/runs/{run_id}/link", {})
        followed = get(base, fresh.json()["stream"])
    assert fresh.status_code == 200, fresh.text
    body = fresh.json()
    assert body["run_id"] == run_id
    assert verify(KEYS, body["token"], run_id) == body["expires_at"]
    assert body["stream"] == f"/agent/runs/{run_id}/stream?token={body['token']}"
    assert followed.status_code == 200
    assert_valid(followed.content)
    assert unknown.status_code == 404
    assert anonymous.status_code == 401


def test_without_keys_there_are_no_links(tmp_path: Path) -> None:
    """No ``--token`` and no key file: no link header, ``POST .../link`` 404 ``links_off`` [RL1-c]."""
    app = create_app(store=SQLiteStore(tmp_path / "a.db"), model_factory=ScriptedModel)
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": "What is 2 + 2?"})
        link = post(base, f"/agent/runs/{first.headers['x-run-id']}/link", {})
    assert_valid(first.content)
    assert "x-resume-token" not in first.headers
    assert link.status_code == 404
    assert link.json()["error"]["type"] == "links_off"


def test_link_keys_from_a_file_rotate_and_refuse_short_keys(tmp_path: Path) -> None:
    """The first key signs, every key is accepted; derived keys differ by token; bad files name the line [RL1-c]."""
    keys = tmp_path / "keys"
    keys.write_text("# new key first\nnew-key-of-sixteen-bytes\n\nold-key-of-sixteen-bytes\n", encoding="utf-8")
    both = link_keys(keys, "ignored-when-a-file-is-given")
    assert both == (b"new-key-of-sixteen-bytes", b"old-key-of-sixteen-bytes")
    by_old = mint(b"old-key-of-sixteen-bytes", "run-1")
    assert verify(list(both), by_old, "run-1") > 0  # rotation: the old key's links still work
    assert link_keys(None, "a") != link_keys(None, "b")
    assert link_keys(None, None) == ()
    assert link_keys(None, "t")[0] != b"t"  # derived, not the bearer itself
    short = tmp_path / "short"
    short.write_text("good-key-of-sixteen-bytes\ntoo-short\n", encoding="utf-8")
    with pytest.raises(LinkKeyError, match=r"short:2: a key of 9 bytes"):
        link_keys(short, None)
    empty = tmp_path / "empty"
    empty.write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(LinkKeyError, match="no key"):
        link_keys(empty, None)
    with pytest.raises(LinkKeyError, match="cannot read"):
        link_keys(tmp_path / "missing", None)
