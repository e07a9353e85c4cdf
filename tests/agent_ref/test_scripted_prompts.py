"""The scripted model's demo prompts (spec/agent-ref.md §8.3) and the demo tools they call.

Every prompt is driven through a real ``Agent`` run on the embedded model (the real
``AsyncAnthropic`` client over a mock transport); every stream is validated strictly, here
and by the tee of conftest.py. The MCP demo prompt is tested with the example MCP server
in tests/examples/test_mcp_example.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref.models.scripted import demo_input
from agent_ref.policy.permissions import (
    PermissionAllow,
    PermissionAsk,
    PermissionDeny,
    PermissionResult,
    ToolPermissionContext,
    decide,
)
from agent_ref.tools.core import ToolCallRequest, ToolContextBase, ToolProgress, run_tools
from agent_ref.tools.demo import DEMO_PERMISSION_RULES, MAX_COUNT, add, count_slowly, delete_draft
from agent_ref_support import assert_valid_responses, envelopes, run
from envelope import Emitter

AGENT = "agent-scripted-prompts"


def _run(prompt: str, **options: Any) -> tuple[Any, ScriptedModel, list[bytes]]:
    model = ScriptedModel()
    lines: list[bytes] = []
    options.setdefault("tools", default_tools())
    result = run(Agent(model, **options).run(prompt, lines.append))
    assert_valid_responses(lines)
    return result, model, lines


def _calls(model: ScriptedModel, request: int = 1) -> list[tuple[str, dict[str, Any]]]:
    """The tool calls of the model's answer to request ``request - 1`` (as sent back in request ``request``)."""
    assistant = model.requests[request]["messages"][-2]
    assert assistant["role"] == "assistant"
    return [(b["name"], b["input"]) for b in assistant["content"] if b["type"] == "tool_use"]


