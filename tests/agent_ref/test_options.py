"""``AgentOptions``: the agent's configuration as one typed, validated object (issue 28 §2).

``Agent(model, options=AgentOptions(...))`` and ``Agent(model, **keywords)`` take one
validation path; a bad option is a ``ConfigError`` naming it, raised when the options are
built. Runs here stream through the strict validator (the autouse tee).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_ref import Agent, AgentSpec, ConfigError, ScriptedModel, default_tools
from agent_ref.run.options import AgentOptions
from agent_ref_support import run


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"max_steps": 0}, "max_steps"),
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"max_subagents_per_step": 0}, "max_subagents_per_step"),
        ({"loop_limit": 1}, "loop_limit"),
        ({"max_structured_output_retries": -1}, "max_structured_output_retries"),
        ({"request_options": {"model": "x"}}, "request_options"),
        ({"hooks": {"NoSuchEvent": []}}, "unknown hook events"),
        ({"output_schema": {"type": 5}}, "output_schema"),
    ],
)
def test_a_bad_option_is_a_config_error_naming_it_both_ways(config: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError, match=named) as built:
        AgentOptions(**config)
    with pytest.raises(ConfigError, match=named) as keyword:
        Agent(ScriptedModel(), **config)
    assert str(built.value) == str(keyword.value)  # one validation path


def test_the_two_forms_give_the_same_agent_and_stream() -> None:
    tools = default_tools()
    by_keywords = Agent(ScriptedModel(), tools=tools, max_steps=3, system="be brief", agent_uuid="a-1")
    by_options = Agent(
        ScriptedModel(), options=AgentOptions(tools=tools, max_steps=3, system="be brief", agent_uuid="a-1")
    )
    assert by_keywords.options.to_dict() == by_options.options.to_dict()
    assert by_keywords.options.tools == by_options.options.tools
    assert sorted(by_keywords.tools) == sorted(by_options.tools)
    lines: tuple[list[bytes], list[bytes]] = ([], [])
    first = run(by_keywords.run("What is 5 + (10 * 2)?", lines[0].append))
    second = run(by_options.run("What is 5 + (10 * 2)?", lines[1].append))
    assert first.stop_reason == second.stop_reason == "end_turn"
    assert first.final_text == second.final_text
    assert len(lines[0]) == len(lines[1]) > 3


def test_options_and_keywords_together_or_an_unknown_keyword_are_refused() -> None:
    with pytest.raises(TypeError, match="not both"):
        Agent(ScriptedModel(), options=AgentOptions(), max_steps=2)
    with pytest.raises(TypeError, match="unknown options: max_stepz"):
        Agent(ScriptedModel(), max_stepz=2)


def test_options_are_frozen_and_copy_what_they_are_given() -> None:
    request = {"temperature": 0.5}
    options = AgentOptions(request_options=request)
    request["temperature"] = 1.0
    assert options.request_options == {"temperature": 0.5}
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_steps = 3  # type: ignore[misc]  # the point


def test_to_dict_is_json_and_builds_the_same_plain_options() -> None:
    options = AgentOptions(
        max_steps=4, request_options={"temperature": 0.1}, server_tools=[{"name": "web", "type": "x"}]
    )
    plain = options.to_dict()
    assert json.loads(json.dumps(plain)) == plain
    assert AgentOptions(**plain).to_dict() == plain


def test_a_child_inherits_what_its_spec_does_not_set() -> None:
    parent = AgentOptions(max_steps=5, max_tokens=999, tool_timeout=7.0, loop_limit=4, max_budget_usd=None)
    spec = AgentSpec(description="d", system="child", max_steps=2, tools=default_tools())
    store = Agent(ScriptedModel()).store
    child = parent.for_child(spec, store, background=True)
    assert (child.max_steps, child.max_tokens, child.tool_timeout, child.loop_limit) == (2, 999, 7.0, 4)
    assert child.system == "child"
    assert child.store is store
    assert child.subagents == {}
    assert all(t.executor != "frontend" for t in child.tools)  # a background child cannot pause (spec §14.5)


@given(
    max_steps=st.integers(-3, 20),
    loop_limit=st.one_of(st.none(), st.integers(-1, 6)),
    cap=st.integers(-1, 10),
    retries=st.integers(-2, 5),
)
def test_keywords_and_options_agree_on_every_value(
    max_steps: int, loop_limit: int | None, cap: int, retries: int
) -> None:
    """Property: for any values, both forms accept the same options or refuse with the same message."""
    config: dict[str, Any] = {
        "max_steps": max_steps,
        "loop_limit": loop_limit,
        "max_subagents_per_step": cap,
        "max_structured_output_retries": retries,
    }
    valid = max_steps >= 1 and (loop_limit is None or loop_limit >= 2) and cap >= 1 and retries >= 0
    if valid:
        assert Agent(ScriptedModel(), **config).options.to_dict() == AgentOptions(**config).to_dict()
        return
    with pytest.raises(ConfigError) as built:
        AgentOptions(**config)
    with pytest.raises(ConfigError) as keyword:
        Agent(ScriptedModel(), **config)
    assert str(keyword.value) == str(built.value)
