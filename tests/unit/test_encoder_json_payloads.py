"""Issue 25.5, spec [5.2-c]: a JSON type's payload that is not JSON, strict and not."""

from __future__ import annotations

import json

import pytest

from envelope import Emitter, EncodeError, OversizeError, reconstruct, validate

AGENT = "abc-123"
JSON_TYPES = ("meta_init", "meta_final", "meta_files", "meta_compaction", "error", "awaiting_frontend_tools")
ID_JSON_TYPES = ("tool_call", "server_tool_call")
#: Not JSON as the validator and the reconstructor read it (§7.5), and why the message says so.
BAD = {
    "{not json": "object keys must be strings",
    '{"path": "/tm': "ends inside a value",
    "NaN": "invalid character",
    "[1e400]": "Number out of range",
    '"\\ud800"': "ends inside a value",
    "[" * 300 + "]" * 300: "deeper than 256 levels",
    "": "ends inside a value",
}


def _emit(em: Emitter, kind: str, payload: str) -> list[bytes]:
    if kind in ID_JSON_TYPES:
        return em.buffered(kind, payload, id="toolu_1", name="read_file")  # type: ignore[arg-type]  # kind is a buffered type
    return em.buffered(kind, payload)  # type: ignore[arg-type]  # kind is a buffered type


@pytest.mark.parametrize("kind", JSON_TYPES + ID_JSON_TYPES)
@pytest.mark.parametrize("payload", list(BAD))
def test_strict_refuses_a_json_type_whose_payload_is_not_json(kind: str, payload: str) -> None:
    """[5.2-c] strict: an EncodeError naming the type, the reason and section 5.2-c; no line."""
    em = Emitter(AGENT, strict=True)
    with pytest.raises(EncodeError) as caught:
        _emit(em, kind, payload)
    assert not isinstance(caught.value, OversizeError)
    message = str(caught.value)
    assert f"{kind} payload is not JSON" in message
    assert BAD[payload] in message
    assert "5.2-c" in message
    assert caught.value.field == "$.delta"


def test_the_issue_case_replayed() -> None:
    """Issue 25 case 5 as written: strict raises; non-strict sends it and the validator says E140."""
    with pytest.raises(EncodeError, match="tool_call payload is not JSON"):
        Emitter(AGENT, strict=True).buffered("tool_call", "{not json", id="t", name="n")
    lines = Emitter(AGENT).buffered("tool_call", "{not json", id="t", name="n")
    codes = {v.code for v in validate(lines)}
    assert "E140" in codes


@pytest.mark.parametrize("kind", JSON_TYPES + ID_JSON_TYPES)
@pytest.mark.parametrize("payload", list(BAD))
def test_non_strict_sends_the_text_as_given(kind: str, payload: str) -> None:
    """[5.2-c] non-strict: the lines carry the payload byte for byte and a reader gives it back raw."""
    lines = _emit(Emitter(AGENT, 200), kind, payload)
    assert "".join(json.loads(x)["delta"] for x in lines) == payload
    assert all(len(x) <= 200 for x in lines)
    (block,) = reconstruct(lines).agents[AGENT]
    rebuilt = block.to_dict()
    assert rebuilt["input" if kind in ID_JSON_TYPES else "data"] == payload  # raw, §7.5


@pytest.mark.parametrize("kind", JSON_TYPES + ID_JSON_TYPES)
def test_strict_sends_json_exactly_as_non_strict_does(kind: str) -> None:
    """[5.2-c] the check refuses nothing that is JSON: deep to the limit, chunked, escaped."""
    for payload in ('{"a": [1, 2.5, "x\\"y\\n"], "b": null}', "[" * 255 + "]" * 255, json.dumps({"k": "é" * 3000})):
        assert _emit(Emitter(AGENT, 300, strict=True), kind, payload) == _emit(Emitter(AGENT, 300), kind, payload)


def test_strict_does_not_parse_text_types() -> None:
    """[5.2-c] tool_result and server_tool_result carry text: strict sends any text."""
    em = Emitter(AGENT, strict=True)
    assert em.buffered("tool_result", "{not json", id="t", name="n")
    assert em.buffered("server_tool_result", "{not json", id="t", name="n")
    assert em.tool_result("t", "n", "{not json")


def test_strict_seed_profile_checks_the_control_types_it_sends_whole() -> None:
    """[5.2-c] the seed profile's one-line control envelopes are checked too."""
    em = Emitter(AGENT, strict=True, profile="seed")
    with pytest.raises(EncodeError, match="meta_final payload is not JSON"):
        em.buffered("meta_final", "{" * 3000)
    assert len(em.buffered("meta_final", json.dumps({"x": "y" * 3000}))) == 1


def test_a_lone_surrogate_is_reported_as_such_first() -> None:
    """A raw lone surrogate keeps its own error (§6.4), which names the index."""
    with pytest.raises(EncodeError, match="lone surrogate U\\+D800 at index 2"):
        Emitter(AGENT, strict=True).buffered("error", '{"\ud800')
