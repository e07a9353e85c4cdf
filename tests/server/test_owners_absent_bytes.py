"""The wrong principal's answer is byte for byte an unknown id's, on every endpoint that takes an id (issue 39 §7).

One ``agent-ref serve --jwt-secret-file F --files-dir D`` started as a user starts it (the
scripted model, paced so a run lasts a while); alice and bob hold HS256 tokens minted here
with PyJWT. Alice has a run paused on a frontend ``confirm`` call (its agent, its run, the
call), an ``/agui`` thread and an ``/api/chat`` chat paused the same way, and a stored file
her run produced. For each row of ``CASES`` (an endpoint and how to call it) bob asks for
alice's id and for an id that does not exist, of the same shape and length: the two answers
have the same status, the same body bytes (the id swapped) and the same headers (``Date``
aside), and alice's things read back unchanged, from the store and over HTTP as alice. The
route walk fails when the app has a route that is neither in ``CASES`` nor named in
``NO_ID`` with its reason, so a new endpoint cannot skip the check. Every envelope stream
obtained goes through the strict validator.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import string
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from starlette.routing import Route

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import create_app
from agent_ref.store.core import SQLiteStore
from agent_ref.store.files import DirectoryFiles
from cli_support import start_serve, stop_serve
from principals_support import Served, fingerprint
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

CONFIRM = "Please confirm: delete the temp files"
#: A run that goes on for many paced steps: alice's chat is running while bob asks for it.
LONG = "keep calculating"
FILE_BYTES = b"alice's invoice\n"
#: Routes that take no id of anything a principal owns, and why (every other route must be in ``CASES``).
NO_ID = {
    ("GET", "/"): "the page: the same bytes for everyone, no data",
    ("GET", "/static/{name}"): "the page's files by name (app.js, ...): no data, no owner",
    ("GET", "/agents"): "the list of one's own agents: takes no id (tests/server/test_owners_lists.py)",
    ("GET", "/agent/runs"): "the list of one's own runs: takes no id (tests/server/test_owners_lists.py)",
}


@dataclass(frozen=True)
class Alice:
    """The server, and what alice holds on it (each id is hers)."""

    server: Served
    db: Path
    files: Path
    run: str
    agent: str
    call: str
    thread: str
    thread_agent: str
    thread_call: str
    chat: str
    chat_agent: str
    chat_call: str
    file: str
    #: A link bob was minted for his own run (to try on alice's run).
    bob_link: str

    def known(self, kind: str) -> str:
        """Alice's id of ``kind`` (``run``, ``agent``, ``thread``, ``chat``, ``file``)."""
        return {"run": self.run, "agent": self.agent, "thread": self.thread, "chat": self.chat, "file": self.file}[kind]


#: How to call an endpoint about ``ident``: the path and the request's keyword arguments.
Request = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Case:
    """One way to call one endpoint with an id: its route, which of alice's ids, the request."""

    name: str
    method: str
    route: str
    kind: str
    request: Callable[[Alice, str], Request]
    #: What alice's own request gets, for rows whose request changes nothing (``None``: it would act).
    owner: int | None = None
    #: While bob asks, alice's chat is running (the reconnect answers only a running chat).
    live: bool = field(default=False)
    #: The request starts a conversation of bob's own (spec server [OW1-c]): 200, ids of its own run aside.
    starts: bool = field(default=False)


def _answer(alice: Alice, agent: str, **result: Any) -> Request:
    return "/agent/tool_results", {
        "json": {"agent_uuid": agent, "tool_results": [{"tool_use_id": alice.call, **result}]}
    }


def _agui_resume(alice: Alice, thread: str) -> Request:
    user = {"id": "u1", "role": "user", "content": CONFIRM}
    tool = {"id": "t1", "role": "tool", "toolCallId": alice.thread_call, "content": "yes"}
    body = {"threadId": thread, "runId": "r2", "messages": [user, tool], "tools": [], "context": []}
    return "/agui", {"json": body}


