"""The @tool decorator: schema from hints and docstring (spec/agent-ref.md §2)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any, Literal

import jsonschema  # type: ignore[import-untyped]
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_ref import Agent, ReplayModel, Tool, ToolDefinitionError, default_tools, tool
from agent_ref.tools.core import ToolCallRequest, _call
from agent_ref.tools.demo import confirm, evaluate
from agent_ref_support import drop, fast_retry, run


def test_spec_2_1_schema_from_hints_and_docstring() -> None:
    """Hints give types, Args lines give descriptions, defaults are optional [R2.1-a]."""

    @tool
    def search(
        query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast", tags: list[str] | None = None
    ) -> str:
        """Search the notes.

        Longer explanation on a second line.

        Args:
            query: What to look for.
            limit: How many results,
                at most.
            mode: Search mode.
            tags: Only notes with these tags.
        """
        return f"{query} {limit} {mode} {tags}"

    assert search.name == "search"
    assert search.executor == "backend"
    assert search.description == "Search the notes. Longer explanation on a second line."
    assert search.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "description": "How many results, at most.", "default": 5},
            "mode": {"enum": ["fast", "deep"], "description": "Search mode.", "default": "fast"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Only notes with these tags."},
        },
        "required": ["query"],
    }


def test_spec_2_1_frontend_tools_are_schema_only() -> None:
    """A frontend tool has a schema and no function [R2.1-a]."""
    assert confirm.executor == "frontend"
    assert confirm.fn is None
    assert confirm.definition()["input_schema"]["required"] == ["question"]
    assert [t.name for t in default_tools()] == [
        "calculator",
        "add",
        "multiply",
        "confirm",
        "delete_draft",
        "count_slowly",
    ]


def test_spec_2_1_unsupported_definitions_are_refused() -> None:
    """No hint, *args, bad names: a ToolDefinitionError [R2.1-a]."""
    with pytest.raises(ToolDefinitionError, match="no type hint"):

        @tool
        def bad(x) -> str:  # type: ignore[no-untyped-def]  # the missing hint is the point
            """Bad."""
            return str(x)

    with pytest.raises(ToolDefinitionError, match="args"):

        @tool
        def star(*xs: int) -> str:
            """Bad."""
            return str(xs)

    with pytest.raises(ToolDefinitionError, match="name"):
        tool(name="has space")(lambda: "")


def test_calculator_is_safe_arithmetic() -> None:
    """The demo calculator evaluates arithmetic only."""
    assert evaluate("5 + (10 * 2)") == 25
    assert evaluate("7 / 2") == 3.5
    with pytest.raises(ValueError, match="not allowed"):
        evaluate("__import__('os')")
    with pytest.raises(ValueError, match="too large"):
        evaluate("9 ** 9 ** 9")


# --- tuples and dataclasses as parameters (spec §2.1-b; issue 24 §7) -------------------------


@dataclasses.dataclass
class Point:
    """A point on the grid.

    Attributes:
        x: Columns from the left.
        y: Rows from the top.
    """

    x: int
    y: int = 0


@dataclasses.dataclass
class Box:
    corner: Point
    size: tuple[int, int]
    tags: list[str] = dataclasses.field(default_factory=list)
    label: str | None = None
    note: str | None = dataclasses.field(default=None)
    kind: Literal["crate", "bag"] = "crate"


POINT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A point on the grid.",
    "properties": {
        "x": {"type": "integer", "description": "Columns from the left."},
        "y": {"type": "integer", "description": "Rows from the top.", "default": 0},
    },
    "required": ["x"],
    "additionalProperties": False,
}


def test_spec_2_1_b_a_fixed_tuple_is_prefix_items_not_an_array_of_its_first_type() -> None:
    """tuple[int, str]: position by position, exactly that long [R2.1-b].

    Before: "array of integers" (the first type only), so the model sent [1, 2] and the call failed.
    """

    @tool
    def at(pos: tuple[int, str], many: tuple[int, ...], anything: tuple, empty: tuple[()] = ()) -> str:  # type: ignore[type-arg]  # the bare tuple on purpose
        """Place something."""
        return repr((pos, many, anything, empty))

    props = at.input_schema["properties"]
    assert props["pos"] == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "items": False,
        "minItems": 2,
        "maxItems": 2,
    }
    assert props["many"] == {"type": "array", "items": {"type": "integer"}}
    assert props["anything"] == {"type": "array"}
    assert props["empty"] == {"type": "array", "maxItems": 0}
    jsonschema.Draft202012Validator.check_schema(at.input_schema)


def test_spec_2_1_b_a_dataclass_is_an_object_of_its_fields() -> None:
    """Fields become properties (nested dataclasses too), without a default required, no other key [R2.1-b].

    Before: a dataclass parameter was a ToolDefinitionError.
    """

    @tool
    def pack(box: Box, where: Point | None, spare: Point | None = None) -> str:
        """Pack a box.

        Args:
            box: The box.
            where: Where it goes; null for anywhere.
            spare: A second place.
        """
        return repr((box, where, spare))

    assert pack.input_schema["required"] == ["box", "where"]
    props = pack.input_schema["properties"]
    assert props["box"] == {
        "type": "object",
        "description": "The box.",
        "properties": {
            "corner": POINT_SCHEMA,
            "size": {
                "type": "array",
                "prefixItems": [{"type": "integer"}] * 2,
                "items": False,
                "minItems": 2,
                "maxItems": 2,
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "label": {"type": "string"},
            "note": {"type": "string"},
            "kind": {"enum": ["crate", "bag"], "default": "crate"},
        },
        "required": ["corner", "size"],
        "additionalProperties": False,
    }
    # required and Optional: null is a value the model may send; with a default, it omits the key
    assert props["where"] == {
        "anyOf": [POINT_SCHEMA, {"type": "null"}],
        "description": "Where it goes; null for anywhere.",
    }
    assert props["spare"] == {**POINT_SCHEMA, "description": "A second place."}
    jsonschema.Draft202012Validator.check_schema(pack.input_schema)


def _tool_call(name: str, tool_input: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """A recorded model that calls ``name`` once with ``tool_input``, then answers."""
    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "model": "r", "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    start: dict[str, Any] = {"type": "message_start", "message": message}
    block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}
    call: list[dict[str, Any]] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": block},
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": json.dumps(tool_input)},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}},
    ]
    answer: list[dict[str, Any]] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    ]
    return [call, answer]


def _result_of(tool_def: Tool, tool_input: dict[str, Any]) -> dict[str, Any]:
    """Run one call of ``tool_def`` through the agent; its tool_result block as the model gets it."""
    model = ReplayModel(_tool_call(tool_def.name, tool_input))
    run(Agent(model, tools=[tool_def], retry=fast_retry()).run("go", drop))
    block = model.server.requests[1]["messages"][-1]["content"][0]
    assert block["type"] == "tool_result"
    return block  # type: ignore[no-any-return]  # the recorded request's JSON


received: list[Any] = []


@tool
def pack_box(box: Box, at: tuple[int, str], maybe: Point | None) -> str:
    """Pack a box."""
    received.append((box, at, maybe))
    return "packed"


def test_spec_2_1_b_the_models_json_becomes_the_dataclass_and_the_tuple() -> None:
    """The tool gets a Box (a Point inside, defaults filled) and a tuple, not dicts and lists [R2.1-b]."""
    received.clear()
    block = _result_of(
        pack_box, {"box": {"corner": {"x": 3}, "size": [2, 5], "label": None}, "at": [7, "dock"], "maybe": None}
    )
    assert block["content"][0]["text"] == "packed"
    assert received == [(Box(corner=Point(x=3, y=0), size=(2, 5)), (7, "dock"), None)]
    assert isinstance(received[0][0].corner, Point)


@pytest.mark.parametrize(
    ("tool_input", "message"),
    [
        (
            {"box": {"corner": {"x": 3, "z": 1}, "size": [2, 5]}, "at": [7, "d"], "maybe": None},
            "invalid input for pack_box: parameter 'box': unexpected field 'z' at `$.corner` (the fields of Point: x, y)",
        ),
        (
            {"box": {"corner": {"x": 3}, "size": [2, 5]}, "at": [7, "d"], "maybe": {"x": 1, "extra": 2}},
            "invalid input for pack_box: parameter 'maybe': unexpected field 'extra' at `$` (the fields of Point: x, y)",
        ),
        (
            {"box": {"corner": {"x": "left"}, "size": [2, 5]}, "at": [7, "d"], "maybe": None},
            "invalid input for pack_box: parameter 'box': Expected `int`, got `str` - at `$.corner.x`",
        ),
        (
            {"box": {"corner": {"x": 3}, "size": [2, 5]}, "at": [7, "d", "extra"], "maybe": None},
            "invalid input for pack_box: parameter 'at': Expected `array` of length 2, got 3",
        ),
        (
            {"box": {"size": [2, 5]}, "at": [7, "d"], "maybe": None},
            "invalid input for pack_box: parameter 'box': Object missing required field `corner`",
        ),
    ],
    ids=["unknown-nested-field", "unknown-field-in-optional", "wrong-type", "long-tuple", "missing-field"],
)
def test_spec_2_1_b_bad_input_names_the_parameter_and_the_place(tool_input: dict[str, Any], message: str) -> None:
    """An input that does not fit is an is_error result naming the parameter and the path; a key is never dropped [R2.1-b]."""
    received.clear()
    block = _result_of(pack_box, tool_input)
    assert block["is_error"] is True
    assert block["content"][0]["text"] == message
    assert received == []


@dataclasses.dataclass
class Node:
    value: int
    children: list[Node]


@dataclasses.dataclass
class Other:
    y: int


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (Node, r"tool t: parameter 'p'\.children\[\]: dataclass Node contains itself \(Node -> Node\); not supported"),
        (
            Point | Other,
            r"tool t: parameter 'p': .* cannot be read from JSON: Type unions may not contain more than one dataclass",
        ),
        (
            dict[int, str],
            r"tool t: parameter 'p': dict\[int, str\]: a JSON object's keys are strings; use dict\[str, \.\.\.\]",
        ),
        (bytes, r"tool t: parameter 'p': <class 'bytes'> has no JSON Schema form here \(supported: str, int"),
        (list[complex], r"tool t: parameter 'p'"),
        (tuple[int, bytes], r"tool t: parameter 'p'\[1\]: <class 'bytes'> has no JSON Schema form"),
    ],
    ids=["recursive", "two-dataclasses", "int-keys", "bytes", "complex", "bytes-in-tuple"],
)
def test_spec_2_1_b_unsupported_types_say_which_parameter_and_why(annotation: Any, message: str) -> None:
    """A hint with no JSON form is refused when the tool is made, naming the parameter (and the place inside) [R2.1-b]."""

    def t(p: Any) -> str:
        """T."""
        return str(p)

    t.__annotations__["p"] = annotation
    with pytest.raises(ToolDefinitionError, match=message):
        tool(t)


@dataclasses.dataclass
class Crate:
    """Generated by hypothesis below: every shape of field the schema describes."""

    name: str
    size: tuple[int, int]
    at: Point
    tags: tuple[str, ...] = ()
    flag: bool | None = None
    kind: Literal["a", "b"] = "a"
    extra: dict[str, int] = dataclasses.field(default_factory=dict)
    inner: list[Point] = dataclasses.field(default_factory=list)


@tool
def ship(crate: Crate, pair: tuple[int, str]) -> str:
    """Ship a crate."""
    return repr((crate, pair))


@settings(max_examples=60, deadline=None)
@given(crate=st.from_type(Crate), pair=st.tuples(st.integers(), st.text(max_size=5)))
def test_spec_2_1_b_property_a_value_matches_its_schema_and_comes_back_whole(
    crate: Crate, pair: tuple[int, str]
) -> None:
    """Any value of the types, as JSON, is valid under the tool's schema and converts back equal [R2.1-b].

    So the schema the model is given and the conversion the call does agree.
    """
    tool_input = json.loads(msgspec.json.encode({"crate": crate, "pair": pair}))  # as the model sends it
    if tool_input["crate"]["flag"] is None:
        # An Optional field with a default is described without null: the model omits it (the
        # conversion takes an explicit null too, checked below with the key kept).
        del tool_input["crate"]["flag"]
        jsonschema.Draft202012Validator(ship.input_schema).validate(tool_input)
        tool_input["crate"]["flag"] = None
    else:
        jsonschema.Draft202012Validator(ship.input_schema).validate(tool_input)
    assert asyncio.run(_call(ship, ToolCallRequest(id="t", name="ship", input=tool_input))) == repr((crate, pair))


@pytest.mark.parametrize(
    ("crate", "where"),
    [
        ({"inner": [{"x": 1}, {"x": 2, "w": 0}]}, "unexpected field 'w' at `$.inner[1]`"),
        ({"at": {"x": 1, "y": 2, "z": 3}}, "unexpected field 'z' at `$.at`"),
        ({"colour": "red"}, "unexpected field 'colour' at `$` (the fields of Crate: name, size, at, tags"),
    ],
)
def test_spec_2_1_b_an_unknown_key_anywhere_inside_is_refused_with_its_path(crate: dict[str, Any], where: str) -> None:
    """Inside lists and nested dataclasses too: msgspec would drop the key; the call refuses it [R2.1-b]."""
    base = {"name": "c", "size": [1, 2], "at": {"x": 0}}
    call = ToolCallRequest(id="t", name="ship", input={"crate": {**base, **crate}, "pair": [1, "a"]})
    with pytest.raises(TypeError) as err:
        asyncio.run(_call(ship, call))
    assert str(err.value).startswith(f"parameter 'crate': {where}")
