"""Tool parameter schemas from Python types, and the check that nothing the model sends is dropped.

Owns: the JSON Schema of one parameter's type hint (spec ``spec/agent-ref.md`` §2.1-b,
§2.1-c): scalars, ``Literal``, enums, unions, lists, sets, tuples (``prefixItems``),
``dict[str, T]``, dataclasses, ``TypedDict`` and msgspec ``Struct`` classes (their
``Attributes:`` docstring lines describe the fields), ``Annotated[..., msgspec.Meta]``;
pydantic models through pydantic's own schema and validation (§2.1-d); converting the
model's JSON to the annotated type; and refusing a key that conversion would drop.
Does not own: the tool (``tools/core.py``) or running it.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import functools
import inspect
import math
import re
import types
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, Union

import msgspec

from ..errors import ToolDefinitionError

_SIMPLE: Final[dict[type, dict[str, Any]]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    # Strings msgspec converts to these types (its lax mode takes a number for a Decimal too).
    datetime.datetime: {"type": "string", "format": "date-time"},
    datetime.date: {"type": "string", "format": "date"},
    datetime.time: {"type": "string", "format": "time"},
    datetime.timedelta: {"type": "string", "format": "duration"},
    uuid.UUID: {"type": "string", "format": "uuid"},
    decimal.Decimal: {"type": "string", "format": "decimal"},
}

#: What ``@tool`` can describe, for the error that names a type it cannot.
SUPPORTED_HINTS: Final = (
    "str, int, float, bool, None, Any, datetime/date/time/timedelta, UUID, Decimal, NewType, Literal[...], enums, "
    "unions and Optional, list[T], Sequence[T], set[T], "
    "tuple[T, ...], tuple[T1, T2, ...], dict[str, T], Annotated[T, msgspec.Meta(...)], dataclasses, TypedDicts "
    "and msgspec Structs of these, and pydantic models"
)


def json_able(value: object) -> bool:
    """A default the schema may show (a JSON scalar that is not ``None``)."""
    if isinstance(value, enum.Enum):
        return json_able(value.value)
    return isinstance(value, str | int | bool) or (isinstance(value, float) and math.isfinite(value))


def default_value(value: object) -> object:
    """The JSON form of a default shown in the schema (an enum member is its value)."""
    return value.value if isinstance(value, enum.Enum) else value


def own_doc(cls: type) -> str:
    """The class's own docstring, cleaned; ``""`` when it has none (not a base class's, not a generated one)."""
    doc = cls.__dict__.get("__doc__")
    if not isinstance(doc, str) or doc.startswith(f"{cls.__name__}("):  # a dataclass's generated signature
        return ""
    return inspect.cleandoc(doc)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the summary and the ``Args:``/``Attributes:`` descriptions."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for raw in doc.splitlines():
        stripped = raw.strip()
        if re.fullmatch(r"(Args|Arguments|Parameters|Attributes|Returns|Raises|Yields|Examples?|Notes?):", stripped):
            section = stripped[:-1]
            current = None
            continue
        if section is None:
            summary.append(stripped)
        elif section in ("Args", "Arguments", "Parameters", "Attributes"):
            match = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if match and raw.startswith((" ", "\t")) and (len(raw) - len(raw.lstrip())) <= 4:
                current = match.group(1)
                args[current] = match.group(2)
            elif current is not None and stripped:
                args[current] = f"{args[current]} {stripped}".strip()
    return " ".join(p for p in " ".join(summary).split()), args


# --- pydantic (optional) ----------------------------------------------------------------------


def _pydantic_base() -> type | None:
    """``pydantic.BaseModel`` when pydantic is installed (and already imported by someone), else ``None``.

    Only an imported pydantic can have made a model class, so a tool module that never
    imports pydantic never pays for importing it here.
    """
    import sys

    module = sys.modules.get("pydantic")
    base = getattr(module, "BaseModel", None) if module is not None else None
    return base if isinstance(base, type) else None


def is_pydantic_model(hint: object) -> bool:
    """``hint`` is a pydantic model class."""
    base = _pydantic_base()
    return base is not None and isinstance(hint, type) and issubclass(hint, base)


def uses_pydantic(hint: object) -> bool:
    """``hint`` is a pydantic model or a union/container whose arguments are (spec §2.1-d)."""
    if is_pydantic_model(hint):
        return True
    return any(uses_pydantic(a) for a in typing.get_args(hint) if a is not Ellipsis)


def pydantic_schema(hint: Any, where: str, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema pydantic makes for ``hint`` (validation mode), its ``$defs`` moved into ``defs``.

    ``$ref``s point at ``#/$defs/...`` of the document root, so the definitions of every
    parameter are kept at the root of the tool's ``input_schema``; two parameters whose
    models share a name but not a schema are refused rather than silently merged.
    """
    import pydantic

    try:
        schema = dict(pydantic.TypeAdapter(hint).json_schema(mode="validation"))
    except Exception as exc:  # pydantic's own reason, e.g. a type it cannot describe
        raise ToolDefinitionError(f"{where}: pydantic cannot describe {hint!r}: {exc}") from None
    for name, definition in schema.pop("$defs", {}).items():
        if name in defs and defs[name] != definition:
            raise ToolDefinitionError(f"{where}: two different pydantic models are named {name!r} in one tool")
        defs[name] = definition
    return schema


