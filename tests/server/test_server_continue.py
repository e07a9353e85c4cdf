"""A server in checkpoint mode continues a dead run itself: the in-process cases (spec server §CN).

[CN1-a] [CN1-c] [CN1-d]

The real-process cases (kill -9 on SQLite and PostgreSQL) are in
``tests/faults/test_checkpoint_serve.py``; here: a run this process lost with the database
continues once it answers ([CN1-c]), the follower's writer check on a checkpointed run
([CN1-d]), and what turns checkpoint mode on for the server ([CN1-a]).
"""

from __future__ import annotations

import asyncio
import json
import time

from agent_ref import Agent, MemoryStore, ScriptedModel
from agent_ref.run.options import AgentOptions
from agent_ref.server.app import RunManager, create_app
from agent_ref.server.streams import DONE_LINE, MemoryJournal
from agent_ref.store.state import Checkpoint, RunState
from agent_ref_support import meta
from fault_support import FlakyJournal, FlakyStore, Reader
from server_support import Gate, data_lines, running
from validating import assert_valid, violations

ARITHMETIC = "What is 5 + (10 * 2)?"


def test_spec_cn1_c_a_run_lost_with_the_database_continues_live_once_it_answers() -> None:
    """Store and journal fail inside a tool of a checkpointed run: the client's response ends ``error``
    (§3.3-d); once they answer, this process continues the run in response 1, journaled, to ``end_turn``."""
    store, journal, gate = FlakyStore(), FlakyJournal(), Gate()
    app = create_app(
        store=store,
        model_factory=ScriptedModel,
        journal=journal,
        tools=gate.tools(),
        agent_config={"checkpoints": True},
    )
    with running(app) as base:
        reader = Reader("POST", base + "/agent/run", json={"prompt": ARITHMETIC})
        reader.wait_open()
        assert gate.entered.wait(10)
        run_id, agent = reader.headers["x-run-id"], reader.headers["x-agent-uuid"]
        store.down = journal.down = True
        gate.opened.set()
        body = reader.finish(timeout=10)
        dead = data_lines(body)
        assert meta(dead, "meta_final")["stop_reason"] == "error"  # what the client read stays as it was
        deadline = time.monotonic() + 10
        while not app.state.manager.owed:  # the run itself failed (not only its client's stream), while down
            assert time.monotonic() < deadline, "the run did not fail with the database"
            time.sleep(0.02)
        store.down = journal.down = False
        while (journal.read(run_id, 1) or [])[-1:] != [DONE_LINE]:
            assert time.monotonic() < deadline, "the run was not continued once the database answered"
            time.sleep(0.05)
        assert journal.read(run_id, 0) == dead
        continuation = journal.read(run_id, 1) or []
        replay = Reader("GET", f"{base}/agent/runs/{run_id}/stream")  # the latest response: the continuation
        replayed = data_lines(replay.finish(timeout=10))
        assert replay.headers["x-response-index"] == "1"
    assert replayed == continuation
    assert_valid(continuation)
    assert [v.code for v in violations(b"\n".join(dead)) if v.code != "E140"] == []  # spec server §3.3-a
    assert meta(continuation, "meta_init")["resume"]["continued"] is True
    assert meta(continuation, "meta_final")["stop_reason"] == "end_turn"
    assert asyncio.run(store.run_responses(run_id)) == [dead, continuation]  # the store's log agrees
    state = asyncio.run(store.load(agent))
    assert state is not None
    assert state.status == "idle"


def test_spec_cn1_a_without_checkpoints_a_run_lost_with_the_database_is_closed_not_continued() -> None:
    """The same failure without checkpoint mode: the agent is recovered as before, no response 1."""
    store, journal, gate = FlakyStore(), FlakyJournal(), Gate()
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal, tools=gate.tools())
    assert app.state.manager.continues is False
    with running(app) as base:
        reader = Reader("POST", base + "/agent/run", json={"prompt": ARITHMETIC})
        reader.wait_open()
        assert gate.entered.wait(10)
        run_id = reader.headers["x-run-id"]
        store.down = journal.down = True
        gate.opened.set()
        reader.finish(timeout=10)
        store.down = journal.down = False
        deadline = time.monotonic() + 10
        while app.state.manager.owed:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    assert journal.read(run_id, 1) is None


def test_spec_cn1_a_checkpoint_mode_is_the_agents_option() -> None:
    """``agent_config`` ``checkpoints`` (what ``serve --checkpoints`` passes) or ``options.checkpoints``."""
    store = MemoryStore()
    assert create_app(
        store=store, model_factory=ScriptedModel, agent_config={"checkpoints": True}
    ).state.manager.continues
    options = AgentOptions(checkpoints=True)
    assert create_app(
        store=store, model_factory=ScriptedModel, agent_config={"options": options}
    ).state.manager.continues


def test_spec_cn1_d_a_checkpointed_writer_under_a_live_lease_is_not_dead() -> None:
    """[CN1-d]: a checkpoint stores ``responses`` = index + 1 while that response is written: not "a later one"."""
    store, journal = MemoryStore(), MemoryJournal()
    lines: list[bytes] = []
    agent = Agent(ScriptedModel(), store=store)
    asyncio.run(agent.run("hello", lines.append))
    run_id = json.loads(json.loads(lines[0])["delta"])["run_id"]
    journal.append(run_id, 0, lines[0])  # the writer's response, open
    state = agent.state
    state.status, state.lease_owner, state.lease_expires_at = "running", "elsewhere:1:x", time.time() + 60
    state.run = RunState(run_id=run_id, user_query="hello", started_at=time.time(), responses=1)
    state.run.checkpoint = Checkpoint(step=1)
    asyncio.run(store.save(state))
    manager = RunManager(store, journal)
    assert asyncio.run(manager.writer_dead(run_id, 0)) is False  # before: True, and the live run was taken over
    state.run.responses = 2  # a later response (a continuation elsewhere) claimed the run
    asyncio.run(store.save(state))
    assert asyncio.run(manager.writer_dead(run_id, 0)) is True
    state.run.responses, state.lease_expires_at = 1, time.time() - 1  # the writer stopped renewing its lease
    asyncio.run(store.save(state))
    assert asyncio.run(manager.writer_dead(run_id, 0)) is True
