"""Structured output: seed 004's ``error_max_structured_output_retries`` (spec/agent-ref.md §17).

Every response these tests make is validated strictly by the autouse tee
(tests/agent_ref_validating.py).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref.errors import ConfigError
from agent_ref.run.structured import DEFAULT_STRUCTURED_RETRIES, STOP_STRUCTURED_RETRIES, StructuredOutput
from agent_ref_support import blocks, drop, fast_retry, meta, run

WEATHER = "Describe the weather in Paris as JSON."
STUBBORN = "Stubbornly describe the weather in Paris as JSON."
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["city", "temperature_c"],
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "temperature_c": {"type": "integer", "minimum": -90, "maximum": 60},
        "conditions": {"enum": ["sunny", "cloudy", "rain"]},
    },
    "additionalProperties": False,
}


class Weather(msgspec.Struct):
    """The scripted model's weather report, as a msgspec type."""

    city: str
    temperature_c: int
    conditions: str


def _agent(schema: Any, **kw: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel()
    return Agent(model, tools=default_tools(), retry=fast_retry(), output_schema=schema, **kw), model


def _invalid(lines: list[bytes]) -> list[dict[str, Any]]:
    return [
        b["data"] for b in blocks(lines) if b["type"] == "error" and b["data"]["type"] == "structured_output_invalid"
    ]


@pytest.mark.parametrize("schema", [SCHEMA, Weather], ids=["json-schema", "msgspec"])
def test_spec_17_2_a_bad_answer_is_corrected_then_valid(schema: Any) -> None:
    """Prose first: the model is told why and answers again; the value is on the result [R17.2-a]."""
    agent, model = _agent(schema)
    lines: list[bytes] = []
    result = run(agent.run(WEATHER, lines.append))
    assert result.stop_reason == "end_turn"
    expected = {"city": "Paris", "temperature_c": 21, "conditions": "sunny"}
    if schema is Weather:
        assert result.structured_output == Weather(city="Paris", temperature_c=21, conditions="sunny")
    else:
        assert result.structured_output == expected
    assert meta(lines, "meta_final")["structured_output"] == expected
    (invalid,) = _invalid(lines)
    assert invalid["attempt"] == 1
    assert invalid["retrying"] is True
    assert invalid["errors"][0].startswith("not JSON")
    # The correction the model got: a user turn naming the errors and the schema.
    correction = model.requests[1]["messages"][-1]["content"][0]["text"]
    assert correction.startswith("Your final answer did not match the output schema: not JSON")
    assert '"temperature_c"' in correction
    # The schema is in the system prompt of every call [R17.1-a].
    assert all('"temperature_c"' in body["system"] for body in model.requests)
    assert result.steps == 2


def test_spec_17_2_a_retries_run_out() -> None:
    """Always prose: 1 + 3 answers, then ``error_max_structured_output_retries`` [R17.2-a]."""
    assert DEFAULT_STRUCTURED_RETRIES == 3
    agent, model = _agent(SCHEMA)
    lines: list[bytes] = []
    result = run(agent.run(STUBBORN, lines.append))
    assert result.stop_reason == STOP_STRUCTURED_RETRIES == "error_max_structured_output_retries"
    assert meta(lines, "meta_final")["stop_reason"] == STOP_STRUCTURED_RETRIES
    assert "structured_output" not in meta(lines, "meta_final")
    assert result.structured_output is None
    assert [e["retrying"] for e in _invalid(lines)] == [True, True, True, False]
    assert len(model.requests) == 4


def test_spec_17_2_a_retry_limit_is_configurable() -> None:
    """``max_structured_output_retries=0``: the first bad answer ends the run."""
    agent, model = _agent(SCHEMA, max_structured_output_retries=0)
    result = run(agent.run(WEATHER, drop))
    assert result.stop_reason == STOP_STRUCTURED_RETRIES
    assert len(model.requests) == 1
    with pytest.raises(ConfigError, match="max_structured_output_retries"):
        _agent(SCHEMA, max_structured_output_retries=-1)


def test_spec_17_2_a_wrong_shape_is_named() -> None:
    """A JSON answer of the wrong shape: the errors name the path, and the run gives up after the retries."""
    strict = {**SCHEMA, "required": ["city", "humidity"]}
    agent, _ = _agent(strict, max_structured_output_retries=1)
    lines: list[bytes] = []
    result = run(agent.run(WEATHER, lines.append))
    assert result.stop_reason == STOP_STRUCTURED_RETRIES
    errors = _invalid(lines)[-1]["errors"]
    assert "$: 'humidity' is a required property" in errors
    assert not any("Additional properties" in e for e in errors)  # conditions is declared


def test_spec_17_2_b_no_schema_no_check() -> None:
    """Without ``output_schema`` nothing changes: prose ends the run, no value."""
    result = run(Agent(ScriptedModel(), tools=default_tools()).run(WEATHER, drop))
    assert result.stop_reason == "end_turn"
    assert result.structured_output is None


def test_spec_17_1_c_fenced_json_is_accepted_and_nothing_else_is_cut() -> None:
    """One ```json fence that is the whole answer is read; text around JSON is an error [R17.1-c]."""
    out = StructuredOutput(SCHEMA)
    good = '{"city": "Oslo", "temperature_c": -3}'
    assert out.check(good) == ({"city": "Oslo", "temperature_c": -3}, [])
    assert out.check(f"```json\n{good}\n```\n") == ({"city": "Oslo", "temperature_c": -3}, [])
    assert out.check(f"Here it is: {good}")[1][0].startswith("not JSON")
    assert StructuredOutput(Weather).check('{"city": 1}')[1] == ["Expected `str`, got `int` - at `$.city`"]


def test_spec_17_1_b_bad_schemas_are_config_errors_naming_the_problem() -> None:
    """The schema is checked when the agent is built: each error names its place [R17.1-b]."""
    with pytest.raises(ConfigError, match=r"output_schema: \$\.type: 'str' is not valid under any"):
        StructuredOutput({"type": "str"})
    with pytest.raises(ConfigError, match=r"\$\.properties\.a\.minimum: 'x' is not of type 'number'"):
        StructuredOutput({"properties": {"a": {"minimum": "x"}}})
    with pytest.raises(ConfigError, match=r"\$\.\$schema: unknown JSON Schema draft 'draft-99'"):
        StructuredOutput({"$schema": "draft-99", "type": "string"})
    with pytest.raises(ConfigError, match=r"\$\.properties\.x\.\$ref: '#/\$defs/X' does not resolve"):
        StructuredOutput({"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}})
    with pytest.raises(ConfigError, match="nothing is fetched"):  # no network, ever
        StructuredOutput({"$ref": "https://example.com/schema.json"})
    with pytest.raises(ConfigError, match="msgspec cannot use"):
        StructuredOutput(object)
    with pytest.raises(ConfigError, match="output_schema"):  # at Agent construction too
        _agent({"type": "str"})


def test_spec_17_1_b_the_schema_is_copied() -> None:
    """Changing the caller's dict later changes nothing: the schema is copied when built."""
    schema: dict[str, Any] = {"type": "string"}
    out = StructuredOutput(schema)
    schema["type"] = "integer"
    assert out.check('"a"')[1] == []


@pytest.mark.parametrize(
    ("schema", "value", "errors"),
    [
        ({"type": "integer"}, 3.0, []),
        ({"type": "integer"}, 3.5, ["$: 3.5 is not of type 'integer'"]),
        ({"type": "integer"}, True, ["$: True is not of type 'integer'"]),
        ({"type": ["string", "null"]}, None, []),
        ({"const": 1}, 2, ["$: 1 was expected"]),
        ({"exclusiveMinimum": 0}, 0, ["$: 0 is less than or equal to the minimum of 0"]),
        ({"maxLength": 2}, "abc", ["$: 'abc' is too long"]),
        ({"items": {"type": "string"}, "minItems": 2}, ["a"], ["$: ['a'] is too short"]),
        (
            {"items": {"type": "string"}, "maxItems": 1},
            ["a", 2],
            ["$[1]: 2 is not of type 'string'", "$: ['a', 2] is too long"],
        ),
        ({"additionalProperties": {"type": "integer"}}, {"a": "x"}, ["$.a: 'x' is not of type 'integer'"]),
        (
            {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            [],
            ["$: [] is not valid under any of the given schemas"],
        ),
        # Keywords the former hand-written subset refused, now checked by jsonschema:
        ({"type": "string", "pattern": "^a"}, "ba", ["$: 'ba' does not match '^a'"]),
        ({"type": "string", "pattern": "^a"}, "ab", []),
        (
            {"oneOf": [{"type": "integer"}, {"minimum": 0}]},
            5,
            ["$: 5 is valid under each of {'minimum': 0}, {'type': 'integer'}"],
        ),
        ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -5, []),
        (
            {"type": "object", "properties": {"x": {"$ref": "#/$defs/X"}}, "$defs": {"X": {"type": "integer"}}},
            {"x": "no"},
            ["$.x: 'no' is not of type 'integer'"],
        ),
        ({"type": "string", "format": "date"}, "2026-13-45", ["$: '2026-13-45' is not a 'date'"]),
        ({"type": "string", "format": "date"}, "2026-11-24", []),
        (
            {"prefixItems": [{"type": "string"}], "items": False},
            ["a", 1],
            ["$: Expected at most 1 item but found 1 extra: 1"],
        ),
        # The declared draft is the one used: draft 7's array form of items and additionalItems.
        (
            {
                "$schema": "http://json-schema.org/draft-07/schema#",
                "items": [{"type": "string"}],
                "additionalItems": False,
            },
            ["a", 1],
            ["$: Additional items are not allowed (1 was unexpected)"],
        ),
    ],
)
def test_spec_17_1_b_jsonschema_checks(schema: dict[str, Any], value: Any, errors: list[str]) -> None:
    """Each keyword does what JSON Schema says; each error line is ``$.path: what failed``."""
    import json

    assert StructuredOutput(schema).check(json.dumps(value))[1] == errors


def test_spec_17_1_b_a_very_deep_answer_is_an_error_not_a_crash() -> None:
    """An answer nested deeper than Python's recursion limit is reported, never a RecursionError."""
    out = StructuredOutput({"items": {"$ref": "#"}})
    assert out.check("[" * 900 + "]" * 900)[1] == ["$: nested too deeply to check against the schema"]
    assert out.check("[" * 100_000 + "]" * 100_000) == (None, ["not JSON: nested too deeply to read"])
    assert out.check("[" * 50 + "]" * 50)[1] == []


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=10,
)


@given(_JSON)
def test_property_checking_never_raises(value: Any) -> None:
    """Any JSON value against the test schema: a list of errors, never an exception."""
    import json

    _, errors = StructuredOutput(SCHEMA).check(json.dumps(value))
    assert isinstance(errors, list)
    assert (errors == []) == (
        isinstance(value, dict)
        and set(value) <= {"city", "temperature_c", "conditions"}
        and isinstance(value.get("city"), str)
        and len(value["city"]) >= 1
        and type(value.get("temperature_c")) in (int, float)
        and not isinstance(value.get("temperature_c"), bool)
        and float(value["temperature_c"]).is_integer()
        and -90 <= value["temperature_c"] <= 60
        and value.get("conditions", "sunny") in ("sunny", "cloudy", "rain")
    )


def test_spec_17_2_b_only_end_turn_is_checked() -> None:
    """A run that ends ``max_steps`` is not checked: no correction, no value [R17.2-b]."""
    agent, model = _agent(SCHEMA, max_steps=2)
    lines: list[bytes] = []
    result = run(agent.run("Please keep calculating.", lines.append))
    assert result.stop_reason == "max_steps"
    assert result.structured_output is None
    assert _invalid(lines) == []
    assert len(model.requests) == 3


def test_spec_17_2_c_a_prompt_that_begins_like_a_correction_spends_no_retry() -> None:
    """The user's prompt may begin with the correction text: the run still gets every correction [R17.2-c].

    Before: corrections were counted by their text, so this prompt counted as one already and
    the run ended after a single answer (attempt 2, not retrying).
    """
    from agent_ref.run.structured import CORRECTION

    agent, model = _agent(SCHEMA, max_structured_output_retries=1)
    lines: list[bytes] = []
    prompt = f"{CORRECTION}: that is what my last tool said. Stubbornly describe the weather in Paris as JSON."
    result = run(agent.run(prompt, lines.append))
    assert result.stop_reason == STOP_STRUCTURED_RETRIES
    assert [(e["attempt"], e["retrying"]) for e in _invalid(lines)] == [(1, True), (2, False)]
    assert len(model.requests) == 2  # the first answer and the one correction


def test_spec_17_2_c_the_count_is_state_and_survives_a_pause_in_another_process() -> None:
    """A correction before a pause still counts after a resume by a fresh Agent [R17.2-c]."""
    import asyncio
    import json

    from agent_ref import MemoryStore, ReplayModel

    def start() -> dict[str, Any]:
        message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "model": "r", "content": []}
        message |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
        return {"type": "message_start", "message": message}

    def end(reason: str) -> list[dict[str, Any]]:
        return [{"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 2}}]

    def prose(text: str) -> list[dict[str, Any]]:
        return [
            start(),
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
            {"type": "content_block_stop", "index": 0},
            *end("end_turn"),
        ]

    block = {"type": "tool_use", "id": "toolu_c", "name": "confirm", "input": {}}
    ask = [
        start(),
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "content_block_stop", "index": 0},
        *end("tool_use"),
    ]
    ask[2]["delta"]["partial_json"] = json.dumps({"question": "Paris?"})
    model = ReplayModel([prose("sunny"), ask, prose("still sunny")])
    store = MemoryStore()
    config: dict[str, Any] = {"tools": default_tools(), "retry": fast_retry(), "output_schema": SCHEMA}
    agent = Agent(model, store=store, max_structured_output_retries=1, **config)
    first: list[bytes] = []
    paused = run(agent.run("weather", first.append))
    assert paused.stop_reason == "awaiting_frontend_tools"
    stored = asyncio.run(store.load(agent.agent_uuid))
    assert stored is not None
    assert stored.run is not None
    assert stored.run.structured_corrections == 1
    fresh = asyncio.run(Agent.load(agent.agent_uuid, store, model, max_structured_output_retries=1, **config))
    second: list[bytes] = []
    result = run(fresh.continue_with_tool_results([{"tool_use_id": "toolu_c", "content": "yes"}], second.append))
    assert result.stop_reason == STOP_STRUCTURED_RETRIES
    assert [(e["attempt"], e["retrying"]) for e in _invalid(first) + _invalid(second)] == [(1, True), (2, False)]