def pydantic_convert(value: object, hint: Any) -> object:
    """Validate ``value`` into ``hint`` with pydantic, refusing keys it would ignore (spec §2.1-d).

    Raises:
        TypeError: a key the result does not keep (the model's ``extra="ignore"`` default
            would drop it), with its path.
        msgspec.ValidationError: pydantic's errors, each with its path.
    """
    import pydantic

    adapter = _adapter(hint)
    try:
        result = adapter.validate_python(value)
    except pydantic.ValidationError as exc:
        errors = "; ".join(f"{e['msg']} - at `$" + "".join(_step(p) for p in e["loc"]) + "`" for e in exc.errors())
        raise msgspec.ValidationError(errors) from None
    kept = adapter.dump_python(result, mode="json", by_alias=True, exclude_unset=True)
    dropped = _dropped(value, kept, "$")
    if dropped is not None:
        raise TypeError(dropped)
    return result


def _adapter(hint: Any) -> Any:
    """pydantic's ``TypeAdapter`` of ``hint``, built once per hint (building one compiles a validator)."""
    try:
        return _cached_adapter(hint)
    except TypeError:  # an unhashable hint (Annotated with unhashable metadata): built each time
        import pydantic

        return pydantic.TypeAdapter(hint)


@functools.lru_cache(maxsize=256)
def _cached_adapter(hint: Any) -> Any:
    import pydantic

    return pydantic.TypeAdapter(hint)


def _step(part: int | str) -> str:
    return f"[{part}]" if isinstance(part, int) else f".{part}"


def _dropped(sent: object, kept: object, path: str) -> str | None:
    """The first key of ``sent`` that ``kept`` (the validated value, dumped) does not have."""
    if isinstance(sent, dict) and isinstance(kept, dict):
        for key, item in sent.items():
            if key not in kept:
                return f"unexpected field {key!r} at `{path}` (the fields kept: {', '.join(map(str, kept))})"
            found = _dropped(item, kept[key], f"{path}.{key}")
            if found:
                return found
    elif isinstance(sent, list) and isinstance(kept, list):
        for i, (item, back) in enumerate(zip(sent, kept, strict=False)):
            found = _dropped(item, back, f"{path}[{i}]")
            if found:
                return found
    return None


# --- msgspec-converted types -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    """One field of an object type: its JSON key, hint, whether required, and its default."""

    key: str
    attr: str
    hint: Any
    required: bool
    default: object = None


def object_fields(cls: type, where: str) -> Sequence[_Field] | None:
    """The fields of a dataclass, TypedDict or Struct class as the JSON object has them; ``None`` for another type.

    Read once per class (every call's input is checked against them, spec §2.1-b).
    """
    try:
        return _fields_of(cls)
    except _Unresolved as exc:
        raise ToolDefinitionError(f"{where}: cannot resolve the type hints of {cls.__name__} ({exc})") from None


class _Unresolved(Exception):
    """A class's type hints do not resolve."""


