"""A child that needs a frontend tool pauses the whole run; a resume in a fresh agent continues it (§13.5).

Every response is validated strictly by the autouse tee (tests/agent_ref_validating.py);
the recordings (pause + resume back to back) are validated here too.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore, default_tools
from agent_ref.errors import StateError, ToolResultsError
from agent_ref.run.subagents import AgentSpec
from agent_ref.tools.demo import confirm
from agent_ref_support import envelopes, fast_retry, run
from envelope import reconstruct, tree
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

    from agent_ref.store.core import Store

#: The second child's task says "confirm": with a confirm tool it pauses; the first finishes.
ONE_PAUSES = "Research tides and volcanoes (confirm first) in parallel"
#: The same, and the parent asks to confirm too: both frontend calls in one step.
BOTH_PAUSE = "Research tides and volcanoes (confirm first) in parallel, then confirm"


def _config() -> dict[str, Any]:
    spec = AgentSpec(description="researches one topic", tools=[confirm])
    return {"tools": default_tools(), "retry": fast_retry(), "subagents": {"researcher": spec}}


def _agent(store: Store) -> Agent:
    return Agent(ScriptedModel(), store=store, **_config())


async def _fresh(agent_uuid: str, store: Store) -> Agent:
    """The agent as a new process would rebuild it: a new model and a new instance, from the store."""
    return await Agent.load(agent_uuid, store, ScriptedModel(), **_config())


def _ofs(envs: list[dict[str, Any]], agent: str, kind: str) -> list[dict[str, Any]]:
    return [e for e in envs if e["agent"] == agent and e["type"] == kind]


def _awaiting(lines: list[bytes]) -> tuple[str, list[dict[str, Any]]]:
    (pause,) = [e for e in envelopes(lines) if e["type"] == "awaiting_frontend_tools"]
    return pause["agent"], json.loads(pause["delta"])


def _children(lines: list[bytes], parent: str) -> dict[str, dict[str, Any]]:
    return {
        e["agent"]: json.loads(e["delta"])
        for e in envelopes(lines)
        if e["type"] == "meta_init" and e["agent"] != parent
    }


def test_spec_13_5_a_one_child_pauses_one_finishes_then_a_fresh_agent_resumes(tmp_path: Path) -> None:
    """The run pauses on the child's call, announced once by the root [R13.5-a] [R13.5-b]; a fresh agent resumes [R13.5-c]."""
    store = SQLiteStore(tmp_path / "agents.db")
    agent = _agent(store)
    first: list[bytes] = []
    paused = run(agent.run(ONE_PAUSES, first.append))
    assert paused.stop_reason == "awaiting_frontend_tools"
    assert first.count(b"[DONE]") == 1
    assert first[-1] == b"[DONE]"
    owner, pending = _awaiting(first)
    assert owner == agent.agent_uuid  # the root announces the pause
    assert json.loads(first[-2])["type"] == "awaiting_frontend_tools"  # last before [DONE] [R1.1-a]
    children = _children(first, agent.agent_uuid)
    waiting = next(c for c, meta in children.items() if "confirm" in meta["user_query"])
    done = next(c for c in children if c != waiting)
    assert [(p["name"], p["agent"]) for p in pending] == [("confirm", waiting)]
    envs = envelopes(first)
    assert _ofs(envs, done, "meta_final")  # the finished sibling ended and was answered
    assert not _ofs(envs, waiting, "meta_final")
    assert [c["id"] for c in _ofs(envs, waiting, "tool_call")] == [pending[0]["tool_use_id"]]
    spawn_for = {c: meta["parent_tool_use_id"] for c, meta in children.items()}
    assert [r["id"] for r in _ofs(envs, agent.agent_uuid, "tool_result")] == [spawn_for[done]]
    # both states are saved before the pause is sent (§4.4): the parent with its pending child
    parent_state = run_sync(store.load(agent.agent_uuid))
    assert parent_state.status == "awaiting_frontend_tools"
    assert [(c.agent_uuid, c.tool_use_id) for c in parent_state.pending_children] == [(waiting, spawn_for[waiting])]
    assert [b["tool_use_id"] for b in parent_state.pending_backend_results] == [spawn_for[done]]
    assert run_sync(store.load(waiting)).status == "awaiting_frontend_tools"

    second: list[bytes] = []
    fresh = run_sync(_fresh(agent.agent_uuid, store))
    result = run(
        fresh.continue_with_tool_results([{"tool_use_id": pending[0]["tool_use_id"], "content": "yes"}], second.append)
    )
    assert result.stop_reason == "end_turn"
    assert second.count(b"[DONE]") == 1
    envs2 = envelopes(second)
    (root_init,) = _ofs(envs2, agent.agent_uuid, "meta_init")
    assert json.loads(root_init["delta"])["resume"]["tool_use_ids"] == [spawn_for[waiting]]
    (child_init,) = _ofs(envs2, waiting, "meta_init")
    meta = json.loads(child_init["delta"])
    assert meta["resume"]["tool_use_ids"] == [pending[0]["tool_use_id"]]
    assert (meta["parent_agent"], meta["parent_tool_use_id"]) == (agent.agent_uuid, spawn_for[waiting])
    order = [(e["agent"], e["type"], e.get("id")) for e in envs2 if e.get("final")]
    child_final = order.index((waiting, "meta_final", None))
    assert order.index((agent.agent_uuid, "tool_result", spawn_for[waiting])) > child_final
    assert "Findings on volcanoes" in result.final_text
    assert "Findings on tides" in result.final_text
    assert "You confirmed, so I went ahead" in result.final_text
    assert run_sync(store.load(waiting)).status == "idle"
    # the run's recording, both responses, is one valid stream and nests both children
    log = run_sync(store.run_log(paused.run_id))
    assert log == first + second
    assert_valid(log)
    (root,) = tree(reconstruct(log)).roots
    assert sorted(c.agent for c in root.children) == sorted(children)
    assert not any(c.orphan for c in root.children)


