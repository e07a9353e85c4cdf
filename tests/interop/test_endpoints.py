"""``agent-ref serve``'s AG-UI and ``useChat`` endpoints, driven by those protocols' own clients (issue 27 item 5).

A real ``agent-ref serve`` process on loopback (a bearer token set), and node running
``endpoints.mjs``: ``@ag-ui/client``'s ``HttpAgent`` on ``POST /agui`` and the AI SDK's
``AbstractChat`` (what ``useChat`` wraps) with its ``DefaultChatTransport`` on
``POST /api/chat``, each with the scripted model's ``confirm`` frontend tool answered by
the client. The reconnect (``GET /api/chat/{id}/stream``) runs on the test launcher whose
calculator waits for a gate file, so the response is still being written when the
client comes back. On a PostgreSQL fleet (two processes, one database), a thread paused
on one resumes on the other, and the reconnect is answered by the process that does not
run the response. Every envelope stream the server stored or journaled for those runs
passes the strict validator; what each client received is compared with our own
conversion of the stored stream, or with its transcript.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import httpx2

from agent_ref import SQLiteStore
from agent_ref.server.interop import _agui_events, _vercel_chunks, agent_for_conversation
from agent_ref_support import assert_valid_responses
from browser.agent_server import serving
from envelope import Reconstructor
from envelope.interop.agui import EnvelopeToAgui
from envelope.interop.vercel import EnvelopeToVercel
from interop import test_clients
from validating import assert_valid

if TYPE_CHECKING:
    import contextlib
    from collections.abc import AsyncIterator
    from pathlib import Path

    import pytest

HERE = test_clients.HERE
TOKEN = "interop-test-token"
#: The session fixture that installs the pinned client packages (``npm ci``).
node = test_clients.node
_URL = re.compile(r"(http://127\.0\.0\.1:\d+)")


def _agent_ref_serve(db: Path) -> contextlib.AbstractContextManager[str]:
    command = [sys.executable, "-m", "agent_ref", "serve", "--db", str(db), "--port", "0", "--token", TOKEN]
    return serving(command, url=_URL)


def _client(node: str, *args: str) -> dict[str, Any]:
    result = subprocess.run(
        [node, str(HERE / "endpoints.mjs"), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr[-4000:]
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def _stored(db: Path, run_id: str) -> list[list[bytes]]:
    """The run's responses as the store logged them, each checked against the journal and strictly valid."""

    async def read() -> list[list[bytes]]:
        return await SQLiteStore(str(db)).run_responses(run_id)

    responses = asyncio.run(read())
    assert_valid_responses([line for response in responses for line in response])
    for index, response in enumerate(responses):
        journaled = (db.parent / f"{db.name}.streams" / f"{run_id}.{index}.log").read_bytes().split(b"\n")[:-1]
        assert journaled == response
        assert_valid(journaled)
    return responses


def _texts(responses: list[list[bytes]]) -> list[str]:
    out: list[str] = []
    for response in responses:
        rebuilt = Reconstructor()
        for line in response:
            rebuilt.feed(line)
        out += [b.content for blocks in rebuilt.transcript().agents.values() for b in blocks if b.type == "text"]
    return out


# ---------------------------------------------------------------------------------------
# AG-UI: HttpAgent on POST /agui


