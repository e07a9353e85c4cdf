"""Two server processes on one SQLite file racing for a run's last inbox slots (spec server [IB1-d]).

Each process is ``serve_for_test.py`` with the default bounds (32 messages waiting per
run). The run is held in A's gated calculator; 40 messages are sent at once, half to A
and half to B, from 8 threads. Exactly 32 are ``202`` and 8 ``429 inbox_full``: the count
is read in the ``BEGIN IMMEDIATE`` transaction that inserts. The model's next turn holds
exactly the accepted messages, each once. The stream is validated strictly.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import httpx2

from agent_ref import SQLiteStore
from agent_ref.store.sessions import InboxBounds
from agent_ref_support import user_texts
from server_support import post, read_events, start_server_process, stop_server_process
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

ARITHMETIC = "What is 5 + (10 * 2)?"
BOUND = InboxBounds().max_messages  # the default, which serve_for_test.py (create_app's ServerConfig) has


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


def test_spec_server_ib1_d_two_processes_on_one_file_racing_for_the_last_slots(tmp_path: Path) -> None:
    """[IB1-d]: 40 messages to A and B at once, bound 32: exactly 32 accepted, and those the turn reads."""
    db = tmp_path / "agents.db"
    gate = tmp_path / "gate"
    proc_b, base_b = start_server_process(db)
    proc_a, base_a = start_server_process(db, "--gate", str(gate))
    body = bytearray()
    at_tool = threading.Event()
    try:
        reader = threading.Thread(target=_read, args=(base_a, body, at_tool))
        reader.start()
        assert at_tool.wait(30), "the run never reached its tool"
        run_id = read_events(bytes(body))[0].id.split(":")[0]
        texts = [f"note {n}" for n in range(BOUND + 8)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(
                pool.map(
                    lambda n: post((base_a, base_b)[n % 2], f"/agent/runs/{run_id}/messages", {"text": texts[n]}),
                    range(len(texts)),
                )
            )
        gate.touch()
        reader.join(60)
        assert not reader.is_alive()
    finally:
        gate.touch()
        stop_server_process(proc_a)
        stop_server_process(proc_b)
    statuses = [r.status_code for r in answers]
    assert sorted(set(statuses)) == [202, 429], [r.text for r in answers if r.status_code not in (202, 429)]
    assert statuses.count(202) == BOUND
    assert all(r.json()["error"]["bound"] == "inbox_messages" for r in answers if r.status_code == 429)
    accepted = {texts[n] for n, r in enumerate(answers) if r.status_code == 202}
    assert_valid(bytes(body))
    agent_uuid = json.loads(read_events(bytes(body))[0].data)["agent"]
    (record,) = asyncio.run(SQLiteStore(db).runs(agent_uuid))
    assert sorted(user_texts(record.messages)[1:]) == sorted(accepted)
