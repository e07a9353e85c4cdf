"""What is wrong with the shape of an envelope line msgspec refused, found and worded by us.

Owns: ``shape_error(line, lenient=...)``: on the error path of ``decode`` and of the
reconstructor's lenient reading, after msgspec raised a ``ValidationError``, the first
fault of the line's members against the envelope schema (spec §3.1, §3.3, §3.4), as a
``ValidationError`` with our message and the field's ``$.path`` (spec/limits.md L5-c).
Does not own: the schema (the Structs of ``_types`` and ``_structs``, read here once
with ``msgspec.inspect``), nor well-formedness (UTF-8, JSON syntax, nesting: the decoder).

Why: msgspec words its errors itself ("Expected `bool`, got `int` - at `$.final`") and
may change them in any version; a user reads ours. The line is read again as an object
of raw members (``msgspec.Raw``, not parsed), each member's JSON kind is told from its
first byte, and the first fault in wire order is reported. Error path only.
"""

from __future__ import annotations

import typing
from typing import Final

import msgspec

from ._errors import ValidationError
from ._structs import _Wire
from ._types import Envelope

__all__ = ["expected_kind", "shape_error"]

#: A field's JSON kind, as the message says it, by the msgspec type it is declared as.
_KIND_OF_TYPE: Final[dict[type[msgspec.inspect.Type], str]] = {
    msgspec.inspect.StrType: "a string",
    msgspec.inspect.BoolType: "a boolean",
    msgspec.inspect.IntType: "an integer",
}
#: A field: its kind (None: any JSON value) and whether it is required.
_Field = tuple[str | None, bool]

_members = msgspec.json.Decoder(dict[str, msgspec.Raw])


def _fields(struct: type[msgspec.Struct]) -> dict[str, _Field]:
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    return {f.encode_name: (_KIND_OF_TYPE.get(type(f.type)), f.required) for f in info.fields}


def _strict_schema() -> dict[str, dict[str, _Field]]:
    out: dict[str, dict[str, _Field]] = {}
    for struct in typing.get_args(Envelope):
        info = msgspec.inspect.type_info(struct)
        assert isinstance(info, msgspec.inspect.StructType)
        assert isinstance(info.tag, str)
        out[info.tag] = _fields(struct)
    return out


#: Each envelope type's fields (the strict reading: unknown members are refused, §3.4).
_STRICT: Final = _strict_schema()
#: The lenient reading's fields: any ``type``, extras of any kind, unknown members ignored.
_LENIENT: Final = _fields(_Wire)
#: Each field name's kind, in any envelope type (a name has one kind in all of them).
_KIND_OF_NAME: Final = {name: kind for fields in _STRICT.values() for name, (kind, _) in fields.items() if kind}


def expected_kind(field: str) -> str | None:
    """The JSON kind a top-level member ``$.name`` must have (``"a string"``), or None if unknown."""
    return _KIND_OF_NAME.get(field.removeprefix("$.")) if field.count(".") == 1 else None


def _kind(raw: bytes) -> str:
    """The JSON kind of a raw member value, from its first byte (msgspec has parsed it as JSON)."""
    first = raw[:1]
    if first == b'"':
        return "a string"
    if first in (b"t", b"f"):
        return "a boolean"
    if first == b"n":
        return "null"
    if first == b"[":
        return "an array"
    if first == b"{":
        return "an object"
    return "a number" if any(c in raw for c in b".eE") else "an integer"


def shape_error(line: bytes | str, *, lenient: bool = False) -> ValidationError | None:
    """The first fault of the line's members against the schema, or None when none is found.

    Args:
        line: a line msgspec refused with a ``ValidationError`` (so it is JSON).
        lenient: check as the reconstructor reads (``_Wire``), not as ``decode`` does.

    Returns:
        A ``ValidationError`` whose message is ours and whose ``field`` is the member's
        path; ``None`` when the line cannot be read as an object of members here (nested
        too deep for the parser) or no fault is found, and the caller says what msgspec
        found in its own words.
    """
    try:
        members = _members.decode(line)
    except msgspec.ValidationError:
        kind = _kind(line.lstrip().encode() if isinstance(line, str) else line.lstrip())
        return ValidationError(f"the line is {kind} in JSON, not an object", section="3.1")
    except (msgspec.DecodeError, RecursionError, UnicodeError):
        return None
    raw_type = members.get("type")
    if raw_type is None:
        return ValidationError("missing required field `type`", field="$.type", section="3.1")
    if lenient:
        fields = _LENIENT
    else:
        if _kind(bytes(raw_type)) != "a string":
            return _wrong("type", "a string", bytes(raw_type))
        name = msgspec.json.decode(raw_type, type=str)
        known = _STRICT.get(name)
        if known is None:
            return ValidationError(f"unknown envelope type {name!r}", field="$.type", section="3.1")
        fields = known
    for key, raw in members.items():
        if key == "type" and not lenient:
            continue
        field = fields.get(key)
        if field is None:
            if lenient:
                continue  # §3.4: the lenient reading ignores unknown members
            return ValidationError(f"field `{key}` is not allowed on this type", field=f"$.{key}", section="3.1")
        want = field[0]
        if want is not None and _kind(bytes(raw)) != want:
            return _wrong(key, want, bytes(raw))
    for key, (_want, required) in fields.items():
        if required and key not in members:
            return ValidationError(f"missing required field `{key}`", field=f"$.{key}", section="3.1")
    return None


def _wrong(key: str, want: str, raw: bytes) -> ValidationError:
    got = _kind(raw)
    if got == "null":
        # §3.3-a: an extra that is not set is absent, never null.
        return ValidationError(
            f"expected {want}, got null (a field is absent or has its type, never null)",
            field=f"$.{key}",
            section="3.1",
        )
    return ValidationError(f"expected {want}, got {got}", field=f"$.{key}", section="3.1")
