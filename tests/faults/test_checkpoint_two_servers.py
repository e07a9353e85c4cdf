"""Two server processes on ONE SQLite file: the second one's start must not close the first one's live run.

[CK2.1-a]

Both are ``kill_support.py`` servers (a SQLite store and the file journal beside it, as
``agent-ref serve``). A's run waits in its gated calculator; B starts on the same file
(its start closes what dead processes left open, spec server §8.1-a); then A's tool goes
on. Before the fix B took A's live response for a dead one (the file journal lists every
unfinished response, whoever writes it): A's run ended ``error`` (its end conflicted with
B's recovery of it).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from agent_ref import SQLiteStore
from faults.kill_support import OpenStream, Server, assert_closed_and_valid, client, envelopes
from server_support import data_lines

if TYPE_CHECKING:
    from pathlib import Path


def test_second_server_start_leaves_the_first_servers_live_run(tmp_path: Path) -> None:
    """A's run, live while B starts on the same file, ends ``end_turn`` in A's stream, A's journal and the store."""
    db, gate = tmp_path / "agents.db", tmp_path / "gate"
    with Server(db, gate) as a:
        stream = OpenStream(a.base, "/agent/run", {"prompt": "What is 5 + (10 * 2)?"})
        try:
            stream.read_until(b'"type":"tool_call"')  # A's calculator waits for the gate
            with Server(db) as b:
                # B answers only once its start-up (the lifespan, whose recovery of dead responses is
                # awaited before uvicorn serves) is over: what it did to A's response is done by now
                with client() as http:
                    assert http.get(b.base + "/").status_code == 200
                gate.touch()
                stream.read_to_end()
        finally:
            stream.close()
    raw = stream.whole_events()
    assert_closed_and_valid(raw)
    lines = data_lines(raw)
    assert [e["stop_reason"] for e in envelopes(lines, "meta_final")] == ["end_turn"]
    assert envelopes(lines, "error") == []
    agent, run_id = stream.headers["x-agent-uuid"], stream.headers["x-run-id"]
    journal = (tmp_path / "agents.db.streams" / f"{run_id}.0.log").read_bytes().split(b"\n")
    assert journal.count(b"[DONE]") == 1  # nobody else closed A's response
    assert b"server_restarted" not in b"\n".join(journal)
    records = asyncio.run(SQLiteStore(db).runs(agent))
    assert [r.stop_reason for r in records] == ["end_turn"]
