"""Streaming input through the store's inbox (spec [IN1-a]..[IN1-e]).

Messages sent concurrently by several clients, each through its own store object on the
agent's database (as other processes would), are each delivered exactly once, in the
order the inbox accepted them; a refused one is never delivered.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_ref import Agent, MemoryStore, ScriptedModel, SQLiteStore, StateError, default_tools
from agent_ref.store.sessions import InboxReceipt, InboxStore, fork_state
from agent_ref_support import assert_valid_responses, fast_retry, user_texts

if TYPE_CHECKING:
    from pathlib import Path


def _concurrent_run(
    agent: Agent, other: InboxStore, clients: int, each: int
) -> tuple[list[bytes], list[InboxReceipt], list[str]]:
    """Run the agent while ``clients`` threads send ``each`` messages through ``other``; lines, accepted, refused."""
    lines: list[bytes] = []
    started = threading.Event()
    run_id: list[str] = []
    accepted: list[InboxReceipt] = []
    refused: list[str] = []
    lock = threading.Lock()

    def sink(line: bytes) -> None:
        lines.append(line)
        if not started.is_set() and agent.state.run is not None:
            run_id.append(agent.state.run.run_id)
            started.set()
        time.sleep(0.004)  # a slow reader: the run works long enough for the clients

    def client(c: int) -> None:
        if not started.wait(30):
            return  # the run never started: the test's own assertions say so
        for i in range(each):
            text = f"note {c}-{i}"
            try:
                receipt = other.inbox_put(run_id[0], text)
            except StateError:
                with lock:
                    refused.append(text)
            else:
                with lock:
                    accepted.append(receipt)
                    accepted[-1] = InboxReceipt(receipt.agent_uuid, receipt.seq, receipt.waiting)
                    _TEXTS[(receipt.agent_uuid, receipt.seq)] = text
            time.sleep(0.002 * (c + 1))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    asyncio.run(agent.run("What is 5 + (10 * 2)?", sink))
    for t in threads:
        t.join(30)
    return lines, accepted, refused


_TEXTS: dict[tuple[str, int], str] = {}


def _check_exactly_once_in_order(
    agent: Agent, lines: list[bytes], accepted: list[InboxReceipt], refused: list[str]
) -> None:
    assert_valid_responses(lines)
    delivered = [t for t in user_texts(agent.state.messages) if t.startswith("note ")]
    in_order = [_TEXTS[(r.agent_uuid, r.seq)] for r in sorted(accepted, key=lambda r: r.seq)]
    assert delivered == in_order  # each accepted message once, in accepted order [IN1-c]
    assert not set(refused) & set(delivered)  # a refused message is never delivered [SE2.3-a]
    assert sorted(r.seq for r in accepted) == list(range(1, len(accepted) + 1))  # numbered without gaps


@settings(max_examples=4, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(clients=st.integers(1, 4), each=st.integers(1, 4))
def test_concurrent_senders_on_sqlite_are_delivered_once_in_order(tmp_path: Path, clients: int, each: int) -> None:
    """Several clients, each with its own SQLiteStore on the file, send while the run works [IN1-c] [IN1-a] [IN1-e]."""
    db = tmp_path / f"a-{clients}-{each}-{time.monotonic_ns()}.db"
    agent = Agent(ScriptedModel(), tools=default_tools(), store=SQLiteStore(db), retry=fast_retry())
    lines, accepted, refused = _concurrent_run(agent, SQLiteStore(db), clients, each)
    assert accepted, "no message was accepted: the run was too fast for the test"
    _check_exactly_once_in_order(agent, lines, accepted, refused)
    records = asyncio.run(SQLiteStore(db).runs(agent.agent_uuid))
    stored = [t for t in user_texts(records[-1].messages) if t.startswith("note ")]
    assert stored == [t for t in user_texts(agent.state.messages) if t.startswith("note ")]


def test_concurrent_senders_on_memory_are_delivered_once_in_order() -> None:
    """The same on the memory store, the senders on the agent's own store object [IN1-c]."""
    store = MemoryStore()
    agent = Agent(ScriptedModel(), tools=default_tools(), store=store, retry=fast_retry())
    lines, accepted, refused = _concurrent_run(agent, store, 3, 4)
    assert accepted
    _check_exactly_once_in_order(agent, lines, accepted, refused)


def test_inbox_refuses_unknown_closed_and_idle_runs(tmp_path: Path) -> None:
    """No open inbox for the run, or its agent not running: refused with where and why [IN1-b]."""
    store = SQLiteStore(tmp_path / "a.db")
    with pytest.raises(StateError, match="run nope has ended"):
        store.inbox_put("nope", "hi")
    agent = Agent(ScriptedModel(), tools=default_tools(), store=store, retry=fast_retry())
    asyncio.run(agent.run("hello there", lambda _line: None))
    run = asyncio.run(store.runs(agent.agent_uuid))[0].run_id
    with pytest.raises(StateError, match=f"run {run} has ended"):
        store.inbox_put(run, "too late")


