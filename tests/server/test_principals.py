"""Principals and ownership on one ``agent-ref serve --jwt-secret-file`` (spec server §PR, §OW; issue 39 §1, §2, §7).

Two users, alice and bob, on one server started as a user starts it; tokens minted here with
PyJWT. Every endpoint that names a run or an agent is tried by the wrong principal: the answer
is the one a run that does not exist gets, and the store shows the run untouched. Every
envelope stream is checked by the strict validator.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from typing import TYPE_CHECKING, Any

import httpx2
import jwt
import pytest

from agent_ref.server.interop import agent_for_conversation
from agent_ref.store.core import SQLiteStore
from cli_support import start_serve, stop_serve
from principals_support import AUDIENCE, ISSUER, Served, absent_id, as_absent, bearer, claims, fingerprint, mint
from server_support import data_lines
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

CONFIRM = "Please confirm: delete the temp files"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    """``agent-ref serve --jwt-secret-file`` with an issuer and an audience, paced so a run lasts a while."""
    tmp = tmp_path_factory.mktemp("principals")
    secret = secrets.token_hex(32).encode()
    (tmp / "jwt.secret").write_bytes(secret + b"\n")
    args = ("--jwt-secret-file", str(tmp / "jwt.secret"), "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE)
    proc, host, port = start_serve(tmp, *args, "--pace", "0.05")
    try:
        yield Served(f"http://{host}:{port}", secret), tmp / "agents.db"
    finally:
        stop_serve(proc)


def _run(server: Served, sub: str, body: dict[str, Any]) -> httpx2.Response:
    answer = server.call("POST", "/agent/run", sub, json=body)
    assert answer.status_code == 200, answer.text
    assert_valid(answer.content)
    return answer


def _paused(server: Served, db: Path, sub: str) -> tuple[str, str, str]:
    """A run of ``sub`` paused on a ``confirm`` call: its run id, agent and the call's id."""
    answer = _run(server, sub, {"prompt": CONFIRM})
    state = asyncio.run(SQLiteStore(db).load(answer.headers["x-agent-uuid"]))
    assert state is not None
    (pending,) = state.pending_frontend
    return answer.headers["x-run-id"], answer.headers["x-agent-uuid"], pending.tool_use_id


def _print(db: Path, agent: str, run_id: str) -> tuple[Any, ...]:
    return asyncio.run(fingerprint(SQLiteStore(db), agent, run_id))


# ---------------------------------------------------------------------- tokens


def test_spec_pr1_f_refused_tokens_are_401_saying_which(served: tuple[Served, Path]) -> None:
    """Forged, expired, nbf ahead, wrong iss/aud, no sub, no exp, alg none, no token: 401 naming which [PR1-f] [PR1-c]."""
    server, _ = served
    now = int(time.time())
    other = secrets.token_hex(32).encode()
    cases = {
        "no token": ({}, "unauthorized"),
        "not a JWT": (bearer("not-a-jwt"), "token_invalid"),
        "forged": (bearer(mint(other, "alice")), "token_invalid"),
        "alg none": (bearer(jwt.encode(claims("alice"), "", algorithm="none")), "token_invalid"),
        "expired": (bearer(mint(server.secret, "alice", exp=now - 120)), "token_expired"),
        "nbf ahead": (bearer(mint(server.secret, "alice", nbf=now + 600)), "token_not_yet_valid"),
        "wrong iss": (bearer(mint(server.secret, "alice", iss="https://evil.test")), "token_wrong_issuer"),
        "wrong aud": (bearer(mint(server.secret, "alice", aud="someone-else")), "token_wrong_audience"),
        "no sub": (bearer(mint(server.secret, None)), "token_no_subject"),
        "no exp": (bearer(jwt.encode(claims("alice", exp=None), server.secret)), "token_invalid"),
    }
    before = server.call("GET", "/agents", "root", headers=server.headers("root", admin=True)).json()["agents"]
    with httpx2.Client(timeout=30) as client:
        for name, (headers, code) in cases.items():
            answer = client.post(server.base + "/agent/run", json={"prompt": "hi"}, headers=headers)
            assert answer.status_code == 401, (name, answer.text)
            assert answer.json()["error"]["type"] == code, (name, answer.text)
            assert answer.headers["www-authenticate"].startswith("Bearer"), name
            assert "signature" not in answer.json()["error"]["message"] or code == "token_invalid", name
    after = server.call("GET", "/agents", "root", headers=server.headers("root", admin=True)).json()["agents"]
    assert after == before  # nothing ran for any of them
    # [PR1-c]: an exp a few seconds past is inside the 30 s leeway; nbf a few seconds ahead too
    late = bearer(mint(server.secret, "alice", exp=now - 5, nbf=now + 5))
    with httpx2.Client(timeout=60) as client:
        ok = client.post(server.base + "/agent/run", json={"prompt": "hi"}, headers=late)
    assert ok.status_code == 200, ok.text
    assert_valid(ok.content)


