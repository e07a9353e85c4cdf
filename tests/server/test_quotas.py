"""Quotas per principal (spec server §QU): runs in flight, messages a minute, spend a day; 429, nothing half-done.

Every stream a test receives is validated strictly as raw SSE bytes.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import ServerConfig, create_app
from agent_ref.server.quotas import DAY_SECONDS, QuotaExceeded, Quotas, QuotaState, day_start
from agent_ref.store.state import RunRecord, Usage
from server_support import Gate, data_lines, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ARITHMETIC = "What is 5 + (10 * 2)?"


def test_quota_state_counts_each_principal_apart() -> None:
    """Two principals: one's messages and starts never count against the other's [QU1-a] [QU1-b] [QU1-c] [QU1-d]."""
    state = QuotaState(Quotas(max_runs_in_flight=1, messages_per_minute=2, budget_usd=1.0))
    state.take_message("alice", 100.0)
    state.take_message("alice", 110.0)
    with pytest.raises(QuotaExceeded) as refused:
        state.take_message("alice", 120.0)
    assert refused.value.quota == "messages_per_minute"
    assert refused.value.retry_after == 40  # the oldest (100) leaves the window at 160
    state.take_message("bob", 120.0)  # bob's minute is his own
    state.take_message("alice", 160.5)  # the oldest has left
    state.give_back_message("alice", 160.5)  # not queued after all: it does not count
    state.take_message("alice", 161.0)
    with pytest.raises(QuotaExceeded):
        state.take_message("alice", 162.0)
    state.check_runs("alice", 0)
    with state.start("alice"):  # a start the store does not show yet holds its place
        with pytest.raises(QuotaExceeded, match="1 runs in flight"):
            state.check_runs("alice", 0)
        state.check_runs("bob", 0)
    state.check_runs("alice", 0)
    assert state.starting == {}
    with pytest.raises(QuotaExceeded):
        state.check_runs("bob", 1)
    noon = day_start(1_800_000_000.0) + DAY_SECONDS / 2
    state.check_budget("alice", 0.99, noon)
    with pytest.raises(QuotaExceeded) as broke:
        state.check_budget("alice", 1.0, noon)
    assert broke.value.quota == "budget_usd"
    assert broke.value.retry_after == DAY_SECONDS // 2  # the next UTC midnight
    unlimited = QuotaState()
    for n in range(1000):
        unlimited.take_message("alice", float(n))
    unlimited.check_runs("alice", 10**6)
    unlimited.check_budget("alice", 1e9, noon)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[Gate, SQLiteStore, str]]:
    """A server whose ``calculator`` waits for the test, with quotas of 1 run and 1 message a minute."""
    gate = Gate()
    store = SQLiteStore(tmp_path / "a.db")
    cfg = ServerConfig(quotas=Quotas(max_runs_in_flight=1, messages_per_minute=1))
    app = create_app(
        store=store, model_factory=ScriptedModel, tools=gate.tools(), agent_config={"stream_history": True}, config=cfg
    )
    with running(app) as base:
        yield gate, store, base
        gate.opened.set()


def _start_gated(base: str, gate: Gate) -> tuple[threading.Thread, bytearray, dict[str, str]]:
    body = bytearray()
    opened: dict[str, str] = {}
    headed = threading.Event()

    def read() -> None:
        with (
            httpx2.Client(timeout=30) as client,
            client.stream("POST", base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
        ):
            opened["run"] = r.headers["x-run-id"]
            headed.set()
            for chunk in r.iter_bytes():
                body.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    assert gate.entered.wait(20), "the run never reached its tool"
    assert headed.wait(20), "the run's answer never came"
    return reader, body, opened


def _refused(answer: httpx2.Response, quota: str) -> dict[str, Any]:
    assert answer.status_code == 429, answer.text
    assert int(answer.headers["retry-after"]) >= 1
    error: dict[str, Any] = answer.json()["error"]
    assert error["type"] == "quota_exceeded"
    assert error["quota"] == quota
    return error


def test_a_run_past_the_runs_in_flight_is_429_and_creates_nothing(gated: tuple[Gate, SQLiteStore, str]) -> None:
    """While one run works, a second is 429 naming the quota: no agent stored; after it ends one starts [QU1-b]."""
    gate, store, base = gated
    reader, body, _ = _start_gated(base, gate)
    try:
        agents_before = asyncio.run(store.agents())
        second = post(base, "/agent/run", {"prompt": "hello there"})
        agents_after = asyncio.run(store.agents())
    finally:
        gate.opened.set()
    reader.join(30)
    error = _refused(second, "max_runs_in_flight")
    assert error["limit"] == 1
    assert error["used"] == 1
    assert agents_after == agents_before  # [QU1-a]: no agent, no run, nothing journaled
    assert_valid(bytes(body))
    later = post(base, "/agent/run", {"prompt": "hello there"})
    assert later.status_code == 200
    assert_valid(later.content)


def test_a_message_past_the_rate_is_429_and_not_queued(gated: tuple[Gate, SQLiteStore, str]) -> None:
    """One message a minute: a bad one does not count, the second good one is 429 and never reaches the run [QU1-c]."""
    gate, _, base = gated
    reader, body, opened = _start_gated(base, gate)
    path = f"/agent/runs/{opened['run']}/messages"
    try:
        bad = post(base, path, {"text": 3})
        first = post(base, path, {"text": "Also, what is 8 + 1?"})
        second = post(base, path, {"text": "And 9 + 9?"})
    finally:
        gate.opened.set()
    reader.join(30)
    assert bad.status_code == 422  # [QU1-a]: refused for its own reason, not counted
    assert first.status_code == 202, first.text
    _refused(second, "messages_per_minute")
    assert_valid(bytes(body))
    finals = [json.loads(x) for x in data_lines(bytes(body)) if x != b"[DONE]"]
    text = "".join(p["delta"] for p in finals if p["type"] == "meta_final")
    assert "Also, what is 8 + 1?" in text
    assert "And 9 + 9?" not in text


def test_a_run_past_the_days_budget_is_429_until_midnight(tmp_path: Path) -> None:
    """Spend recorded today reaches the budget: the next run is 429 ``budget_usd``; yesterday's does not count [QU1-d]."""
    store = SQLiteStore(tmp_path / "a.db")
    cfg = ServerConfig(quotas=Quotas(budget_usd=1.0))
    app = create_app(store=store, model_factory=ScriptedModel, config=cfg)
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": "What is 2 + 2?"})
        agent = first.headers["x-agent-uuid"]
        _record_cost(store, agent, 0.75, time.time() - DAY_SECONDS * 2)  # an old day: not today's
        _record_cost(store, agent, 0.6, time.time())
        within = post(base, "/agent/run", {"prompt": "What is 2 + 2?"})
        _record_cost(store, agent, 0.4, time.time())  # today's runs sum to the budget
        over = post(base, "/agent/run", {"prompt": "What is 2 + 2?"})
        agents = len(asyncio.run(store.agents()))
        again = post(base, "/agent/run", {"prompt": "hi", "agent_uuid": agent})
    assert_valid(first.content)
    assert within.status_code == 200
    assert_valid(within.content)
    error = _refused(over, "budget_usd")
    assert error["limit"] == 1.0
    assert error["used"] >= 1.0
    assert "midnight UTC" in error["message"]
    assert int(over.headers["retry-after"]) <= DAY_SECONDS
    assert agents == 2  # the refused run made no agent
    _refused(again, "budget_usd")  # continuing an agent is a run too


def _record_cost(store: SQLiteStore, agent_uuid: str, cost: float, finished_at: float) -> None:
    """A finished run of ``agent_uuid`` that cost ``cost``, recorded as the agent's run would be."""

    async def record() -> None:
        state = await store.load(agent_uuid)
        assert state is not None
        run = RunRecord(
            run_id=f"run-cost-{int(finished_at * 1000)}-{int(cost * 1000)}",
            agent_uuid=agent_uuid,
            user_query="priced",
            started_at=finished_at - 1,
            finished_at=finished_at,
            stop_reason="end_turn",
            steps=1,
            usage=Usage(input_tokens=10),
            cost_usd=cost,
            messages=[],
        )
        await store.save(state, run=run)

    asyncio.run(record())
