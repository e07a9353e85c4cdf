"""One store suite, run against SQLite and PostgreSQL alike (spec agent-ref §4, spec scaleout §1).

Every test gets a ``store_factory`` (see ``conftest.py``): each call makes a new store
object on the same database, standing for another process. The PostgreSQL variant uses a
schema of its own per test.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, AgentState, ConflictError, RunRecord, ScriptedModel, default_tools
from agent_ref.store.core import LogBatch
from agent_ref.store.state import RunState, Usage
from agent_ref_support import assert_valid_responses
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine

    from agent_ref.store.core import Store

    Factory = Callable[[], Store]


def _go(factory: Factory, count: int, body: Callable[..., Awaitable[Any]]) -> Any:
    """Run ``body(*stores)`` with ``count`` fresh stores in one event loop; close the pools after."""

    async def main() -> Any:
        stores = [factory() for _ in range(count)]
        try:
            return await body(*stores)
        finally:
            for store in stores:
                close: Callable[[], Coroutine[Any, Any, None]] | None = getattr(store, "aclose", None)
                if close is not None:
                    await close()

    return asyncio.run(main())


def _state(uuid: str = "agent-1", **kw: Any) -> AgentState:
    return AgentState(agent_uuid=uuid, model="scripted", **kw)


def _record(run_id: str, finished_at: float) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        agent_uuid="agent-1",
        user_query="q",
        started_at=finished_at - 1,
        finished_at=finished_at,
        stop_reason="end_turn",
        steps=1,
        usage=Usage(),
        cost_usd=None,
        messages=[{"role": "user", "content": "q"}],
    )


def test_spec_4_3_save_then_load_round_trips_and_bumps_the_version(store_factory: Factory) -> None:
    """A new agent is saved at version 0 and read back at 1 by another store object."""

    async def body(a: Store, b: Store) -> None:
        assert await b.load("agent-1") is None
        state = _state(messages=[{"role": "user", "content": "héllo ✓"}])
        await a.save(state)
        assert state.version == 1
        loaded = await b.load("agent-1")
        assert loaded is not None
        assert loaded.version == 1
        assert loaded.messages == state.messages
        loaded.status = "awaiting_frontend_tools"
        await b.save(loaded)
        again = await a.load("agent-1")
        assert again is not None
        assert (again.version, again.status) == (2, "awaiting_frontend_tools")

    _go(store_factory, 2, body)


def test_spec_4_3_stale_version_conflicts_and_writes_nothing(store_factory: Factory) -> None:
    """Of two stores that loaded version 1, the second save conflicts; its log and run are not written."""

    async def body(a: Store, b: Store) -> None:
        await a.save(_state())
        first, second = await a.load("agent-1"), await b.load("agent-1")
        assert first is not None
        assert second is not None
        await a.save(first, log=LogBatch("run-1", 0, 0, [b"a", b"[DONE]"]))
        with pytest.raises(ConflictError, match="another process"):
            await b.save(second, log=LogBatch("run-2", 0, 0, [b"x"]), run=_record("run-2", 10.0))
        assert second.version == 1  # unchanged on conflict
        assert await a.run_log("run-2") == []
        assert await a.runs("agent-1") == []
        assert await a.run_log("run-1") == [b"a", b"[DONE]"]

    _go(store_factory, 2, body)


@pytest.mark.parametrize("uuid", [f"agent-{i}" for i in range(5)])  # five races
def test_spec_scaleout_1_2_a_concurrent_saves_exactly_one_wins(store_factory: Factory, uuid: str) -> None:
    """Two stores save the same loaded version at once: exactly one commits [P1.2-a]."""

    async def body(a: Store, b: Store) -> None:
        await a.save(_state(uuid))
        x, y = await a.load(uuid), await b.load(uuid)
        assert x is not None
        assert y is not None
        x.status, y.status = "running", "idle"
        outcomes = await asyncio.gather(
            a.save(x, log=LogBatch("r-x", 0, 0, [b"x"])),
            b.save(y, log=LogBatch("r-y", 0, 0, [b"y"])),
            return_exceptions=True,
        )
        assert sum(o is None for o in outcomes) == 1, outcomes
        assert sum(isinstance(o, ConflictError) for o in outcomes) == 1, outcomes
        winner = x if outcomes[0] is None else y
        stored = await a.load(uuid)
        assert stored is not None
        assert (stored.version, stored.status) == (2, winner.status)
        logs = (await a.run_log("r-x"), await a.run_log("r-y"))
        assert logs == (([b"x"], []) if winner is x else ([], [b"y"]))

    _go(store_factory, 2, body)


def test_spec_scaleout_1_2_a_concurrent_creation_exactly_one_wins(store_factory: Factory) -> None:
    """Two stores create the same new agent at once: one wins, the other conflicts [P1.2-a]."""

    async def body(a: Store, b: Store) -> list[object]:
        return list(await asyncio.gather(a.save(_state()), b.save(_state()), return_exceptions=True))

    outcomes = _go(store_factory, 2, body)
    assert sorted(type(o).__name__ for o in outcomes) == ["ConflictError", "NoneType"]


def test_spec_4_2_run_log_and_responses_keep_order(store_factory: Factory) -> None:
    """Lines saved in batches come back in (response, seq) order, grouped by response."""

    async def body(a: Store, b: Store) -> None:
        state = _state()
        await a.save(state, log=LogBatch("run-1", 0, 0, [b"l0", b"l1"]))
        await a.save(state, log=LogBatch("run-1", 1, 0, [b"m0", b"[DONE]"]))
        await a.save(state, log=LogBatch("run-1", 0, 2, [b"l2", b"[DONE]"]))
        await a.save(state, log=LogBatch("run-other", 0, 0, [b"o"]))
        assert await b.run_log("run-1") == [b"l0", b"l1", b"l2", b"[DONE]", b"m0", b"[DONE]"]
        assert await b.run_responses("run-1") == [[b"l0", b"l1", b"l2", b"[DONE]"], [b"m0", b"[DONE]"]]
        assert await b.run_responses("unknown") == []
        assert await b.run_log("unknown") == []

    _go(store_factory, 2, body)


def test_spec_4_2_runs_are_listed_oldest_first(store_factory: Factory) -> None:
    """Completed runs are the agent's history, oldest first, equal to what was saved."""

    async def body(a: Store, b: Store) -> None:
        state = _state()
        await a.save(state, run=_record("late", 20.0))
        await a.save(state, run=_record("early", 10.0))
        runs = await b.runs("agent-1")
        assert [r.run_id for r in runs] == ["early", "late"]
        assert runs[0] == _record("early", 10.0)
        assert await b.runs("nobody") == []

    _go(store_factory, 2, body)