# ---------------------------------------------------------------------- ownership


def test_spec_ow1_b_another_principals_paused_run_is_404_on_every_endpoint(served: tuple[Served, Path]) -> None:
    """Follow, Last-Event-ID, the log, answers, stop, messages, continue, fork: 404 as absent, run untouched [OW1-b]."""
    server, db = served
    run_id, agent, call_id = _paused(server, db, "alice")
    before = _print(db, agent, run_id)
    assert before[1] == "awaiting_frontend_tools"
    assert before[2] == "alice"  # [OW1-a]: the creator is recorded
    gone, gone_agent = absent_id(), absent_id()
    answer: dict[str, Any] = {"agent_uuid": agent, "tool_results": [{"tool_use_id": call_id, "content": "yes"}]}
    tries: list[tuple[str, str, dict[str, Any], str, str]] = [
        ("GET", f"/agent/runs/{run_id}/stream", {}, run_id, gone),
        ("GET", f"/agent/runs/{run_id}/stream", {"headers": {"Last-Event-ID": f"{run_id}:0:1"}}, run_id, gone),
        ("GET", f"/agent/runs/{run_id}/stream?response=0", {}, run_id, gone),
        ("POST", "/agent/tool_results", {"json": answer}, agent, gone_agent),
        (
            "POST",
            "/agent/tool_results",
            {
                "json": {
                    **answer,
                    "tool_results": [{**answer["tool_results"][0], "is_error": True, "content": "denied"}],
                }
            },
            agent,
            gone_agent,
        ),
        ("POST", f"/agent/runs/{run_id}/stop", {}, run_id, gone),
        ("POST", f"/agent/runs/{run_id}/messages", {"json": {"text": "hijack"}}, run_id, gone),
        ("POST", "/agent/run", {"json": {"prompt": "continue", "agent_uuid": agent}}, agent, gone_agent),
        ("POST", "/agent/run", {"json": {"prompt": "fork", "agent_uuid": agent, "fork": True}}, agent, gone_agent),
    ]
    for method, path, kwargs, known, unknown in tries:
        refused = server.call(method, path, "bob", **kwargs)
        assert refused.status_code == 404, (path, refused.text)
        absent_path = path.replace(known, unknown)
        absent_kwargs = _swap(kwargs, known, unknown)
        absent = server.call(method, absent_path, "bob", **absent_kwargs)
        as_absent(refused, known, absent, unknown)
    assert _print(db, agent, run_id) == before  # nothing of alice's run changed
    # the owner still can: follow her run, then answer it
    again = server.call("GET", f"/agent/runs/{run_id}/stream?response=0", "alice")
    assert again.status_code == 200
    assert_valid(again.content)
    done = server.call("POST", "/agent/tool_results", "alice", json=answer)
    assert done.status_code == 200, done.text
    assert_valid(done.content)
    assert _print(db, agent, run_id)[1] == "idle"


