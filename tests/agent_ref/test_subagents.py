"""Subagents on one stream, and the agent tree (spec/agent-ref.md §13, spec/envelope-v1.md §8.3.1).

Every response is validated strictly by the autouse tee (tests/agent_ref_validating.py):
a parent's response carries its children's envelopes, so the children are judged as
part of one multi-agent stream.
"""

# ruff: noqa: ARG001  (hooks and callbacks take the signature they are given; many ignore it)

from __future__ import annotations

import asyncio
import itertools
import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools, tool
from agent_ref.run.subagents import SUBAGENT_TOOL, AgentSpec
from agent_ref_support import drop, fast_retry, run
from envelope import AgentTree, ValidationError, reconstruct, tree
from validating import assert_valid

if TYPE_CHECKING:
    from agent_ref.policy.hooks import HookInput

PARALLEL = "Research tidal locking and lunar geology in parallel"


def _parent(model: ScriptedModel | None = None, **kw: Any) -> Agent:
    kw.setdefault("subagents", {"researcher": AgentSpec(description="researches one topic")})
    return Agent(model or ScriptedModel(), tools=default_tools(), retry=fast_retry(), **kw)


def run_sync(coro: Any) -> Any:
    return asyncio.run(coro)


def _agents_in_order(lines: list[bytes]) -> list[str]:
    return [json.loads(line)["agent"] for line in lines if line != b"[DONE]"]


def test_spec_13_parallel_research_interleaves_two_children_on_one_valid_stream() -> None:
    """One spawn_subagent call per topic [R13.1-a]; two children run concurrently and interleave [R13.3-a]; one [DONE] [R13.3-b]."""
    lines: list[bytes] = []
    agent = _parent()
    result = run(agent.run(PARALLEL, lines.append))
    assert_valid(lines)
    assert result.stop_reason == "end_turn"
    assert lines.count(b"[DONE]") == 1
    assert lines[-1] == b"[DONE]"
    order = _agents_in_order(lines)
    children = [a for a in dict.fromkeys(order) if a != agent.agent_uuid]
    assert len(children) == 2
    # interleaved: the children's lines alternate at least once (neither ran to its end first)
    child_lines = [a for a in order if a in children]
    switches = sum(1 for x, y in itertools.pairwise(child_lines) if x != y)
    assert switches >= 2
    # the parent's tool results are the children's final answers
    assert "Findings on tidal locking" in result.final_text
    assert "Findings on lunar geology" in result.final_text


def test_spec_8_3_1_children_name_parent_and_call_and_nest_under_it() -> None:
    """Each child's meta_init names parent_agent and parent_tool_use_id [8.3.1-a]; tree() nests them [8.3.1-b]."""
    lines: list[bytes] = []
    agent = _parent()
    run(agent.run(PARALLEL, lines.append))
    forest = tree(reconstruct(lines))
    assert isinstance(forest, AgentTree)
    (root,) = forest.roots
    assert root.agent == agent.agent_uuid
    calls = [b for b in root.blocks if b.type == "tool_call" and b.name == SUBAGENT_TOOL]
    assert [c.parent_tool_use_id for c in root.children] == [c.id for c in calls]
    assert all(c.parent_agent == agent.agent_uuid for c in root.children)
    assert not any(c.orphan for c in root.children)
    as_dict = forest.to_dict()
    spawn_blocks = [b for b in as_dict["agents"][0]["blocks"] if b["type"] == "tool_call"]
    nested = [b["agents"][0] for b in spawn_blocks]
    assert [n["agent"] for n in nested] == [c.agent for c in root.children]
    texts = ["".join(b["content"] for b in n["blocks"] if b["type"] == "text") for n in nested]
    assert "tidal locking" in texts[0]
    assert "lunar geology" in texts[1]
    # each child, alone, is what the store logged for it: a complete stream of its own agent
    for child in root.children:
        own = [line for line in lines if line != b"[DONE]" and json.loads(line)["agent"] == child.agent]
        assert reconstruct(own).agents[child.agent] == child.blocks


def test_spec_13_2_a_children_inherit_model_store_and_retry_unless_overridden() -> None:
    """Unset spec fields are inherited; a spec's system prompt and model are its own [R13.2-a]."""
    parent_model = ScriptedModel()
    child_model = ScriptedModel()
    store = MemoryStore()
    specs = {"researcher": AgentSpec(description="d", system="You research.", model=child_model)}
    agent = _parent(parent_model, subagents=specs, store=store)
    run(agent.run(PARALLEL, drop))
    assert len(child_model.requests) == 2
    assert all(r["system"] == "You research." for r in child_model.requests)
    assert all(r["model"] == "scripted" for r in child_model.requests)
    assert len(parent_model.requests) == 2  # spawn, then answer
    tools = [t["name"] for t in parent_model.requests[0]["tools"]]
    assert SUBAGENT_TOOL in tools
    # [SA2-a]: a depth-1 child spawns from its parent's subagents (the default depth is 3)
    assert SUBAGENT_TOOL in [t["name"] for t in child_model.requests[0]["tools"]]
    lines: list[bytes] = []
    inherited = _parent(ScriptedModel(), store=store)
    run(inherited.run(PARALLEL, lines.append))
    children = {a for a in _agents_in_order(lines) if a != inherited.agent_uuid}
    saved = {s.agent_uuid for s in run_sync(store.agents())}
    assert children <= saved  # the children are saved in the parent's store, with their runs
    for child in children:
        (record,) = run_sync(store.runs(child))
        assert record.stop_reason == "end_turn"