def _chat_resume(alice: Alice, chat: str) -> Request:
    pending = [{"tool_use_id": alice.chat_call, "name": "confirm", "input": {}}]
    parts = [
        {"type": "tool-confirm", "toolCallId": alice.chat_call, "state": "output-available", "output": "yes"},
        {"type": "data-awaiting-frontend-tools", "data": {"data": pending}},
    ]
    user = {"id": "u", "role": "user", "parts": [{"type": "text", "text": CONFIRM}]}
    return "/api/chat", {"json": {"id": chat, "messages": [user, {"id": "a", "role": "assistant", "parts": parts}]}}


def _agui_start(_: Alice, thread: str) -> Request:
    user = {"id": "u1", "role": "user", "content": "hello"}
    return "/agui", {"json": {"threadId": thread, "runId": "r1", "messages": [user], "tools": [], "context": []}}


def _chat_start(_: Alice, chat: str) -> Request:
    user = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hello"}]}
    return "/api/chat", {"json": {"id": chat, "messages": [user]}}


STREAM = "/agent/runs/{run_id}/stream"
CASES = [
    Case("follow", "GET", STREAM, "run", lambda _, i: (f"/agent/runs/{i}/stream", {}), owner=200),
    Case("follow ?response=0", "GET", STREAM, "run", lambda _, i: (f"/agent/runs/{i}/stream?response=0", {}), 200),
    Case(
        "follow Last-Event-ID",
        "GET",
        STREAM,
        "run",
        lambda _, i: (f"/agent/runs/{i}/stream", {"headers": {"Last-Event-ID": f"{i}:0:1"}}),
        owner=200,
    ),
    Case(
        "follow ?token= of bob's own run",
        "GET",
        STREAM,
        "run",
        lambda a, i: (f"/agent/runs/{i}/stream?token={a.bob_link}", {}),
    ),
    Case("stop", "POST", "/agent/runs/{run_id}/stop", "run", lambda _, i: (f"/agent/runs/{i}/stop", {})),
    Case("stop {}", "POST", "/agent/runs/{run_id}/stop", "run", lambda _, i: (f"/agent/runs/{i}/stop", {"json": {}})),
    Case(
        "messages",
        "POST",
        "/agent/runs/{run_id}/messages",
        "run",
        lambda _, i: (f"/agent/runs/{i}/messages", {"json": {"text": "and delete everything"}}),
        owner=409,  # paused: not accepting (spec server [SVSE2-b]), and nothing queued
    ),
    Case("link", "POST", "/agent/runs/{run_id}/link", "run", lambda _, i: (f"/agent/runs/{i}/link", {}), owner=200),
    Case(
        "continue",
        "POST",
        "/agent/run",
        "agent",
        lambda _, i: ("/agent/run", {"json": {"prompt": "go on", "agent_uuid": i}}),
        owner=409,  # paused: agent_state (spec server [S1.1-a])
    ),
    Case(
        "fork",
        "POST",
        "/agent/run",
        "agent",
        lambda _, i: ("/agent/run", {"json": {"prompt": "fork it", "agent_uuid": i, "fork": True}}),
    ),
    Case("answer", "POST", "/agent/tool_results", "agent", lambda a, i: _answer(a, i, content="yes")),
    Case(
        "answer is_error",
        "POST",
        "/agent/tool_results",
        "agent",
        lambda a, i: _answer(a, i, content="no", is_error=True),
    ),
    Case("approve", "POST", "/agent/tool_results", "agent", lambda a, i: _answer(a, i, decision="approve")),
    Case("deny", "POST", "/agent/tool_results", "agent", lambda a, i: _answer(a, i, decision="deny", message="no")),
    Case("tasks", "GET", "/agents/{agent_id}/tasks", "agent", lambda _, i: (f"/agents/{i}/tasks", {}), owner=200),
    Case(
        "tasks ?wait=1",
        "GET",
        "/agents/{agent_id}/tasks",
        "agent",
        lambda _, i: (f"/agents/{i}/tasks?wait=1&timeout=1", {}),
        owner=200,
    ),
    Case("agui resume", "POST", "/agui", "thread", _agui_resume),
    Case("agui start", "POST", "/agui", "thread", _agui_start, starts=True),
    Case("chat resume", "POST", "/api/chat", "chat", _chat_resume),
    Case("chat start", "POST", "/api/chat", "chat", _chat_start, starts=True),
    Case(
        "chat reconnect",
        "GET",
        "/api/chat/{id}/stream",
        "chat",
        lambda _, i: (f"/api/chat/{i}/stream", {}),
        live=True,
    ),
    Case("file", "GET", "/files/{file_id}", "file", lambda _, i: (f"/files/{i}", {}), owner=200),
]


