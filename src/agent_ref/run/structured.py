"""Structured output (seed 004's termination table): the final answer must match a schema.

Owns: ``OutputSchema`` (a msgspec type, or a JSON Schema dict checked by ``jsonschema``),
checking a final answer against it, telling the model what was wrong, and the stop
reason ``error_max_structured_output_retries`` (spec ``spec/agent-ref.md`` §17). Does
not own: the loop (``loop.steps`` calls ``structured_end`` where a run would end).

JSON Schema: checked by the ``jsonschema`` library, under the draft the schema declares
in ``$schema`` (2020-12 when it declares none), ``format`` asserted; the schema itself is
checked when the agent is built, and only ``$ref``s inside it resolve (nothing is
fetched). Each validation error becomes one line, ``$.json.path: what failed``, which
the model reads ([R17.1-b]). msgspec types are checked by msgspec.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from envelope._extras import import_failed

try:
    import jsonschema  # type: ignore[import-untyped]
    import msgspec
    from referencing import Registry
    from referencing.exceptions import Unresolvable
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "agent") from None  # pragma: no cover  # in a subprocess (tests/install)

from ..errors import ConfigError
from ..store.record import append_user, last_text

if TYPE_CHECKING:
    from .context import RunContext

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
#: How a correction message begins (the count is ``RunState.structured_corrections``, not this text).
CORRECTION: Final = "Your final answer did not match the output schema"

#: A msgspec type (a ``Struct``, ``dict[str, int]``...) or a JSON Schema object.
OutputSchema = type | Mapping[str, Any]

#: The draft of a schema that declares none in ``$schema`` ([R17.1-b]).
DEFAULT_DRAFT: Final = "https://json-schema.org/draft/2020-12/schema"
#: How long one error line may be (a message may quote a large part of the answer).
_MAX_ERROR_CHARS: Final = 300
_FENCE: Final = re.compile(r"\A\s*```(?:json)?[ \t]*\n(?P<body>.*?)\n```\s*\Z", re.DOTALL)


class StructuredOutput:
    """A checked output schema.

    Args:
        schema: a msgspec type, or a JSON Schema dict (any draft ``jsonschema`` knows).

    Raises:
        ConfigError: a schema msgspec cannot use; a JSON Schema that is invalid under its
            draft, declares an unknown draft, or has a ``$ref`` that does not resolve
            inside it; each naming the place (``$.path``) and the problem.
    """

    def __init__(self, schema: OutputSchema) -> None:
        """See the class docstring."""
        self.type: Any = None
        self._validator: Any = None
        if isinstance(schema, Mapping):
            self.json_schema: dict[str, Any] = _plain(schema)
            self._validator = _json_validator(self.json_schema)
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
        Each error names the JSON path and what failed ([R17.1-b]).
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
        except RecursionError:
            return None, ["not JSON: nested too deeply to read"]
        try:
            return value, [_line(error) for error in self._validator.iter_errors(value)]
        except RecursionError:  # a deep answer under a recursive schema: an error, never a crash
            return value, ["$: nested too deeply to check against the schema"]


def _plain(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema as plain JSON (a copy the caller cannot change later)."""
    try:
        plain: dict[str, Any] = json.loads(json.dumps(schema, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"output_schema: $: not JSON: {exc}") from None
    return plain


def _json_validator(schema: dict[str, Any]) -> Any:
    """The validator of ``schema``'s draft, after checking the schema ([R17.1-b])."""
    cls = jsonschema.validators.validator_for(schema, default=None)
    if cls is None:
        cls = jsonschema.validators.validator_for({"$schema": DEFAULT_DRAFT})
        if "$schema" in schema:
            raise ConfigError(f"output_schema: $.$schema: unknown JSON Schema draft {schema['$schema']!r}")
    error = jsonschema.exceptions.best_match(cls(cls.META_SCHEMA).iter_errors(schema))
    if error is not None:
        raise ConfigError(f"output_schema: {_line(error)} (under {cls.__name__})")
    # An empty registry: a $ref resolves inside the schema or not at all; nothing is fetched.
    validator = cls(schema, registry=Registry(), format_checker=cls.FORMAT_CHECKER)
    resolver = validator._resolver
    for path, ref in _refs(schema, "$"):
        try:
            resolver.lookup(ref)
        except Unresolvable:
            raise ConfigError(
                f"output_schema: {path}.$ref: {ref!r} does not resolve inside the schema "
                "(nothing is fetched; put the definition under $defs)"
            ) from None
    return validator


def _refs(node: object, path: str) -> Iterator[tuple[str, str]]:
    """Every ``$ref`` string in the schema with its ``$.path``."""
    if isinstance(node, dict):
        for key, sub in node.items():
            if key == "$ref" and isinstance(sub, str):
                yield path, sub
            elif key not in ("const", "enum", "default", "examples"):
                yield from _refs(sub, f"{path}.{key}")
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _refs(sub, f"{path}[{i}]")


def _line(error: Any) -> str:
    """One ``jsonschema`` error as the model reads it: ``$.path: what failed``."""
    text = f"{error.json_path}: {error.message}"
    return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


async def structured_end(ctx: RunContext, stop_reason: str) -> str | None:
    """Where a run would end: check the answer; the stop reason, or ``None`` to ask again (spec §17).

    Only an ``end_turn`` answer is checked ([R17.2-b]). A valid one is kept for the
    result and ``meta_final`` (``ctx.structured``); an invalid one gets an ``error`` envelope
    ``structured_output_invalid`` and, while corrections are left, a user turn telling the
    model what was wrong ([R17.2-a]); then the run ends ``error_max_structured_output_retries``.
    """
    output = ctx.options.output
    run = ctx.state.run
    if output is None or run is None or stop_reason != "end_turn":
        return stop_reason
    value, errors = output.check(last_text(run.history))
    if not errors:
        ctx.structured = (value,)
        return stop_reason
    # spec §17.2-c: counted in the run's state, never read back from the text (a user can
    # write a prompt that begins like a correction; a pause keeps the count).
    done = run.structured_corrections
    retrying = done < ctx.options.max_structured_output_retries
    payload = {
        "type": "structured_output_invalid",
        "message": "the final answer does not match the output schema",
        "errors": errors[:20],
        "attempt": done + 1,
        "retrying": retrying,
    }
    await ctx.send(ctx.error_envelope(payload))
    if not retrying:
        return STOP_STRUCTURED_RETRIES
    text = (
        f"{CORRECTION}: " + "; ".join(errors[:20]) + ". Answer again with only a JSON value that matches "
        "the schema:\n" + json.dumps(output.json_schema, ensure_ascii=False)
    )
    run.structured_corrections += 1
    append_user(ctx.state, [{"type": "text", "text": text}])
    return None
