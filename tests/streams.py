"""Test helpers: a small model of blocks, how to emit them, what they rebuild to, and strategies.

The model is deliberately independent of ``envelope._reconstruct``: the expected
blocks are written from the spec (spec §7.6), not from the reconstructor's code, so a
property comparing the two can fail.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

import envelope
from envelope import CitationData, Emitter, ImageRef, encode
from envelope.delivery import DONE_LINE

STREAMED = ("text", "thinking")
WITH_ID = ("tool_call", "server_tool_call", "tool_result", "server_tool_result")
JSON_DATA = ("meta_init", "meta_final", "meta_files", "error", "awaiting_frontend_tools")
BLOCK_TYPES = STREAMED + WITH_ID + JSON_DATA
CLASSES: dict[str, type[envelope.Envelope]] = {
    "text": envelope.Text,
    "thinking": envelope.Thinking,
    "tool_call": envelope.ToolCall,
    "server_tool_call": envelope.ServerToolCall,
    "tool_result": envelope.ToolResult,
    "server_tool_result": envelope.ServerToolResult,
    "meta_init": envelope.MetaInit,
    "meta_final": envelope.MetaFinal,
    "meta_files": envelope.MetaFiles,
    "error": envelope.Error,
    "awaiting_frontend_tools": envelope.AwaitingFrontendTools,
}


@dataclass(frozen=True)
class Spec:
    """One block as its producer meant it."""

    type: str
    #: For streamed types, the deltas as given to ``Emitter.streamed``; else one payload.
    pieces: tuple[str, ...] = ()
    id: str | None = None
    name: str | None = None
    images: tuple[ImageRef, ...] = ()
    citations: tuple[CitationData, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def content(self) -> str:
        return "".join(self.pieces)


def emit(em: Emitter, spec: Spec) -> list[bytes]:
    """The lines a producer sends for ``spec``."""
    if spec.type in STREAMED:
        lines: list[bytes] = []
        for piece in spec.pieces:
            lines += em.streamed(spec.type, piece)  # type: ignore[arg-type]  # STREAMED holds only streamed types
        lines.append(em.end(spec.type))  # type: ignore[arg-type]  # as above
        if spec.citations:
            lines += em.citations(spec.citations)
        return lines
    if spec.type == "tool_result":
        assert spec.id is not None
        assert spec.name is not None
        return em.tool_result(spec.id, spec.name, spec.content, spec.images)
    return em.buffered(spec.type, spec.content, id=spec.id, name=spec.name)  # type: ignore[arg-type]  # a buffered type


def text_response(agent: str = "agent-1", words: int = 8) -> list[bytes]:
    """A whole response as a server journals it: meta_init, ``words`` text deltas (``"word0 "``, ...), meta_final, ``[DONE]``."""
    emitter = Emitter(agent, 2048)
    init = f'{{"format":"json","user_query":"q","agent_uuid":"{agent}","model":"fake"}}'
    out = [*emitter.buffered("meta_init", init)]
    for n in range(words):
        out += emitter.streamed("text", f"word{n} ")
    out.append(emitter.end("text"))
    out += emitter.buffered("meta_final", '{"stop_reason":"end_turn","total_steps":1,"cumulative_usage":{}}')
    return [*out, DONE_LINE]


def _reject(token: str) -> Any:
    raise ValueError(f"{token} is not JSON")


def _finite(token: str) -> float:
    value = float(token)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{token} is out of range")
    return value


def _parse(text: str) -> Any:
    """Spec §7.5: the JSON value (RFC 8259: no NaN or Infinity; numbers must fit a float;
    strings must be valid Unicode), else the raw text. Written with the stdlib, not msgspec."""
    try:
        value = json.loads(text, parse_constant=_reject, parse_float=_finite)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate raises
    except (ValueError, UnicodeEncodeError):
        return text
    return value


def expected(spec: Spec) -> dict[str, Any]:
    """The block as spec §7.6 says the transcript shows it (complete)."""
    out: dict[str, Any] = {"type": spec.type, "complete": True}
    if spec.type in STREAMED:
        out["content"] = spec.content
        if spec.type == "text":
            out["citations"] = [
                {"cited_text": c.cited_text, **{k: v for k, v in _citation_extras(c).items()}} for c in spec.citations
            ]
    elif spec.type in ("tool_call", "server_tool_call"):
        out |= {"id": spec.id, "name": spec.name, "input": _parse(spec.content)}
    elif spec.type == "tool_result":
        out |= {
            "id": spec.id,
            "name": spec.name,
            "content": spec.content,
            "images": [{"src": i.src, "media_type": i.media_type} for i in spec.images],
        }
    elif spec.type == "server_tool_result":
        out |= {"id": spec.id, "name": spec.name, "content": spec.content}
    else:
        out["data"] = _parse(spec.content)
    return out


def expected_agent(specs: list[Spec]) -> list[dict[str, Any]]:
    """One agent's blocks as the transcript shows them: each ``expected``, a repeated tool_call id marked an edit (§4.6-a)."""
    seen: set[str | None] = set()
    out = []
    for spec in specs:
        block = expected(spec)
        if spec.type == "tool_call":
            if spec.id in seen:
                block["edit"] = True
            seen.add(spec.id)
        out.append(block)
    return out


