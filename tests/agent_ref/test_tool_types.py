"""Tools from types: TypedDict, msgspec Structs, enums, Annotated constraints (spec/agent-ref.md §2.1-c)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import enum
import json
import uuid
from typing import Annotated, Any, Literal, NewType, NotRequired, Required, TypedDict

import jsonschema  # type: ignore[import-untyped]
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_ref import Tool, ToolDefinitionError, tool
from agent_ref.tools.core import ToolCallRequest, _call


class Colour(enum.Enum):
    """A colour of the palette."""

    RED = "red"
    BLUE = "blue"


class Size(enum.IntEnum):
    SMALL = 1
    LARGE = 3


class Options(TypedDict, total=False):
    """How to search.

    Attributes:
        depth: How many levels down.
        query: What to look for.
    """

    depth: int
    query: Required[str]


class Label(TypedDict):
    text: str
    colour: NotRequired[Colour]


class Item(msgspec.Struct, rename="camel"):
    """An item of the order.

    Attributes:
        item_name: What it is.
        count: How many.
    """

    item_name: str
    count: Annotated[int, msgspec.Meta(ge=1, le=99)] = 1
    size: Size = Size.SMALL


class Cat(msgspec.Struct, tag=True):
    lives: int


class Dog(msgspec.Struct, tag="dog"):
    name: Annotated[str, msgspec.Meta(min_length=1, description="Its name.")]


class Pair(msgspec.Struct, array_like=True):
    left: int
    right: str = "r"


def _run(tool_def: Tool, tool_input: dict[str, Any]) -> object:
    return asyncio.run(_call(tool_def, ToolCallRequest(id="t", name=tool_def.name, input=tool_input)))


seen: list[tuple[Any, ...]] = []


@tool
def order(options: Options, label: Label, item: Item, pet: Cat | Dog, pair: Pair, colour: Colour = Colour.RED) -> str:
    """Place an order.

    Args:
        options: Search options.
        colour: The wrapping.
    """
    seen.append((options, label, item, pet, pair, colour))
    return "ok"


def test_spec_2_1_c_typeddict_struct_and_enum_schemas() -> None:
    """TypedDict keys (total/Required/NotRequired), Struct JSON names, tags, array_like, enum values [R2.1-c].

    Before: each of these hints was a ToolDefinitionError ("no JSON Schema form here").
    """
    props = order.input_schema["properties"]
    assert props["options"] == {
        "type": "object",
        "description": "Search options.",
        "properties": {
            "depth": {"type": "integer", "description": "How many levels down."},
            "query": {"type": "string", "description": "What to look for."},
        },
        "required": ["query"],  # Required[...] under `from __future__ import annotations` too
        "additionalProperties": False,
    }
    assert props["label"] == {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "colour": {"enum": ["red", "blue"], "description": "A colour of the palette."},
        },
        "required": ["text"],
        "additionalProperties": False,
    }  # no description: a TypedDict without a docstring does not borrow dict's
    assert props["item"] == {
        "type": "object",
        "description": "An item of the order.",
        "properties": {
            "itemName": {"type": "string", "description": "What it is."},
            "count": {"type": "integer", "description": "How many.", "minimum": 1, "maximum": 99, "default": 1},
            "size": {"enum": [1, 3], "default": 1},
        },
        "required": ["itemName"],
        "additionalProperties": False,
    }
    cat = {"type": "object", "properties": {"type": {"enum": ["Cat"]}, "lives": {"type": "integer"}}}
    dog = {
        "type": "object",
        "properties": {
            "type": {"enum": ["dog"]},
            "name": {"type": "string", "description": "Its name.", "minLength": 1},
        },
    }
    assert props["pet"] == {
        "anyOf": [
            {**cat, "required": ["type", "lives"], "additionalProperties": False},
            {**dog, "required": ["type", "name"], "additionalProperties": False},
        ]
    }
    assert props["pair"] == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string", "default": "r"}],
        "items": False,
        "minItems": 1,
        "maxItems": 2,
    }
    assert props["colour"] == {
        "enum": ["red", "blue"],
        "description": "The wrapping.",
        "default": "red",
    }
    assert order.input_schema["required"] == ["options", "label", "item", "pet", "pair"]
    jsonschema.Draft202012Validator.check_schema(order.input_schema)


GOOD: dict[str, Any] = {
    "options": {"query": "q"},
    "label": {"text": "t", "colour": "blue"},
    "item": {"itemName": "pen", "count": 2, "size": 3},
    "pet": {"type": "dog", "name": "Rex"},
    "pair": [4],
}


def test_spec_2_1_c_the_models_json_becomes_the_typed_values() -> None:
    """A TypedDict stays a dict, a Struct is built under its JSON names, a tag picks the member, a value its enum [R2.1-c]."""
    seen.clear()
    jsonschema.Draft202012Validator(order.input_schema).validate(GOOD)
    assert _run(order, GOOD) == "ok"
    assert seen == [
        (
            {"query": "q"},
            {"text": "t", "colour": Colour.BLUE},
            Item(item_name="pen", count=2, size=Size.LARGE),
            Dog(name="Rex"),
            Pair(left=4),
            Colour.RED,
        )
    ]


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            {"options": {"query": "q", "limit": 3}},
            TypeError,
            "unexpected field 'limit' at `$` (the fields of Options: depth, query)",
        ),
        ({"item": {"itemName": "pen", "item_name": "x"}}, TypeError, "unexpected field 'item_name' at `$`"),
        (
            {"pet": {"type": "dog", "name": "Rex", "age": 3}},
            TypeError,
            "unexpected field 'age' at `$` (the fields of Dog: type, name)",
        ),
        (
            {"pet": {"type": "Cat", "lives": 9, "name": "Tom"}},
            TypeError,
            "unexpected field 'name' at `$` (the fields of Cat: type, lives)",
        ),
        ({"options": {"depth": 1}}, msgspec.ValidationError, "Object missing required field `query`"),
        ({"item": {"itemName": "pen", "count": 0}}, msgspec.ValidationError, "Expected `int` >= 1 - at `$.count`"),
        (
            {"label": {"text": "t", "colour": "green"}},
            msgspec.ValidationError,
            "Invalid enum value 'green' - at `$.colour`",
        ),
        ({"pet": {"type": "dog", "name": ""}}, msgspec.ValidationError, "Expected `str` of length >= 1 - at `$.name`"),
        ({"pair": [1, "a", "extra"]}, TypeError, "unexpected item at `$[2]` (Pair has 2: left, right)"),
    ],
    ids=[
        "typeddict-key",
        "struct-python-name",
        "tagged-extra",
        "other-tag-extra",
        "missing-required",
        "ge",
        "enum",
        "min-length",
        "array-like",
    ],
)
def test_spec_2_1_c_what_does_not_fit_is_refused_with_its_place(
    change: dict[str, Any], error: type[Exception], message: str
) -> None:
    """Nothing the model sends is dropped; constraints msgspec checks are refused with the path [R2.1-c, R2.1-b]."""
    seen.clear()
    with pytest.raises(error) as err:
        _run(order, {**GOOD, **change})
    assert message in str(err.value)
    assert str(err.value).startswith(f"parameter '{next(iter(change))}': ")
    assert seen == []


class Tree(TypedDict):
    value: int
    children: list[Tree]


class Chain(msgspec.Struct):
    next: Chain | None = None


class Mixed(enum.Enum):
    A = 1.5


@pytest.mark.parametrize(
    ("annotation", "message"),
    [
        (Tree, r"parameter 'p'\.children\[\]: TypedDict Tree contains itself \(Tree -> Tree\); not supported"),
        (Chain, r"parameter 'p'\.next: Struct Chain contains itself \(Chain -> Chain\)"),
        (Mixed, r"parameter 'p': .* cannot be read from JSON: Enums must contain either all str or all int values"),
    ],
    ids=["recursive-typeddict", "recursive-struct", "float-enum"],
)
def test_spec_2_1_c_recursive_and_odd_types_are_refused_naming_the_place(annotation: Any, message: str) -> None:
    """A type that contains itself is a ToolDefinitionError with the chain, not a hang or a $ref [R2.1-c]."""

    def t(p: Any) -> str:
        """T."""
        return str(p)

    t.__annotations__["p"] = annotation
    with pytest.raises(ToolDefinitionError, match=message):
        tool(t)


# --- the invariant: value -> JSON -> valid under the schema -> converted back equal ---------------


class Parcel(TypedDict):
    """Generated below."""

    name: str
    weight: NotRequired[int]
    colour: Colour
    tags: list[Literal["x", "y"]]


class Crate(msgspec.Struct, rename="camel"):
    """Generated below.

    Attributes:
        crate_id: The id.
    """

    crate_id: int
    parcels: list[Parcel]
    size: Size = Size.SMALL
    dims: tuple[int, int] = (1, 1)
    extra: dict[str, float] = msgspec.field(default_factory=dict)


@dataclasses.dataclass
class Ship:
    crates: list[Crate]
    flag: Colour = Colour.BLUE


@tool
def load(ship: Ship, crate: Crate, parcel: Parcel) -> object:
    """Load a ship."""
    return (ship, crate, parcel)


_finite = st.floats(allow_nan=False, allow_infinity=False)
_parcel = st.from_type(Parcel)
_crate = st.builds(
    Crate,
    crate_id=st.integers(),
    parcels=st.lists(_parcel, max_size=3),
    size=st.sampled_from(Size),
    dims=st.tuples(st.integers(), st.integers()),
    extra=st.dictionaries(st.text(max_size=4), _finite, max_size=3),
)
_ship = st.builds(Ship, crates=st.lists(_crate, max_size=2), flag=st.sampled_from(Colour))


@settings(max_examples=60, deadline=None)
@given(ship=_ship, crate=_crate, parcel=_parcel)
def test_spec_2_1_c_property_a_value_matches_its_schema_and_comes_back_whole(
    ship: Ship, crate: Crate, parcel: Parcel
) -> None:
    """Any dataclass/TypedDict/Struct value, as JSON, is valid under the tool's schema and converts back equal [R2.1-c].

    So the schema the model is given and the conversion the call does agree.
    """
    tool_input = json.loads(msgspec.json.encode({"ship": ship, "crate": crate, "parcel": parcel}))
    jsonschema.Draft202012Validator(load.input_schema).validate(tool_input)
    assert _run(load, tool_input) == (ship, crate, parcel)


UserId = NewType("UserId", int)


@tool
def book(when: datetime.datetime, day: datetime.date, ref: uuid.UUID, price: decimal.Decimal, who: UserId) -> object:
    """Book a slot."""
    return (when, day, ref, price, who)


def test_spec_2_1_c_dates_uuids_decimals_and_newtypes_are_strings_msgspec_converts() -> None:
    """Formatted strings the conversion turns into the annotated type; a NewType is its base type [R2.1-c]."""
    props = book.input_schema["properties"]
    assert props == {
        "when": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "ref": {"type": "string", "format": "uuid"},
        "price": {"type": "string", "format": "decimal"},
        "who": {"type": "integer"},
    }
    sent = {
        "when": "2026-01-02T03:04:05Z",
        "day": "2026-01-02",
        "ref": str(uuid.UUID(int=7)),
        "price": "1.50",
        "who": 3,
    }
    assert _run(book, sent) == (
        datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        datetime.date(2026, 1, 2),
        uuid.UUID(int=7),
        decimal.Decimal("1.50"),
        3,
    )


def _objects(value: object, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The JSON objects of ``load``'s input that are dataclass/TypedDict/Struct values (not the free dict ``extra``).

    ``extra``'s keys are at most 4 characters, so none of them is ``crates``, ``crateId`` or ``colour``.
    """
    if isinstance(value, dict):
        if {"crates", "crateId", "colour"} & set(value):
            found.append(value)
        for item in value.values():
            _objects(item, found)
    elif isinstance(value, list):
        for item in value:
            _objects(item, found)
    return found


@settings(max_examples=60, deadline=None)
@given(ship=_ship, crate=_crate, parcel=_parcel, data=st.data())
def test_spec_2_1_c_property_a_key_added_anywhere_is_refused_never_dropped(
    ship: Ship, crate: Crate, parcel: Parcel, data: st.DataObject
) -> None:
    """One unknown key put into any object of a valid input: the call is refused naming it [R2.1-c, R2.1-b].

    msgspec alone would ignore the key and call the tool with less than the model sent.
    """
    tool_input = json.loads(msgspec.json.encode({"ship": ship, "crate": crate, "parcel": parcel}))
    target = data.draw(st.sampled_from(_objects(tool_input, [])))
    target["unknown_key"] = 1
    with pytest.raises(TypeError, match="unexpected field 'unknown_key' at `\\$"):
        _run(load, tool_input)