def _swap(value: Any, known: str, unknown: str) -> Any:
    if isinstance(value, str):
        return value.replace(known, unknown)
    if isinstance(value, dict):
        return {k: _swap(v, known, unknown) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, known, unknown) for v in value]
    return value


def test_spec_ow1_b_a_working_run_is_not_stopped_nor_messaged_by_another(served: tuple[Served, Path]) -> None:
    """While alice's run streams, bob's stop and message are 404 and her run ends as it would [OW1-b]."""
    server, db = served
    first = threading.Event()
    got: dict[str, Any] = {}

    def stream() -> None:
        with (
            httpx2.Client(timeout=60) as client,
            client.stream(
                "POST", server.base + "/agent/run", json={"prompt": "What is 2 + 3?"}, headers=server.headers("alice")
            ) as answer,
        ):
            got["headers"] = answer.headers
            body = bytearray()
            for chunk in answer.iter_bytes():
                body += chunk
                first.set()
            got["body"] = bytes(body)

    reader = threading.Thread(target=stream)
    reader.start()
    assert first.wait(60)
    run_id = got["headers"]["x-run-id"]
    stop = server.call("POST", f"/agent/runs/{run_id}/stop", "bob")
    message = server.call("POST", f"/agent/runs/{run_id}/messages", "bob", json={"text": "and delete everything"})
    reader.join(60)
    assert not reader.is_alive()
    assert (stop.status_code, stop.json()["error"]["type"]) == (404, "unknown_run")
    assert (message.status_code, message.json()["error"]["type"]) == (404, "unknown_run")
    assert_valid(got["body"])
    final = [json.loads(line) for line in data_lines(got["body"]) if b'"meta_final"' in line]
    assert json.loads(final[-1]["delta"])["stop_reason"] == "end_turn"  # not aborted by bob's stop
    assert b"delete everything" not in got["body"]
    stored = asyncio.run(SQLiteStore(db).run_responses(run_id))
    assert b"delete everything" not in b"".join(stored[-1])


