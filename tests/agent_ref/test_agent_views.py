"""The read-only views and recovery calls a server uses instead of the agent's stored state (issue 28 §2).

``current_response``, ``lease_owner``, ``reload`` and ``recover_dead`` replace the
server's reads of ``agent.state.run.responses`` and its edits of the lease behind the
agent's back. Streams here go through the strict validator (the autouse tee).
"""

from __future__ import annotations

import asyncio
import time

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools
from agent_ref_support import drop, fast_retry, run

PROMPT = "Please confirm, then tell me what is 6 * 7"


def _agent(store: MemoryStore) -> Agent:
    return Agent(ScriptedModel(), tools=default_tools(), store=store, retry=fast_retry())


def test_current_response_names_the_response_being_sent_and_none_when_idle() -> None:
    store = MemoryStore()
    agent = _agent(store)
    assert agent.current_response is None
    seen: list[tuple[str, int] | None] = []

    def sink(line: bytes) -> None:
        assert line  # every line is seen with the view at that moment
        seen.append(agent.current_response)

    paused = run(agent.run(PROMPT, sink))
    assert paused.stop_reason == "awaiting_frontend_tools"
    assert set(seen) == {(paused.run_id, 0)}
    assert agent.lease_owner is None  # a pause holds no lease
    seen.clear()
    ended = run(
        agent.continue_with_tool_results(
            [{"tool_use_id": paused.pending_frontend_tools[0].tool_use_id, "content": "yes"}], sink
        )
    )
    assert ended.stop_reason == "end_turn"
    assert seen[0] == (paused.run_id, 1)  # what a server reads at the first line
    assert set(seen) - {None} == {(paused.run_id, 1)}  # the closing lines are sent once the run is stored as ended
    assert agent.current_response is None


def test_recover_dead_only_takes_over_the_named_owners_run() -> None:
    store = MemoryStore()
    paused = run(_agent(store).run(PROMPT, drop))
    agent = _agent(store)
    agent.state = asyncio.run(store.load(paused.agent_uuid))  # type: ignore[assignment]  # it is there
    # A resume that claimed the agent and died: the stored state is running under a live lease.
    state = agent.state
    state.status = "running"
    state.lease_owner = "host:1:dead"
    state.lease_expires_at = time.time() + 600
    assert agent.lease_owner == "host:1:dead"
    assert asyncio.run(agent.recover_dead(paused.run_id, "host:2:other")) is None  # not that owner's: left alone
    assert asyncio.run(agent.recover_dead("another-run", "host:1:dead")) is None
    assert agent.state.status == "running"
    assert asyncio.run(agent.recover_dead(paused.run_id, "host:1:dead")) is None  # a resume is put back to its pause
    assert _status(agent) == "awaiting_frontend_tools"
    assert agent.lease_owner is None
    # The store has it too: reload reads it again.
    other = _agent(store)
    other.state = agent.state.__copy__()
    other.state.status = "idle"
    run(other.reload())
    assert other.state.status == "awaiting_frontend_tools"


def _status(agent: Agent) -> str:
    """The stored status, read afresh (a plain ``str``: the test changes it behind mypy's narrowing)."""
    return agent.state.status
