"""Property: any set of children, any subset of them pausing, pause then resume keeps the run whole (§13.5).

Each example runs a real parent with real concurrent children on the scripted model;
every response is validated strictly by the autouse tee, and the run's recording here.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools
from agent_ref.run.subagents import SUBAGENT_TOOL, AgentSpec
from agent_ref.tools.demo import confirm
from agent_ref_support import envelopes, fast_retry
from validating import assert_valid

TOPICS = ["tides", "volcanoes", "comets", "glaciers", "deserts"]

#: (topic, pauses?) per child, topics distinct.
children = st.lists(st.tuples(st.sampled_from(TOPICS), st.booleans()), min_size=1, max_size=4, unique_by=lambda c: c[0])


def _prompt(case: list[tuple[str, bool]]) -> str:
    topics = [f"{t} (confirm first)" if pauses else t for t, pauses in case]
    joined = topics[0] if len(topics) == 1 else ", ".join(topics[:-1]) + " and " + topics[-1]
    return f"Research {joined} in parallel"


def _config() -> dict[str, Any]:
    return {
        "tools": default_tools(),
        "retry": fast_retry(),
        "subagents": {"researcher": AgentSpec(description="d", tools=[confirm])},
    }


def _check(case: list[tuple[str, bool]]) -> None:
    asyncio.run(_run(case))


async def _run(case: list[tuple[str, bool]]) -> None:
    store = MemoryStore()
    agent = Agent(ScriptedModel(), store=store, **_config())
    first: list[bytes] = []
    result = await agent.run(_prompt(case), first.append)
    pausing = [t for t, pauses in case if pauses]
    inits = {e["agent"]: json.loads(e["delta"]) for e in envelopes(first) if e["type"] == "meta_init"}
    if not pausing:
        assert result.stop_reason == "end_turn"
        return
    assert result.stop_reason == "awaiting_frontend_tools"
    (pause,) = [e for e in envelopes(first) if e["type"] == "awaiting_frontend_tools"]
    assert pause["agent"] == agent.agent_uuid
    pending = json.loads(pause["delta"])
    # exactly one call per pausing child, each naming that child
    owners = [inits[p["agent"]]["user_query"] for p in pending]
    assert owners == [f"Research {t} (confirm first)" for t in pausing]
    fresh = await Agent.load(agent.agent_uuid, store, ScriptedModel(), **_config())
    second: list[bytes] = []
    answers = [{"tool_use_id": p["tool_use_id"], "content": "yes"} for p in pending]
    done = await fresh.continue_with_tool_results(answers, second.append)
    assert done.stop_reason == "end_turn"
    assert_valid(first + second)
    # [R1.2-b] every spawning call answered once, in call order, in the next user turn
    messages = fresh.state.messages
    calls = [b["id"] for b in messages[1]["content"] if b.get("type") == "tool_use" and b["name"] == SUBAGENT_TOOL]
    assert len(calls) == len(case)
    answered = [b["tool_use_id"] for b in messages[2]["content"] if b.get("type") == "tool_result"]
    assert answered == calls
    for topic, _ in case:
        assert f"Findings on {topic}" in done.final_text


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(children)
@example([("tides", True), ("volcanoes", False)])
@example([("tides", True), ("volcanoes", True), ("comets", False)])
def test_property_spec_13_5_any_children_any_pausing_subset_resume_whole(case: list[tuple[str, bool]]) -> None:
    """Any children, any subset pausing: one pause naming each, one resume ends the run with every call answered [R13.5-c]."""
    _check(case)


@pytest.mark.parametrize("fixed_seed", [31, 32, 33])
def test_property_spec_13_5_fixed_seeds(fixed_seed: int) -> None:
    """The same property under fixed seeds (CI runs hypothesis derandomised)."""

    @seed(fixed_seed)
    @settings(derandomize=False, max_examples=6, database=None, deadline=None)
    @given(children)
    def check(case: list[tuple[str, bool]]) -> None:
        _check(case)

    check()
