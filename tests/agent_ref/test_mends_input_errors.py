"""A call missing a required field is answered with the field and what it expects, no Python names (spec [MA1-b]).

Each call goes through an agent (a scripted model), so every stream passes the strict
validator (the autouse tee of tests/agent_ref); the result texts are read from it.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel
from agent_ref.tools.core import Tool, tool
from agent_ref_support import envelopes

if TYPE_CHECKING:
    from pathlib import Path

#: What must never reach the model or the user in an input error: an exception class, a
#: Python function's qualified name or call form.
PYTHON_NAMES = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|<locals>|\w\(\) ")


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace cache under this test's directory, never the user's ``~/.cache``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _result(agent: Agent, name: str, tool_input: dict[str, Any]) -> str:
    lines: list[bytes] = []
    asyncio.run(agent.run(f"call {name} with {json.dumps(tool_input)}", lines.append))
    (done,) = [e for e in envelopes(lines) if e["type"] == "tool_result"]
    text: str = done["delta"]
    return text


def _lookup(**kw: Any) -> str:
    return f"found {kw['key']}"  # a hand-made tool that trusts its schema's "required"


LOOKUP = Tool(
    name="lookup",
    description="Look a key up.",
    input_schema={
        "type": "object",
        "properties": {"key": {"type": "string", "description": "the key to look up"}},
        "required": ["key"],
    },
    fn=_lookup,
    param_types={"key": Any},
)


@tool
async def note(text: str, count: int = 1) -> str:
    """Write a note.

    Args:
        text: the note.
        count: how many times.
    """
    return f"noted {text} x{count}"


def test_spec_ma1_b_a_missing_field_is_named_with_what_it_expects_not_a_key_error() -> None:
    """[MA1-b] A hand-made tool indexing its input: `missing required field 'key'`, its type and description."""
    text = _result(Agent(ScriptedModel(), tools=[LOOKUP]), "lookup", {})
    assert text == "invalid input for lookup: missing required field 'key' (expected a string: the key to look up)"
    assert _result(Agent(ScriptedModel(), tools=[LOOKUP]), "lookup", {"key": "k"}) == "found k"


def test_spec_ma1_b_a_decorated_tool_says_the_fields_not_the_python_signature() -> None:
    """[MA1-b] A @tool function missing its argument: the field, not `note() missing 1 required positional argument`."""
    text = _result(Agent(ScriptedModel(), tools=[note]), "note", {"count": 2})
    assert text == "invalid input for note: missing required field 'text' (expected a string: the note.)"
    wrong = _result(Agent(ScriptedModel(), tools=[note]), "note", {"text": "a", "count": "many"})
    assert wrong == "invalid input for note: parameter 'count': Expected `int`, got `str`"  # as before (§2.1-b)


@pytest.mark.parametrize(
    ("name", "tool_input", "fields"),
    [
        ("Write", {}, ["file_path", "content"]),
        ("Edit", {"file_path": "a.txt"}, ["old_string", "new_string"]),
        ("Grep", {}, ["pattern"]),
        ("Bash", {}, ["command"]),
    ],
)
def test_spec_ma1_b_workspace_tools_name_every_missing_field(
    tmp_path: Path, name: str, tool_input: dict[str, Any], fields: list[str]
) -> None:
    """[MA1-b] The workspace tools: every missing field named, no exception class or Python name in the text."""
    root = tmp_path / "ws"
    root.mkdir()
    text = _result(Agent(ScriptedModel(), workspace=root, unsandboxed_bash=True), name, tool_input)
    plural = "s" if len(fields) > 1 else ""
    assert text.startswith(f"invalid input for {name}: missing required field{plural} '{fields[0]}' (expected a "), text
    assert all(f"'{field}' (expected " in text for field in fields), text
    assert PYTHON_NAMES.search(text) is None, text


def test_spec_ma1_b_an_unknown_field_beside_a_missing_one_is_named_too() -> None:
    """A misspelt field: the error names the missing one and what the call gave instead."""
    text = _result(Agent(ScriptedModel(), tools=[LOOKUP]), "lookup", {"kee": "k"})
    assert text == (
        "invalid input for lookup: missing required field 'key' (expected a string: the key to look up)"
        "; the call gave 'kee', which the tool does not take"
    )
    many = _result(Agent(ScriptedModel(), tools=[LOOKUP]), "lookup", {f"f{i}": i for i in range(7)})
    assert many.endswith("; the call gave 'f0', 'f1', 'f2', 'f3', 'f4' and 2 more, which the tool does not take"), many
