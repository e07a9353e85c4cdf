"""Spec §3 and §4: base fields, wire order, absent-not-null, unknown members, the 13 types."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import envelope
from envelope import ENVELOPE_TYPES, DecodeError, Position, ValidationError, decode, encode
from streams import CLASSES, ident, nasty_text


def test_spec_03_1_base_fields_required_with_positions() -> None:
    """[3.1-a] a missing or mistyped base field is an error naming the field, at the given position."""
    with pytest.raises(ValidationError) as info:
        decode(b'{"type":"text","agent":"a","final":1,"delta":""}', position=Position(line=4, offset=100))
    err = info.value
    assert err.field == "$.final"
    assert (err.position.line, err.position.offset) == (4, 100)
    assert str(err) == "line 4, byte offset 100: expected a boolean, got an integer at $.final (spec §3.1)"
    for missing in ("agent", "final", "delta"):
        obj = {"type": "text", "agent": "a", "final": True, "delta": ""}
        del obj[missing]
        with pytest.raises(ValidationError, match=f"missing required field `{missing}`") as info:
            decode(json.dumps(obj))
        assert info.value.field == f"$.{missing}"
    with pytest.raises(ValidationError, match="missing required field `type`"):
        decode('{"agent":"a","final":true,"delta":""}')


def test_decode_errors_carry_byte_offsets() -> None:
    with pytest.raises(DecodeError, match="not JSON") as info:
        decode(b'{"type":"text",,}', position=Position(line=2, offset=50))
    assert info.value.position.offset == 50 + 15
    with pytest.raises(DecodeError, match="ends inside a value"):
        decode(b'{"type":"te')
    with pytest.raises(DecodeError, match="invalid UTF-8") as bad:
        decode(b'{"type":"text","agent":"\xff","final":true,"delta":""}')
    assert bad.value.position.offset == 24
    with pytest.raises(DecodeError, match="lone surrogate"):
        decode('{"type":"text","agent":"\ud800","final":true,"delta":""}')
    with pytest.raises(ValidationError):
        decode(b"[1,2]")


@given(agent=ident, delta=nasty_text, final=st.booleans(), id=ident, name=ident, data=st.data())
def test_spec_03_2_wire_order_and_roundtrip(
    agent: str, delta: str, final: bool, id: str, name: str, data: st.DataObject
) -> None:
    """[3.2-a] members in wire order: type, agent, final, id, name, delta, then extras."""
    kind = data.draw(st.sampled_from(sorted(CLASSES)))
    cls = CLASSES[kind]
    if kind in ("tool_call", "server_tool_call", "tool_result", "server_tool_result"):
        env = cls(agent=agent, final=final, delta=delta, id=id, name=name)  # type: ignore[call-arg]  # id types
        order = ["type", "agent", "final", "id", "name", "delta"]
    else:
        env = cls(agent=agent, final=final, delta=delta)  # type: ignore[call-arg]  # no id
        order = ["type", "agent", "final", "delta"]
    line = encode(env)
    assert list(json.loads(line)) == order
    assert decode(line) == env
    image = envelope.ToolResultImage(agent=agent, final=False, id=id, name=name, delta="", src="s", media_type="m")
    assert list(json.loads(encode(image))) == [*order[:3], "id", "name", "delta", "src", "media_type"]


def test_spec_03_3_absent_never_null() -> None:
    """[3.3-a] unset extras are absent; an explicit null is a type error."""
    cite = envelope.Citation(agent="a", final=True, delta="x", citation_type="char_location", end_char_index=3)
    assert encode(cite) == (
        b'{"type":"citation","agent":"a","final":true,"delta":"x","citation_type":"char_location","end_char_index":3}'
    )
    with pytest.raises(ValidationError, match="got null") as info:
        decode('{"type":"citation","agent":"a","final":true,"delta":"x","citation_type":"c","url":null}')
    assert info.value.field == "$.url"
    with pytest.raises(ValidationError, match="expected an integer, got a string"):
        decode('{"type":"citation","agent":"a","final":true,"delta":"x","citation_type":"c","document_index":"0"}')


def test_spec_03_4_strict_decoder_refuses_unknown_members() -> None:
    """[3.4-a] the strict decoder refuses members the type does not define."""
    with pytest.raises(ValidationError, match="field `src` is not allowed") as info:
        decode('{"type":"text","agent":"a","final":true,"delta":"","src":"x"}')
    assert info.value.field == "$.src"


def test_spec_04_1_thirteen_types_and_unknown_type() -> None:
    """[4.1-a] exactly 15 types (the seed's 13, meta_compaction §4.15, meta_status §4.16); anything else is refused. [4.1-b] id/name only where defined."""
    assert len(ENVELOPE_TYPES) == 15
    tags = {cls.__struct_config__.tag for cls in envelope.Envelope.__args__}
    assert tags == set(ENVELOPE_TYPES)
    with pytest.raises(ValidationError, match="unknown envelope type 'progress'") as info:
        decode('{"type":"progress","agent":"a","final":true,"delta":""}')
    assert info.value.field == "$.type"
    with pytest.raises(ValidationError, match="field `id` is not allowed"):
        decode('{"type":"meta_files","agent":"a","final":true,"delta":"","id":"x"}')
    with pytest.raises(ValidationError, match="missing required field `name`"):
        decode('{"type":"tool_call","agent":"a","final":true,"id":"x","delta":""}')


def test_envelopes_are_frozen() -> None:
    env = envelope.Text(agent="a", final=True, delta="")
    with pytest.raises(AttributeError):
        env.delta = "x"  # type: ignore[misc]  # frozen on purpose
    assert msgspec.structs.replace(env, delta="y").delta == "y"