@functools.lru_cache(maxsize=1024)
def _fields_of(cls: type) -> tuple[_Field, ...] | None:
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        return tuple(
            _Field(f.encode_name, f.name, f.type, f.required, None if f.default is msgspec.NODEFAULT else f.default)
            for f in msgspec.structs.fields(cls)
        )
    if not (typing.is_typeddict(cls) or (dataclasses.is_dataclass(cls) and isinstance(cls, type))):
        return None
    try:
        hints = typing.get_type_hints(cls, include_extras=True)  # Annotated kept: msgspec.Meta is read
    except Exception as exc:  # a hint that does not resolve is a definition error, not a crash
        raise _Unresolved(str(exc)) from None
    if typing.is_typeddict(cls):
        # msgspec's reading of total/Required/NotRequired, which the conversion follows (the class's
        # own __required_keys__ miss a Required[...] written under `from __future__ import annotations`).
        info = msgspec.inspect.type_info(cls)
        required_keys = {f.name for f in getattr(info, "fields", ()) if f.required}
        return tuple(_Field(k, k, _unwrap_required(h), k in required_keys) for k, h in hints.items())
    return tuple(_dataclass_fields(cls, hints))


def _unwrap_required(hint: Any) -> Any:
    """``Required[T]``/``NotRequired[T]`` is ``T`` (the class's required keys already say which)."""
    while typing.get_origin(hint) in (typing.Required, typing.NotRequired):
        hint = typing.get_args(hint)[0]
    return hint


def _dataclass_fields(cls: Any, hints: dict[str, Any]) -> list[_Field]:
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue  # not an argument of the class: the model cannot give it
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        default = None if f.default is dataclasses.MISSING else f.default
        out.append(_Field(f.name, f.name, hints[f.name], not has_default, default))
    return out


def _kind(cls: type) -> str:
    if typing.is_typeddict(cls):
        return "TypedDict"
    return "Struct" if issubclass(cls, msgspec.Struct) else "dataclass"


def _object_schema(cls: type, fields: Sequence[_Field], where: str, seen: tuple[type, ...]) -> dict[str, Any]:
    """An object of the class's fields; those without a default are required (spec §2.1-b, §2.1-c).

    The class docstring's summary describes the object and its ``Attributes:`` lines the
    fields. Other keys are refused (``additionalProperties: false``): conversion would drop them.
    A tagged Struct's tag is a required property with its one value.
    """
    if cls in seen:
        chain = " -> ".join(c.__name__ for c in (*seen, cls))
        raise ToolDefinitionError(f"{where}: {_kind(cls)} {cls.__name__} contains itself ({chain}); not supported")
    summary, docs = parse_docstring(own_doc(cls))
    properties: dict[str, Any] = {}
    required: list[str] = []
    config = getattr(cls, "__struct_config__", None)
    if config is not None and config.tag is not None:
        properties[config.tag_field] = {"enum": [config.tag]}
        required.append(config.tag_field)
    for f in fields:
        schema = schema_of(f.hint, f"{where}.{f.key}", omit_none=not f.required, seen=(*seen, cls))
        if f.attr in docs:
            schema = {**schema, "description": docs[f.attr]}
        if f.required:
            required.append(f.key)
        elif f.default is not None and json_able(f.default):
            schema = {**schema, "default": default_value(f.default)}
        properties[f.key] = schema
    if config is not None and config.array_like:
        items = list(properties.values())  # the tag first, as msgspec writes it
        return {
            "type": "array",
            "prefixItems": items,
            "items": False,
            "minItems": len(required),
            "maxItems": len(items),
        }
    out: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        out["required"] = required
    if summary:
        out["description"] = summary
    return out


_META_KEYS: Final = {
    "description": "description",
    "title": "title",
    "examples": "examples",
    "ge": "minimum",
    "le": "maximum",
    "gt": "exclusiveMinimum",
    "lt": "exclusiveMaximum",
    "multiple_of": "multipleOf",
    "pattern": "pattern",
}


