"""Streaming input across processes: two servers on one SQLite file share the inbox (spec server [IN2-a]).

A message POSTed to process B reaches the run working in process A at its next step
boundary; a message accepted just before A is killed is delivered by the agent's next
response, on B. Every stream received is validated strictly as raw SSE bytes.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from typing import TYPE_CHECKING, Any

import httpx2

from agent_ref import SQLiteStore
from agent_ref_support import user_texts
from server_support import data_lines, post, read_events, start_server_process, stop_server_process
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Generator
    from pathlib import Path

ARITHMETIC = "What is 5 + (10 * 2)?"
NOTE = "Also, what is 8 + 1?"


def _stream(base: str, body: dict[str, Any], at_tool: threading.Event, into: bytearray) -> Generator[None]:
    """POST /agent/run on ``base``, appending the raw bytes to ``into``; ``at_tool`` set at the first tool call."""
    with (
        httpx2.Client(timeout=60) as client,
        client.stream("POST", base + "/agent/run", json=body) as r,
    ):
        for chunk in r.iter_raw():
            into.extend(chunk)
            if b'"type":"tool_call"' in into and into.endswith(b"\n\n"):
                at_tool.set()
            yield


def test_message_sent_to_another_process_reaches_the_run(tmp_path: Path) -> None:
    """B accepts a message for a run working on A; A's next step has it, after the tool results [IN2-a] [IN1-a]."""
    db = tmp_path / "agents.db"
    gate = tmp_path / "gate"
    proc_b, base_b = start_server_process(db)
    proc_a, base_a = start_server_process(db, "--gate", str(gate))
    body = bytearray()
    at_tool = threading.Event()
    try:
        reader = threading.Thread(target=lambda: [None for _ in _stream(base_a, {"prompt": ARITHMETIC}, at_tool, body)])
        reader.start()
        assert at_tool.wait(30), "the run never reached its tool"
        run_id = read_events(bytes(body))[0].id.split(":")[0]
        queued = post(base_b, f"/agent/runs/{run_id}/messages", {"text": NOTE})
        gate.touch()
        reader.join(60)
        assert not reader.is_alive()
        late = post(base_b, f"/agent/runs/{run_id}/messages", {"text": "too late"})
    finally:
        gate.touch()
        stop_server_process(proc_a)
        stop_server_process(proc_b)
    assert queued.status_code == 202, queued.text
    assert queued.json()["queued"] == 1
    assert late.status_code == 409  # [SE2.3-a] across processes too
    assert late.json()["error"]["type"] == "not_accepting"
    assert_valid(bytes(body))
    lines = data_lines(bytes(body))
    final = [json.loads(x) for x in lines if x != b"[DONE]"]
    agent_uuid = final[0]["agent"]
    records = asyncio.run(SQLiteStore(db).runs(agent_uuid))
    assert len(records) == 1
    messages = records[0].messages
    assert user_texts(messages).count(NOTE) == 1  # delivered once
    at = next(i for i, m in enumerate(messages) if m["role"] == "user" and NOTE in json.dumps(m))
    # at the step boundary: in the user turn of the first step's tool results, after them, as the API
    # request carried it (spec agent-ref [SF3-a]), before the next model turn
    assert [b["type"] for b in messages[at]["content"]] == ["tool_result", "text"]
    assert messages[at - 1]["role"] == "assistant"
    assert messages[at + 1]["role"] == "assistant"
    assert "9" in json.dumps(messages[-1])  # the model answered it


def test_message_accepted_before_the_run_dies_reaches_the_next_run(tmp_path: Path) -> None:
    """Accepted by B, then A is killed mid-step: the agent's next run (on a new process C) gets it [IN1-d]."""
    db = tmp_path / "agents.db"
    proc_b, base_b = start_server_process(db)
    proc_a, base_a = start_server_process(db, "--gate", str(tmp_path / "never"))
    body = bytearray()
    at_tool = threading.Event()
    try:
        stream = _stream(base_a, {"prompt": ARITHMETIC}, at_tool, body)
        for _ in stream:
            if at_tool.is_set():
                break
        run_id = read_events(bytes(body))[0].id.split(":")[0]
        agent_uuid = json.loads(read_events(bytes(body))[0].data)["agent"]
        queued = post(base_b, f"/agent/runs/{run_id}/messages", {"text": NOTE})
        proc_a.send_signal(signal.SIGKILL)  # our own child, by its pid
        proc_a.wait(20)
        stream.close()
        stop_server_process(proc_b)
        # a process started on the database recovers the dead run (spec server §3.3) and runs the next one
        proc_c, base_c = start_server_process(db)
        try:
            refused = post(base_c, f"/agent/runs/{run_id}/messages", {"text": "to the dead run"})
            again = post(base_c, "/agent/run", {"prompt": "What is 1 + 1?", "agent_uuid": agent_uuid})
        finally:
            stop_server_process(proc_c)
    finally:
        stop_server_process(proc_a)
        stop_server_process(proc_b)
    assert queued.status_code == 202, queued.text
    assert again.status_code == 200, again.text
    assert_valid(again.content)
    assert refused.status_code == 409  # the dead run takes nothing now
    records = asyncio.run(SQLiteStore(db).runs(agent_uuid))
    last = records[-1]
    assert last.stop_reason == "end_turn"
    assert user_texts(last.messages) == ["What is 1 + 1?", NOTE]  # joined the next run's first user turn
    every = [t for r in records for t in user_texts(r.messages)]
    assert every.count(NOTE) == 1
