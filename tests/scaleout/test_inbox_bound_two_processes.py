"""Two server processes on one PostgreSQL database racing for a run's last inbox slots (spec server [IB1-d]).

Each process is ``tests/scaleout/serve_pg.py`` with the default bounds (32 messages
waiting per run). The run is held in A's gated calculator; 40 messages are sent at once,
half to A and half to B, from 8 threads. Exactly 32 are ``202`` and 8 are ``429
inbox_full``: the bound is read under the run's ``inbox_runs`` row lock, in the
transaction that inserts, so no two processes both take the last slot. The model's next
turn holds exactly the accepted messages, each once. Every stream is validated strictly.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import httpx2

from agent_ref.store.postgres import PostgresStore
from agent_ref.store.sessions import InboxBounds
from agent_ref_support import user_texts
from server_support import post, read_events
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from agent_ref.store.state import RunRecord
    from scaleout_support import Process

ARITHMETIC = "What is 5 + (10 * 2)?"
BOUND = InboxBounds().max_messages  # the default, which serve_pg.py (create_app's ServerConfig) has


def _records(url: str, agent_uuid: str) -> list[RunRecord]:
    async def body() -> list[RunRecord]:
        store = PostgresStore(url)
        try:
            return await store.runs(agent_uuid)
        finally:
            await store.aclose()

    return asyncio.run(body())


def _read(base: str, body: bytearray, at_tool: threading.Event) -> None:
    """Read a run's stream into ``body``; ``at_tool`` once its first tool call is in."""
    with (
        httpx2.Client(timeout=60) as client,
        client.stream("POST", base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
    ):
        for chunk in r.iter_raw():
            body.extend(chunk)
            if b'"type":"tool_call"' in body and body.endswith(b"\n\n"):
                at_tool.set()


def test_spec_server_ib1_d_two_processes_racing_for_the_last_slots(
    processes: Callable[..., Process], pg_schema_url: str, tmp_path: Path
) -> None:
    """[IB1-d] [IN2-a]: 40 messages to A and B at once, bound 32: exactly 32 accepted, and those the turn reads."""
    gate = tmp_path / "gate"
    a, b = processes("--gate", str(gate)), processes()
    body = bytearray()
    at_tool = threading.Event()
    reader = threading.Thread(target=_read, args=(a.base, body, at_tool))
    reader.start()
    try:
        assert at_tool.wait(30), "the run never reached its tool"
        first = read_events(bytes(body))[0]
        run_id, agent_uuid = first.id.split(":")[0], json.loads(first.data)["agent"]
        texts = [f"note {n}" for n in range(BOUND + 8)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(
                    lambda n: post((a, b)[n % 2].base, f"/agent/runs/{run_id}/messages", {"text": texts[n]}),
                    range(len(texts)),
                )
            )
    finally:
        gate.touch()
    reader.join(60)
    assert not reader.is_alive()
    statuses = [r.status_code for r in answers]
    assert sorted(set(statuses)) == [202, 429], [r.text for r in answers if r.status_code not in (202, 429)]
    assert statuses.count(202) == BOUND
    for refused in (r for r in answers if r.status_code == 429):
        assert refused.json()["error"]["bound"] == "inbox_messages"
        assert refused.headers["retry-after"] == "2"
    assert sorted(r.json()["queued"] for r in answers if r.status_code == 202) == list(range(1, BOUND + 1))
    accepted = {texts[n] for n, r in enumerate(answers) if r.status_code == 202}
    assert_valid(bytes(body))
    (record,) = _records(pg_schema_url, agent_uuid)
    delivered = user_texts(record.messages)[1:]
    assert sorted(delivered) == sorted(accepted)  # each accepted once, nothing refused
