"""Spec §3.2 and §6: the template a line is built from, made with one encode, against two."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import example, given
from hypothesis import strategies as st

import envelope
from envelope import Emitter, chunk
from envelope._encoder import _Template
from streams import citation_data, ident, nasty_text, small_text

#: Every envelope type: its Struct and whether it carries ``id`` and ``name``.
_TYPES: list[tuple[type[Any], bool]] = [
    (envelope.Text, False),
    (envelope.Thinking, False),
    (envelope.MetaInit, False),
    (envelope.MetaFinal, False),
    (envelope.MetaFiles, False),
    (envelope.Error, False),
    (envelope.AwaitingFrontendTools, False),
    (envelope.ToolCall, True),
    (envelope.ServerToolCall, True),
    (envelope.ToolResult, True),
    (envelope.ServerToolResult, True),
    (envelope.ToolResultImage, True),
    (envelope.Citation, False),
]


@st.composite
def envelopes(draw: st.DrawFn) -> Any:
    """Any envelope, with agents, ids and names that look like the final flag or a delta key."""
    cls, has_id = draw(st.sampled_from(_TYPES))
    tricky = st.sampled_from(['"final":false', '","final":false,"', "final", '"delta":""', "\\", '"'])
    text = st.one_of(ident, tricky)
    kwargs: dict[str, Any] = {"agent": draw(text), "final": draw(st.booleans()), "delta": draw(small_text)}
    if has_id:
        kwargs["id"], kwargs["name"] = draw(text), draw(text)
    if cls is envelope.ToolResultImage:
        kwargs["src"], kwargs["media_type"] = draw(text), draw(text)
    if cls is envelope.Citation:
        data = draw(citation_data())
        kwargs.update(msgspec.structs.asdict(data))
        kwargs["delta"] = kwargs.pop("cited_text")
    return cls(**kwargs)


def _two_encode_template(env: Any) -> tuple[bytes, bytes, bytes]:
    """The template as it was first built: one encode per value of ``final``."""
    heads: dict[bool, bytes] = {}
    tail = b""
    for final in (False, True):
        line = msgspec.json.encode(msgspec.structs.replace(env, final=final, delta=""))
        at = line.index(b'"delta":""') + len(b'"delta":""') - 2
        heads[final] = line[:at]
        tail = line[at + 2 :]
    return heads[False], heads[True], tail


@given(env=envelopes())
@example(env=envelope.Text(agent='"final":false', final=True, delta="x"))
@example(env=envelope.ToolCall(agent="a", final=False, id='","final":false,"', name='"final":false', delta=""))
def test_spec_03_2_one_encode_template_equals_two(env: Any) -> None:
    """[3.2] heads for both finals and the tail equal those of two separate encodes."""
    template = _Template(env)
    assert (template.head_false, template.head_true, template.tail) == _two_encode_template(env)
    assert template.type == env.__struct_config__.tag
    assert template.agent == env.agent
    # and a line built from it is the Struct's own encoding
    for final in (False, True):
        whole = msgspec.structs.replace(env, final=final)
        quoted = msgspec.json.encode(env.delta)
        assert template.line(final, quoted[1:-1]) == msgspec.json.encode(whole)


@given(payload=nasty_text, agent=ident, id=ident, extra=st.integers(-40, 40))
@example(payload="x" * 2040 + "\n" * 9, agent="a", id="i", extra=0)
def test_spec_06_1_buffered_just_over_the_bound_equals_the_chunker(
    payload: str, agent: str, id: str, extra: int
) -> None:
    """A payload shorter than the bound whose line is longer: lines equal ``chunk``'s, byte for byte."""
    env = envelope.ServerToolCall(agent=agent, final=True, id=id, name="n", delta=payload)
    blank = len(msgspec.json.encode(msgspec.structs.replace(env, final=False, delta="")))
    bound = max(len(msgspec.json.encode(env)) + extra, blank + 6, len(payload) + 1)
    em = Emitter(agent, bound)
    assert em.buffered("server_tool_call", payload, id=id, name="n") == chunk(env, bound)
    assert em.oversize == []
