"""Structured output (seed 004's termination table): the final answer must match a schema.

Owns: ``OutputSchema`` (a msgspec type, or a JSON Schema dict in a documented subset),
checking a final answer against it, telling the model what was wrong, and the stop
reason ``error_max_structured_output_retries`` (spec ``spec/agent-ref.md`` §17). Does
not own: the loop (``Agent._steps`` calls ``structured_end`` where a run would end).

JSON Schema: a **subset** is checked here, on purpose small and exact: ``type`` (one or
a list), ``properties``, ``required``, ``additionalProperties`` (bool or schema),
``items`` (one schema), ``enum``, ``const``, ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum``, ``minLength``, ``maxLength``, ``minItems``,
``maxItems``, ``anyOf``; the annotations ``title``, ``description``, ``default``,
``examples``, ``$schema`` are ignored. Any other keyword (``$ref``, ``pattern``,
``format``, ``oneOf``...) is refused when the agent is built ([R17.1-b]), never ignored
while checking. Richer schemas: give a msgspec type (checked by msgspec).
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .errors import ConfigError
from .record import _last_text

if TYPE_CHECKING:
    from .agent import Agent
    from .response import _Response

__all__ = [
    "DEFAULT_STRUCTURED_RETRIES",
    "STOP_STRUCTURED_RETRIES",
    "OutputSchema",
    "StructuredOutput",
]

#: Corrections the model gets before the run ends ([R17.2-a]): 3, so 4 answers in all.
DEFAULT_STRUCTURED_RETRIES: Final = 3
#: Seed 004's name for a run that never gave a valid answer.
STOP_STRUCTURED_RETRIES: Final = "error_max_structured_output_retries"
#: How a correction message begins (and how the run's corrections are counted).
CORRECTION: Final = "Your final answer did not match the output schema"

#: A msgspec type (a ``Struct``, ``dict[str, int]``...) or a JSON Schema object.
OutputSchema = type | Mapping[str, Any]

_KEYWORDS: Final = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "anyOf",
    }
)
_ANNOTATIONS: Final = frozenset({"title", "description", "default", "examples", "$schema"})
_TYPES: Final = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "null": (type(None),),
}
_FENCE: Final = re.compile(r"\A\s*```(?:json)?[ \t]*\n(?P<body>.*?)\n```\s*\Z", re.DOTALL)


class StructuredOutput:
    """A checked output schema.

    Args:
        schema: a msgspec type, or a JSON Schema dict in the subset above.

    Raises:
        ConfigError: a schema msgspec cannot use, or a JSON Schema keyword outside the subset.
    """

    def __init__(self, schema: OutputSchema) -> None:
        """See the class docstring."""
        self.type: Any = None
        if isinstance(schema, Mapping):
            problems = _schema_problems(schema, "$")
            if problems:
                raise ConfigError("output_schema: " + "; ".join(problems))
            self.json_schema: dict[str, Any] = json.loads(json.dumps(schema))
        else:
            try:
                self.json_schema = msgspec.json.schema(schema)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"output_schema: msgspec cannot use {schema!r}: {exc}") from None
            self.type = schema

    def instruction(self) -> str:
        """What the system prompt says about the answer's form ([R17.1-a])."""
        return (
            "Your final answer must be a single JSON value, and nothing else, that matches this JSON Schema:\n"
            + json.dumps(self.json_schema, ensure_ascii=False)
        )

    def check(self, text: str) -> tuple[Any, list[str]]:
        """The answer's value and what is wrong with it (empty when it is valid).

        ``text`` is the whole final text, or one fenced code block that is all of it
        (a ```json fence, as models often write); nothing else is cut away ([R17.1-c]).
        """
        fenced = _FENCE.match(text)
        body = fenced.group("body") if fenced else text
        if self.type is not None:
            try:
                return msgspec.json.decode(body.strip().encode(), type=self.type), []
            except msgspec.ValidationError as exc:
                return None, [str(exc)]
            except msgspec.DecodeError as exc:
                return None, [f"not JSON: {exc}"]
        try:
            value = json.loads(body)
        except ValueError as exc:
            return None, [f"not JSON: {exc}"]
        return value, _errors(value, self.json_schema, "$")


