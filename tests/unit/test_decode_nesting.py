"""Nesting depth (spec/limits.md L2): a coded error or a raw payload, never ``RecursionError`` (issue 18 §2).

[L2-a] a line whose nesting the codec must walk past ``MAX_NESTING_DEPTH`` is a
``DecodeError`` naming the limit and the byte where the nesting passes it.
[L2-b] a payload nested deeper than the limit is given raw (spec §7.5), and is not a
discarded-attempt signal.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from envelope import DecodeError, Position, Reconstructor, ValidationError, decode, reconstruct
from envelope._limits import MAX_NESTING_DEPTH

HEAD = b'{"type":"text","agent":"a","final":false,"delta":"x","zz":'
#: An unknown member nested past msgspec's depth limit: the lenient reader still walks it.
DEEP = HEAD + b"[" * 5000 + b"]" * 5000 + b"}"
TEXT = '{"type":"text","agent":"a","final":true,"delta":"cited"}'


def _citation(levels: int) -> str:
    return (
        '{"type":"citation","agent":"a","final":true,"delta":"c","citation_type":"char_location","url":'
        + "[" * levels
        + "]" * levels
        + "}"
    )


@pytest.mark.parametrize("line", [DEEP, DEEP.decode()])
def test_l2_a_reconstructor_refuses_a_line_too_deep_to_walk_with_its_position(line: bytes | str) -> None:
    """[L2-a] the error names the limit, the byte, the envelope index; feed and feed_many agree."""
    rec = Reconstructor()
    rec.feed(b'{"type":"text","agent":"a","final":false,"delta":"ok"}')
    with pytest.raises(DecodeError, match=f"nested deeper than MAX_NESTING_DEPTH={MAX_NESTING_DEPTH}") as caught:
        rec.feed(line)
    # The envelope's own object is level 1: the bracket opening level 257 is the 256th "[".
    assert caught.value.position.offset == len(HEAD) + MAX_NESTING_DEPTH - 1
    assert caught.value.position.index == 1
    assert caught.value.section == "L2-a"
    with pytest.raises(DecodeError, match="MAX_NESTING_DEPTH") as batch:
        Reconstructor().feed_many([line])
    assert batch.value.position.offset == caught.value.position.offset


def test_l2_a_citation_extras_are_held_to_the_limit() -> None:
    """[L2-a] the citation extras are kept as parsed values, so they are held to the limit exactly."""
    within = reconstruct([TEXT, _citation(MAX_NESTING_DEPTH - 1)])
    url: Any = within.agents["a"][0].citations[0]["url"]
    depth = 0
    while isinstance(url, list) and url:
        url, depth = url[0], depth + 1
    assert depth == MAX_NESTING_DEPTH - 2  # the innermost list is empty
    for levels in (MAX_NESTING_DEPTH, 999, 5000):
        rec = Reconstructor()
        rec.feed(TEXT)
        with pytest.raises(DecodeError, match="MAX_NESTING_DEPTH") as caught:
            rec.feed(_citation(levels))
        assert caught.value.position.index == 1


def test_strict_decode_refuses_nesting_after_the_tag_at_once() -> None:
    """After the ``type`` tag, the strict reading refuses an unknown member, or a nested known one, at its first byte."""
    with pytest.raises(ValidationError, match="not allowed"):
        decode(DEEP)
    with pytest.raises(ValidationError, match="expected a string"):
        decode(b'{"type":"text","agent":"a","final":false,"delta":' + b"[" * 5000 + b"]" * 5000 + b"}")


@pytest.mark.parametrize("form", [bytes, str])
def test_l2_a_strict_decode_walks_members_before_the_tag(form: type) -> None:
    """[L2-a] to find the ``type`` tag msgspec skips the members before it: too deep there is our error."""
    head = b'{"zz":'
    line = head + b"[" * 5000 + b"]" * 5000 + b',"type":"text","agent":"a","final":false,"delta":"x"}'
    with pytest.raises(DecodeError, match="MAX_NESTING_DEPTH") as caught:
        decode(line if form is bytes else line.decode(), position=Position(line=3, offset=100))
    assert caught.value.position.offset == 100 + len(head) + MAX_NESTING_DEPTH - 1
    with pytest.raises(DecodeError, match="MAX_NESTING_DEPTH"):
        Reconstructor().feed(line)


def _payload(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("kind", ["error", "meta_init", "tool_call", "awaiting_frontend_tools"])
def test_l2_b_a_payload_too_deep_is_given_raw(kind: str) -> None:
    """[L2-b] spec §7.5: a payload deeper than the limit is the raw text; at the limit it is parsed."""
    extra = {"id": "t", "name": "n"} if kind == "tool_call" else {}
    key = "input" if kind == "tool_call" else "data"
    for levels, parsed in ((MAX_NESTING_DEPTH, True), (MAX_NESTING_DEPTH + 1, False), (1000, False), (50_000, False)):
        line = json.dumps({"type": kind, "agent": "a", "final": True, **extra, "delta": _payload(levels)})
        rec = Reconstructor()
        rec.feed(line)  # an error with a deep delta once raised RecursionError from feed() itself
        value = rec.transcript().to_dict()["agents"]["a"]["blocks"][0][key]
        assert isinstance(value, list) is parsed
        if not parsed:
            assert value == _payload(levels)


def test_l2_b_a_deep_error_payload_is_no_discard_signal() -> None:
    """[L2-b] an attempt_discarded object nested too deep is not read: the block before it stays."""
    signal = {"type": "attempt_discarded", "discard_blocks": 1, "x": json.loads(_payload(200))}
    deep = json.dumps(signal).replace(_payload(200), _payload(300))
    lines = [TEXT, json.dumps({"type": "error", "agent": "a", "final": True, "delta": deep})]
    blocks = reconstruct(lines).agents["a"]
    assert [b.type for b in blocks] == ["text", "error"]
    shallow = json.dumps({"type": "error", "agent": "a", "final": True, "delta": json.dumps(signal)})
    assert [b.type for b in reconstruct([TEXT, shallow]).agents["a"]] == ["error"]
