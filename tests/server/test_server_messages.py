"""Streaming input and forks over HTTP: ``POST /agent/runs/{run_id}/messages``, ``fork: true`` (spec server §SE).

Every stream a test receives is validated strictly as raw SSE bytes.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any

import httpx2

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import create_app
from agent_ref.store.state import encode_state
from server_support import Gate, data_lines, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

ARITHMETIC = "What is 5 + (10 * 2)?"


def _meta(lines: list[bytes], kind: str) -> Any:
    parts = [json.loads(x) for x in lines if x != b"[DONE]" and json.loads(x)["type"] == kind]
    return json.loads("".join(p["delta"] for p in parts))


def test_message_to_a_working_run_reaches_its_next_step(tmp_path: Path) -> None:
    """202 while the run works; the model gets it at the next step; 409 once the run ended [SVSE2-a] [SVSE2-b] [SVSE2-c]."""
    gate = Gate()
    store = SQLiteStore(tmp_path / "a.db")
    app = create_app(
        store=store, model_factory=ScriptedModel, tools=gate.tools(), agent_config={"stream_history": True}
    )
    body = bytearray()
    opened: dict[str, str] = {}
    with running(app) as base:

        def read() -> None:
            with (
                httpx2.Client(timeout=30) as client,
                client.stream("POST", base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
            ):
                opened["run"] = r.headers["x-run-id"]
                for chunk in r.iter_bytes():
                    body.extend(chunk)

        reader = threading.Thread(target=read)
        reader.start()
        try:
            assert gate.entered.wait(20), "the run never reached its tool"
            queued = post(base, f"/agent/runs/{opened['run']}/messages", {"text": "Also, what is 8 + 1?"})
            bad = post(base, f"/agent/runs/{opened['run']}/messages", {"text": 3})
            unknown = post(base, f"/agent/runs/{opened['run']}/messages", {"text": "x", "role": "user"})
        finally:
            gate.opened.set()
        reader.join(30)
        late = post(base, f"/agent/runs/{opened['run']}/messages", {"text": "too late"})
        nowhere = post(base, "/agent/runs/no-such-run/messages", {"text": "hi"})
    assert queued.status_code == 202, queued.text
    assert queued.json()["queued"] == 1
    assert bad.status_code == 422
    assert bad.json()["error"]["field"] == "$.text"
    assert unknown.status_code == 422
    assert not reader.is_alive()
    assert_valid(bytes(body))
    lines = data_lines(bytes(body))
    final = _meta(lines, "meta_final")
    assert final["stop_reason"] == "end_turn"
    user_texts = [
        b["text"]
        for m in final["conversation_history"]
        if m["role"] == "user"
        for b in m["content"]
        if b["type"] == "text"
    ]
    assert "Also, what is 8 + 1?" in user_texts  # [SVSE2-a]: recorded as the user's turn
    assert late.status_code == 409
    assert late.json()["error"]["type"] == "not_accepting"
    assert nowhere.status_code == 404  # [OW1-b]: a run not known is 404, as another principal's run is


def test_run_with_fork_true_runs_a_fork(tmp_path: Path) -> None:
    """``fork: true`` runs a new agent forked from ``agent_uuid``; the original is untouched [SVSE1-a]."""
    import asyncio

    store = SQLiteStore(tmp_path / "a.db")
    app = create_app(store=store, model_factory=ScriptedModel)
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": "What is 2 + 2?"})
        original = first.headers["x-agent-uuid"]
        state = asyncio.run(store.load(original))
        assert state is not None
        before = encode_state(state)
        forked = post(base, "/agent/run", {"prompt": "hello there", "agent_uuid": original, "fork": True})
        no_agent = post(base, "/agent/run", {"prompt": "hi", "fork": True})
        not_bool = post(base, "/agent/run", {"prompt": "hi", "agent_uuid": original, "fork": "yes"})
    assert forked.status_code == 200
    assert_valid(forked.content)
    fork_uuid = forked.headers["x-agent-uuid"]
    assert fork_uuid != original
    assert _meta(data_lines(forked.content), "meta_init")["agent_uuid"] == fork_uuid
    after = asyncio.run(store.load(original))
    assert after is not None
    assert encode_state(after) == before
    fork_state = asyncio.run(store.load(fork_uuid))
    assert fork_state is not None
    assert fork_state.forked_from == original
    assert fork_state.messages[: len(after.messages)] == after.messages
    assert no_agent.status_code == 422
    assert "fork needs agent_uuid" in no_agent.json()["error"]["message"]
    assert not_bool.status_code == 422