def _schema_problems(schema: object, path: str) -> list[str]:
    if not isinstance(schema, Mapping):
        return [f"{path} must be a JSON Schema object"]
    problems = [
        f"{path}: keyword {key!r} is outside the supported subset (give a msgspec type for richer schemas)"
        for key in schema
        if key not in _KEYWORDS and key not in _ANNOTATIONS
    ]
    kinds = schema.get("type")
    for kind in kinds if isinstance(kinds, list) else [kinds] if kinds is not None else []:
        if kind not in _TYPES:
            problems.append(f"{path}: unknown type {kind!r}")
    for name, sub in (schema.get("properties") or {}).items():
        problems += _schema_problems(sub, f"{path}.properties.{name}")
    if isinstance(schema.get("additionalProperties"), Mapping):
        problems += _schema_problems(schema["additionalProperties"], f"{path}.additionalProperties")
    if "items" in schema:
        problems += _schema_problems(schema["items"], f"{path}.items")
    for i, sub in enumerate(schema.get("anyOf") or []):
        problems += _schema_problems(sub, f"{path}.anyOf[{i}]")
    return problems


def _is(value: object, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    if kind == "integer" and isinstance(value, float):
        return math.isfinite(value) and value.is_integer()
    return isinstance(value, _TYPES[kind])


def _errors(value: object, schema: Mapping[str, Any], path: str) -> list[str]:
    """What is wrong with ``value`` under ``schema`` (the subset), each with its ``$.path``."""
    kinds = schema.get("type")
    if kinds is not None:
        wanted = kinds if isinstance(kinds, list) else [kinds]
        if not any(_is(value, k) for k in wanted):
            return [f"{path}: expected {' or '.join(wanted)}, got {_name(value)}"]
    errors: list[str] = []
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: must be {json.dumps(schema['const'])}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: must be one of {json.dumps(schema['enum'])}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        for key, bad in (
            ("minimum", operator.lt),
            ("maximum", operator.gt),
            ("exclusiveMinimum", operator.le),
            ("exclusiveMaximum", operator.ge),
        ):
            if key in schema and bad(value, schema[key]):
                errors.append(f"{path}: {value} breaks {key} {schema[key]}")
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(f"{path}: shorter than {schema['minLength']} characters")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']} characters")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if isinstance(schema.get("items"), Mapping):
            for i, item in enumerate(value):
                errors += _errors(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name in schema.get("required") or []:
            if name not in value:
                errors.append(f"{path}: missing required key {name!r}")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                errors += _errors(item, properties[name], f"{path}.{name}")
            elif extra is False:
                errors.append(f"{path}: unexpected key {name!r}")
            elif isinstance(extra, Mapping):
                errors += _errors(item, extra, f"{path}.{name}")
    if "anyOf" in schema and not any(not _errors(value, sub, path) for sub in schema["anyOf"]):
        errors.append(f"{path}: matches none of anyOf")
    return errors


def _name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {str: "string", int: "integer", float: "number", dict: "object", list: "array"}.get(type(value), "value")


async def structured_end(self: Agent, response: _Response, stop_reason: str) -> str | None:
    """Where a run would end: check the answer; the stop reason, or ``None`` to ask again (spec §17).

    Only an ``end_turn`` answer is checked ([R17.2-b]). A valid one is kept for the
    result and ``meta_final``; an invalid one gets an ``error`` envelope
    ``structured_output_invalid`` and, while corrections are left, a user turn telling the
    model what was wrong ([R17.2-a]); then the run ends ``error_max_structured_output_retries``.
    """
    output = self._output
    run = self.state.run
    if output is None or run is None or stop_reason != "end_turn":
        return stop_reason
    value, errors = output.check(_last_text(run.history))
    if not errors:
        self._structured = (value,)
        return stop_reason
    done = sum(
        1
        for message in run.history
        if message.get("role") == "user"
        for block in message.get("content") or []
        if isinstance(block, dict) and str(block.get("text", "")).startswith(CORRECTION)
    )
    retrying = done < self.max_structured_output_retries
    payload = {
        "type": "structured_output_invalid",
        "message": "the final answer does not match the output schema",
        "errors": errors[:20],
        "attempt": done + 1,
        "retrying": retrying,
    }
    await response.send(self._emitter.buffered("error", json.dumps(payload, ensure_ascii=False)))
    if not retrying:
        return STOP_STRUCTURED_RETRIES
    text = (
        f"{CORRECTION}: " + "; ".join(errors[:20]) + ". Answer again with only a JSON value that matches "
        "the schema:\n" + json.dumps(output.json_schema, ensure_ascii=False)
    )
    self._append_user([{"type": "text", "text": text}])
    return None