def _results(lines: list[bytes]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in envelopes(lines):
        if e["type"] == "tool_result":
            out[e["name"]] = out.get(e["name"], "") + e["delta"]
    return out


# ------------------------------------------------------------------ R8.3-a: call TOOL with {json}


def test_spec_8_3_a_generic_prompt_calls_the_named_tools_with_the_exact_input() -> None:
    """ "call TOOL with {json}" twice: both calls in one step, inputs as given, then the results quoted [R8.3-a]."""
    result, model, lines = _run('call add with {"a": 2, "b": 40} and then call multiply with {"a": 3, "b": 5}')
    assert result.stop_reason == "end_turn"
    assert len(model.requests) == 2
    assert _calls(model) == [("add", {"a": 2, "b": 40}), ("multiply", {"a": 3, "b": 5})]
    assert _results(lines) == {"add": "42", "multiply": "15"}
    assert "add gave: 42" in result.final_text
    assert "multiply gave: 15" in result.final_text


def test_spec_8_3_a_generic_prompt_quotes_an_error_result() -> None:
    """A call whose result is an error: the answer says it failed, quoting the error [R8.3-a]."""
    result, model, _ = _run('call calculator with {"expression": "1 / 0"}')
    assert _calls(model) == [("calculator", {"expression": "1 / 0"})]
    assert "calculator failed: ZeroDivisionError" in result.final_text


def test_spec_8_3_a_generic_prompt_drives_a_frontend_tool_to_a_pause() -> None:
    """Any tool, a frontend one too: the run pauses on the call, with the given input [R8.3-a]."""
    result, _, lines = _run('call confirm with {"question": "Ship it?"}')
    assert result.stop_reason == "awaiting_frontend_tools"
    calls: dict[str, str] = {}
    for e in envelopes(lines):
        if e["type"] == "tool_call":
            calls[e["name"]] = calls.get(e["name"], "") + e["delta"]
    assert {name: json.loads(text) for name, text in calls.items()} == {"confirm": {"question": "Ship it?"}}


def test_spec_8_3_a_after_the_resume_the_answer_quotes_the_browser_result() -> None:
    """The paused generic call resumed with the browser's answer: the model quotes it [R8.3-a]."""
    model = ScriptedModel()
    agent = Agent(model, tools=default_tools())
    first: list[bytes] = []
    paused = run(agent.run('call confirm with {"question": "Ship it?"}', first.append))
    (call,) = paused.pending_frontend_tools
    second: list[bytes] = []
    answers = [{"tool_use_id": call.tool_use_id, "content": "yes, ship it"}]
    result = run(agent.continue_with_tool_results(answers, second.append))
    assert_valid_responses(first)
    assert_valid_responses(second)
    assert result.stop_reason == "end_turn"
    assert result.final_text == "Results. confirm gave: yes, ship it"


def test_spec_8_3_a_with_tools_turned_off_the_model_says_it_did_not_call() -> None:
    """tool_choice none (the last step): no call, a sentence naming the tools it would have called [R8.3-a]."""

    async def ask() -> tuple[list[str], str]:
        model = ScriptedModel()
        async with model.client.messages.stream(
            model="scripted",
            max_tokens=1024,
            messages=[{"role": "user", "content": 'call add with {"a": 1, "b": 2}'}],
            tools=[add.definition()],  # type: ignore[list-item]  # a plain dict, as the agent sends it
            tool_choice={"type": "none"},
        ) as stream:
            message = await stream.get_final_message()
        return [b.type for b in message.content], "".join(b.text for b in message.content if b.type == "text")

    kinds, text = asyncio.run(ask())
    assert kinds == ["text"]
    assert text == "I may not use tools now, so I did not call add."


@pytest.mark.parametrize(
    ("prompt", "said"),
    [
        ('call nothing_here with {"a": 1}', "no tool named 'nothing_here' is offered"),
        ('call add with {"a": 1, "b": }', "the input of add is not valid JSON (Expecting value at character"),
        ('call add with {"a": 1} and call nope with {}', "no tool named 'nope' is offered"),
    ],
)
def test_spec_8_3_a_generic_prompt_refuses_what_it_cannot_call(prompt: str, said: str) -> None:
    """A tool not offered, or input that is not JSON: an answer saying which, and no call at all [R8.3-a]."""
    result, model, _ = _run(prompt)
    assert len(model.requests) == 1
    assert result.final_text.startswith("I did not call anything: ")
    assert said in result.final_text


_KEYS = st.text(alphabet=st.characters(blacklist_characters="{", blacklist_categories=["Cs"]), max_size=8)
_SCALARS = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
_JSON = st.recursive(
    _SCALARS | _KEYS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(_KEYS, _JSON, max_size=4))
def test_spec_8_3_a_any_json_object_is_the_call_input_exactly(arguments: dict[str, Any]) -> None:
    """Whatever JSON object the prompt gives, the model's call carries exactly it (through the real SDK) [R8.3-a]."""

    async def ask() -> list[Any]:
        model = ScriptedModel()
        prompt = f"call echo_anything with {json.dumps(arguments, ensure_ascii=False)} please"
        async with model.client.messages.stream(
            model="scripted",
            max_tokens=100_000,
            messages=[{"role": "user", "content": prompt}],
            tools=[{"name": "echo_anything", "input_schema": {"type": "object"}}],
        ) as stream:
            message = await stream.get_final_message()
        return [(b.name, b.input) for b in message.content if b.type == "tool_use"]

    assert asyncio.run(ask()) == [("echo_anything", arguments)]


# ------------------------------------------------------------------ R8.3-b: demo inputs from a schema


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "object", "properties": {"term": {"type": "string"}}, "required": ["term"]}, {"term": "demo"}),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "number"}, "c": {"type": "boolean"}},
                "required": ["a", "b", "c"],
            },
            {"a": 1, "b": 1, "c": True},
        ),
        (
            {
                "type": "object",
                "properties": {
                    "unit": {"enum": ["km", "mi"]},
                    "kind": {"const": "x"},
                    "tags": {"type": "array"},
                    "opts": {"type": "object"},
                    "maybe": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                    "either": {"type": ["null", "string"]},
                    "skipped": {"type": "string"},
                },
                "required": ["unit", "kind", "tags", "opts", "maybe", "either"],
            },
            {"unit": "km", "kind": "x", "tags": [], "opts": {}, "maybe": 1, "either": "demo"},
        ),
        ({"type": "object", "properties": {}}, {}),
        ({"type": "object"}, {}),
        ("not a schema", {}),
    ],
)
def test_spec_8_3_b_demo_input_fills_the_required_properties(schema: object, expected: dict[str, Any]) -> None:
    """Required properties only, each given a demo value of its type [R8.3-b]."""
    assert demo_input(schema) == expected


# ------------------------------------------------------------------ R8.3-c: the approval demo


def test_spec_8_3_c_delete_the_draft_calls_delete_draft_and_reports_it() -> None:
    """ "delete the draft 'NAME'": a delete_draft call; once it ran, "Deleted ..." [R8.3-c]."""
    result, model, lines = _run("Please delete the draft 'notes-2'.")
    assert _calls(model) == [("delete_draft", {"name": "notes-2"})]
    assert _results(lines)["delete_draft"] == "the draft 'notes-2' is deleted (a demo: nothing real was removed)"
    assert result.final_text.startswith("Deleted the draft 'notes-2': ")


