"""``POST /agent/runs/{run_id}/stop`` on one process with SQLite (spec server §1.4).

Every stream a test receives is validated strictly as raw SSE bytes.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import httpx2

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import ServerConfig, create_app
from server_support import Gate, data_lines, get, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

ARITHMETIC = "What is 5 + (10 * 2)?"
CONFIRM = "Please confirm: delete the temp files"


def meta(lines: list[bytes], kind: str) -> Any:
    (env,) = [json.loads(x) for x in lines if x != b"[DONE]" and json.loads(x)["type"] == kind]
    return json.loads(env["delta"])


def test_spec_server_1_4_a_stop_mid_run_aborts_it(tmp_path: Path) -> None:
    """A run held in a gated tool is stopped: ``error`` aborted, the call answered, ``meta_final`` aborted, ``[DONE]``."""
    gate = Gate()
    app = create_app(store=SQLiteStore(tmp_path / "a.db"), model_factory=ScriptedModel, tools=gate.tools())
    body = bytearray()
    opened: dict[str, str] = {}
    headers_read = threading.Event()  # the tool may be reached before the reader has the headers
    with running(app) as base:

        def read() -> None:
            with (
                httpx2.Client(timeout=30) as client,
                client.stream("POST", base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
            ):
                opened["run"] = r.headers["x-run-id"]
                headers_read.set()
                for chunk in r.iter_bytes():
                    body.extend(chunk)

        reader = threading.Thread(target=read)
        reader.start()
        try:
            assert gate.entered.wait(20), "the run never reached its tool"
            assert headers_read.wait(20), "the reader never got the response's headers"
            stopped = post(base, f"/agent/runs/{opened['run']}/stop", {})
            # the order, not a duration: the stop answered while the tool still held its call
            answered_while_held = not gate.left.is_set()
        finally:
            gate.opened.set()
        reader.join(30)
        again = post(base, f"/agent/runs/{opened['run']}/stop", {})
        stored = get(base, f"/agent/runs/{opened['run']}/stream?response=0")
    assert stopped.status_code == 200, stopped.text
    assert stopped.json() == {
        "run_id": opened["run"],
        "agent_uuid": stopped.json()["agent_uuid"],
        "stopped": True,
        "stop_reason": "aborted",
        "status": "idle",
    }
    assert answered_while_held, "the stop waited for the tool's call to end"
    assert not reader.is_alive()
    assert_valid(bytes(body))
    lines = data_lines(bytes(body))
    assert lines[-1] == b"[DONE]"
    assert meta(lines, "meta_final")["stop_reason"] == "aborted"
    assert b"cancelled: the run was aborted" in b"".join(lines)
    assert_valid(stored.content)
    assert data_lines(stored.content) == lines
    assert again.status_code == 409
    assert again.json()["error"]["type"] == "run_finished"
    assert again.json()["error"]["stop_reason"] == "aborted"


def test_spec_server_1_4_b_stop_of_a_finished_run_is_409_with_its_state(tmp_path: Path) -> None:
    """A run that ended by itself: the stop changes nothing and says how it ended."""
    app = create_app(store=SQLiteStore(tmp_path / "a.db"), model_factory=ScriptedModel)
    with running(app) as base:
        done = post(base, "/agent/run", {"prompt": ARITHMETIC})
        run_id = done.headers["x-run-id"]
        answer = post(base, f"/agent/runs/{run_id}/stop", {})
        after = get(base, f"/agent/runs/{run_id}/stream?response=0")
    assert answer.status_code == 409
    error = answer.json()["error"]
    assert (error["type"], error["stop_reason"], error["agent_status"]) == ("run_finished", "end_turn", "idle")
    assert data_lines(after.content) == data_lines(done.content)


def test_spec_server_1_4_b_stop_of_a_paused_run_abandons_it(tmp_path: Path) -> None:
    """A run paused for a frontend tool: abandoned, its closing response journaled and valid."""
    app = create_app(store=SQLiteStore(tmp_path / "a.db"), model_factory=ScriptedModel)
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        run_id = first.headers["x-run-id"]
        stopped = httpx2.post(f"{base}/agent/runs/{run_id}/stop", timeout=30)  # no body at all
        closing = get(base, f"/agent/runs/{run_id}/stream?response=1")
        again = post(base, f"/agent/runs/{run_id}/stop", {})
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["stop_reason"] == "abandoned"
    assert_valid(closing.content)
    assert meta(data_lines(closing.content), "meta_final")["stop_reason"] == "abandoned"
    assert again.status_code == 409  # nothing is paused any more
    assert again.json()["error"]["stop_reason"] == "abandoned"


def test_spec_server_1_4_a_stop_checks_token_host_body_and_run(tmp_path: Path) -> None:
    """The stop has the checks of every endpoint: token, Host, body; an unknown run is 404."""
    app = create_app(
        store=SQLiteStore(tmp_path / "a.db"), model_factory=ScriptedModel, config=ServerConfig(token="t0ken")
    )
    auth = {"Authorization": "Bearer t0ken"}
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM}, headers=auth)
        path = f"/agent/runs/{first.headers['x-run-id']}/stop"
        no_token = post(base, path, {})
        bad_host = post(base, path, {}, headers={**auth, "Host": "evil.example"})
        extra = post(base, path, {"why": "x"}, headers=auth)
        text = post(base, path, None, headers={**auth, "Content-Type": "text/plain"}, content=b"stop")
        unknown = post(base, "/agent/runs/nope/stop", {}, headers=auth)
        still = post(base, path, {}, headers=auth)
    assert no_token.status_code == 401
    assert bad_host.status_code == 421
    assert extra.status_code == 422
    assert text.status_code == 415
    assert unknown.status_code == 404
    assert still.status_code == 200  # none of the refusals touched the run
