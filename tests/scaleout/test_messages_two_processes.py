"""Streaming input across two server processes on one PostgreSQL database (spec server [IN2-a]).

Each process is ``tests/scaleout/serve_pg.py``. A message POSTed to process B reaches the
run working in process A at its next step boundary; one accepted just before A is killed
reaches the agent's next run on B. Every stream received is validated strictly.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING

import httpx2

from agent_ref.store.postgres import PostgresStore
from agent_ref_support import user_texts
from fault_support import wait_until
from server_support import post, read_events
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from agent_ref.store.state import RunRecord
    from scaleout_support import Process

ARITHMETIC = "What is 5 + (10 * 2)?"
NOTE = "Also, what is 8 + 1?"


def _records(url: str, agent_uuid: str) -> list[RunRecord]:
    async def body() -> list[RunRecord]:
        store = PostgresStore(url)
        try:
            return await store.runs(agent_uuid)
        finally:
            await store.aclose()

    return asyncio.run(body())


def _read_until_tool(base: str, body: bytearray, at_tool: threading.Event, stop: threading.Event) -> None:
    """Read a run's stream into ``body``; ``at_tool`` at its first tool call; ends quietly once ``stop`` is set."""
    try:
        with (
            httpx2.Client(timeout=60) as client,
            client.stream("POST", base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
        ):
            for chunk in r.iter_raw():
                body.extend(chunk)
                if b'"type":"tool_call"' in body and body.endswith(b"\n\n"):
                    at_tool.set()
                if stop.is_set():
                    return
    except httpx2.HTTPError:
        if not stop.is_set():  # the process was killed on purpose only after stop is set
            raise


def test_message_sent_to_b_reaches_the_run_on_a(
    processes: Callable[..., Process], pg_schema_url: str, tmp_path: Path
) -> None:
    """B accepts a message for a run working on A; A's next step has it, once [IN2-a] [IN1-a] [IN1-c]."""
    gate = tmp_path / "gate"
    a, b = processes("--gate", str(gate)), processes()
    body = bytearray()
    at_tool, stop = threading.Event(), threading.Event()
    reader = threading.Thread(target=_read_until_tool, args=(a.base, body, at_tool, stop))
    reader.start()
    try:
        assert at_tool.wait(30), "the run never reached its tool"
        first = read_events(bytes(body))[0]
        run_id, agent_uuid = first.id.split(":")[0], json.loads(first.data)["agent"]
        queued = post(b.base, f"/agent/runs/{run_id}/messages", {"text": NOTE})
    finally:
        gate.touch()
    reader.join(60)
    assert not reader.is_alive()
    late = post(b.base, f"/agent/runs/{run_id}/messages", {"text": "too late"})
    assert queued.status_code == 202, queued.text
    assert queued.json() == {"run_id": run_id, "agent_uuid": agent_uuid, "queued": 1}
    assert late.status_code == 409
    assert_valid(bytes(body))
    (record,) = _records(pg_schema_url, agent_uuid)
    assert user_texts(record.messages).count(NOTE) == 1
    at = next(i for i, m in enumerate(record.messages) if m["role"] == "user" and NOTE in json.dumps(m))
    # in the tool results' user turn, after them, as the API request carried it (spec agent-ref [SF3-a])
    assert [blk["type"] for blk in record.messages[at]["content"]] == ["tool_result", "text"]
    assert "9" in record.final_text


def test_message_accepted_before_a_dies_reaches_the_next_run(
    processes: Callable[..., Process], pg_schema_url: str, tmp_path: Path
) -> None:
    """Accepted by B, then A is killed mid-step: after A's lease, the agent's next run on B gets it [IN1-d]."""
    a, b = processes("--gate", str(tmp_path / "never"), "--lease", "1"), processes("--lease", "1")
    body = bytearray()
    at_tool, stop = threading.Event(), threading.Event()
    reader = threading.Thread(target=_read_until_tool, args=(a.base, body, at_tool, stop), daemon=True)
    reader.start()
    assert at_tool.wait(30), "the run never reached its tool"
    first = read_events(bytes(body))[0]
    run_id, agent_uuid = first.id.split(":")[0], json.loads(first.data)["agent"]
    queued = post(b.base, f"/agent/runs/{run_id}/messages", {"text": NOTE})
    stop.set()
    a.kill()
    assert queued.status_code == 202, queued.text
    answers: list[httpx2.Response] = []

    def not_refused() -> bool:  # the dead run's lease runs out, then B recovers it and runs the next one
        answers.append(post(b.base, "/agent/run", {"prompt": "What is 1 + 1?", "agent_uuid": agent_uuid}))
        return answers[-1].status_code != 409

    wait_until(not_refused, "B to take the next run once A's lease ran out", timeout=30, every=0.2)
    again = answers[-1]
    assert again.status_code == 200, again.text
    assert_valid(again.content)
    records = _records(pg_schema_url, agent_uuid)
    assert user_texts(records[-1].messages) == ["What is 1 + 1?", NOTE]
    assert sum(user_texts(r.messages).count(NOTE) for r in records) == 1