def test_message_left_by_a_dead_run_is_delivered_by_the_next_run(tmp_path: Path) -> None:
    """Accepted for a run whose process died before saving it: the agent's next response delivers it [IN1-d].

    The process death is simulated in the store (the state saved running, the inbox open,
    then closed by recovery); the real ``kill -9`` is in tests/server/test_server_messages_fleet.py.
    """
    db = tmp_path / "a.db"
    store = SQLiteStore(db)
    first = Agent(ScriptedModel(), tools=default_tools(), store=store, retry=fast_retry())
    asyncio.run(first.run("hello there", lambda _line: None))
    state = asyncio.run(store.load(first.agent_uuid))
    assert state is not None
    state.status = "running"  # as the dead process left it
    asyncio.run(store.save(state))
    asyncio.run(store.inbox_open(first.agent_uuid, "dead-run", state.inbox_seq))
    receipt = SQLiteStore(db).inbox_put("dead-run", "Also, what is 8 + 1?")
    assert (receipt.agent_uuid, receipt.seq, receipt.waiting) == (first.agent_uuid, 1, 1)
    asyncio.run(store.inbox_close(first.agent_uuid, "dead-run", 0, if_empty=False))  # recovery closes it
    with pytest.raises(StateError):
        SQLiteStore(db).inbox_put("dead-run", "after the close")
    state = asyncio.run(store.load(first.agent_uuid))
    assert state is not None
    state.status = "idle"
    asyncio.run(store.save(state))
    later = asyncio.run(Agent.load(first.agent_uuid, SQLiteStore(db), ScriptedModel(), tools=default_tools()))
    lines: list[bytes] = []
    result = asyncio.run(later.run("What is 1 + 1?", lines.append))
    assert_valid_responses(lines)
    assert user_texts(result.conversation_history)[:2] == ["What is 1 + 1?", "Also, what is 8 + 1?"]
    saved = asyncio.run(SQLiteStore(db).load(first.agent_uuid))
    assert saved is not None
    assert saved.inbox_seq == 1  # saved with the context that holds it
    again = asyncio.run(later.run("hello there", lines.append))
    assert "8 + 1" not in json.dumps(again.conversation_history)  # not delivered twice


def test_a_fork_has_its_own_inbox() -> None:
    """A fork starts its inbox at 0, so its first message (seq 1) is not taken for delivered [IN1-c]."""
    agent = Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry())
    agent.state.inbox_seq = 5
    assert fork_state(agent.state).inbox_seq == 0


def test_concurrent_senders_on_postgresql_are_delivered_once_in_order(pg_schema_url: str) -> None:
    """The same with PostgreSQL: each client's ``inbox_put`` on a connection of its own [IN1-c] [IN1-a]."""
    from agent_ref.store.postgres import PostgresStore

    agent = Agent(ScriptedModel(), tools=default_tools(), store=PostgresStore(pg_schema_url), retry=fast_retry())
    lines, accepted, refused = _concurrent_run(agent, PostgresStore(pg_schema_url), 3, 3)
    assert accepted, "no message was accepted: the run was too fast for the test"
    _check_exactly_once_in_order(agent, lines, accepted, refused)


class _FailingInbox(MemoryStore):
    """A memory store whose inbox fails as a database in an outage would."""

    async def inbox_open(self, agent_uuid: str, run_id: str, delivered: int) -> None:
        raise StateError(f"the database is down ({agent_uuid}, {run_id}, {delivered})")

    async def inbox_take(self, agent_uuid: str, after: int) -> list[tuple[int, str]]:
        raise StateError(f"the database is down ({agent_uuid}, {after})")

    async def inbox_close(self, agent_uuid: str, run_id: str, after: int, *, if_empty: bool) -> bool:
        raise StateError(f"the database is down ({agent_uuid}, {run_id}, {after}, {if_empty})")


def test_a_failing_inbox_never_ends_the_run(caplog: pytest.LogCaptureFixture) -> None:
    """Open, read and close all fail: the run ends as it would have, the failures logged [IN1-f]."""
    agent = Agent(ScriptedModel(), tools=default_tools(), store=_FailingInbox(), retry=fast_retry())
    lines: list[bytes] = []
    result = asyncio.run(agent.run("What is 5 + (10 * 2)?", lines.append))
    assert_valid_responses(lines)
    assert result.stop_reason == "end_turn"
    assert "25" in result.final_text
    assert "could not open the inbox" in caplog.text
    assert "could not read the inbox" in caplog.text
    assert "could not close the inbox" in caplog.text
