"""Robustness: arbitrary bytes and mutated valid streams never make the validator, the
SSE reader or the reconstructor raise anything but the library's own errors; the
validator's verdict does not depend on how the bytes are chunked; its held state is
only the open blocks.

"Never hang" is shown by every example finishing: each step consumes input, and the
readers hold at most one capped line. No timing is asserted.
"""

from __future__ import annotations

import itertools
import json

from hypothesis import example, given
from hypothesis import strategies as st

from envelope import (
    Emitter,
    EnvelopeError,
    ImageRef,
    Reconstructor,
    SSEReader,
    StreamReader,
    StreamValidator,
    Validator,
    Violation,
    frame,
    validate,
)
from envelope._validator import CODES
from validator._streams import mutate

AGENTS = ("a1", "b2")
small_text = st.text(st.characters(codec="utf-8"), max_size=40)


@st.composite
def valid_lines(draw: st.DrawFn) -> list[bytes]:
    """A valid stream of one or two agents, from the codec's own Emitter (small bound)."""
    bound = draw(st.sampled_from([120, 300, 2048]))
    per_agent: list[list[bytes]] = []
    for agent in AGENTS[: draw(st.integers(1, 2))]:
        em = Emitter(agent, max_bytes=bound)
        meta = {"format": "json", "user_query": draw(small_text), "agent_uuid": agent, "model": "m"}
        lines = em.buffered("meta_init", json.dumps(meta))
        for i in range(draw(st.integers(0, 4))):
            kind = draw(st.sampled_from(["text", "thinking", "tool", "image", "server", "compaction"]))
            if kind in ("text", "thinking"):
                for part in draw(st.lists(small_text, max_size=3)):
                    lines += em.streamed(kind, part)  # type: ignore[arg-type]  # kind is text/thinking here
                lines.append(em.end(kind))  # type: ignore[arg-type]  # as above
            elif kind == "tool":
                lines += em.buffered("tool_call", json.dumps({"q": draw(small_text)}), id=f"t{i}", name="f")
                lines += em.tool_result(f"t{i}", "f", draw(small_text))
            elif kind == "image":
                lines += em.buffered("tool_call", "{}", id=f"t{i}", name="shot")
                lines += em.tool_result(
                    f"t{i}", "shot", "", [ImageRef(src="data:image/png;base64,AA==", media_type="image/png")]
                )
            elif kind == "compaction":  # spec §4.15: between the agent's blocks
                payload = {"trigger": "auto", "pre_tokens": i, "strategy": draw(small_text)}
                lines += em.buffered("meta_compaction", json.dumps(payload))
            else:
                lines += em.buffered("server_tool_call", "{}", id=f"s{i}", name="web_search")
                lines += em.buffered("server_tool_result", draw(small_text), id=f"s{i}", name="web_search_tool_result")
        lines += em.buffered("meta_final", json.dumps({"stop_reason": "end_turn", "total_steps": 1}))
        per_agent.append(lines)
    # interleave the agents, keeping each agent's order (spec §8.3)
    merged: list[bytes] = []
    while any(per_agent):
        pick = draw(st.sampled_from([i for i, x in enumerate(per_agent) if x]))
        merged.append(per_agent[pick].pop(0))
    return merged


def as_sse(lines: list[bytes]) -> bytes:
    return b"".join(frame(x) for x in lines) + b"data: [DONE]\n\n"


def as_jsonl(lines: list[bytes]) -> bytes:
    return b"".join(x + b"\n" for x in lines) + b"[DONE]\n"


def chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def run_validator(data: bytes, cuts: list[int], **kw: int) -> list[Violation]:
    checker = StreamValidator(**kw)  # type: ignore[arg-type]  # int limits only
    found: list[Violation] = []
    for piece in chunks(data, cuts):
        found += checker.feed(piece)
    found += checker.close()
    for v in found:
        assert v.code in CODES
        assert v.line >= 1
        assert 0 <= v.offset <= len(data)
    return found