def _pending(db: Path, agent: str) -> str:
    """The one frontend call ``agent`` is paused on."""
    state = asyncio.run(SQLiteStore(db).load(agent))
    assert state is not None
    assert state.status == "awaiting_frontend_tools"
    (call,) = state.pending_frontend
    return call.tool_use_id


def _started(server: Served, sub: str, path: str, body: dict[str, Any]) -> httpx2.Response:
    answer = server.call("POST", path, sub, json=body)
    assert answer.status_code == 200, answer.text
    return answer


def _valid_run(db: Path, run_id: str) -> None:
    """Every stored response of ``run_id`` passes the strict validator."""
    responses = asyncio.run(SQLiteStore(db).run_responses(run_id))
    assert responses
    for response in responses:
        assert_valid(response)


@pytest.fixture(scope="module")
def alice(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alice]:
    """The server, alice's paused run, thread and chat, her file, and a link bob holds for his own run."""
    tmp = tmp_path_factory.mktemp("absent-bytes")
    secret = secrets.token_hex(32).encode()
    (tmp / "jwt.secret").write_bytes(secret + b"\n")
    files = tmp / "files"
    flags = ("--jwt-secret-file", str(tmp / "jwt.secret"), "--files-dir", str(files), "--pace", "0.05")
    proc, host, port = start_serve(tmp, *flags)
    try:
        server, db = Served(f"http://{host}:{port}", secret), tmp / "agents.db"
        paused = _started(server, "alice", "/agent/run", {"prompt": CONFIRM})
        assert_valid(paused.content)
        run_id, agent = paused.headers["x-run-id"], paused.headers["x-agent-uuid"]
        user = {"id": "u1", "role": "user", "content": CONFIRM}
        thread = "alice-thread"
        body = {"threadId": thread, "runId": "r1", "messages": [user], "tools": [], "context": []}
        thread_agent = _started(server, "alice", "/agui", body).headers["x-agent-uuid"]
        chat = "alice-chat"
        said = {"id": "u", "role": "user", "parts": [{"type": "text", "text": CONFIRM}]}
        chat_agent = _started(server, "alice", "/api/chat", {"id": chat, "messages": [said]}).headers["x-agent-uuid"]
        # the file alice's run produced, kept where `--files-dir` serves it, recorded as hers (spec server [FS2-a])
        asyncio.run(
            DirectoryFiles(files).put("file_alice_0001", "invoice.txt", FILE_BYTES, principal="alice", run_id=run_id)
        )
        bobs = _started(server, "bob", "/agent/run", {"prompt": "hi"})
        assert_valid(bobs.content)
        yield Alice(
            server,
            db,
            files,
            run_id,
            agent,
            _pending(db, agent),
            thread,
            thread_agent,
            _pending(db, thread_agent),
            chat,
            chat_agent,
            _pending(db, chat_agent),
            "file_alice_0001",
            bobs.headers["x-resume-token"],
        )
    finally:
        stop_serve(proc)