def _annotated(hint: Any, where: str, omit_none: bool, seen: tuple[type, ...]) -> dict[str, Any]:
    """``Annotated[T, msgspec.Meta(...)]``: ``T``'s schema with the constraints msgspec checks on conversion."""
    base, *extras = typing.get_args(hint)
    schema = schema_of(base, where, omit_none=omit_none, seen=seen)
    for meta in extras:
        if not isinstance(meta, msgspec.Meta):
            continue  # other metadata is not ours to read
        for attr, key in _META_KEYS.items():
            value = getattr(meta, attr)
            if value is not None:
                schema[key] = value
        string = schema.get("type") == "string"
        for attr, (as_string, other) in {
            "min_length": ("minLength", "minItems"),
            "max_length": ("maxLength", "maxItems"),
        }.items():
            value = getattr(meta, attr)
            if value is not None:
                schema[as_string if string else other] = value
    return schema


def _enum_schema(cls: type[enum.Enum], where: str) -> dict[str, Any]:
    """An enum is one of its members' values (msgspec converts a value to its member)."""
    values = [m.value for m in cls]
    if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in values):
        raise ToolDefinitionError(f"{where}: enum {cls.__name__} has values that are not strings or integers")
    schema: dict[str, Any] = {"enum": values}
    summary, _ = parse_docstring(own_doc(cls))
    if summary and cls.__doc__ != enum.Enum.__doc__:
        schema["description"] = summary
    return schema


def schema_of(hint: Any, where: str, *, omit_none: bool = False, seen: tuple[type, ...] = ()) -> dict[str, Any]:
    """JSON Schema of one type hint (spec §2.1-a, §2.1-b, §2.1-c).

    Args:
        hint: the annotation.
        where: the place, for errors (``tool t: parameter 'p'``, then ``.field`` or ``[]`` deeper).
        omit_none: ``None`` in a union is left out (a property with a default: the model
            omits it rather than sending ``null``); elsewhere ``None`` is ``{"type": "null"}``.
        seen: the object types being described, outermost first (a recursive one is refused).

    Raises:
        ToolDefinitionError: a hint with no JSON form here, naming the place and why.
    """
    if hint in _SIMPLE:
        return dict(_SIMPLE[hint])
    if hint is Any:
        return {}
    if hint is None or hint is type(None):
        return {"type": "null"}
    if isinstance(hint, typing.NewType):  # its base type, which msgspec converts to
        return schema_of(hint.__supertype__, where, omit_none=omit_none, seen=seen)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _annotated(hint, where, omit_none, seen)
    if origin is Literal:
        return {"enum": [default_value(a) for a in args]}
    if origin in (Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args) and not omit_none
        schemas = [schema_of(a, where, seen=seen) for a in members] + ([{"type": "null"}] if nullable else [])
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum_schema(hint, where)
    if is_pydantic_model(hint):
        raise ToolDefinitionError(
            f"{where}: pydantic model {hint.__name__} inside a dataclass, TypedDict or Struct; "
            "make the parameter a pydantic model (or a list/union of them) instead"
        )
    fields = object_fields(hint, where) if isinstance(hint, type) else None
    if fields is not None:
        return _object_schema(hint, fields, where, seen)
    return _container_schema(hint, origin, args, where, seen)


def _container_schema(
    hint: Any, origin: Any, args: tuple[Any, ...], where: str, seen: tuple[type, ...]
) -> dict[str, Any]:
    """Tuples, lists, sets and ``dict[str, T]``; anything else is refused naming the place."""
    if hint is tuple or hint is typing.Tuple:  # noqa: UP006  # the bare typing alias is a hint too
        return {"type": "array"}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_of(args[0], f"{where}[]", seen=seen)}
        if not args:  # tuple[()]: the empty array
            return {"type": "array", "maxItems": 0}
        # A fixed shape: position i has type args[i], and nothing more (JSON Schema 2020-12).
        items = [schema_of(a, f"{where}[{i}]", seen=seen) for i, a in enumerate(args)]
        return {"type": "array", "prefixItems": items, "items": False, "minItems": len(items), "maxItems": len(items)}
    if origin in (list, Sequence, set, frozenset) or hint in (list, set, frozenset):
        schema: dict[str, Any] = {"type": "array"}
        if args:
            schema["items"] = schema_of(args[0], f"{where}[]", seen=seen)
        if origin in (set, frozenset) or hint in (set, frozenset):
            schema["uniqueItems"] = True
        return schema
    if origin in (dict, Mapping) or hint is dict:
        if args and args[0] is not str:
            raise ToolDefinitionError(f"{where}: {hint!r}: a JSON object's keys are strings; use dict[str, ...]")
        if args and args[1] is not Any:
            return {"type": "object", "additionalProperties": schema_of(args[1], f"{where}{{}}", seen=seen)}
        return {"type": "object"}
    raise ToolDefinitionError(f"{where}: {hint!r} has no JSON Schema form here (supported: {SUPPORTED_HINTS})")


