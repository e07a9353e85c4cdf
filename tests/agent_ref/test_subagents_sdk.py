"""Subagents as the Claude Agent SDK shapes them: its input, and nesting to a depth (spec/agent-ref.md §SA).

Every response is validated strictly by the autouse tee (tests/agent_ref_validating.py),
and each stream here is also checked with ``assert_valid`` and read back with
``envelope.tree``.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from agent_ref import Agent, ConfigError, ScriptedModel, default_tools
from agent_ref.run.subagents import SUBAGENT_TOOL, AgentSpec, background_flag, parse_spawn, spawn_tool_definition
from agent_ref_support import fast_retry, run
from envelope import AgentTree, reconstruct, tree
from validating import assert_valid

SPECS = {"researcher": AgentSpec(description="researches one topic")}


def _agent(**kw: Any) -> Agent:
    kw.setdefault("subagents", SPECS)
    return Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry(), **kw)


def _nested(levels: int, leaf: str = "Research tides") -> str:
    """A prompt that makes each of ``levels`` agents spawn the next, the last one researching ``leaf``."""
    prompt = leaf
    for level in range(levels):
        sdk = {"subagent_type": "researcher", "description": f"level {levels - level}", "prompt": prompt}
        prompt = f"call {SUBAGENT_TOOL} with {json.dumps(sdk)}"
    return prompt


def _chain(forest: AgentTree) -> list[Any]:
    """The agents from the root down, each the only child of the one before."""
    (node,) = forest.roots
    chain = [node]
    while node.children:
        (node,) = node.children
        chain.append(node)
    return chain


def test_sa1_a_the_tool_offers_the_sdk_input_shape() -> None:
    """The spawning tool's schema is the SDK Agent tool's: subagent_type, description, prompt, run_in_background [SA1-a]."""
    schema = spawn_tool_definition(SPECS)["input_schema"]
    assert schema["required"] == ["subagent_type", "description", "prompt"]
    assert schema["properties"]["subagent_type"]["enum"] == ["researcher"]
    assert schema["properties"]["run_in_background"]["type"] == "boolean"
    assert "agent" not in schema["properties"]


def test_sa1_b_both_input_shapes_are_read_and_a_clash_is_refused() -> None:
    """SDK and older inputs both spawn; mixed keys that disagree, or a non-boolean flag, are errors [SA1-b]."""
    sdk = {"subagent_type": "researcher", "description": "tides", "prompt": "Research tides"}
    assert parse_spawn(sdk, SPECS) == ("researcher", SPECS["researcher"], "Research tides")
    assert parse_spawn({"agent": "researcher", "task": "Research tides"}, SPECS) == parse_spawn(sdk, SPECS)
    clash = parse_spawn({"subagent_type": "researcher", "agent": "other", "prompt": "p"}, SPECS)
    assert clash == "give 'subagent_type' or 'agent', not both with different values"
    assert (
        parse_spawn({"subagent_type": "nobody", "prompt": "p"}, SPECS) == "unknown subagent 'nobody'; known: researcher"
    )
    assert parse_spawn({"subagent_type": "researcher", "prompt": " "}, SPECS) == "the task must be a non-empty string"
    assert background_flag({**sdk, "run_in_background": True}) is True
    assert background_flag({"agent": "researcher", "task": "t", "background": True}) is True
    assert background_flag(sdk) is False
    assert background_flag({**sdk, "run_in_background": "yes"}) == "run_in_background must be true or false"


def test_sa1_b_an_sdk_shaped_call_runs_the_child_on_a_valid_stream() -> None:
    """A call in the SDK shape spawns the child and its answer is the call's result [SA1-b]."""
    lines: list[bytes] = []
    agent = _agent()
    result = run(agent.run(_nested(1), lines.append))
    assert_valid(lines)
    assert result.stop_reason == "end_turn"
    assert "Findings on tides" in result.final_text
    chain = _chain(tree(reconstruct(lines)))
    assert len(chain) == 2


@pytest.mark.parametrize("levels", [1, 2, 3])
def test_sa2_a_subagents_nest_to_the_default_depth_each_level_linked(levels: int) -> None:
    """Depth 1..3 of children each spawn the next; each meta_init names its parent and the spawning call [SA2-a]."""
    lines: list[bytes] = []
    agent = _agent()
    result = run(agent.run(_nested(levels), lines.append))
    assert_valid(lines)
    assert result.stop_reason == "end_turn"
    assert "Findings on tides" in result.final_text
    assert lines.count(b"[DONE]") == 1
    chain = _chain(tree(reconstruct(lines)))
    assert len(chain) == levels + 1
    for parent, child in itertools.pairwise(chain):
        spawns = [b for b in parent.blocks if b.type == "tool_call" and b.name == SUBAGENT_TOOL]
        assert child.parent_agent == parent.agent
        assert child.parent_tool_use_id == spawns[0].id
        assert not child.orphan


def test_sa2_a_beyond_the_depth_the_tool_is_not_offered() -> None:
    """A fourth level is not offered the spawning tool: the deepest child says so, and no fifth agent runs [SA2-a]."""
    lines: list[bytes] = []
    agent = _agent()
    result = run(agent.run(_nested(4), lines.append))
    assert_valid(lines)
    chain = _chain(tree(reconstruct(lines)))
    assert len(chain) == 4  # the root and three levels of children
    assert f"no tool named {SUBAGENT_TOOL!r} is offered" in result.final_text
    assert "Findings on tides" not in result.final_text


def test_sa2_a_the_depth_is_configurable_and_checked() -> None:
    """``max_subagent_depth=1``: the child cannot spawn; a depth below 1 is a ConfigError [SA2-a]."""
    lines: list[bytes] = []
    agent = _agent(max_subagent_depth=1)
    result = run(agent.run(_nested(2), lines.append))
    assert_valid(lines)
    assert len(_chain(tree(reconstruct(lines)))) == 2
    assert f"no tool named {SUBAGENT_TOOL!r} is offered" in result.final_text
    for bad in (0, -1, True, "3"):
        with pytest.raises(ConfigError, match="max_subagent_depth must be an integer of at least 1"):
            _agent(max_subagent_depth=bad)
    child = agent.options.for_child(SPECS["researcher"], agent.store)
    assert child.subagent_depth == 1
    assert child.subagents == {}
    deep = _agent().options
    assert deep.for_child(SPECS["researcher"], agent.store).subagents == SPECS
