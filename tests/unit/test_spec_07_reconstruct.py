"""Spec §7 and §8: routing by (agent, type), block boundaries, images, citations, [DONE]."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from envelope import (
    DecodeError,
    Emitter,
    Reconstructor,
    SequenceError,
    ValidationError,
    reconstruct,
)
from streams import Spec, emit, expected_agent, fixed_part, ident, specs


@st.composite
def agent_streams(draw: st.DrawFn) -> tuple[dict[str, list[Spec]], int]:
    agents = draw(st.lists(ident, min_size=1, max_size=4, unique=True))
    ids = draw(st.lists(ident, min_size=1, max_size=3))
    names = draw(st.lists(ident, min_size=len(ids), max_size=len(ids)))
    plan = {a: draw(st.lists(specs(ids, names), max_size=6)) for a in agents}
    floor = max([fixed_part(a, s) for a, ss in plan.items() for s in ss] + [60]) + 6
    bound = draw(st.integers(floor, floor + 600))
    return plan, bound


@given(streams=agent_streams(), data=st.data())
@example(streams=({"0": [Spec("tool_call", ("NaN",), id="0", name="0")]}, 83), data=None)
@example(streams=({"0": [Spec("error", ("[1e400]",))]}, 83), data=None)
@example(streams=({"0": [Spec("meta_files", ('"\\ud800"',))]}, 83), data=None)
def test_spec_07_1_any_interleaving_rebuilds_every_agent(
    streams: tuple[dict[str, list[Spec]], int], data: st.DataObject | None
) -> None:
    """[7.1-a] blocks route by (agent, type): any interleaving of agents rebuilds each one's blocks.

    [8.3-a] agents interleave at envelope granularity on one stream.
    Also: [6.1-a] every chunkable line is within the bound and parses with plain json.loads.
    """
    plan, bound = streams
    queues: dict[str, list[bytes]] = {}
    emitters = {agent: Emitter(agent, bound) for agent in plan}
    for agent, blocks in plan.items():
        queues[agent] = [line for spec in blocks for line in emit(emitters[agent], spec)]
    merged: list[bytes] = []
    live = [a for a in queues if queues[a]]
    while live:
        agent = live[0] if data is None else data.draw(st.sampled_from(live))
        merged.append(queues[agent].pop(0))
        live = [a for a in live if queues[a]]
    for line in merged:
        obj = json.loads(line)
        if obj["type"] not in ("citation", "tool_result_image"):
            assert len(line) <= bound
    assert all(r.type in ("citation", "tool_result_image") for em in emitters.values() for r in em.oversize)
    got = reconstruct([*merged, b"[DONE]"]).to_dict()
    assert got["done"] is True
    want = {agent: expected_agent(blocks) for agent, blocks in plan.items() if blocks}
    assert {a: v["blocks"] for a, v in got["agents"].items()} == want


AGENT = "abc-123"


def _lines(*objs: dict[str, object]) -> list[str]:
    return [json.dumps(o) for o in objs]


def _env(type: str, final: bool, delta: str = "", **extra: object) -> dict[str, object]:
    return {"type": type, "agent": AGENT, "final": final, "delta": delta, **extra}


def test_spec_07_2_transcript_mid_block_and_close() -> None:
    """[7.2-a] a block is visible while open, incomplete; close() names the blocks left open."""
    rec = Reconstructor()
    rec.feed(_lines(_env("text", False, "Hel"))[0])
    rec.feed(_lines(_env("tool_call", False, '{"a":', id="t1", name="calc"))[0])
    mid = rec.transcript().to_dict()["agents"][AGENT]["blocks"]
    assert mid == [
        {"type": "text", "complete": False, "content": "Hel", "citations": []},
        {"type": "tool_call", "complete": False, "id": "t1", "name": "calc", "input": '{"a":'},
    ]
    rec.feed(_lines(_env("text", False, "lo"))[0])
    assert rec.close() == [(AGENT, "text"), (AGENT, "tool_call")]
    assert rec.transcript().agents[AGENT][0].content == "Hello"
    assert rec.done is False


def test_spec_07_2_final_opens_a_new_block_next_time() -> None:
    """[7.2-b] a final line on an idle key opens and closes a block; [7.2-c] the next line opens another."""
    t = reconstruct(_lines(_env("text", True, "a"), _env("text", True, "b"), _env("thinking", False, "c")))
    blocks = t.agents[AGENT]
    assert [(b.type, b.content, b.complete) for b in blocks] == [
        ("text", "a", True),
        ("text", "b", True),
        ("thinking", "c", False),
    ]


def test_spec_07_2_id_change_inside_open_block_is_refused() -> None:
    """[7.2-d] a buffered block keeps its id across its lines."""
    rec = Reconstructor()
    rec.feed(_lines(_env("tool_result", False, "x", id="a", name="n"))[0])
    with pytest.raises(SequenceError, match="differs from the open block's id") as info:
        rec.feed(_lines(_env("tool_result", True, "y", id="b", name="n"))[0])
    assert info.value.position.index == 1
    assert info.value.key == (AGENT, "tool_result")


def test_spec_07_3_image_rules() -> None:
    """[7.3-a] an image needs an open tool_result of its agent; [7.3-b] with the same id."""
    with pytest.raises(SequenceError, match="no open tool_result"):
        reconstruct(_lines(_env("tool_result_image", False, id="t", name="n", src="s", media_type="image/png")))
    with pytest.raises(SequenceError, match="differs from the open tool_result"):
        reconstruct(
            _lines(
                _env("tool_result", False, "x", id="t", name="n"),
                _env("tool_result_image", False, id="u", name="n", src="s", media_type="image/png"),
            )
        )
    with pytest.raises(ValidationError, match="needs src and media_type"):
        reconstruct(_lines(_env("tool_result", False, "x", id="t", name="n"), _env("tool_result_image", False, id="t")))


def test_spec_07_4_citation_rules() -> None:
    """[7.4-a] citations need a completed text block of their agent; they attach to the latest."""
    with pytest.raises(SequenceError, match="no completed text block"):
        reconstruct(_lines(_env("citation", True, "c", citation_type="char_location")))
    t = reconstruct(
        _lines(
            _env("text", True, "one"),
            _env("text", False, "two"),
            _env("text", True),
            _env("citation", False, "c1", citation_type="char_location", document_index=0),
            _env("citation", True, "c2", citation_type="page_location", start_page_number=2),
            _env("citation", True, "c3", citation_type="char_location"),
        )
    ).to_dict()
    blocks = t["agents"][AGENT]["blocks"]
    assert blocks[0]["citations"] == []
    assert blocks[1]["citations"] == [
        {"cited_text": "c1", "citation_type": "char_location", "document_index": 0},
        {"cited_text": "c2", "citation_type": "page_location", "start_page_number": 2},
        {"cited_text": "c3", "citation_type": "char_location"},
    ]
    with pytest.raises(ValidationError, match="citation_type"):
        reconstruct(_lines(_env("text", True, "x"), _env("citation", True, "c")))


def test_spec_07_5_payloads_parse_or_stay_raw() -> None:
    """[7.5-a] JSON payloads are parsed when complete JSON, else given as the raw string."""
    t = reconstruct(
        _lines(
            _env("meta_init", True, '{"format":"json"}'),
            _env("error", True, "not json"),
            _env("tool_call", True, "[1, 2", id="t", name="n"),
        )
    ).to_dict()
    assert [b.get("data", b.get("input")) for b in t["agents"][AGENT]["blocks"]] == [
        {"format": "json"},
        "not json",
        "[1, 2",
    ]


def test_spec_08_2_done_and_after() -> None:
    """[8.2-a] nothing may follow [DONE]."""
    rec = Reconstructor()
    rec.feed("[DONE]")
    assert rec.done
    with pytest.raises(SequenceError, match=r"after \[DONE\]"):
        rec.feed(_lines(_env("text", True))[0])


def test_lenient_about_extras_strict_about_base_fields() -> None:
    """The reconstructor ignores unknown extras but refuses broken base fields, with positions."""
    t = reconstruct(['{"type":"text","agent":"a","final":true,"delta":"x","future_field":1}'])
    assert t.agents["a"][0].content == "x"
    with pytest.raises(ValidationError, match="expected a boolean, got a string") as info:
        reconstruct(['{"type":"text","agent":"a","final":"yes","delta":""}'])
    assert info.value.field == "$.final"
    with pytest.raises(ValidationError, match="missing required field") as info:
        reconstruct(['{"type":"text","agent":"a","final":true}'])
    assert info.value.field == "$.delta"
    with pytest.raises(ValidationError, match="unknown envelope type 'texx'"):
        reconstruct(['{"type":"texx","agent":"a","final":true,"delta":""}'])
    with pytest.raises(DecodeError, match="not JSON") as broken:
        reconstruct(['{"type":'])
    assert broken.value.position.index == 0


def test_limits_on_block_size_and_open_blocks() -> None:
    rec = Reconstructor(max_block_bytes=5)
    rec.feed(_lines(_env("text", False, "abc"))[0])
    with pytest.raises(DecodeError, match="max_block_bytes=5"):
        rec.feed(_lines(_env("text", False, "def"))[0])
    rec = Reconstructor(max_open_blocks=2)
    rec.feed(_lines(_env("text", False, "a"))[0])
    rec.feed(_lines(_env("thinking", False, "a"))[0])
    with pytest.raises(DecodeError, match="max_open_blocks=2"):
        rec.feed(_lines(_env("tool_call", False, "a", id="i", name="n"))[0])


def _discard(n: object, **extra: object) -> str:
    payload = {"type": "attempt_discarded", "discard_blocks": n, "message": "overloaded", **extra}
    return json.dumps(_env("error", True, json.dumps(payload)))


def test_spec_07_7_discarded_attempt_removes_the_blocks_before_it() -> None:
    """[7.7-a] the n blocks before the signal go (with their citations), the signal stays, other agents stay."""
    other = {"type": "text", "agent": "other", "final": True, "delta": "kept"}
    lines = [
        *_lines(_env("meta_init", True, '{"format":"json"}')),
        *_lines(_env("text", True, "first answer")),
        *_lines(_env("thinking", False, "half a tho")),
        json.dumps(other),
        *_lines(_env("thinking", True)),
        *_lines(_env("text", True, "half an ans")),
        *_lines(_env("citation", True, "half", citation_type="char_location")),
        _discard(2, retrying=True),
        *_lines(_env("thinking", True, "a whole thought")),
        *_lines(_env("text", True, "a whole answer")),
        *_lines(_env("citation", True, "whole", citation_type="char_location")),
    ]
    t = reconstruct(lines).to_dict()
    mine = t["agents"][AGENT]["blocks"]
    assert [(b["type"], b.get("content")) for b in mine] == [
        ("meta_init", None),
        ("text", "first answer"),
        ("error", None),
        ("thinking", "a whole thought"),
        ("text", "a whole answer"),
    ]
    assert mine[2]["data"]["type"] == "attempt_discarded"
    assert [c["cited_text"] for c in mine[4]["citations"]] == ["whole"]
    assert t["agents"]["other"]["blocks"] == [{"type": "text", "complete": True, "content": "kept", "citations": []}]


def test_spec_07_7_citations_after_a_discard_attach_to_the_last_remaining_text() -> None:
    """[7.7-a] after a discard, a citation attaches to the last text block that remains."""
    lines = [
        *_lines(_env("text", True, "kept")),
        *_lines(_env("text", True, "dropped")),
        _discard(1),
        *_lines(_env("citation", True, "c", citation_type="char_location")),
    ]
    blocks = reconstruct(lines).to_dict()["agents"][AGENT]["blocks"]
    assert blocks[0]["citations"] == [{"cited_text": "c", "citation_type": "char_location"}]
    with pytest.raises(SequenceError, match="no completed text block"):
        reconstruct(
            [*_lines(_env("text", True, "only")), _discard(1), *_lines(_env("citation", True, "c", citation_type="x"))]
        )


def test_spec_07_7_bad_discards_are_sequence_errors() -> None:
    """[7.7-b] more blocks than precede it, an open block, or a bad count: sequence errors."""
    with pytest.raises(SequenceError, match="only 1 precede it") as info:
        reconstruct([*_lines(_env("text", True, "a")), _discard(2)])
    assert info.value.section == "7.7-b"
    with pytest.raises(SequenceError, match="still open"):
        reconstruct([*_lines(_env("text", True, "a"), _env("thinking", False, "b")), _discard(1)])
    for bad in (-1, "2", True, 1.5):
        with pytest.raises(SequenceError, match="non-negative integer"):
            reconstruct([*_lines(_env("text", True, "a")), _discard(bad)])
    # other error payloads are ordinary errors
    plain = reconstruct(_lines(_env("error", True, '{"type":"overloaded_error","discard_blocks":1}')))
    assert len(plain.agents[AGENT]) == 1
    assert reconstruct([_discard(0)]).agents[AGENT][0].type == "error"