def _struct_tag(cls: type) -> tuple[str, object] | None:
    config = getattr(cls, "__struct_config__", None)
    return (config.tag_field, config.tag) if config is not None and config.tag is not None else None


def _union_member(value: object, members: tuple[Any, ...]) -> Any:
    """The member of a union that ``value`` converts to (msgspec's choice), for the walk below."""
    if isinstance(value, dict):
        objects = [m for m in members if isinstance(m, type) and object_fields(m, "") is not None]
        for m in objects:
            tag = _struct_tag(m)
            if tag is not None and value.get(tag[0]) == tag[1]:
                return m
        if objects:
            return objects[0]
        return next((m for m in members if typing.get_origin(m) in (dict, Mapping)), None)
    if isinstance(value, list):
        return next((m for m in members if typing.get_origin(m) in (list, tuple, Sequence, set, frozenset)), None)
    return None


def unexpected_field(value: object, hint: Any, path: str) -> str | None:
    """Where ``value`` has a key an object type in ``hint`` does not have (msgspec would drop it), or ``None``.

    Follows the hint, not the value, so the walk is as deep as the type (recursive
    object types are refused when the tool is made).
    """
    if not isinstance(value, dict | list):
        return None  # a scalar has no key to drop
    if typing.get_origin(hint) is typing.Annotated:
        return unexpected_field(value, typing.get_args(hint)[0], path)
    fields = object_fields(hint, path) if isinstance(hint, type) else None
    if fields is not None:
        return _unexpected_in_object(value, hint, fields, path)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Union, types.UnionType):
        member = _union_member(value, args)
        return None if member is None else unexpected_field(value, member, path)
    if isinstance(value, list) and args:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            pairs = list(zip(value, args, strict=False))
        elif origin in (list, tuple, Sequence, set, frozenset):
            pairs = [(item, args[0]) for item in value]
        else:
            return None
        for i, (item, item_hint) in enumerate(pairs):
            found = unexpected_field(item, item_hint, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(value, dict) and origin in (dict, Mapping) and len(args) == 2:
        for key, item in value.items():
            found = unexpected_field(item, args[1], f"{path}.{key}")
            if found:
                return found
    return None


def _unexpected_in_object(value: object, cls: type, fields: Sequence[_Field], path: str) -> str | None:
    by_key = {f.key: f.hint for f in fields}
    tag = _struct_tag(cls)
    if isinstance(value, list):  # an array_like Struct: its positions
        hints = ([Any] if tag is not None else []) + list(by_key.values())
        if len(value) > len(hints):  # msgspec ignores trailing items: refused, not dropped
            names = ", ".join([*([tag[0]] if tag is not None else []), *by_key])
            return f"unexpected item at `{path}[{len(hints)}]` ({cls.__name__} has {len(hints)}: {names})"
        for i, (item, item_hint) in enumerate(zip(value, hints, strict=False)):
            found = unexpected_field(item, item_hint, f"{path}[{i}]")
            if found:
                return found
        return None
    if not isinstance(value, dict):
        return None  # the conversion reports the wrong type
    allowed = [*([tag[0]] if tag is not None else []), *by_key]
    for key in value:
        if key not in by_key and (tag is None or key != tag[0]):
            return f"unexpected field {key!r} at `{path}` (the fields of {cls.__name__}: {', '.join(allowed)})"
    for key, item in value.items():
        if key in by_key:
            found = unexpected_field(item, by_key[key], f"{path}.{key}")
            if found:
                return found
    return None