def test_agui_endpoint_runs_httpagent_with_a_frontend_tool(node: str, tmp_path: Path) -> None:
    """spec server §9.1-a [S9.1-a]: HttpAgent runs, the confirm call is answered by a tool message, the run goes on."""
    db = tmp_path / "agent-ref.db"
    with _agent_ref_serve(db) as base:
        seen = _client(node, "agui", base, TOKEN, "thread-1")
    assert [r["status"] for r in seen["requests"]] == [200, 200]
    first, second = seen["runs"]
    (finished,) = [e for e in first if e["type"] == "RUN_FINISHED"]
    assert finished["outcome"]["pendingToolCallIds"] == seen["pending"]
    # the client's history: one result per call (the server's for the calculator, the client's for confirm)
    messages = seen["messages"]
    (assistant, *_) = [m for m in messages if m["role"] == "assistant" and m.get("toolCalls")]
    calls = {c["function"]["name"]: c["id"] for c in assistant["toolCalls"]}
    assert sorted(calls) == ["calculator", "confirm"]
    assert seen["pending"] == [calls["confirm"]]
    results = [(m["toolCallId"], m["content"]) for m in messages if m["role"] == "tool"]
    assert results == [(calls["calculator"], "5"), (calls["confirm"], "yes")]
    assert messages[-1]["role"] == "assistant"
    assert messages[-1]["content"] == "2 + 3 = 5. You confirmed, so I went ahead."
    assert len({m["id"] for m in messages}) == len(messages)
    # the server kept the envelope stream, strictly valid, in the thread's agent
    (meta_init,) = [e for e in first if e["type"] == "CUSTOM" and e["name"] == "envelope.meta_init"]
    assert meta_init["value"]["data"]["agent_uuid"] == agent_for_conversation("agui", "thread-1")
    stored = _stored(db, meta_init["value"]["data"]["run_id"])
    assert len(stored) == 2
    # what HttpAgent received is our conversion of what was stored, the echo of its own answer left out
    # (spec interop [8-b])
    for index, (run, response, request) in enumerate(zip((first, second), stored, seen["requests"], strict=True)):
        prefix = f"{request['runId']}.{index}."
        converter = EnvelopeToAgui(thread_id="thread-1", run_id=request["body"]["runId"], message_prefix=prefix)
        want = [e for line in response for e in converter.feed(line)] + converter.close()
        if run is second:
            echoed = [e for e in want if e["type"] == "TOOL_CALL_RESULT"]
            assert [e["toolCallId"] for e in echoed] == [calls["confirm"]]
            want = [e for e in want if e["type"] != "TOOL_CALL_RESULT"]
        assert run == want


def test_agui_endpoint_runs_subagents_that_pause(node: str, tmp_path: Path) -> None:
    """spec server §9.1-a [S9.1-a]: interleaved subagents reach HttpAgent as subagent messages; the run pauses and goes on.

    The server is ``agent-ref serve --subagents demo``. Each agent's messages in the client's history are
    that agent's texts in the stored transcript, and no two messages share an id (each
    request's converter counts from 1: a shared id would merge two answers).
    """
    db = tmp_path / "agent-ref.db"
    command = [
        sys.executable,
        "-m",
        "agent_ref",
        "serve",
        "--db",
        str(db),
        "--port",
        "0",
        "--subagents",
        "demo",
        "--token",
        TOKEN,
    ]
    prompt = "Research cats and dogs in parallel, then confirm"
    with serving(command, url=_URL) as base:
        seen = _client(node, "agui", base, TOKEN, "thread-sub", prompt)
    assert [r["status"] for r in seen["requests"]] == [200, 200]
    messages = seen["messages"]
    assert len({m["id"] for m in messages}) == len(messages)
    main = agent_for_conversation("agui", "thread-sub")
    got: dict[str, list[str]] = {}
    for m in messages:
        if m["role"] == "assistant" and m.get("content"):
            got.setdefault(m.get("subagentRunId", main), []).append(m["content"])
    assert len(got) == 3  # the thread's agent and two children
    stored = _stored(db, seen["requests"][0]["runId"])
    want: dict[str, list[str]] = {}
    for response in stored:
        rebuilt = Reconstructor()
        for line in response:
            rebuilt.feed(line)
        for agent, blocks in rebuilt.transcript().agents.items():
            want.setdefault(agent, []).extend(b.content for b in blocks if b.type == "text")
    assert got == {agent: texts for agent, texts in want.items() if texts}
    assert got[main][-1].startswith("You confirmed.")


# ---------------------------------------------------------------------------------------
# useChat: AbstractChat + DefaultChatTransport on POST /api/chat


