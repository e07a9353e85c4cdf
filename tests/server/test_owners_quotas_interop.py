"""Quotas on the foreign endpoints (spec server [QU2-a]): ``POST /agui`` and ``POST /api/chat`` are runs too.

The requests are the bodies the foreign clients send (an AG-UI ``RunAgentInput``, a
``useChat`` body). Every envelope stream a run wrote is validated strictly.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import ServerConfig, create_app
from agent_ref.server.quotas import Quotas
from agent_ref.store.state import RunRecord, Usage
from server_support import Gate, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def _run_input(thread: str, text: str) -> dict[str, Any]:
    """An AG-UI ``RunAgentInput`` as ``HttpAgent`` posts it."""
    user = {"id": "u1", "role": "user", "content": text}
    return {"threadId": thread, "runId": "r1", "messages": [user], "tools": [], "context": [], "state": {}}


def _chat(chat_id: str, text: str) -> dict[str, Any]:
    """A ``useChat`` body as the AI SDK's transport posts it."""
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": chat_id, "messages": [message], "trigger": "submit-message"}


def _refused(answer: httpx2.Response, quota: str) -> dict[str, Any]:
    assert answer.status_code == 429, answer.text
    assert int(answer.headers["retry-after"]) >= 1
    assert answer.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = answer.json()["error"]
    assert (error["type"], error["quota"]) == ("quota_exceeded", quota)
    return error


def _agents(store: SQLiteStore) -> list[str]:
    return sorted(s.agent_uuid for s in asyncio.run(store.agents()))


def _valid_runs(store: SQLiteStore, *answers: httpx2.Response) -> None:
    for answer in answers:
        responses = asyncio.run(store.run_responses(answer.headers["x-run-id"]))
        assert responses
        for response in responses:
            assert_valid(response)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[tuple[Gate, SQLiteStore, str]]:
    """A server whose ``calculator`` waits for the test, one run in flight allowed."""
    gate = Gate()
    store = SQLiteStore(tmp_path / "a.db")
    cfg = ServerConfig(quotas=Quotas(max_runs_in_flight=1))
    app = create_app(store=store, model_factory=ScriptedModel, tools=gate.tools(), config=cfg)
    with running(app) as base:
        yield gate, store, base
        gate.opened.set()


def test_spec_qu2_a_agui_and_chat_past_the_runs_in_flight_are_429_and_create_nothing(
    gated: tuple[Gate, SQLiteStore, str],
) -> None:
    """A run works: a new AG-UI thread and a new chat are 429 ``max_runs_in_flight``, no agent made [QU2-a]."""
    gate, store, base = gated
    body = bytearray()

    def read() -> None:
        with (
            httpx2.Client(timeout=30) as client,
            client.stream("POST", base + "/agent/run", json={"prompt": "What is 5 + (10 * 2)?"}) as answer,
        ):
            for chunk in answer.iter_bytes():
                body.extend(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert gate.entered.wait(20), "the run never reached its tool"
        before = _agents(store)
        agui = post(base, "/agui", _run_input("t-quota", "hello"))
        chat = post(base, "/api/chat", _chat("c-quota", "hello"))
        after = _agents(store)
    finally:
        gate.opened.set()
    reader.join(30)
    assert _refused(agui, "max_runs_in_flight")["used"] == 1
    assert _refused(chat, "max_runs_in_flight")["limit"] == 1
    assert after == before  # [QU1-a]: nothing was created
    assert_valid(bytes(body))
    # the run ended: the same requests now start their runs
    agui_later = post(base, "/agui", _run_input("t-quota", "hello"))
    chat_later = post(base, "/api/chat", _chat("c-quota", "hello"))
    assert agui_later.status_code == chat_later.status_code == 200, (agui_later.text, chat_later.text)
    _valid_runs(store, agui_later, chat_later)


def test_spec_qu2_a_agui_and_chat_past_the_budget_are_429_until_midnight(tmp_path: Path) -> None:
    """Spend today reaches the budget: the next AG-UI run and chat are 429 ``budget_usd``, no agent made [QU2-a]."""
    store = SQLiteStore(tmp_path / "a.db")
    app = create_app(store=store, model_factory=ScriptedModel, config=ServerConfig(quotas=Quotas(budget_usd=1.0)))
    with running(app) as base:
        first = post(base, "/api/chat", _chat("c-1", "What is 2 + 2?"))
        assert first.status_code == 200, first.text
        _record_cost(store, first.headers["x-agent-uuid"], 1.0, time.time())
        before = _agents(store)
        agui = post(base, "/agui", _run_input("t-2", "What is 2 + 2?"))
        chat = post(base, "/api/chat", _chat("c-2", "What is 2 + 2?"))
        again = post(base, "/api/chat", _chat("c-1", "And 3 + 3?"))  # continuing a chat is a run too
        after = _agents(store)
    _valid_runs(store, first)
    error = _refused(agui, "budget_usd")
    assert "midnight UTC" in error["message"]
    _refused(chat, "budget_usd")
    _refused(again, "budget_usd")
    assert after == before


def _record_cost(store: SQLiteStore, agent_uuid: str, cost: float, finished_at: float) -> None:
    """A finished run of ``agent_uuid`` that cost ``cost``, recorded as the agent's run would be."""

    async def record() -> None:
        state = await store.load(agent_uuid)
        assert state is not None
        run = RunRecord(
            run_id=f"run-cost-{int(finished_at * 1000)}",
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
