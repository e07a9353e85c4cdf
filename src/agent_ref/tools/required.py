"""What a call lacks of its tool's required fields, said for the model (spec ``spec/agent-ref.md`` [MA1-b]).

Owns: ``missing_fields``, the text of an input error for a call that leaves out fields
its tool's ``input_schema`` requires: each field by name, with the JSON type it expects
and its description. Does not own: converting the fields a call gives (``core.convert_argument``)
or the result it makes (``core._run_one``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["missing_fields"]

#: The longest description quoted for a missing field: the error names it, it does not repeat the docs.
MAX_DESCRIPTION_CHARS: Final = 120

#: The most unknown fields named beside the missing ones (the rest are counted).
MAX_UNKNOWN_NAMED: Final = 5

#: JSON schema types as the error says them.
_TYPES: Final = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def missing_fields(schema: Mapping[str, Any], tool_input: Mapping[str, Any]) -> str | None:
    """``missing required field 'x' (expected a string: ...)`` for the fields ``schema`` requires and the input lacks.

    ``None`` when nothing required is missing (or the schema requires nothing it names).
    """
    required = schema.get("required")
    if not isinstance(required, list):
        return None
    missing = [name for name in required if isinstance(name, str) and name not in tool_input]
    if not missing:
        return None
    properties = schema.get("properties")
    known: Mapping[str, Any] = properties if isinstance(properties, dict) else {}
    said = ", ".join(f"{name!r} (expected {_expected(known.get(name))})" for name in missing)
    text = f"missing required field{'s' if len(missing) > 1 else ''} {said}"
    unknown = [name for name in tool_input if known and name not in known]
    if unknown:  # most often a misspelt field: the model sees both at once
        given = ", ".join(repr(name) for name in unknown[:MAX_UNKNOWN_NAMED])
        more = f" and {len(unknown) - MAX_UNKNOWN_NAMED} more" if len(unknown) > MAX_UNKNOWN_NAMED else ""
        text += f"; the call gave {given}{more}, which the tool does not take"
    return text


def _expected(prop: object) -> str:
    """What a property's schema asks for: its type (or its values), and its description when it has one."""
    if not isinstance(prop, dict):
        return "a value"
    kind = _kind(prop)
    description = prop.get("description")
    if isinstance(description, str) and description.strip():
        text = " ".join(description.split())
        if len(text) > MAX_DESCRIPTION_CHARS:
            text = text[: MAX_DESCRIPTION_CHARS - 3] + "..."
        return f"{kind}: {text}"
    return kind


def _kind(prop: Mapping[str, Any]) -> str:
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return "one of " + ", ".join(repr(v) for v in enum)
    kind = prop.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    said = [_TYPES[k] for k in kinds if isinstance(k, str) and k in _TYPES]
    return " or ".join(said) if said else "a value"