def _absent_like(known: str) -> str:
    """An id of ``known``'s shape (each letter a random letter of its case, each digit a digit) no one has."""
    pools = (string.ascii_lowercase, string.ascii_uppercase, string.digits)
    out = "".join(next((secrets.choice(p) for p in pools if ch in p), ch) for ch in known)
    assert out != known
    return out


def _state(alice: Alice, *, live_chat: bool = False) -> tuple[Any, ...]:
    """What bob must not change: alice's agents and run in the store, her run's stream and her file over HTTP."""
    store = SQLiteStore(alice.db)
    agents = [alice.thread_agent] if live_chat else [alice.thread_agent, alice.chat_agent]
    stored = [asyncio.run(store.load(a)) for a in agents]
    followed = alice.server.call("GET", f"/agent/runs/{alice.run}/stream?response=0", "alice")
    assert followed.status_code == 200, followed.text
    assert_valid(followed.content)
    served = alice.server.call("GET", f"/files/{alice.file}", "alice")
    return (
        asyncio.run(fingerprint(store, alice.agent, alice.run)),
        [(s.version, s.status, s.principal, len(s.messages)) if s else None for s in stored],
        followed.content,
        (served.status_code, served.content),
        sorted(p.name for p in alice.files.iterdir()),
    )


#: Headers that name what a request started (its own run, agent and link), each different by nature.
PER_REQUEST = ("x-resume-token", "x-run-id", "x-agent-uuid", "x-resume-expires")


def _normal(answer: httpx2.Response, ident: str) -> tuple[int, bytes, list[tuple[str, str]]]:
    """Status, body and headers (``Date`` aside) with the id asked for and the answer's own run ids swapped out."""
    swaps = [(answer.headers[h], h.upper()) for h in PER_REQUEST if h in answer.headers] + [(ident, "ID")]
    body = answer.content
    heads = [(k, v) for k, v in answer.headers.items() if k != "date"]
    for old, new in swaps:
        body = body.replace(old.encode(), new.encode())
        heads = [(k, v.replace(old, new)) for k, v in heads]
    return answer.status_code, body, sorted(heads)


def _same(refused: httpx2.Response, known: str, absent: httpx2.Response, unknown: str) -> None:
    """Status, body bytes and headers of the two answers are one (the id asked for swapped, ``Date`` aside)."""
    assert refused.status_code == absent.status_code, (refused.status_code, refused.text, absent.text)
    mine, theirs = _normal(refused, known), _normal(absent, unknown)
    assert mine[1] == theirs[1]
    assert mine[2] == theirs[2]


@contextlib.contextmanager
def _running_chat(alice: Alice) -> Iterator[str]:
    """Alice's chat streaming a long run until the block ends; then her own reconnect proves it still ran.

    Bob's requests are made inside the block; alice's reconnect after them answers ``200``
    (a chat that is not running is ``204``), so the chat was running when bob asked: an
    order, not a time. Then the run is read to its end and validated.
    """
    chat = "alice-live"
    said = {"id": "u", "role": "user", "parts": [{"type": "text", "text": LONG}]}
    with (
        httpx2.Client(timeout=120) as client,
        client.stream(
            "POST",
            alice.server.base + "/api/chat",
            json={"id": chat, "messages": [said]},
            headers=alice.server.headers("alice"),
        ) as answer,
    ):
        assert answer.status_code == 200
        chunks = answer.iter_bytes()
        next(chunks)  # the run has begun
        yield chat
        mine = alice.server.call("GET", f"/api/chat/{chat}/stream", "alice")
        assert mine.status_code == 200, mine.status_code
        assert b"data: [DONE]" in mine.content
        for _ in chunks:
            pass
        run_id = answer.headers["x-run-id"]
    _valid_run(alice.db, run_id)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_spec_ow1_b_bobs_answer_for_alices_id_is_an_unknown_ids_byte_for_byte(alice: Alice, case: Case) -> None:
    """[OW1-b] [FS2-a] [LD1-a]: bob's request for alice's id and an absent id: one status, body, headers; hers unchanged."""
    before = _state(alice, live_chat=case.live)
    with _running_chat(alice) if case.live else contextlib.nullcontext(alice.known(case.kind)) as known:
        unknown = _absent_like(known)
        path, kwargs = case.request(alice, known)
        refused = alice.server.call(case.method, path, "bob", **kwargs)
        path, kwargs = case.request(alice, unknown)
        absent = alice.server.call(case.method, path, "bob", **kwargs)
    _same(refused, known, absent, unknown)
    expected = 200 if case.starts else 204 if case.live else 404
    assert refused.status_code == expected, refused.text
    if case.starts:  # bob's own new conversation, as for an id never seen: none of alice's words in it
        assert refused.headers["x-agent-uuid"] not in (alice.thread_agent, alice.chat_agent)
        assert CONFIRM.encode() not in refused.content
        _valid_run(alice.db, refused.headers["x-run-id"])
        _valid_run(alice.db, absent.headers["x-run-id"])
    assert _state(alice, live_chat=case.live) == before