def test_spec_13_5_b_parent_and_child_frontend_calls_in_one_step(tmp_path: Path) -> None:
    """The root's pause lists its own call, then the child's with its agent [R13.5-b]; one resume answers both [R13.5-c].

    The scripted model makes both calls in one step for "..., then confirm" [R13.8-a].
    """
    store = SQLiteStore(tmp_path / "agents.db")
    agent = _agent(store)
    first: list[bytes] = []
    run(agent.run(BOTH_PAUSE, first.append))
    _, pending = _awaiting(first)
    assert [p["name"] for p in pending] == ["confirm", "confirm"]
    assert "agent" not in pending[0]  # the root's own call
    child = pending[1]["agent"]
    assert child in _children(first, agent.agent_uuid)
    second: list[bytes] = []
    fresh = run_sync(_fresh(agent.agent_uuid, store))
    answers = [{"tool_use_id": p["tool_use_id"], "content": "yes"} for p in reversed(pending)]
    result = run(fresh.continue_with_tool_results(answers, second.append))
    assert result.stop_reason == "end_turn"
    assert result.final_text.startswith("You confirmed.")
    assert "You confirmed, so I went ahead" in result.final_text
    envs = envelopes(second)
    (root_init,) = _ofs(envs, agent.agent_uuid, "meta_init")
    spawn = _children(first, agent.agent_uuid)[child]["parent_tool_use_id"]
    assert json.loads(root_init["delta"])["resume"]["tool_use_ids"] == [pending[0]["tool_use_id"], spawn]
    results = [r["id"] for r in _ofs(envs, agent.agent_uuid, "tool_result")]
    assert results == [pending[0]["tool_use_id"], spawn]  # own result opens the response; the spawn's after the child
    assert_valid(run_sync(store.run_log(result.run_id)))