def test_spec_8_3_c_a_denied_deletion_is_reported_as_not_done() -> None:
    """A denial (an is_error result): "I did not delete ...", quoting why [R8.3-c]."""
    asked: list[str] = []

    def can_use_tool(name: str, _input: dict[str, Any], _context: ToolPermissionContext) -> PermissionResult:
        asked.append(name)
        return PermissionDeny(message="the user said no") if name == "delete_draft" else PermissionAllow()

    result, model, _ = _run("delete the draft", can_use_tool=can_use_tool)
    assert asked == ["delete_draft"]
    assert _calls(model) == [("delete_draft", {"name": "demo-draft"})]
    assert result.final_text.startswith("I did not delete the draft 'demo-draft': ")
    assert "the user said no" in result.final_text


def test_spec_8_3_c_delete_draft_needs_approval_under_the_demo_rules() -> None:
    """Under DEMO_PERMISSION_RULES (mode auto) delete_draft is asked, durably; every other tool runs [R8.3-c]."""
    asked = decide("auto", DEMO_PERMISSION_RULES, "delete_draft", {"name": "x"})
    assert isinstance(asked, PermissionAsk)
    assert asked.durable
    assert asked.rule is not None
    assert asked.rule.tool == "delete_draft"
    for other in ("calculator", "count_slowly", "mcp__demo__lookup"):
        assert isinstance(decide("auto", DEMO_PERMISSION_RULES, other, {}), PermissionAllow)
    assert isinstance(decide("ask", DEMO_PERMISSION_RULES, "calculator", {}), PermissionAsk)


@pytest.mark.parametrize("name", ["", " lead", "a/b", "x" * 65, "../etc"])
def test_spec_8_3_c_delete_draft_refuses_a_bad_name(name: str) -> None:
    """A name that is no draft name: an error result naming the field, nothing 'deleted' [R8.3-c]."""

    async def go() -> tuple[str, bool]:
        call = ToolCallRequest(id="toolu_1", name="delete_draft", input={"name": name})

        async def send(_lines: list[bytes]) -> None:
            return None

        (done,) = await run_tools([call], {"delete_draft": delete_draft}, Emitter(AGENT), send)
        return done.text, done.is_error

    text, is_error = asyncio.run(go())
    assert is_error
    assert text.startswith("ValueError: name: must be 1 to 64 letters")


# ------------------------------------------------------------------ R8.3-d: the progress demo


def test_spec_8_3_d_count_slowly_prompt_calls_the_tool_and_answers() -> None:
    """ "count slowly to N": a count_slowly call with n, then the count quoted [R8.3-d]."""
    result, model, _ = _run("Count slowly to 4, please.")
    assert _calls(model) == [("count_slowly", {"n": 4})]
    assert result.final_text == "I counted slowly to 4: 1, 2, 3, 4"


def test_spec_8_3_d_count_slowly_out_of_range_is_an_error_the_model_reads() -> None:
    """n over MAX_COUNT: an is_error result saying the range; the model says it could not [R8.3-d]."""
    result, _, _ = _run(f"count slowly to {MAX_COUNT + 1}")
    assert result.final_text.startswith(f"I could not count to {MAX_COUNT + 1}: ValueError: n: must be an integer")


def test_spec_8_3_d_count_slowly_reports_rising_fractions_into_a_valid_stream() -> None:
    """count_slowly reports "counting i of n" with fraction (i-1)/n; the progress lines stream strictly valid [R8.3-d]."""
    heard: list[ToolProgress] = []

    async def go() -> tuple[list[bytes], str]:
        emitter = Emitter(AGENT)
        init = {"format": "json", "user_query": "count", "agent_uuid": AGENT, "model": "scripted"}
        call = ToolCallRequest(id="toolu_count", name="count_slowly", input={"n": 3})
        sent = [*emitter.buffered("meta_init", json.dumps(init))]
        sent += emitter.buffered("tool_call", json.dumps(call.input), id=call.id, name=call.name)

        async def send(lines: list[bytes]) -> None:
            sent.extend(lines)

        base = ToolContextBase(agent_uuid=AGENT, run_id="run-1", progress_interval=0.0, on_progress=heard.append)
        (done,) = await run_tools([call], {"count_slowly": count_slowly}, emitter, send, context=base)
        final = {"stop_reason": "end_turn", "total_steps": 1, "cumulative_usage": {}}
        sent += emitter.buffered("meta_final", json.dumps(final))
        return [*sent, b"[DONE]"], done.text

    lines, text = asyncio.run(go())
    assert text == "1, 2, 3"
    assert [(p.message, p.fraction) for p in heard] == [
        ("counting 1 of 3", 0.0),
        ("counting 2 of 3", 1 / 3),
        ("counting 3 of 3", 2 / 3),
    ]
    progress = [json.loads(e["delta"]) for e in envelopes(lines) if e["type"] == "meta_status"]
    assert [p["fraction"] for p in progress] == [0.0, 1 / 3, 2 / 3]
    assert {p["kind"] for p in progress} == {"tool_progress"}
    assert not [e for e in envelopes(lines) if e["type"] == "error"]  # envelope-v1 [4.16-c]
    assert_valid_responses(lines)