def run_readers(data: bytes, cuts: list[int]) -> None:
    """The SSE reader and the reconstructor may refuse input, only with our errors."""
    reader = SSEReader(max_line_bytes=4096)
    try:
        for piece in chunks(data, cuts):
            reader.feed(piece)
        reader.close()
    except EnvelopeError:
        pass
    rebuilder = Reconstructor()
    lines = StreamReader(max_line_bytes=4096)
    try:
        for piece in chunks(data, cuts):
            for raw in lines.feed(piece):
                rebuilder.feed(raw)
        for raw in lines.close():
            rebuilder.feed(raw)
        rebuilder.close()
        rebuilder.transcript().to_dict()
    except EnvelopeError:
        pass


@given(st.binary(max_size=600), st.lists(st.integers(0, 10_000), max_size=6))
@example(b"data: \xff\r\rdata: x\n\n", [8])
@example(b"\r\n" * 3 + b'{"type":\r\x00', [])
@example(b'{"type":"text","agent":"a","final":true,"delta":"\\ud800"}\n', [])
def test_arbitrary_bytes(data: bytes, cuts: list[int]) -> None:
    run_validator(data, cuts, max_line_bytes=64)
    run_readers(data, cuts)


@given(st.binary(max_size=400), st.lists(st.integers(0, 10_000), max_size=6))
@example(b"data: \xff\r", [7])
@example(b"x\xff\r\ry\n\n\xff\r\n", [4])
def test_verdict_does_not_depend_on_chunking(data: bytes, cuts: list[int]) -> None:
    whole = [(v.code, v.line, v.offset) for v in run_validator(data, [], max_line_bytes=64)]
    split = [(v.code, v.line, v.offset) for v in run_validator(data, cuts, max_line_bytes=64)]
    assert whole == split


@given(valid_lines(), st.booleans(), st.lists(st.integers(0, 10_000), max_size=5))
def test_valid_streams_are_valid_at_any_split(lines: list[bytes], sse: bool, cuts: list[int]) -> None:
    data = as_sse(lines) if sse else as_jsonl(lines)
    found = run_validator(data, cuts)
    assert [v for v in found if v.code != "W108"] == []


@given(valid_lines())
def test_validator_holds_nothing_after_a_valid_stream(lines: list[bytes]) -> None:
    checker = Validator()
    peak_open = 0
    for line in lines:
        assert checker.feed(line) == []
        peak_open = max(peak_open, len(checker.open_blocks()))
        assert checker.held_bytes <= sum(len(x) for x in lines)
    assert checker.open_blocks() == []
    assert checker.held_bytes == 0
    assert peak_open <= 2 * len(AGENTS) * 3  # a few types open at once per agent, never the stream


MUTATIONS = st.sampled_from(["flip", "cut", "duplicate", "swap", "drop", "truncate"])


@given(
    valid_lines(),
    st.booleans(),
    st.lists(st.tuples(MUTATIONS, st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    st.lists(st.integers(0, 10_000), max_size=4),
)
def test_mutated_valid_streams(
    lines: list[bytes], sse: bool, mutations: list[tuple[str, int, int]], cuts: list[int]
) -> None:
    lines = mutate(lines, mutations)
    data = b"".join(x + b"\n" for x in lines) if not sse else b"".join(b"data: " + x + b"\n\n" for x in lines)
    run_validator(data, cuts)
    run_readers(data, cuts)
    list(validate(lines))


@given(st.lists(st.one_of(st.binary(max_size=80), st.text(max_size=80)), max_size=20))
def test_plain_line_validation_never_raises(lines: list[bytes | str]) -> None:
    for v in validate(lines):
        assert v.code in CODES


def test_benchmark_inputs_are_valid_streams() -> None:
    """Smoke test of the benchmark data: the generated stream is valid (so the benchmark measures a pass)."""
    from benchmarks.validate_data import sse_chunks, stream_lines

    assert list(validate(stream_lines(50_000))) == []
    checker = StreamValidator()
    found = [v for chunk in sse_chunks(50_000, chunk_size=1000) for v in checker.feed(chunk)]
    assert found + checker.close() == []
