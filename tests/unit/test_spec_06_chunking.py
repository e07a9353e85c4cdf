"""Spec §5 and §6: emission modes, the bound after escaping, cut rules, oversize policy."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import envelope
from envelope import CitationData, Emitter, EncodeError, ImageRef, OversizeError, Text, _speedups, chunk, decode, encode
from envelope._chunker import escape, split_escaped
from streams import ident, nasty_text

AGENT = "abc-123"


def _deltas(lines: list[bytes]) -> str:
    return "".join(json.loads(line)["delta"] for line in lines)


def _unit_lengths(text: str) -> list[int]:
    """Escaped length of each code point of ``text`` (what one more code point costs)."""
    return [len(escape(ch)) - 2 for ch in text]


@given(payload=nasty_text, agent=ident, id=ident, name=ident, extra=st.integers(0, 400), data=st.data())
@example(payload='"' * 50, agent="a", id="i", name="n", extra=0, data=None)
@example(payload="\x00" * 40, agent="a", id="i", name="n", extra=1, data=None)
@example(payload="\\" * 41 + "u", agent="a", id="i", name="n", extra=2, data=None)
@example(payload="😀" * 30, agent="a", id="i", name="n", extra=3, data=None)
def test_spec_06_1_buffered_lines_within_bound_and_join(
    payload: str, agent: str, id: str, name: str, extra: int, data: st.DataObject | None
) -> None:
    """[6.1-a] every line within the bound after escaping; [5.2-a] final only on the last line."""
    kind = "tool_result" if data is None else data.draw(st.sampled_from(["tool_result", "meta_init", "error"]))
    ids = {"id": id, "name": name} if kind == "tool_result" else {}
    # spec §6.6: the fixed part is measured with final:false, a byte longer than a final line
    fixed = len(Emitter(agent, 10**9).buffered(kind, "", **ids)[0]) + 1  # type: ignore[arg-type]  # buffered
    bound = fixed + 6 + extra
    em = Emitter(agent, bound)
    lines = em.buffered(kind, payload, **ids)  # type: ignore[arg-type]  # as above
    assert em.oversize == []
    parsed = [json.loads(line) for line in lines]
    assert all(len(line) <= bound for line in lines)
    assert "".join(p["delta"] for p in parsed) == payload
    assert [p["final"] for p in parsed] == [False] * (len(lines) - 1) + [True]
    assert all(p["agent"] == agent and p["type"] == kind for p in parsed)
    if kind == "tool_result":
        assert all(p["id"] == id and p["name"] == name for p in parsed)
    # byte identity with msgspec encoding of the same Struct (spec §3.2)
    assert all(encode(decode(line)) == line for line in lines)


@given(payload=nasty_text, extra=st.integers(0, 200))
@example(payload="ab\\" * 30, extra=0)
@example(payload="\x01" * 20 + "é" * 20, extra=1)
def test_spec_06_3_chunks_are_maximal(payload: str, extra: int) -> None:
    """[6.3-a] no non-last chunk could have taken one more code point."""
    em = Emitter(AGENT, 1)
    fixed = len(Emitter(AGENT, 10**9).streamed("text", "x")[0]) - 1
    bound = fixed + 6 + extra
    em = Emitter(AGENT, bound)
    lines = em.streamed("text", payload)
    rest = payload
    for line in lines[:-1]:
        delta = json.loads(line)["delta"]
        assert rest.startswith(delta)
        rest = rest[len(delta) :]
        nxt = _unit_lengths(rest[:1])[0]
        assert len(line) + nxt > bound, "the chunk could have taken one more code point"
    if lines:
        assert json.loads(lines[-1])["delta"] == rest


@given(payload=nasty_text, extra=st.integers(0, 300))
def test_spec_05_1_streamed_never_final(payload: str, extra: int) -> None:
    """[5.1-a] streamed chunks are all final:false; [5.1-b] the marker is final with an empty delta."""
    fixed = len(Emitter(AGENT).end("thinking")) + 1
    em = Emitter(AGENT, fixed + 6 + extra)
    lines = em.streamed("thinking", payload)
    assert all(json.loads(line)["final"] is False for line in lines)
    assert _deltas(lines) == payload
    assert (lines == []) == (payload == "")
    marker = json.loads(em.end("thinking"))
    assert marker == {"type": "thinking", "agent": AGENT, "final": True, "delta": ""}


def test_spec_06_1_escape_heavy_payload_holds_the_bound() -> None:
    """[6.1-a] the seed's raw-byte algorithm would overflow here: a delta of quotes doubles in size."""
    em = Emitter(AGENT, 100)
    lines = em.streamed("text", '"' * 500 + "\n" * 500 + "\x07" * 100)
    assert all(len(line) <= 100 for line in lines)
    assert len(lines) > 10
    assert _deltas(lines) == '"' * 500 + "\n" * 500 + "\x07" * 100