def test_spec_10_2_a_leases_renew_without_a_version_bump(store_factory: Factory) -> None:
    """Only the owner of a running agent renews its lease; the version stays (spec §10.2-a)."""

    async def body(a: Store, b: Store) -> None:
        run = RunState(run_id="run-1", user_query="q", started_at=time.time())
        state = _state(status="running", run=run, lease_owner="proc-a", lease_expires_at=100.0)
        await a.save(state)
        assert await b.renew_lease("agent-1", "proc-a", 200.0) is True
        assert await b.renew_lease("agent-1", "proc-b", 300.0) is False
        assert await b.renew_lease("nobody", "proc-a", 300.0) is False
        loaded = await a.load("agent-1")
        assert loaded is not None
        assert (loaded.version, loaded.lease_expires_at, loaded.lease_owner) == (1, 200.0, "proc-a")
        loaded.status, loaded.run, loaded.lease_owner = "idle", None, None
        await a.save(loaded)  # the owner's own save does not conflict after a renewal
        assert await b.renew_lease("agent-1", "proc-a", 400.0) is False  # idle: no lease to renew

    _go(store_factory, 2, body)


def test_spec_10_2_a_agents_lists_newest_first_with_leases(store_factory: Factory) -> None:
    """``agents()`` shows every agent, most recently saved first, with its run and lease."""

    async def body(a: Store, b: Store) -> None:
        await a.save(_state("old"))
        await asyncio.sleep(0.01)
        run = RunState(run_id="run-9", user_query="do it", started_at=time.time())
        await a.save(_state("new", status="running", run=run, lease_owner="p", lease_expires_at=time.time() + 60))
        listed = await b.agents()
        assert [s.agent_uuid for s in listed] == ["new", "old"]
        assert (listed[0].run_id, listed[0].user_query, listed[0].lease_owner) == ("run-9", "do it", "p")
        assert listed[0].lease_alive()
        assert not listed[1].lease_alive()

    _go(store_factory, 2, body)


def test_spec_4_4_pause_in_one_process_resume_in_another(store_factory: Factory) -> None:
    """The agent pauses with store A and is resumed with store B; every response is valid."""

    async def body(a: Store, b: Store) -> tuple[list[bytes], list[bytes], list[list[bytes]]]:
        first: list[bytes] = []
        agent = Agent(ScriptedModel(), tools=default_tools(), store=a)
        result = await agent.run("Please confirm, then tell me what is 6 * 7", first.append)
        assert result.stop_reason == "awaiting_frontend_tools"
        later = await Agent.load(agent.agent_uuid, b, ScriptedModel(), tools=default_tools())
        pending = [p.tool_use_id for p in later.state.pending_frontend]
        assert len(pending) == 1
        second: list[bytes] = []
        done = await later.continue_with_tool_results([{"tool_use_id": pending[0], "content": "yes"}], second.append)
        assert done.stop_reason == "end_turn"
        return first, second, await a.run_responses(result.run_id)

    first, second, stored = _go(store_factory, 2, body)
    assert_valid(first)
    assert_valid(second)
    assert stored == [first, second]
    assert_valid_responses([line for response in stored for line in response])