@pytest.mark.parametrize(
    ("pick", "message"),
    [
        ("root_only", "missing results for"),
        ("unknown", "not pending: toolu_nobody"),
        ("twice", "given more than once"),
    ],
)
def test_spec_13_5_c_wrong_or_missing_ids_change_nothing(tmp_path: Path, pick: str, message: str) -> None:
    """Results must be exactly the pending set, the children's included; a mismatch changes nothing [R13.5-c]."""
    store = SQLiteStore(tmp_path / "agents.db")
    agent = _agent(store)
    first: list[bytes] = []
    run(agent.run(BOTH_PAUSE, first.append))
    _, pending = _awaiting(first)
    child = pending[1]["agent"]
    before = (run_sync(store.load(agent.agent_uuid)), run_sync(store.load(child)))
    ok = [{"tool_use_id": p["tool_use_id"], "content": "yes"} for p in pending]
    bad = {
        "root_only": ok[:1],
        "unknown": [*ok, {"tool_use_id": "toolu_nobody", "content": "x"}],
        "twice": [*ok, ok[1]],
    }
    fresh = run_sync(_fresh(agent.agent_uuid, store))
    sent: list[bytes] = []
    with pytest.raises(ToolResultsError, match=message) as err:
        run(fresh.continue_with_tool_results(bad[pick], sent.append))
    if pick == "root_only":
        assert err.value.missing == [pending[1]["tool_use_id"]]
    assert sent == []
    assert (run_sync(store.load(agent.agent_uuid)), run_sync(store.load(child))) == before
    # nothing lost: the right answer still resumes
    result = run(run_sync(_fresh(agent.agent_uuid, store)).continue_with_tool_results(ok, sent.append))
    assert result.stop_reason == "end_turn"


def test_spec_13_5_c_a_child_no_longer_paused_is_refused_before_anything_changes(tmp_path: Path) -> None:
    """A resume whose child was closed meanwhile is a StateError naming the child; the parent stays paused [R13.5-c]."""
    store = SQLiteStore(tmp_path / "agents.db")
    agent = _agent(store)
    first: list[bytes] = []
    run(agent.run(ONE_PAUSES, first.append))
    _, pending = _awaiting(first)
    child = pending[0]["agent"]
    run(run_sync(Agent.load(child, store, ScriptedModel(), tools=[confirm])).abandon())
    fresh = run_sync(_fresh(agent.agent_uuid, store))
    with pytest.raises(StateError, match=f"subagent researcher \\({child}\\) is no longer paused"):
        run(fresh.continue_with_tool_results([{"tool_use_id": pending[0]["tool_use_id"], "content": "y"}], print))
    assert run_sync(store.load(agent.agent_uuid)).status == "awaiting_frontend_tools"


def test_spec_13_5_d_abandon_while_paused_closes_the_children(tmp_path: Path) -> None:
    """Abandoning the paused run abandons its paused children and answers their spawning calls [R13.5-d]."""
    store = SQLiteStore(tmp_path / "agents.db")
    agent = _agent(store)
    first: list[bytes] = []
    run(agent.run(BOTH_PAUSE, first.append))
    _, pending = _awaiting(first)
    child = pending[1]["agent"]
    closing: list[bytes] = []
    fresh = run_sync(_fresh(agent.agent_uuid, store))
    result = run(fresh.abandon(closing.append, reason="the tab was closed"))
    assert result.stop_reason == "abandoned"
    envs = envelopes(closing)
    answered = {r["id"]: r["delta"] for r in _ofs(envs, agent.agent_uuid, "tool_result")}
    spawn = _children(first, agent.agent_uuid)[child]["parent_tool_use_id"]
    assert set(answered) == {pending[0]["tool_use_id"], spawn}
    assert answered[spawn].startswith(f"abandoned: subagent researcher ({child}) was paused")
    (init,) = _ofs(envs, agent.agent_uuid, "meta_init")
    assert sorted(json.loads(init["delta"])["resume"]["tool_use_ids"]) == sorted(answered)
    assert run_sync(store.load(child)).status == "idle"
    (record,) = run_sync(store.runs(child))
    assert record.stop_reason == "abandoned"
    assert run_sync(store.load(agent.agent_uuid)).status == "idle"
    # the history stays valid: the agent runs again
    assert run(fresh.run("hello", closing.append)).stop_reason == "end_turn"


