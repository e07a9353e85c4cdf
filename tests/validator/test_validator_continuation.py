"""A continuation: the stream a server sends after ``Last-Event-ID`` (validation.md [V2.1-e]).

It starts after lines the validator never saw, so what lay before its first line is not
judged: its agents may have begun earlier (no W163), their calls and texts may be
earlier (no W165/W166/E126), and the first block of each type of such an agent may have
opened earlier (its payload, perhaps a tail, is not reported as E140; an image may join a
tool_result opened earlier, no E122). Everything it does hold is judged as usual.
(Issue 25 §4: ``envelope check`` with ``Last-Event-ID`` warned W163 on every such response.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envelope import CitationData, Emitter, ImageRef, StreamValidator, Violation, validate

from ._streams import A, B, env, meta_final, meta_init, text

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted((ROOT / "fixtures" / "golden").glob("*/envelopes.jsonl"))
CORPUS = sorted((ROOT / "fixtures" / "corpus").glob("json_scenario_*.jsonl"))


def rich_stream() -> list[bytes]:
    """Two interleaved agents, chunked payloads of every JSON kind, a result with an image,
    citations, server tools: a valid stream with every rule [V2.1-e] relaxes in play."""
    a, b = Emitter(A, max_bytes=90), Emitter(B, max_bytes=90)
    init = {"format": "json", "user_query": "q" * 30, "agent_uuid": A, "model": "m"}
    out: list[bytes] = [*a.buffered("meta_init", json.dumps(init))]
    out += b.buffered("meta_init", json.dumps({**init, "agent_uuid": B}))
    out += a.buffered("tool_call", json.dumps({"path": "x" * 80, "n": [1, 2, 3]}), id="toolu_1", name="read")
    out += b.streamed("text", "The other agent is thinking about a long answer. " * 3)
    image = ImageRef(src="https://example.test/i.png", media_type="image/png")
    out += a.tool_result("toolu_1", "read", "r" * 150, images=[image])
    out += [b.end("text")]
    out += a.streamed("text", "Cited words, long enough to span several lines of the small bound. " * 2)
    out += [a.end("text")]
    cite = CitationData(cited_text="Cited words", citation_type="char_location", document_index=0)
    out += a.citations([cite, cite])
    out += b.buffered("server_tool_call", json.dumps({"query": "w" * 60}), id="srvtoolu_1", name="web_search")
    out += b.buffered("server_tool_result", "found " * 20, id="srvtoolu_1", name="web_search_tool_result")
    final = json.dumps({"stop_reason": "end_turn", "total_steps": 2, "cumulative_usage": {"input_tokens": 1}})
    out += b.buffered("meta_final", final)
    out += a.buffered("meta_final", final)
    out.append(b"[DONE]")
    return out


def _found(lines: list[bytes] | list[str], start: int = 0, *, continuation: bool) -> list[tuple[str, int]]:
    return [(v.code, v.line + start) for v in validate(lines[start:], continuation=continuation)]


def _streams() -> list[tuple[str, list[bytes]]]:
    cases = [("rich", rich_stream())]
    for path in [*GOLDEN, *CORPUS]:
        lines = [line for line in path.read_bytes().splitlines() if line.strip()]
        cases.append((f"{path.parent.name}/{path.name}", lines))
    return cases


STREAMS = _streams()


def test_the_rich_stream_is_valid() -> None:
    assert list(validate(rich_stream())) == []


@pytest.mark.parametrize(("name", "lines"), STREAMS, ids=[name for name, _ in STREAMS])
def test_a_continuation_reports_nothing_the_whole_stream_does_not(name: str, lines: list[bytes]) -> None:
    """[V2.1-e] every suffix, judged as a continuation, finds a subset of the whole stream's findings."""
    whole = set(_found(lines, continuation=False))
    for start in range(1, len(lines)):
        found = _found(lines, start, continuation=True)
        extra = set(found) - whole
        assert not extra, f"{name} from line {start + 1}: {sorted(extra)}"
        # The batch path (StreamValidator's, feed_many's) finds the same as feed line by line.
        checker = StreamValidator("jsonl", continuation=True)
        batch = [*checker.feed(b"".join(line + b"\n" for line in lines[start:])), *checker.close()]
        assert [(v.code, v.line + start) for v in batch] == found


def test_without_the_flag_a_suffix_is_judged_as_a_whole_stream() -> None:
    """The same suffixes without ``continuation``: W163 and friends, as before (the flag matters)."""
    lines = rich_stream()
    codes = {code for start in range(1, len(lines)) for code, _ in _found(lines, start, continuation=False)}
    assert {"W163", "W165", "W166", "E126", "E122", "E140"} <= codes


def _codes(lines: list[str], *, continuation: bool = True) -> list[tuple[str, int]]:
    found: list[Violation] = list(validate(lines, continuation=continuation))
    return [(v.code, v.line) for v in found]


def test_what_the_continuation_holds_is_judged() -> None:
    """Faults inside the continuation are still found: E121, E162, E140 of a block it opened, E164."""
    tail = [
        env("text", True, "not empty", A),  # E121: a final marker with a delta, wherever the block began
        env("tool_call", False, '{"a": ', A, id="t1", name="f"),  # may be a tail: not judged (line 2-3)
        env("tool_call", True, "1}", A, id="t1", name="f"),
        env("tool_call", False, "{not json", A, id="t2", name="f"),  # opened here: judged (E140)
        env("tool_call", True, "", A, id="t2", name="f"),
        meta_init(A),  # E162: the agent's meta_init was before the continuation, or never came
        meta_final(A),
        env("text", True, "", A),  # E164
        "[DONE]",
    ]
    assert _codes(tail) == [("E121", 1), ("E140", 4), ("E162", 6), ("E164", 8)]


def test_an_agent_that_starts_in_the_continuation_is_judged_in_full() -> None:
    """An agent whose first line is its meta_init began inside the continuation: W165 and E126 apply."""
    tail = [
        *text("x", A),  # agent A carried over from before the cut: nothing to say
        meta_init(B),
        env("tool_result", True, "r", B, id="toolu_9", name="f"),  # W165: B's calls are all here
        Emitter(B).citations([CitationData(cited_text="c", citation_type="char_location")])[0].decode(),  # E126
        meta_final(B),
        meta_final(A),
        "[DONE]",
    ]
    assert _codes(tail) == [("W165", 4), ("E126", 5)]
    assert _codes(tail, continuation=False) == [("W163", 1), ("W165", 4), ("E126", 5)]


def test_the_next_response_of_a_recording_starts_at_its_start() -> None:
    """[V2.1-e] only the first response is a continuation; after [DONE] and a meta_init, rules apply (spec §8.5)."""
    tail = [*text("x", A), meta_final(A), "[DONE]", meta_init(A), env("tool_result", True, "r", A, id="t", name="f")]
    tail += [meta_final(A), "[DONE]"]
    assert _codes(tail) == [("W165", 6)]