@pytest.mark.parametrize("case", [c for c in CASES if c.method == "GET" and not c.live], ids=lambda c: c.name)
def test_spec_ld1_a_a_head_is_the_gets_refusal_too(alice: Alice, case: Case) -> None:
    """[LD1-a]: Starlette answers ``HEAD`` on every ``GET`` route (the walk leaves it out): it refuses as the GET does."""
    before = _state(alice)
    known = alice.known(case.kind)
    unknown = _absent_like(known)
    path, kwargs = case.request(alice, known)
    refused = alice.server.call("HEAD", path, "bob", **kwargs)
    path, kwargs = case.request(alice, unknown)
    absent = alice.server.call("HEAD", path, "bob", **kwargs)
    _same(refused, known, absent, unknown)
    assert (refused.status_code, refused.content) == (404, b"")
    assert _state(alice) == before


@pytest.mark.parametrize("case", [c for c in CASES if c.owner is not None], ids=lambda c: c.name)
def test_the_rows_reach_alices_things(alice: Alice, case: Case) -> None:
    """Alice's own request of each row that changes nothing is answered otherwise than bob's: the row is real."""
    path, kwargs = case.request(alice, alice.known(case.kind))
    mine = alice.server.call(case.method, path, "alice", **kwargs)
    assert mine.status_code == case.owner, (case.name, mine.text)
    if not mine.headers.get("content-type", "").startswith("text/event-stream"):
        return
    whole = alice.server.call("GET", f"/agent/runs/{alice.run}/stream?response=0", "alice")
    assert_valid(whole.content)
    if "Last-Event-ID" in kwargs.get("headers", {}):
        assert whole.content.endswith(mine.content)  # the rest of the response, after the id sent
        assert mine.content.startswith(f"id: {alice.run}:0:2\n".encode())
    else:
        assert_valid(mine.content)


def _app_routes(tmp: Path) -> set[tuple[str, str]]:
    """``(method, path)`` of every route of ``create_app`` with a file backend (so ``/files`` is mounted)."""
    app = create_app(
        store=MemoryStore(), model_factory=ScriptedModel, agent_config={"file_backend": DirectoryFiles(tmp)}
    )
    out = set()
    for route in app.routes:
        assert isinstance(route, Route), route  # a Mount would hide its routes from this walk
        out |= {(method, route.path) for method in route.methods or () if method != "HEAD"}
    return out


def test_spec_ld1_a_every_route_with_an_id_is_in_the_table(tmp_path: Path) -> None:
    """[LD1-a] The route walk: each route of the app is a row of ``CASES`` or named in ``NO_ID``; none is stale."""
    routes = _app_routes(tmp_path)
    tried = {(c.method, c.route) for c in CASES}
    assert routes - tried - set(NO_ID) == set(), "an endpoint no one tried with the wrong principal"
    assert tried - routes == set(), "a row of CASES names a route the app does not have"
    assert set(NO_ID) - routes == set()
    assert not tried & set(NO_ID)