def test_chat_endpoint_runs_use_chat_with_a_frontend_tool(node: str, tmp_path: Path) -> None:
    """spec server §9.1-b [S9.1-b]: onToolCall answers confirm, sendAutomaticallyWhen resumes, once, and the turn ends."""
    db = tmp_path / "agent-ref.db"
    with _agent_ref_serve(db) as base:
        seen = _client(node, "chat", base, TOKEN, "chat-1")
    assert seen["errors"] == []
    assert seen["status"] == "ready"
    assert [c["name"] for c in seen["calls"]] == ["calculator", "confirm"]
    # two requests only: the prompt, then the automatic resume (no third post after the answer)
    requests = seen["requests"]
    assert [(r["method"], r["status"], r["vercelHeader"]) for r in requests] == [("POST", 200, "v1")] * 2
    assert requests[1]["body"]["messages"][-1]["role"] == "assistant"
    user, assistant = seen["messages"]
    assert user["role"] == "user"
    tools = {p["toolName"]: p for p in assistant["parts"] if p["type"] == "dynamic-tool"}
    assert (tools["calculator"]["state"], tools["calculator"]["output"]) == ("output-available", "5")
    assert (tools["confirm"]["state"], tools["confirm"]["output"]) == ("output-available", "yes")
    texts = [p["text"] for p in assistant["parts"] if p["type"] == "text"]
    assert requests[0]["runId"] == requests[1]["runId"]
    stored = _stored(db, requests[0]["runId"])
    assert len(stored) == 2
    assert texts == _texts(stored)
    assert texts[-1] == "2 + 3 = 5. You confirmed, so I went ahead."


def test_chat_reconnect_replays_the_live_response(node: str, tmp_path: Path) -> None:
    """spec server §9.3-a [S9.3-a]: a client gone mid-response picks it up with resumeStream; 204 when nothing is live."""
    db = tmp_path / "agent-ref.db"
    gate = tmp_path / "gate"
    command = [sys.executable, str(HERE.parent / "server" / "serve_for_test.py"), str(db), "--gate", str(gate)]
    with serving(command, url_on="stdout", url=_URL) as base:
        seen = _client(node, "resume", base, "chat-2", str(gate))
    assert seen["before"] is True  # no agent for the chat yet: 204
    assert seen["seen"][-1] == "tool-input-available", seen
    assert seen["opened"] is True, seen["requests"]
    assert seen["status"] == "ready"
    requests = [(r["method"], r["url"].rsplit("/api", 1)[1], r["status"]) for r in seen["requests"]]
    assert requests == [
        ("GET", "/chat/chat-2/stream", 204),
        ("POST", "/chat", 200),
        ("GET", "/chat/chat-2/stream", 200),
        ("GET", "/chat/chat-2/stream", 204),
    ]
    _, assistant = seen["messages"]
    tools = [(p["toolName"], p["state"], p.get("output")) for p in assistant["parts"] if p["type"] == "dynamic-tool"]
    assert tools == [("calculator", "output-available", "42")]
    stored = _stored(db, seen["requests"][1]["runId"])
    texts = [p["text"] for p in assistant["parts"] if p["type"] == "text"]
    assert texts == _texts(stored)  # replayed from the start: nothing twice, nothing missing
    assert texts[-1].startswith("6 * 7 = 42")


# ---------------------------------------------------------------------------------------
# the checks of /agent/run, on the foreign routes