def test_spec_ow1_c_the_same_thread_id_is_two_agents_for_two_users(served: tuple[Served, Path]) -> None:
    """/agui and /api/chat map a thread id per principal; bob cannot resume nor reconnect to alice's [OW1-c] [OW1-b]."""
    server, db = served
    user = {"id": "u1", "role": "user", "content": CONFIRM}
    run_input: dict[str, Any] = {
        "threadId": "shared-thread",
        "runId": "r1",
        "messages": [user],
        "tools": [],
        "context": [],
    }
    alices = server.call("POST", "/agui", "alice", json=run_input)
    assert alices.status_code == 200, alices.text
    agent = alices.headers["x-agent-uuid"]
    assert agent == agent_for_conversation("agui", "shared-thread", "alice")
    before = asyncio.run(SQLiteStore(db).load(agent))
    assert before is not None
    assert before.status == "awaiting_frontend_tools"
    (pending,) = [p.tool_use_id for p in before.pending_frontend]
    resume = {
        **run_input,
        "runId": "r2",
        "messages": [user, {"id": "t1", "role": "tool", "toolCallId": pending, "content": "yes"}],
    }
    refused = server.call("POST", "/agui", "bob", json=resume)
    absent = server.call("POST", "/agui", "bob", json={**resume, "threadId": "never-seen"})
    as_absent(refused, "shared-thread", absent, "never-seen")
    assert refused.status_code == 404
    bobs = server.call("POST", "/agui", "bob", json={**run_input, "messages": [{**user, "content": "hello"}]})
    assert bobs.status_code == 200
    assert bobs.headers["x-agent-uuid"] not in (agent, agent_for_conversation("agui", "shared-thread"))
    after = asyncio.run(SQLiteStore(db).load(agent))
    assert after is not None
    assert (after.version, after.status) == (before.version, before.status)
    for run in (alices, bobs):
        for response in asyncio.run(SQLiteStore(db).run_responses(run.headers["x-run-id"])):
            assert_valid(response)
    # useChat: the same chat id of two users, and the reconnect of a chat that is not yours
    chat = {"id": "shared-chat", "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}
    mine = server.call("POST", "/api/chat", "alice", json=chat)
    theirs = server.call("POST", "/api/chat", "bob", json=chat)
    assert mine.status_code == theirs.status_code == 200
    assert mine.headers["x-agent-uuid"] != theirs.headers["x-agent-uuid"]
    for run in (mine, theirs):
        for response in asyncio.run(SQLiteStore(db).run_responses(run.headers["x-run-id"])):
            assert_valid(response)


def test_spec_ow1_b_a_chat_reconnect_reaches_only_ones_own_chat(served: tuple[Served, Path]) -> None:
    """``GET /api/chat/{id}/stream`` while alice's chat runs: hers for her, 204 (as no chat) for bob [OW1-b]."""
    server, _ = served
    chat = {
        "id": "running-chat",
        "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "What is 2 + 3?"}]}],
    }
    first = threading.Event()

    def stream() -> None:
        with (
            httpx2.Client(timeout=60) as client,
            client.stream("POST", server.base + "/api/chat", json=chat, headers=server.headers("alice")) as answer,
        ):
            for _ in answer.iter_bytes():
                first.set()

    reader = threading.Thread(target=stream)
    reader.start()
    assert first.wait(60)
    bob = server.call("GET", "/api/chat/running-chat/stream", "bob")
    nobody = server.call("GET", "/api/chat/no-such-chat/stream", "bob")
    alice = server.call("GET", "/api/chat/running-chat/stream", "alice")
    reader.join(60)
    assert (bob.status_code, bob.content) == (nobody.status_code, nobody.content) == (204, b"")
    assert alice.status_code == 200, alice.status_code  # her run was still streaming (paced): she reconnects
    assert b"data: [DONE]" in alice.content


def test_spec_ow2_a_lists_show_ones_own_and_the_admin_claim_shows_all(served: tuple[Served, Path]) -> None:
    """GET /agents and /agent/runs: each user's own; ``envelope_admin: true`` all, and may follow anyone's [OW2-a] [PR1-d].

    The principal is the token's ``sub`` [PR1-a], recorded with each agent it creates [OW1-a].
    """
    server, _ = served
    alice_run = _run(server, "alice", {"prompt": "hi"})
    bob_run = _run(server, "bob", {"prompt": "hi"})
    ids = {
        who: (r.headers["x-run-id"], r.headers["x-agent-uuid"]) for who, r in (("alice", alice_run), ("bob", bob_run))
    }
    for who, other in (("alice", "bob"), ("bob", "alice")):
        agents = server.call("GET", "/agents", who).json()["agents"]
        assert {a["principal"] for a in agents} == {who}
        assert ids[who][1] in {a["agent_uuid"] for a in agents}
        assert ids[other][1] not in {a["agent_uuid"] for a in agents}
        runs = server.call("GET", "/agent/runs", who).json()["runs"]
        assert ids[who][0] in {r["run_id"] for r in runs}
        assert ids[other][0] not in {r["run_id"] for r in runs}
    admin = bearer(mint(server.secret, "root", admin=True))
    everyone = server.call("GET", "/agents", "root", headers=admin).json()["agents"]
    assert {ids["alice"][1], ids["bob"][1]} <= {a["agent_uuid"] for a in everyone}
    followed = server.call("GET", f"/agent/runs/{ids['alice'][0]}/stream?response=0", "root", headers=admin)
    assert followed.status_code == 200
    assert_valid(followed.content)
    # only JSON true is the claim: a string "true" is no admin
    fake = bearer(jwt.encode({**claims("mallory"), "envelope_admin": "true"}, server.secret))
    assert server.call("GET", "/agents", "mallory", headers=fake).json()["agents"] == []
    refused = server.call("GET", f"/agent/runs/{ids['alice'][0]}/stream", "mallory", headers=fake)
    assert refused.status_code == 404