def test_spec_13_7_a_abort_while_the_resumed_child_streams(tmp_path: Path) -> None:
    """An abort during the resumed child's part closes every agent and answers the spawn call [R13.7-a] [R13.5-c]."""
    store = SQLiteStore(tmp_path / "agents.db")
    agent = _agent(store)
    first: list[bytes] = []
    run(agent.run(ONE_PAUSES, first.append))
    _, pending = _awaiting(first)
    child = pending[0]["agent"]
    fresh = run_sync(_fresh(agent.agent_uuid, store))
    second: list[bytes] = []

    def sink(line: bytes) -> None:
        second.append(line)
        if line != b"[DONE]" and json.loads(line)["agent"] == child and json.loads(line)["type"] == "tool_result":
            fresh.abort()

    result = run(fresh.continue_with_tool_results([{"tool_use_id": pending[0]["tool_use_id"], "content": "y"}], sink))
    assert result.stop_reason == "aborted"
    assert second.count(b"[DONE]") == 1
    envs = envelopes(second)
    spawn = _children(first, agent.agent_uuid)[child]["parent_tool_use_id"]
    (answer,) = _ofs(envs, agent.agent_uuid, "tool_result")
    assert (answer["id"], answer["delta"]) == (spawn, "cancelled: the run was aborted before this tool call finished")
    assert not _ofs(envs, child, "meta_final")
    assert run_sync(store.load(child)).status == "idle"
    assert run_sync(store.runs(child))[-1].stop_reason == "aborted"
    state = run_sync(store.load(agent.agent_uuid))
    assert state.status == "idle"
    assert state.pending_children == []


def run_sync(coro: Any) -> Any:
    return asyncio.run(coro)


def test_spec_13_5_a_both_states_are_stored_before_the_pause_is_sent(tmp_path: Path) -> None:
    """When the client sees awaiting_frontend_tools, parent and child are already stored paused [R13.5-a] [R4.4-a]."""
    store = SQLiteStore(tmp_path / "agents.db")
    agent = _agent(store)
    seen: list[tuple[str, str]] = []
    lines: list[bytes] = []

    async def main() -> None:
        async def checking_sink(line: bytes) -> None:
            lines.append(line)
            if line != b"[DONE]" and json.loads(line)["type"] == "awaiting_frontend_tools":
                child = json.loads(json.loads(line)["delta"])[0]["agent"]
                parent_state = await store.load(agent.agent_uuid)
                child_state = await store.load(child)
                assert parent_state is not None
                assert child_state is not None
                seen.append((parent_state.status, child_state.status))
                assert [c.agent_uuid for c in parent_state.pending_children] == [child]

        await agent.run(ONE_PAUSES, checking_sink)

    asyncio.run(main())
    assert seen == [("awaiting_frontend_tools", "awaiting_frontend_tools")]


def test_spec_13_5_c_a_resume_that_died_is_recovered_with_its_children(tmp_path: Path) -> None:
    """A resume whose process died (parent and child claimed, leases expired): recover, then resume again [R13.5-c]."""
    store = SQLiteStore(tmp_path / "agents.db")
    agent = _agent(store)
    first: list[bytes] = []
    run(agent.run(ONE_PAUSES, first.append))
    _, pending = _awaiting(first)
    child = pending[0]["agent"]
    for uuid in (agent.agent_uuid, child):  # what a dead resume leaves: claimed, lease run out
        state = run_sync(store.load(uuid))
        state.status, state.lease_owner, state.lease_expires_at = "running", "host:1:dead", 1.0
        run_sync(store.save(state))
    fresh = run_sync(_fresh(agent.agent_uuid, store))
    assert run_sync(fresh.recover()) is None  # put back to its pause
    second: list[bytes] = []
    result = run(
        fresh.continue_with_tool_results([{"tool_use_id": pending[0]["tool_use_id"], "content": "yes"}], second.append)
    )
    assert result.stop_reason == "end_turn"
    assert "You confirmed, so I went ahead" in result.final_text
    assert run_sync(store.load(child)).status == "idle"