def test_foreign_requests_pass_the_same_checks(tmp_path: Path) -> None:
    """spec server §9.4-a [S9.4-a]: token, Host, body checks before any claim; errors are JSON naming the field."""
    db = tmp_path / "agent-ref.db"
    run_input = {
        "threadId": "t-checks",
        "runId": "r1",
        "messages": [{"id": "u", "role": "user", "content": "hello"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    chat: dict[str, Any] = {
        "id": "c-checks",
        "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    }
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with _agent_ref_serve(db) as base, httpx2.Client(base_url=base, timeout=30) as client:

        def refused(path: str, body: Any, headers: dict[str, str] | None = None, **kw: Any) -> tuple[int, Any]:
            r = client.post(path, json=body, headers=headers if headers is not None else auth, **kw)
            assert r.headers["content-type"].startswith("application/json"), r.text
            return r.status_code, r.json()["error"]

        assert refused("/agui", run_input, {})[0] == 401
        assert refused("/api/chat", chat, {})[0] == 401
        assert client.get("/api/chat/c-checks/stream").status_code == 401
        assert refused("/agui", run_input, {**auth, "Host": "evil.example"})[0] == 421
        status, error = refused("/agui", {**run_input, "messages": [{"id": "t", "role": "tool", "content": "x"}]})
        assert (status, error["field"], error["code"]) == (422, "$.messages[0].toolCallId", "I202")
        status, error = refused("/agui", {**run_input, "messages": [{"id": "u", "role": "user", "content": " "}]})
        assert (status, error["field"]) == (422, "$.messages[0]")
        status, error = refused("/agui", {**run_input, "threadId": "x" * 300})
        assert (status, error["field"]) == (422, "$.threadId")
        resume = {"id": "t", "role": "tool", "toolCallId": "toolu_x", "content": "yes"}
        status, error = refused("/agui", {**run_input, "messages": [resume]})
        assert (status, error["type"]) == (404, "unknown_conversation")
        status, error = refused("/api/chat", {**chat, "trigger": "regenerate-message"})
        assert (status, error["field"], error["code"]) == (422, "$.trigger", "I203")
        image = {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="}
        status, error = refused("/api/chat", {**chat, "messages": [{**chat["messages"][0], "parts": [image]}]})
        assert (status, error["field"], error["code"]) == (422, "$.messages[0].parts[0]", "I203")
        r = client.post(
            "/api/chat", content=b'{"id": "c", "messages": [', headers={**auth, "content-type": "application/json"}
        )
        assert (r.status_code, r.json()["error"]["type"]) == (400, "invalid_json")
        r = client.post(
            "/api/chat", content=b"x" * (5 * 1024 * 1024), headers={**auth, "content-type": "application/json"}
        )
        assert r.status_code == 413
        # nothing of the refused requests was stored
        ok = client.post("/api/chat", json=chat, headers=auth)
        assert ok.status_code == 200
        assert ok.headers["x-vercel-ai-ui-message-stream"] == "v1"
    _stored(db, ok.headers["x-run-id"])

    async def agents() -> list[str]:
        store = SQLiteStore(str(db))
        ids = (agent_for_conversation("agui", "t-checks"), agent_for_conversation("chat", "c-checks"))
        return [a for a in ids if await store.load(a) is not None]

    assert asyncio.run(agents()) == [agent_for_conversation("chat", "c-checks")]


# ---------------------------------------------------------------------------------------
# a fleet: the thread's agent is found by any process


def test_agui_thread_paused_on_one_process_resumes_on_another(pg_schema_url: str) -> None:
    """spec server §9.2-a [S9.2-a]: two ``agent-ref serve`` on one PostgreSQL database; the thread id alone finds the agent."""
    from agent_ref.store.postgres import PostgresStore
    from envelope import SSEReader

    def events(raw: bytes) -> list[dict[str, Any]]:
        reader = SSEReader()
        return [json.loads(e.data) for e in [*reader.feed(raw), *reader.close()]]

    user = {"id": "u1", "role": "user", "content": "Please confirm: delete the temp files"}
    run_input: dict[str, Any] = {"threadId": "fleet-1", "runId": "r1", "messages": [user], "tools": [], "context": []}
    command = [sys.executable, "-m", "agent_ref", "serve", "--db", pg_schema_url, "--port", "0", "--token", TOKEN]
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with serving(command, url=_URL) as a, serving(command, url=_URL) as b:
        first = httpx2.post(f"{a}/agui", json=run_input, headers=auth, timeout=30)
        assert first.status_code == 200, first.text
        (finished,) = [e for e in events(first.content) if e["type"] == "RUN_FINISHED"]
        (pending,) = finished["outcome"]["pendingToolCallIds"]
        answer = {"id": "t1", "role": "tool", "toolCallId": pending, "content": "yes"}
        resume = {**run_input, "runId": "r2", "messages": [user, answer]}
        second = httpx2.post(f"{b}/agui", json=resume, headers=auth, timeout=30)
        assert second.status_code == 200, second.text
        again = httpx2.post(f"{a}/agui", json={**resume, "runId": "r3"}, headers=auth, timeout=30)
        assert (again.status_code, again.json()["error"]["type"]) == (409, "agent_state")  # a stale answer
    assert first.headers["x-agent-uuid"] == second.headers["x-agent-uuid"] == agent_for_conversation("agui", "fleet-1")
    assert first.headers["x-run-id"] == second.headers["x-run-id"]
    texts = [e["delta"] for e in events(second.content) if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert "".join(texts).endswith("You confirmed, so I went ahead.")

    async def stored() -> list[list[bytes]]:
        store = PostgresStore(pg_schema_url)
        try:
            return await store.run_responses(first.headers["x-run-id"])
        finally:
            await store.aclose()

    responses = asyncio.run(stored())
    assert len(responses) == 2
    assert_valid_responses([line for response in responses for line in response])


def test_chat_reconnect_on_another_process_follows_the_shared_journal(pg_schema_url: str, tmp_path: Path) -> None:
    """spec server §9.3-a [S9.3-a]: the AI SDK's reconnect reaches a process that does not run the response."""
    from agent_ref.store.postgres import PostgresStore
    from scaleout_support import Process

    gate = tmp_path / "gate"
    chat = {
        "id": "fleet-chat",
        "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "What is 6 * 7?"}]}],
        "trigger": "submit-message",
    }
    a, b = Process(pg_schema_url, "--gate", str(gate)), Process(pg_schema_url)
    try:
        with httpx2.Client(timeout=30) as client:
            assert client.get(f"{b.base}/api/chat/fleet-chat/stream").status_code == 204
            with client.stream("POST", f"{a.base}/api/chat", json=chat) as first:
                assert first.status_code == 200
                run_id = first.headers["x-run-id"]
                for line in first.iter_lines():
                    if '"tool-input-available"' in line:
                        break  # the calculator waits for the gate; this client goes away
            chunks: list[Any] = []
            with client.stream("GET", f"{b.base}/api/chat/fleet-chat/stream") as again:
                assert again.status_code == 200
                assert again.headers["x-vercel-ai-ui-message-stream"] == "v1"
                assert again.headers["x-run-id"] == run_id
                for line in again.iter_lines():
                    if line.startswith("data: "):
                        chunks.append(line[6:] if line == "data: [DONE]" else json.loads(line[6:]))
                        gate.touch()
            assert client.get(f"{b.base}/api/chat/fleet-chat/stream").status_code == 204
    finally:
        a.stop()
        b.stop()
    assert chunks[0] == {"type": "start"}  # replayed from the response's start
    assert chunks[-2:] == [{"type": "finish", "finishReason": "stop"}, "[DONE]"]
    texts: dict[str, str] = {}
    for c in chunks:
        if isinstance(c, dict) and c["type"] == "text-delta":
            texts[c["id"]] = texts.get(c["id"], "") + c["delta"]

    async def stored() -> list[list[bytes]]:
        store = PostgresStore(pg_schema_url)
        try:
            return await store.run_responses(run_id)
        finally:
            await store.aclose()

    (response,) = asyncio.run(stored())
    assert_valid_responses(response)
    assert list(texts.values()) == _texts([response])


def test_a_stored_response_the_converter_refuses_ends_with_the_dialects_error(caplog: pytest.LogCaptureFixture) -> None:
    """spec server [S9.5-a]: a response the converter refuses ends the answer with the dialect's error, the cause logged.

    The two converting generators of the routes are fed a valid line, then one no converter
    reads (not JSON): the client's last event is AG-UI's ``RUN_ERROR`` or the UI message
    stream's ``error`` chunk naming the code, and the log has the converter's message.
    """
    lines = [b'{"type":"text","agent":"a","final":false,"delta":"hi"}', b"not json"]

    async def source() -> AsyncIterator[bytes]:
        for line in lines:
            yield line

    async def collect(events: AsyncIterator[bytes]) -> list[dict[str, Any]]:
        return [json.loads(chunk.removeprefix(b"data: ")) async for chunk in events]

    with caplog.at_level("ERROR"):
        agui = asyncio.run(collect(_agui_events(source(), EnvelopeToAgui(), set())))
        vercel = asyncio.run(collect(_vercel_chunks(source(), EnvelopeToVercel())))
    assert agui[-1] == {"type": "RUN_ERROR", "message": "the server could not convert this response", "code": "I207"}
    assert any(e["type"] == "TEXT_MESSAGE_CONTENT" and e["delta"] == "hi" for e in agui)
    assert vercel[-1] == {"type": "error", "errorText": "the server could not convert this response (I207)"}
    assert any(e["type"] == "text-delta" and e["delta"] == "hi" for e in vercel)
    assert sum("not JSON" in r.getMessage() for r in caplog.records) == 2
