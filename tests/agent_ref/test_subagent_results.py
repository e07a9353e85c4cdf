"""The spawning call's result is on the stream, after its child's meta_final (spec/agent-ref.md §13.3-a).

Every response is validated strictly by the autouse tee (tests/agent_ref_validating.py).
"""

from __future__ import annotations

from typing import Any

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref.run.subagents import SUBAGENT_TOOL, AgentSpec
from agent_ref_support import envelopes, fast_retry, run

PARALLEL = "Research tidal locking and lunar geology in parallel"


def _parent(**kw: Any) -> Agent:
    kw.setdefault("subagents", {"researcher": AgentSpec(description="researches one topic")})
    return Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry(), **kw)


def test_spec_13_3_a_spawn_results_follow_each_childs_meta_final() -> None:
    """Each spawn_subagent call gets its tool_result on the stream, after that child's meta_final [R13.3-a].

    Failed before: the results went into the history only; a browser saw two tool_calls
    that were never answered.
    """
    lines: list[bytes] = []
    agent = _parent()
    run(agent.run(PARALLEL, lines.append))
    envs = envelopes(lines)
    parent = agent.agent_uuid
    calls = [e["id"] for e in envs if e["agent"] == parent and e["type"] == "tool_call" and e["name"] == SUBAGENT_TOOL]
    results = [e for e in envs if e["agent"] == parent and e["type"] == "tool_result"]
    assert [r["id"] for r in results] == calls
    children = {e["agent"]: i for i, e in enumerate(envs) if e["type"] == "meta_final" and e["agent"] != parent}
    inits = {e["agent"]: e["delta"] for e in envs if e["type"] == "meta_init" and e["agent"] != parent}
    for child, final_at in children.items():
        call_id = next(c for c in calls if c in inits[child])
        result_at = next(i for i, e in enumerate(envs) if e["type"] == "tool_result" and e["id"] == call_id)
        assert result_at > final_at
        assert "Findings on" in envs[result_at]["delta"]