def test_spec_06_2_never_splits_escapes_or_characters() -> None:
    """[6.2-a] cuts land on code point boundaries; [6.2-b] never inside an escape sequence."""
    body = escape('a\\\\\\u\x01😀é"x')[1:-1]
    for budget in range(6, len(body) + 1):
        pieces = split_escaped(body, budget, budget)
        assert b"".join(pieces) == body
        for piece in pieces:
            json.loads(b'"' + piece + b'"')  # each piece is a valid JSON string body
            piece.decode("utf-8")


def test_split_escaped_refuses_budget_below_one_code_point() -> None:
    with pytest.raises(ValueError, match="budget"):
        split_escaped(b"abc", 5, 5)


def test_spec_06_4_lone_surrogate_is_an_error() -> None:
    """[6.4-a] a lone surrogate is an EncodeError naming its index, never replaced silently."""
    em = Emitter(AGENT)
    with pytest.raises(EncodeError, match=r"U\+D800 at index 3") as info:
        em.streamed("text", "abc\ud800")
    assert info.value.field == "$.delta"
    assert info.value.section == "6.4"
    with pytest.raises(EncodeError, match="lone surrogate"):
        em.buffered("tool_call", "{}", id="\udfff", name="n")
    with pytest.raises(EncodeError, match="lone surrogate"):
        Emitter("\ud800")
    with pytest.raises(EncodeError, match="lone surrogate"):
        encode(envelope.Text(agent="a", final=True, delta="\ud83d"))


def test_spec_06_5_fixed_part_over_bound_gives_one_reported_line() -> None:
    """[6.5-a] when the fixed part leaves no room, the whole payload goes in one line, reported."""
    em = Emitter(AGENT, 80)
    lines = em.buffered("tool_result", "payload " * 20, id="x" * 100, name="big")
    assert len(lines) == 1
    assert _deltas(lines) == "payload " * 20
    assert len(em.oversize) == 1
    report = em.oversize[0]
    assert (report.type, report.agent, report.size, report.max_bytes) == ("tool_result", AGENT, len(lines[0]), 80)
    assert "fixed part" in report.reason


def test_spec_06_5_image_and_citation_lines_are_atomic() -> None:
    """[6.5-b] tool_result_image and citation lines are never split; oversize ones are reported."""
    em = Emitter(AGENT, 200)
    src = "data:image/png;base64," + "A" * 1000
    lines = em.tool_result("toolu_1", "shot", "ok", [ImageRef(src=src, media_type="image/png")])
    assert [json.loads(line)["type"] for line in lines] == ["tool_result", "tool_result_image", "tool_result"]
    assert json.loads(lines[1])["src"] == src
    assert [r.type for r in em.oversize] == ["tool_result_image"]
    cites = em.citations([CitationData(cited_text="c" * 300, citation_type="char_location")])
    assert len(cites) == 1
    assert [r.type for r in em.oversize] == ["tool_result_image", "citation"]


def test_spec_06_5_strict_mode_raises() -> None:
    """[6.5-c] strict mode refuses an oversize line with OversizeError."""
    em = Emitter(AGENT, 80, strict=True)
    with pytest.raises(OversizeError, match="exceeds max_bytes=80") as info:
        em.buffered("tool_result", "p", id="x" * 100, name="n")
    assert info.value.key == (AGENT, "tool_result")
    with pytest.raises(OversizeError):
        em.tool_result("i", "n", "", [ImageRef(src="s" * 200, media_type="image/png")])
    with pytest.raises(OversizeError):
        chunk(envelope.Citation(agent="a", final=True, delta="x" * 100, citation_type="t"), 50, strict=True)


def test_spec_06_6_just_enough_room_for_one_code_point() -> None:
    """[6.6-a] a budget of exactly 6 bytes carries any code point, the widest escape included."""
    fixed = len(Emitter(AGENT).streamed("text", "x")[0]) - 1
    em = Emitter(AGENT, fixed + 6)
    payload = "\x00😀\\é\x1fz"
    lines = em.streamed("text", payload)
    assert em.oversize == []
    assert all(len(line) <= fixed + 6 for line in lines)
    assert _deltas(lines) == payload
    # one byte less: no longer workable, so one reported oversize line
    em5 = Emitter(AGENT, fixed + 5)
    assert len(em5.streamed("text", payload)) == 1
    assert len(em5.oversize) == 1


def test_spec_05_2_empty_payload_gives_one_final_line() -> None:
    """[5.2-b] an empty buffered payload gives exactly one final line."""
    lines = Emitter(AGENT).buffered("meta_files", "")
    assert lines == [b'{"type":"meta_files","agent":"abc-123","final":true,"delta":""}']