def test_spec_13_4_a_child_failure_is_an_error_result() -> None:
    """A child whose run fails gives the parent an is_error result; the parent goes on [R13.4-a]."""

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up.

        Args:
            topic: the topic.
        """
        raise RuntimeError("unused")

    failing = ScriptedModel(faults=[_fatal(), _fatal()])
    specs = {"researcher": AgentSpec(description="d", model=failing, tools=[lookup])}
    model = ScriptedModel()
    lines: list[bytes] = []
    result = run(_parent(model, subagents=specs).run(PARALLEL, lines.append))
    assert result.stop_reason == "end_turn"
    sent = [b for b in model.requests[1]["messages"][-1]["content"] if b.get("type") == "tool_result"]
    assert len(sent) == 2
    assert all(b["is_error"] is True for b in sent)
    assert "(failed)" in result.final_text


def _fatal() -> Any:
    from agent_ref import Fault

    return Fault(kind="status", status=400)


def test_spec_13_4_b_unknown_child_name_is_an_error_result() -> None:
    """A spawn naming no registered child is answered is_error, never run [R13.4-b]."""
    from agent_ref.run.subagents import parse_spawn

    specs = {"researcher": AgentSpec(description="d")}
    assert parse_spawn({"agent": "nobody", "task": "x"}, specs) == "unknown subagent 'nobody'; known: researcher"
    assert parse_spawn({"agent": "researcher", "task": " "}, specs) == "the task must be a non-empty string"


def test_spec_13_6_a_subagent_hooks_fire_around_each_child() -> None:
    """SubagentStart/SubagentStop fire once per child, with the child's answer [R13.6-a]."""
    seen: list[tuple[str, str | None]] = []

    def hook(data: HookInput) -> None:
        seen.append((data.event, data.result))

    run(_parent(hooks={"SubagentStart": [hook], "SubagentStop": [hook]}).run(PARALLEL, drop))
    starts = [s for s in seen if s[0] == "SubagentStart"]
    stops = [s for s in seen if s[0] == "SubagentStop"]
    assert len(starts) == 2
    assert len(stops) == 2
    assert all(r is not None and r.startswith("Findings on") for _, r in stops)


def test_spec_8_3_1_c_tree_keeps_orphans_and_refuses_bad_keys() -> None:
    """A child naming an absent parent stays a root marked orphan; a bad key is a ValidationError [8.3.1-c]."""
    from envelope import Emitter

    def opening(agent: str, extra: dict[str, Any]) -> list[bytes]:
        meta = {"format": "json", "user_query": "q", "agent_uuid": agent, "model": "m", **extra}
        return Emitter(agent, 2048).buffered("meta_init", json.dumps(meta))

    lines = opening("root", {}) + opening("kid", {"parent_agent": "ghost", "parent_tool_use_id": "t1"})
    forest = tree(reconstruct(lines))
    assert [(n.agent, n.orphan) for n in forest.roots] == [("root", False), ("kid", True)]
    assert forest.to_dict()["agents"][1]["parent_agent"] == "ghost"
    cyc = opening("a", {"parent_agent": "a", "parent_tool_use_id": "t"})
    assert tree(reconstruct(cyc)).roots[0].orphan
    with pytest.raises(ValidationError, match=r"agent 'kid': meta_init parent_tool_use_id must be") as err:
        tree(reconstruct(opening("kid", {"parent_agent": "root", "parent_tool_use_id": 7})))
    assert err.value.field == "$.delta.parent_tool_use_id"


def test_spec_13_7_a_abort_while_children_stream_leaves_a_valid_stream() -> None:
    """Abort mid-child: every agent's open blocks closed, spawns answered, one end [R13.7-a]."""
    holder: dict[str, Agent] = {}

    def abort_soon(data: HookInput) -> None:
        asyncio.get_running_loop().call_later(0.0, holder["agent"].abort)

    agent = _parent(hooks={"SubagentStart": [abort_soon]})
    holder["agent"] = agent
    lines: list[bytes] = []
    result = run(agent.run(PARALLEL, lines.append))
    assert_valid(lines)  # failed before: the children's thinking blocks stayed open (E120)
    assert result.stop_reason == "aborted"
    assert lines.count(b"[DONE]") == 1
    children = [a for a in reconstruct(lines).agents if a != agent.agent_uuid]
    assert len(children) == 2
    results = [b for b in reconstruct(lines).agents[agent.agent_uuid] if b.type == "tool_result"]
    assert [r.content for r in results] == ["cancelled: the run was aborted before this tool call finished"] * 2
