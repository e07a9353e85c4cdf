"""The @tool decorator: schema from hints and docstring (spec/agent-ref.md §2)."""

from __future__ import annotations

from typing import Literal

import pytest

from agent_ref import ToolDefinitionError, default_tools, tool
from agent_ref.demo_tools import confirm, evaluate


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
    assert [t.name for t in default_tools()] == ["calculator", "add", "multiply", "confirm"]


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
