"""A database that fails under the server, without PostgreSQL (spec server §3.3-d, §3.4-a; issue 24 case 1).

[S3.3-d] [S3.4-a]

The store and the journal here are the in-memory ones with a switch that makes them
fail as ``PostgresStore`` / ``PostgresJournal`` do when their database is down
(``UnavailableError``, whose text names the database). The same faults on a real
PostgreSQL stopped and started are in ``tests/faults/test_pg_outage.py``.
"""

from __future__ import annotations

import time
from typing import Any

import httpx2

from agent_ref import ScriptedModel
from agent_ref.server.app import create_app
from agent_ref.server.streams import DONE_LINE
from agent_ref_support import meta
from fault_support import FlakyJournal, FlakyStore, Reader
from server_support import Gate, data_lines, post, running
from validating import assert_valid, violations

ARITHMETIC = "What is 5 + (10 * 2)?"


def _assert_unavailable(answer: httpx2.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["retry-after"]) >= 1
    assert answer.json()["error"]["type"] == "database_unavailable"
    for secret in ("db.internal", "6543", "agents", "PostgreSQL", "server closed"):
        assert secret not in answer.text, f"{secret!r} reached the client: {answer.text}"


def _post(base: str, body: dict[str, Any]) -> httpx2.Response:
    with httpx2.Client(timeout=10) as client:  # a hang fails here, in 10 s
        return client.post(base + "/agent/run", json=body)


def test_spec_server_3_4_a_unavailable_store_is_503_naming_nothing() -> None:
    """A new run, and a run of a stored agent, while the store is down: 503 + Retry-After, not 409/404."""
    store, journal = FlakyStore(), FlakyJournal()
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal)
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": "hello"})
        assert first.status_code == 200
        assert_valid(first.content)
        store.down = True
        _assert_unavailable(_post(base, {"prompt": "hello"}))
        answer = _post(base, {"prompt": "hello", "agent_uuid": first.headers["x-agent-uuid"]})
        _assert_unavailable(answer)
        assert answer.headers["retry-after"] == "3"
        store.down = False
        again = _post(base, {"prompt": "hello", "agent_uuid": first.headers["x-agent-uuid"]})
        assert again.status_code == 200
        assert_valid(again.content)


def test_spec_server_3_4_a_first_line_the_journal_refuses_is_503_not_a_hang() -> None:
    """The journal is down when a run starts: 503 at once (before: 0 bytes, for ever)."""
    store, journal = FlakyStore(), FlakyJournal()
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal)
    with running(app) as base:
        journal.down = True
        answer = _post(base, {"prompt": "hello"})
        _assert_unavailable(answer)
        journal.down = False
        assert _post(base, {"prompt": "hello"}).status_code == 200


def test_spec_server_3_3_d_journal_down_mid_run_ends_the_stream_then_the_journal_and_agent() -> None:
    """The journal and store fail while a run is in a tool: the client's stream ends at once, closed.

    Once they answer again the journal holds what the client got, and the agent runs again.
    """
    store, journal, gate = FlakyStore(), FlakyJournal(), Gate()
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal, tools=gate.tools())
    with running(app) as base:
        reader = Reader("POST", base + "/agent/run", json={"prompt": ARITHMETIC})
        reader.wait_open()
        assert gate.entered.wait(10)
        run_id, agent = reader.headers["x-run-id"], reader.headers["x-agent-uuid"]
        store.down = journal.down = True
        gate.opened.set()
        body = reader.finish(timeout=10)
        lines = data_lines(body)
        assert lines[-1] == DONE_LINE
        assert [v.code for v in violations(body) if v.code != "E140"] == []
        assert meta(lines, "error")["type"] == "server_unavailable"
        assert meta(lines, "meta_final")["stop_reason"] == "error"

        store.down = journal.down = False
        deadline = time.monotonic() + 10
        while (journal.read(run_id, 0) or [])[-1:] != [DONE_LINE]:
            assert time.monotonic() < deadline, "the journal was not closed once it answered"
            time.sleep(0.05)
        assert journal.read(run_id, 0) == lines
        while app.state.manager.owed:  # the journal closes first, then the agent is recovered
            assert time.monotonic() < deadline, f"still owed: {app.state.manager.owed}"
            time.sleep(0.05)
        after = _post(base, {"prompt": "hello", "agent_uuid": agent})
        assert after.status_code == 200, after.text
        assert_valid(after.content)