def test_spec_05_3_multimodal_sequence() -> None:
    """[5.3-a] text (final false), one image line each (final false, empty delta), empty final marker."""
    em = Emitter(AGENT)
    lines = em.tool_result(
        "toolu_03",
        "screenshot",
        "Screenshot captured successfully",
        [ImageRef(src="data:image/png;base64,AAA", media_type="image/png"), ImageRef(src="u", media_type="image/jpeg")],
    )
    parsed = [json.loads(line) for line in lines]
    assert [(p["type"], p["final"], p["delta"]) for p in parsed] == [
        ("tool_result", False, "Screenshot captured successfully"),
        ("tool_result_image", False, ""),
        ("tool_result_image", False, ""),
        ("tool_result", True, ""),
    ]
    assert all(p["id"] == "toolu_03" and p["name"] == "screenshot" for p in parsed)
    assert em.tool_result("t", "n", "plain") == em.buffered("tool_result", "plain", id="t", name="n")


def test_spec_05_4_citations_final_on_last_only() -> None:
    """[5.4-a] one line per citation, final only on the last; unset extras absent, never null."""
    em = Emitter(AGENT)
    lines = em.citations(
        [
            CitationData(cited_text="a", citation_type="char_location", document_index=0, start_char_index=0),
            CitationData(cited_text="b", citation_type="web_search_result_location", url="https://e.x", title="E"),
        ]
    )
    assert lines[1] == (
        b'{"type":"citation","agent":"abc-123","final":true,"delta":"b",'
        b'"citation_type":"web_search_result_location","url":"https://e.x","title":"E"}'
    )
    assert json.loads(lines[0])["final"] is False
    assert b"null" not in lines[0]
    assert em.citations([]) == []


def test_emitter_refuses_wrong_types_and_ids() -> None:
    em = Emitter(AGENT)
    with pytest.raises(EncodeError, match="not a streamed type"):
        em.streamed("tool_call", "x")  # type: ignore[arg-type]  # deliberately wrong
    with pytest.raises(EncodeError, match="not a streamed type"):
        em.end("citation")  # type: ignore[arg-type]  # deliberately wrong
    with pytest.raises(EncodeError, match="not a buffered type"):
        em.buffered("text", "x")  # type: ignore[arg-type]  # deliberately wrong
    with pytest.raises(EncodeError, match="needs both id and name"):
        em.buffered("tool_call", "{}", id="x")
    with pytest.raises(EncodeError, match="carries no id or name"):
        em.buffered("meta_init", "{}", id="x")
    for bad in (0, -5):
        with pytest.raises(EncodeError, match="max_bytes must be a positive int"):
            Emitter(AGENT, bad)
    # Wrong Python types: the pure build's EncodeError; compiled, mypyc's argument check
    # raises TypeError first and takes a bool as an int (spec/limits.md L4).
    compiled = _speedups.loaded() == "compiled"
    for wrong in ((AGENT, 2.5), (5,)) + (() if compiled else ((AGENT, True),)):
        with pytest.raises(TypeError if compiled else EncodeError) as caught:
            Emitter(*wrong)
        assert compiled or "must be" in str(caught.value)
    for wrong_bound in (0, -5, True, 2.5):
        with pytest.raises(EncodeError, match="max_bytes must be a positive int"):
            chunk(Text(agent=AGENT, final=True, delta="x"), wrong_bound)  # type: ignore[arg-type]  # deliberately wrong


@given(payload=nasty_text, extra=st.integers(0, 300), final=st.booleans())
def test_chunk_splits_any_envelope(payload: str, extra: int, final: bool) -> None:
    """``chunk`` keeps the envelope's final on the last line only and joins to its delta."""
    env = envelope.ServerToolResult(agent="a", final=final, id="srv", name="web_search_tool_result", delta=payload)
    bound = len(encode(msgspec.structs.replace(env, final=False, delta=""))) + 6 + extra
    lines = chunk(env, bound)
    assert all(len(line) <= bound for line in lines)
    assert _deltas(lines) == payload
    assert [json.loads(line)["final"] for line in lines] == [False] * (len(lines) - 1) + [final]
    if len(lines) == 1:
        assert lines[0] == msgspec.json.encode(env)


def test_spec_06_5_oversize_final_marker_is_reported() -> None:
    """[6.5-a] a bound below even the empty final marker: the marker is sent and reported (strict: raised)."""
    em = Emitter(AGENT, 20)
    marker = em.end("text")
    assert json.loads(marker) == {"type": "text", "agent": AGENT, "final": True, "delta": ""}
    assert [(r.type, r.size) for r in em.oversize] == [("text", len(marker))]
    with pytest.raises(OversizeError, match="final marker"):
        Emitter(AGENT, 20, strict=True).end("thinking")


@given(payload=nasty_text, extra=st.integers(-20, 40))
def test_buffered_single_line_fast_path_matches_the_chunker(payload: str, extra: int) -> None:
    """One-line buffered payloads take a direct encode; the bytes equal the template path's."""
    env = envelope.ToolCall(agent=AGENT, final=True, id="toolu_1", name="search", delta=payload)
    bound = max(len(encode(env)) + extra, len(encode(msgspec.structs.replace(env, final=False, delta=""))) + 6)
    got = Emitter(AGENT, bound).buffered("tool_call", payload, id="toolu_1", name="search")
    assert got == chunk(env, bound)
