"""The server's endpoints over real loopback HTTP (spec/server.md §1, §2, §4, §5).

Every stream a test receives is validated strictly as raw SSE bytes (ids and keep-alive
comments included) with ``tests/validating.py``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from agent_ref import Fault, MemoryStore, ScriptedModel, SQLiteStore
from agent_ref.server.app import ServerConfig, create_app
from agent_ref.server.streams import parse_event_id
from server_support import Gate, data_lines, get, post, read_events, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from starlette.applications import Starlette

ARITHMETIC = "What is 5 + (10 * 2)?"
CONFIRM = "Please confirm: delete the temp files"


def app_with(store: Any = None, **kwargs: Any) -> Starlette:
    """An app on the scripted model and a fresh memory store unless told otherwise."""
    return create_app(store=store if store is not None else MemoryStore(), model_factory=ScriptedModel, **kwargs)


def meta(lines: list[bytes], kind: str) -> Any:
    """The JSON payload of the (one-line) ``kind`` envelope of a stream."""
    (env,) = [json.loads(x) for x in lines if x != b"[DONE]" and json.loads(x)["type"] == kind]
    return json.loads(env["delta"])


def wait_for(predicate: Callable[[], bool], what: str, limit: float = 20.0) -> None:
    """Poll ``predicate`` (bounded); fail naming ``what``. Not a timing assertion: only a bound."""
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.01)


def test_spec_server_1_1_a_run_streams_a_valid_response_with_ids_and_run_id() -> None:
    """[S1.1-a] [S2.1-a] [S2.2-a]: a run answers an SSE stream; every event has an id; the run id is in meta_init and a header."""
    with running(app_with()) as base:
        r = post(base, "/agent/run", {"prompt": ARITHMETIC})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    assert_valid(r.content)
    events = read_events(r.content)
    run_id = r.headers["x-run-id"]
    ids = [parse_event_id(e.id) for e in events]
    assert ids == [(run_id, 0, seq) for seq in range(len(events))]
    lines = data_lines(r.content)
    assert lines[-1] == b"[DONE]"
    assert meta(lines, "meta_init")["run_id"] == run_id
    assert meta(lines, "meta_init")["agent_uuid"] == r.headers["x-agent-uuid"]
    assert meta(lines, "meta_final")["stop_reason"] == "end_turn"


def test_spec_server_1_2_a_frontend_tool_round_trip_resumes_in_a_new_response() -> None:
    """[S1.2-a]: pause on confirm, post the result, the continuation streams and finishes."""
    store = MemoryStore()
    with running(app_with(store)) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        assert_valid(first.content)
        (pending,) = meta(data_lines(first.content), "awaiting_frontend_tools")
        answer = {
            "agent_uuid": first.headers["x-agent-uuid"],
            "tool_results": [{"tool_use_id": pending["tool_use_id"], "content": "yes"}],
        }
        second = post(base, "/agent/tool_results", answer)
        assert second.status_code == 200
        assert_valid(second.content)
        assert second.headers["x-run-id"] == first.headers["x-run-id"]
        assert second.headers["x-response-index"] == "1"
        ids = {parse_event_id(e.id) for e in read_events(second.content)}
        assert {i[1] for i in ids if i} == {1}
        lines = data_lines(second.content)
        assert meta(lines, "meta_final")["stop_reason"] == "end_turn"
        # the second response is also there to replay, by index
        again = get(base, f"/agent/runs/{first.headers['x-run-id']}/stream", params={"response": "1"})
        assert again.content == second.content
        # stale: the same answer again is refused, and nothing changes
        stale = post(base, "/agent/tool_results", answer)
        assert stale.status_code == 409
        assert stale.json()["error"]["type"] == "agent_state"


def test_spec_server_1_2_b_wrong_ids_are_refused_and_change_nothing() -> None:
    """[S1.2-b]: wrong ids get 422 naming them; the right answer still works afterwards."""
    with running(app_with()) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        (pending,) = meta(data_lines(first.content), "awaiting_frontend_tools")
        agent = first.headers["x-agent-uuid"]
        wrong = post(
            base,
            "/agent/tool_results",
            {"agent_uuid": agent, "tool_results": [{"tool_use_id": "toolu_nope", "content": "yes"}]},
        )
        assert wrong.status_code == 422
        error = wrong.json()["error"]
        assert error["type"] == "invalid_tool_results"
        assert error["unexpected"] == ["toolu_nope"]
        assert error["missing"] == [pending["tool_use_id"]]
        unknown = post(
            base,
            "/agent/tool_results",
            {"agent_uuid": "no-such-agent", "tool_results": [{"tool_use_id": "x", "content": "y"}]},
        )
        assert unknown.status_code == 404
        right = post(
            base,
            "/agent/tool_results",
            {"agent_uuid": agent, "tool_results": [{"tool_use_id": pending["tool_use_id"], "content": "no"}]},
        )
        assert right.status_code == 200
        assert_valid(right.content)
        # a new prompt for an agent that is paused is refused the same way
        paused = post(base, "/agent/run", {"prompt": CONFIRM})
        again = post(base, "/agent/run", {"prompt": "hi", "agent_uuid": paused.headers["x-agent-uuid"]})
        assert again.status_code == 409


def test_spec_server_1_2_c_concurrent_resumes_one_wins_the_other_gets_409(tmp_path: Path) -> None:
    """[S1.2-c]: two resumes at once: exactly one streams, the other is 409, the run log has one continuation."""
    store = SQLiteStore(tmp_path / "a.db")
    with running(app_with(store)) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        (pending,) = meta(data_lines(first.content), "awaiting_frontend_tools")
        answer = {
            "agent_uuid": first.headers["x-agent-uuid"],
            "tool_results": [{"tool_use_id": pending["tool_use_id"], "content": "yes"}],
        }
        results: list[httpx2.Response] = []
        barrier = threading.Barrier(2)

        def resume() -> None:
            barrier.wait(10)
            results.append(post(base, "/agent/tool_results", answer))

        threads = [threading.Thread(target=resume) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert sorted(r.status_code for r in results) == [200, 409]
    (won,) = [r for r in results if r.status_code == 200]
    assert_valid(won.content)
    log = asyncio.run(store.run_log(first.headers["x-run-id"]))
    assert log.count(b"[DONE]") == 2  # the pause and exactly one continuation


def test_spec_server_2_3_a_last_event_id_replays_the_rest_exactly_once() -> None:
    """[S2.3-a]: reconnecting after any event gives exactly the events after it."""
    with running(app_with()) as base:
        whole = post(base, "/agent/run", {"prompt": ARITHMETIC})
        events = read_events(whole.content)
        run_id = whole.headers["x-run-id"]
        for cut in (0, 1, len(events) // 2, len(events) - 2):
            rest = get(base, f"/agent/runs/{run_id}/stream", headers={"Last-Event-ID": events[cut].id})
            assert rest.status_code == 200
            seen = [e.data for e in events[: cut + 1]] + [e.data for e in read_events(rest.content)]
            assert seen == [e.data for e in events]
        # no Last-Event-ID: the latest response from its start
        assert get(base, f"/agent/runs/{run_id}/stream").content == whole.content


def test_spec_server_2_3_b_bad_last_event_ids_and_unknown_runs_are_refused() -> None:
    """[S2.3-b]: an id of another run, a malformed id, an id past the end, an unknown run: 4xx JSON."""
    with running(app_with()) as base:
        whole = post(base, "/agent/run", {"prompt": ARITHMETIC})
        run_id = whole.headers["x-run-id"]
        last = read_events(whole.content)[-1].id
        cases = {
            "other-run:0:1": 400,
            "garbage": 400,
            f"{run_id}:0:x": 400,
            f"{run_id}:0:999": 400,  # past the end
            f"{run_id}:7:0": 404,
        }
        for value, status in cases.items():
            r = get(base, f"/agent/runs/{run_id}/stream", headers={"Last-Event-ID": value})
            assert r.status_code == status, value
            assert "error" in r.json()
        done = get(base, f"/agent/runs/{run_id}/stream", headers={"Last-Event-ID": last})
        assert (done.status_code, done.content) == (204, b"")  # [S2.3-c] it has everything
        assert get(base, "/agent/runs/00000000-0000-4000-8000-000000000000/stream").status_code == 404
        assert get(base, "/agent/runs/..%2Fetc/stream").status_code == 404
        assert get(base, f"/agent/runs/{run_id}/stream", params={"response": "-1"}).status_code == 400


def test_spec_server_4_1_a_client_gone_mid_run_loses_nothing() -> None:
    """[S4.1-a] [S3.2-a]: the client drops mid-run; the run goes on and is stored; a reconnect gets the rest exactly once."""
    gate = Gate()
    store = MemoryStore()
    with running(app_with(store, tools=gate.tools())) as base:
        seen: list[bytes] = []
        with (
            httpx2.Client(timeout=30) as client,
            client.stream("POST", base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
        ):
            run_id = r.headers["x-run-id"]
            buffer = b""
            for chunk in r.iter_raw():
                buffer += chunk
                if b'"type":"tool_call"' in buffer and buffer.endswith(b"\n\n"):
                    break
            seen = [e.data.encode() for e in read_events(buffer)]
            last_id = read_events(buffer)[-1].id
        assert gate.entered.wait(20)
        # the connection is closed; the tool is still running
        follower: list[bytes] = []

        def reconnect() -> None:
            follower.append(get(base, f"/agent/runs/{run_id}/stream", headers={"Last-Event-ID": last_id}).content)

        thread = threading.Thread(target=reconnect)
        thread.start()  # follows the live run while the gate is still closed
        gate.opened.set()
        thread.join(30)
        rest = follower[0]
        full = seen + data_lines(rest)
        assert_valid(full)
        assert full[-1] == b"[DONE]"
        whole = get(base, f"/agent/runs/{run_id}/stream")
        assert data_lines(whole.content) == full  # nothing missing, nothing doubled
        assert meta(full, "meta_final")["stop_reason"] == "end_turn"


def test_spec_server_4_2_a_keep_alive_comments_while_the_model_is_silent() -> None:
    """[S4.2-a]: a comment arrives while a tool runs and nothing else is sent; the stream stays valid."""
    gate = Gate()
    app = app_with(tools=gate.tools(), config=ServerConfig(keepalive_seconds=0.05))
    with running(app) as base:
        buffer = b""
        with (
            httpx2.Client(timeout=30) as client,
            client.stream("POST", base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
        ):
            for chunk in r.iter_raw():
                buffer += chunk
                if gate.entered.is_set() and b": keep-alive" in buffer.split(b'"type":"tool_call"')[-1]:
                    gate.opened.set()
    assert b": keep-alive\n\n" in buffer
    assert_valid(buffer)
    assert data_lines(buffer)[-1] == b"[DONE]"


def test_spec_server_1_3_a_model_errors_end_as_error_envelopes() -> None:
    """[S1.3-a]: a model that fails for good gives an error envelope, meta_final and [DONE], status 200."""
    faults = [Fault(status=400)]
    app = create_app(store=MemoryStore(), model_factory=lambda: ScriptedModel(faults))
    with running(app) as base:
        r = post(base, "/agent/run", {"prompt": ARITHMETIC})
    assert r.status_code == 200
    assert_valid(r.content)
    lines = data_lines(r.content)
    assert meta(lines, "meta_final")["stop_reason"] == "error"
    assert "Traceback" not in r.text


class _BrokenStore(MemoryStore):
    """Fails the save that ends a run: the server must still end the response properly."""

    async def save(self, state: Any, *, log: Any = None, run: Any = None) -> None:
        if run is not None:
            raise OSError("disk full (simulated)")
        await super().save(state, log=log, run=run)


def test_spec_server_3_3_a_a_failure_inside_the_server_still_ends_the_response() -> None:
    """[S3.3-a]: an exception after lines were sent: closing lines, an internal_error, meta_final, [DONE]."""
    with running(app_with(_BrokenStore())) as base:
        r = post(base, "/agent/run", {"prompt": ARITHMETIC})
    assert r.status_code == 200
    assert_valid(r.content)
    lines = data_lines(r.content)
    assert meta(lines, "error")["type"] == "internal_error"
    assert "disk full" not in r.text  # no internal detail leaks
    assert meta(lines, "meta_final")["stop_reason"] == "error"


def test_spec_server_6_1_a_page_and_static_files() -> None:
    """[S6.1-a]: the page, its module, its stylesheet and the decoder are served; other names 404."""
    with running(app_with(config=ServerConfig(token="s3cret"))) as base:
        page = get(base, "/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        for name in ("app.js", "app.css", "envelope-decoder.mjs"):
            r = get(base, f"/static/{name}")
            assert r.status_code == 200, name
            assert r.content
        assert get(base, "/static/..%2Fserver.py").status_code == 404
        assert get(base, "/static/server.py").status_code == 404


def test_spec_server_1_1_b_unknown_agent_and_stored_runs() -> None:
    """[S1.1-a] [S2.3-a]: a run for an unknown agent is 404; a run made without the server (no journal) replays from the store's log."""
    from agent_ref import Agent, default_tools
    from agent_ref_support import drop

    store = MemoryStore()
    agent = Agent(ScriptedModel(), tools=default_tools(), store=store)
    lines: list[bytes] = []
    asyncio.run(agent.run(CONFIRM, lines.append))
    (pending,) = meta(lines, "awaiting_frontend_tools")

    async def resume() -> None:
        again = await Agent.load(agent.agent_uuid, store, ScriptedModel(), tools=default_tools())
        await again.continue_with_tool_results([{"tool_use_id": pending["tool_use_id"], "content": "yes"}], drop)

    asyncio.run(resume())
    run_id = meta(lines, "meta_init")["run_id"]
    with running(app_with(store)) as base:
        assert post(base, "/agent/run", {"prompt": "hi", "agent_uuid": "no-such-agent"}).status_code == 404
        first = get(base, f"/agent/runs/{run_id}/stream", params={"response": "0"})
        latest = get(base, f"/agent/runs/{run_id}/stream")
    assert data_lines(first.content) == lines
    assert_valid(first.content)
    assert latest.headers["x-response-index"] == "1"
    assert_valid(latest.content)
    assert data_lines(latest.content)[-1] == b"[DONE]"