def _citation_extras(c: CitationData) -> dict[str, Any]:
    import msgspec

    data = msgspec.to_builtins(c)
    data.pop("cited_text")
    return dict(data)


def fixed_part(agent: str, spec: Spec) -> int:
    """Bytes of the envelope of ``spec`` with an empty delta and ``final: false`` (spec §6.6)."""
    cls = CLASSES[spec.type]
    if spec.type in WITH_ID:
        env = cls(agent=agent, final=False, delta="", id=spec.id or "", name=spec.name or "")  # type: ignore[call-arg]  # WITH_ID types take id/name
    else:
        env = cls(agent=agent, final=False, delta="")  # type: ignore[call-arg]  # the others take none
    return len(encode(env))


# ---- strategies ---------------------------------------------------------------------------

#: Text that stresses escaping and UTF-8: quotes, backslashes, controls, separators, astral.
nasty_text = st.text(
    alphabet=st.one_of(
        st.sampled_from(['"', "\\", "\n", "\r", "\t", "\x00", "\x1f", "\u2028", "\u2029", "é", "中", "😀", "u", "/"]),
        st.characters(codec="utf-8"),
    ),
    max_size=300,
)
small_text = st.text(st.characters(codec="utf-8"), max_size=12)
ident = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)


@st.composite
def citation_data(draw: st.DrawFn) -> CitationData:
    kind = draw(st.sampled_from(["char_location", "page_location", "web_search_result_location"]))
    if kind == "char_location":
        return CitationData(
            cited_text=draw(small_text),
            citation_type=kind,
            document_index=draw(st.integers(0, 9)),
            start_char_index=draw(st.integers(0, 99)),
            end_char_index=draw(st.integers(0, 99)),
        )
    if kind == "page_location":
        return CitationData(
            cited_text=draw(small_text),
            citation_type=kind,
            document_title=draw(small_text),
            start_page_number=draw(st.integers(1, 9)),
            end_page_number=draw(st.integers(1, 9)),
        )
    return CitationData(cited_text=draw(small_text), citation_type=kind, url=draw(small_text), title=draw(small_text))


@st.composite
def specs(draw: st.DrawFn, ids: list[str], names: list[str]) -> Spec:
    """One block of any type, with payloads that stress the chunker."""
    kind = draw(st.sampled_from(BLOCK_TYPES))
    if kind in STREAMED:
        pieces = tuple(draw(st.lists(nasty_text, max_size=4)))
        cites = tuple(draw(st.lists(citation_data(), max_size=3))) if kind == "text" else ()
        return Spec(kind, pieces, citations=cites)
    payload = draw(st.one_of(nasty_text, st.builds(lambda v: json.dumps(v), st.dictionaries(small_text, small_text))))
    if kind in WITH_ID:
        k = draw(st.integers(0, len(ids) - 1))
        images: tuple[ImageRef, ...] = ()
        if kind == "tool_result":
            images = tuple(
                draw(st.lists(st.builds(ImageRef, src=small_text, media_type=st.just("image/png")), max_size=2))
            )
        return Spec(kind, (payload,), id=ids[k], name=names[k], images=images)
    return Spec(kind, (payload,))
