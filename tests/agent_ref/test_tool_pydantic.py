"""Tools whose parameters are pydantic models (spec/agent-ref.md §2.1-d).

pydantic is optional: without it these tests skip with a loud reason (listed under SUITES NOT
RUN), except with CI=true, where the import error fails the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_ref import Tool, ToolDefinitionError, tool
from agent_ref.tools.core import ToolCallRequest, _call

try:
    import pydantic
except ImportError:  # optional for users; the dev extra has it, so CI must run these
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(
        "PYDANTIC TESTS DID NOT RUN: pydantic is not installed (pip install -e '.[dev]')", allow_module_level=True
    )


class Address(pydantic.BaseModel):
    street: str
    number: int = pydantic.Field(ge=1)


class Person(pydantic.BaseModel):
    """Someone to write to."""

    full_name: str = pydantic.Field(alias="fullName", min_length=1)
    addresses: list[Address] = pydantic.Field(default_factory=list)
    boss: Person | None = None


@tool
def write(to: Person, cc: list[Address] | None = None) -> object:
    """Write a letter.

    Args:
        to: The addressee.
    """
    return (to, cc)


def _run(tool_def: Tool, tool_input: dict[str, Any]) -> object:
    return asyncio.run(_call(tool_def, ToolCallRequest(id="t", name=tool_def.name, input=tool_input)))


def test_spec_2_1_d_pydantic_describes_its_models_with_defs_at_the_root() -> None:
    """pydantic's own schema; its $defs moved to the root, where its $refs point; recursion allowed [R2.1-d].

    Before: a pydantic model was a ToolDefinitionError.
    """
    schema = write.input_schema
    assert schema["required"] == ["to"]
    assert schema["properties"]["to"]["description"] == "The addressee."
    assert set(schema["$defs"]) == {"Address", "Person"}
    assert schema["$defs"]["Person"]["properties"]["fullName"]["minLength"] == 1
    jsonschema.Draft202012Validator.check_schema(schema)
    good = {"to": {"fullName": "Ada", "boss": {"fullName": "Bea", "addresses": [{"street": "A", "number": 2}]}}}
    jsonschema.Draft202012Validator(schema).validate(good)  # the $refs resolve from the root
    bad = {"to": {"fullName": "Ada", "addresses": [{"street": "A", "number": 0}]}}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(schema).validate(bad)
    pair = _run(write, good)
    assert isinstance(pair, tuple)
    to, cc = pair
    assert isinstance(to, Person)
    assert to.boss is not None
    assert to.boss.addresses == [Address(street="A", number=2)]
    assert cc is None


@pytest.mark.parametrize(
    ("tool_input", "error", "message"),
    [
        ({"to": {"fullName": "Ada", "age": 3}}, TypeError, "parameter 'to': unexpected field 'age' at `$`"),
        (
            {"to": {"fullName": "Ada", "boss": {"fullName": "B", "addresses": [{"street": "s", "number": 1, "x": 1}]}}},
            TypeError,
            "parameter 'to': unexpected field 'x' at `$.boss.addresses[0]`",
        ),
        (
            {"to": {"fullName": "Ada", "addresses": [{"street": "s", "number": 0}]}},
            msgspec.ValidationError,
            "parameter 'to': Input should be greater than or equal to 1 - at `$.addresses[0].number`",
        ),
        (
            {"to": {"fullName": "Ada", "full_name": "Bo"}},
            TypeError,
            "parameter 'to': unexpected field 'full_name' at `$`",
        ),
        (
            {"to": {"fullName": "Ada"}, "cc": [{"street": "s", "number": 1, "floor": 2}]},
            TypeError,
            "parameter 'cc': unexpected field 'floor' at `$[0]`",
        ),
    ],
    ids=["unknown-key", "deep-unknown-key", "constraint", "python-name-not-alias", "in-a-list"],
)
def test_spec_2_1_d_nothing_is_dropped_and_errors_name_the_place(
    tool_input: dict[str, Any], error: type[Exception], message: str
) -> None:
    """pydantic's extra="ignore" would drop a key: the call refuses it, with its path; its errors keep theirs [R2.1-d]."""
    with pytest.raises(error) as err:
        _run(write, tool_input)
    assert str(err.value).startswith(message)


@dataclasses.dataclass
class Holder:
    who: Address


def test_spec_2_1_d_a_model_inside_a_dataclass_or_two_of_one_name_are_refused() -> None:
    """msgspec cannot build a model inside a dataclass; two models of one name would share a $def [R2.1-d]."""
    with pytest.raises(ToolDefinitionError, match=r"parameter 'h'\.who: pydantic model Address inside a dataclass"):

        @tool
        def hold(h: Holder) -> str:
            """Hold."""
            return repr(h)

    other = pydantic.create_model("Address", city=(str, ...))

    def two(a: Any, b: Any) -> str:
        """Two."""
        return repr((a, b))

    two.__annotations__.update(a=list[Address], b=list[other])  # type: ignore[valid-type]  # made at run time
    with pytest.raises(ToolDefinitionError, match="two different pydantic models are named 'Address'"):
        tool(two)


_address = st.builds(Address, street=st.text(max_size=5), number=st.integers(min_value=1))
_person = st.builds(
    Person,
    fullName=st.text(min_size=1, max_size=5),
    addresses=st.lists(_address, max_size=3),
    boss=st.none() | st.builds(Person, fullName=st.text(min_size=1, max_size=5)),
)


@settings(max_examples=50, deadline=None)
@given(person=_person)
def test_spec_2_1_d_property_a_model_as_json_is_valid_and_comes_back_equal(person: Person) -> None:
    """Any model value, dumped as the model would send it, validates under the schema and converts back equal [R2.1-d]."""
    tool_input = {"to": json.loads(person.model_dump_json(by_alias=True))}
    jsonschema.Draft202012Validator(write.input_schema).validate(tool_input)
    assert _run(write, tool_input) == (person, None)
