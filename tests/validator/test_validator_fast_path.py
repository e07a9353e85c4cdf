"""The stream validator's fast path finds exactly what the line-by-line path finds.

``StreamValidator.feed`` hands the complete lines of a chunk to the reader in one call
when none of them can make the reader raise or the SSE line checks speak, and falls back
to one physical line at a time otherwise (``_feed_by_line``, the reference path, which
restarts the reader after unreadable input). These properties feed the same bytes, cut
the same way, through both and compare the whole violation lists: codes, lines, offsets,
columns and messages, in order. Inputs are valid streams (SSE and JSON lines), the same
mutated at the envelope level, SSE lines the checks report or ignore spliced in at line
boundaries (named events, unknown fields, comments, ids, CR and CRLF line ends, a BOM,
invalid UTF-8, several data lines per event), and arbitrary bytes, with reader caps small
enough to make the reader raise and large enough to let whole chunks through.

The whole-span path checks its lines with ``Validator``'s batch loop (``feed_many`` /
``_run``), which inlines the common line and hands any other to ``feed``'s path. The
second half compares ``feed_many`` with ``feed`` line by line, on the same valid and
mutated streams with envelope lines spliced in (one for each condition the loop must
hand over: ``[DONE]``, non-JSON, a new agent, a changed id, a limit, ...), under small
bounds, as ``RawLine`` lists and as ``StreamReader.feed_batch`` batches cut anywhere:
the violations and the validator's state after every batch must be the same.
"""

from __future__ import annotations

import itertools
import json
from typing import Any, TypeVar

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from envelope import DecodeError, RawLine, StreamReader, StreamValidator, Validator, Violation
from envelope._limits import DEFAULT_MAX_LINE_BYTES
from validator._streams import env, meta_final, meta_init, mutate
from validator.test_validator_robustness import MUTATIONS, as_jsonl, as_sse, chunks, valid_lines

T = TypeVar("T")

PROFILES = st.sampled_from(["default", "seed"])
CAPS = st.sampled_from([64, 200, 1000, 5000, DEFAULT_MAX_LINE_BYTES])

#: Lines spliced into a capture at line boundaries: reported (W112, W113, E100, E109,
#: E111), ignored (comments, ids, retry, ``event: message``), and odd line ends.
SPLICES = st.sampled_from(
    [
        b"event: tool\n",
        b"event: message\n",
        b"event:\n",
        b"id: 7\n",
        b"id: 8\n",
        b"id: r:9\n",
        b"id: r:10\n",
        b"id:\n",
        b"id: a\x00b\n",
        b"retry: 10\n",
        b": keepalive\n",
        b"foo: bar\n",
        b"datax: {}\n",
        b"data\n",
        b"data: {}\n",
        b"data: [DONE]\n\n",
        b"\n",
        b"\r\n",
        b"\r",
        b"\xef\xbb\xbf",
        b"data: \xff\xfe\n",
        b"\xc3\n",
        b": \xff comment\n",
        b": comment\revent: hidden\n",
        b": comment\rfoo: hidden\n",
        b"x" * 300 + b"\n",
        b"data: " + b"y" * 1200 + b"\n",
        b"\revent: named\n",
    ]
)


def by_line(data: bytes, cuts: list[int], cap: int) -> list[Violation]:
    """The reference: every chunk through the line-by-line path."""
    checker = StreamValidator(max_line_bytes=cap)
    found: list[Violation] = []
    for piece in chunks(data, cuts):
        checker._feed_by_line(piece, found)
    return found + checker.close()


def fast(data: bytes, cuts: list[int], cap: int) -> list[Violation]:
    checker = StreamValidator(max_line_bytes=cap)
    found: list[Violation] = []
    for piece in chunks(data, cuts):
        found += checker.feed(piece)
    return found + checker.close()


def splice(data: bytes, inserts: list[tuple[int, bytes]]) -> bytes:
    """Insert each splice after the ``n``-th LF of ``data`` (modulo their number; 0: at the start)."""
    ends = [0] + [i + 1 for i, b in enumerate(data) if b == 0x0A]
    for n, extra in sorted(inserts, key=lambda x: -(x[0] % len(ends))):
        at = ends[n % len(ends)]
        data = data[:at] + extra + data[at:]
    return data


@given(valid_lines(), st.booleans(), st.lists(st.integers(0, 10_000), max_size=5), CAPS)
def test_fast_path_equals_line_by_line_on_valid_streams(
    lines: list[bytes], sse: bool, cuts: list[int], cap: int
) -> None:
    data = as_sse(lines) if sse else as_jsonl(lines)
    assert fast(data, cuts, cap) == by_line(data, cuts, cap)


@given(
    valid_lines(),
    st.booleans(),
    st.lists(st.tuples(MUTATIONS, st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    st.lists(st.tuples(st.integers(0, 10_000), SPLICES), max_size=6),
    st.sampled_from(["lf", "crlf", "cr"]),
    st.lists(st.integers(0, 10_000), max_size=5),
    CAPS,
)
@example([b'{"type":"text","agent":"a","final":true,"delta":""}'] * 3, True, [], [(2, b"event: tool\n")], "lf", [], 64)
@example([b'{"type":"text","agent":"a","final":true,"delta":""}'] * 3, True, [], [(2, b"\xc3\n")], "lf", [], 1000)
@example([b'{"type":"text","agent":"a","final":true,"delta":""}'] * 4, True, [], [(3, b"data\n")] * 3, "lf", [], 64)
def test_fast_path_equals_line_by_line_on_damaged_streams(
    lines: list[bytes],
    sse: bool,
    mutations: list[tuple[str, int, int]],
    inserts: list[tuple[int, bytes]],
    ends: str,
    cuts: list[int],
    cap: int,
) -> None:
    lines = mutate(lines, mutations)
    data = b"".join(b"data: " + x + b"\n\n" for x in lines) if sse else b"".join(x + b"\n" for x in lines)
    data = splice(data, inserts)
    if ends == "crlf":
        data = data.replace(b"\n", b"\r\n")
    elif ends == "cr":
        data = data.replace(b"\n", b"\r")
    assert fast(data, cuts, cap) == by_line(data, cuts, cap)


@given(st.binary(max_size=1200), st.lists(st.integers(0, 10_000), max_size=6), CAPS)
@example(b"data: {}\n\n\xff\n\ndata: {}\n\n", [], 64)
@example(b"data: x\n" * 20 + b"\n", [], 64)
# A span with an event of several data lines (E111) and one of a single line.
@example(b"data: {}\n\ndata: a\ndata: b\n\ndata: {}\n\n", [], DEFAULT_MAX_LINE_BYTES)
# A span opening with a blank line: the one after the first line goes alone, a second stays.
@example(b"data: {}\n\n\ndata: {}\n", [], DEFAULT_MAX_LINE_BYTES)
# A comment ended by a lone CR: the SSE line check reads the line after it (W113).
@example(b"data: {}\n\n: c\revent: foo\n\ndata: {}\n\n", [], DEFAULT_MAX_LINE_BYTES)
# An event's data over the cap, though each line is under it: the lines before the cut
# are in the reader already, the one that overflows comes in a span that could go whole.
# The same, with the event's first lines in an earlier span that could go whole: the
# bound must count from the blank line before them, not from the end of that span.
@example(
    b"data: {}\n\n" + b"data: " + b"a" * 400 + b"\n" + b"data: " + b"b" * 400 + b"\n"
    b": c\n" + b"data: " + b"c" * 300 + b"\n\n",
    [824],
    1000,
)
@example(
    b"data: " + b"a" * 600 + b"\n" + b"data: " + b"b" * 300 + b"\n" + b"data: " + b"c" * 150 + b"\n\n", [607], 1000
)
def test_fast_path_equals_line_by_line_on_arbitrary_bytes(data: bytes, cuts: list[int], cap: int) -> None:
    assert fast(data, cuts, cap) == by_line(data, cuts, cap)


def test_the_fast_path_is_taken() -> None:
    """A clean capture in large chunks goes through ``_whole`` (so the properties test it)."""
    lines = [b'{"type":"text","agent":"a","final":false,"delta":"x"}'] * 50
    data = as_sse(lines)
    calls: list[int] = []

    class Counting(StreamValidator):
        def _whole(self, lines_bytes: bytes, out: list[Violation]) -> None:
            calls.append(len(lines_bytes))
            super()._whole(lines_bytes, out)

    checker = Counting()
    found = checker.feed(data) + checker.close()
    assert calls
    assert sum(calls) > len(data) // 2
    assert found == by_line(data, [], DEFAULT_MAX_LINE_BYTES)


def test_line_checks_after_a_base_field_fault() -> None:
    """A line that misses the common case (here: a field its type does not allow) still gets
    the later line checks: the bound (E107), the streamed final marker (E121), the image's (E124)."""
    long_line = '{"type":"text","agent":"a","final":false,"delta":"' + "x" * 3000 + '","extra":1}'
    marker = '{"type":"text","agent":"a","final":true,"delta":"late","extra":1}'
    image = (
        '{"type":"tool_result_image","agent":"a","final":true,"id":"t","name":"n",'
        '"src":"s","media_type":"image/png","delta":"","extra":1}'
    )
    found = [v.code for line in (long_line, marker, image) for v in Validator().feed(line)]
    assert found == ["E105", "E107", "W163", "E105", "E121", "W163", "E105", "E124", "W163", "E122"]


# -- Validator.feed_many: the batch loop against feed, line by line ----------------------

#: Envelope lines spliced in between the valid ones: each fails one condition of the batch
#: loop's common case (so ``feed``'s path must take it) or passes them all in an odd way.
#: Agents ``a1`` and ``b2`` are those of ``valid_lines``; ``c3`` is new.
LINE_SPLICES = st.sampled_from(
    [
        "[DONE]",
        "",
        "not json",
        "<text>legacy</text>",
        "[1, 2]",
        '"a string"',
        env("text", False, "hi", "a1"),
        env("text", True, "", "a1"),
        env("text", True, "late delta", "a1"),  # E121
        env("thinking", False, "hmm", "b2"),
        env("thinking", True, "", "b2"),
        env("text", False, "x" * 400, "a1"),  # over small bounds: E107
        env("text", False, "new agent", "c3"),  # W163
        env(
            "meta_init", True, json.dumps({"format": "json", "user_query": "q", "agent_uuid": "a1", "model": "m"}), "a1"
        ),
        env("meta_init", False, '{"format":', "b2"),
        env("meta_final", False, '{"stop_reason":"end_turn",', "a1"),
        env("meta_final", True, '"total_steps":1}', "a1"),
        env("meta_final", True, json.dumps({"stop_reason": "end_turn", "total_steps": 1}), "b2"),
        env("tool_call", False, '{"q":', "a1", id="t0", name="f"),
        env("tool_call", True, '"x"}', "a1", id="t0", name="f"),
        env("tool_call", False, '{"q":1}', "a1", id="t0", name="g"),  # E127 when t0 is open
        env("tool_call", True, "", "a1", id="zz", name="f"),
        env("tool_call", False, "{}", "a1", id=7, name="f"),  # E106
        env("tool_call", False, "{}", "a1", name="f"),  # E106
        env("server_tool_call", False, "{}", "b2", id="s0", name="web_search"),
        env("server_tool_call", True, "", "b2", id="s0", name="web_search"),
        env("tool_result", False, "out", "a1", id="t0", name="f"),
        env("tool_result", True, "", "a1", id="t0", name="f"),
        env("tool_result", False, "out", "a1", id="nope", name="f"),  # W165
        env("server_tool_result", True, "r", "b2", id="s0", name="web_search_tool_result"),
        env("citation", True, "", "a1", citation_type="char_location", cited_text="c"),
        env("tool_result_image", False, "", "a1", id="t0", name="f", src="s", media_type="image/png"),
        env("awaiting_frontend_tools", True, "[]", "a1"),
        env("meta_files", False, '{"files": []', "b2"),
        env("meta_files", True, "}", "b2"),
        env("error", True, '{"type": "x", "message": "y"}', "a1"),
        env("error", False, "[", "a1"),
        # spec §4.15: a compaction, one-line or chunked (a block opening while it is open: E130)
        env("meta_compaction", True, '{"trigger":"auto","pre_tokens":5}', "a1"),
        env("meta_compaction", False, '{"trigger":"manual",', "b2"),
        env("meta_compaction", True, '"pre_tokens":-1}', "b2"),  # E141 when joined
        env("text", False, "extra field", "a1", extra=1),  # E105
        env("nope", False, "", "a1"),  # E104
        '{"type":"text","agent":null,"final":false,"delta":""}',  # E103
        '{"type":"text","agent":"a1","final":"no","delta":""}',
        '{"type":"text","agent":"a1","final":false,"delta":3}',
        '{"type":7,"agent":"a1","final":false,"delta":""}',
        '{"agent":"a1","final":false,"delta":""}',
        '{"typ\\u0065":"text","agent":"a1","final":false,"delta":"escaped key"}',
        '{"type":"thinking","type":"text","agent":"a1","final":false,"delta":"duplicate key"}',
        '{"type":"text","agent":"a1","final":false,"delta":"escaped \\ud800 surrogate"}',
        '{"type":"tool_call","agent":"a1","final":false,"id":null,"name":"f","delta":"{}"}',
        env("text", False, "with an id", "a1", id="t0"),  # E105
        env("thinking", True, "", "b2", name="n"),  # E105
        env("text", False, "caf\u00e9 \u6f22\u5b57 \U0001f600", "a1"),
        env("text", False, "lone \ud800 surrogate", "a1"),  # E100 (str only)
    ]
)
MAX_BYTES = st.sampled_from([120, 300, 2048])
MAX_PAYLOAD = st.sampled_from([4, 40, 1000, DEFAULT_MAX_LINE_BYTES])


def envelope_lines(
    lines: list[bytes], mutations: list[tuple[str, int, int]], inserts: list[tuple[int, str]]
) -> list[str]:
    """Valid lines, damaged (as text, invalid UTF-8 replaced), with envelope lines spliced in."""
    texts = [x.decode("utf-8", "replace") for x in mutate(lines, mutations)]
    for at, extra in sorted(inserts, key=lambda x: -x[0]):
        texts.insert(at % (len(texts) + 1), extra)
    return texts


def raw_lines(texts: list[str]) -> list[RawLine]:
    """Each line as ``StreamReader`` would number it in an SSE capture (``data: `` + line + blank line)."""
    out: list[RawLine] = []
    offset = 0
    for i, text in enumerate(texts):
        out.append(RawLine(text, 2 * i + 1, offset))
        offset += len(text.encode("utf-8", "surrogatepass")) + 8
    return out


def parts(items: list[T], cuts: list[int]) -> list[list[T]]:
    points = sorted({c % (len(items) + 1) for c in cuts} | {0, len(items)})
    return [items[a:b] for a, b in itertools.pairwise(points)]


def state(v: Validator) -> tuple[object, ...]:
    """What a validator holds besides its findings (the rest shows in ``close()``'s)."""
    agents = {
        name: (
            st_.meta_init,
            st_.final_done,
            st_.after_final_reported,
            st_.has_text,
            st_.citations_closed,
            list(st_.calls),
            list(st_.server_calls),
            {k: (b.line, b.offset, b.id, b.name, b.parts, b.size, b.unchecked) for k, b in st_.open.items()},
        )
        for name, st_ in v._agents.items()
    }
    return (agents, v._count, v._last, v._done, v._done_reported, v._open_count, v.held_bytes)


def line_by_line(
    batches: list[list[RawLine]] | list[list[bytes | str]], **kw: Any
) -> tuple[list[Violation], list[object]]:
    v = Validator(**kw)
    found: list[Violation] = []
    states: list[object] = []
    for batch in batches:
        for line in batch:
            found += v.feed(line)
        states.append(state(v))
    return found + v.close(), states


def many(batches: list[list[RawLine]] | list[list[bytes | str]], **kw: Any) -> tuple[list[Violation], list[object]]:
    v = Validator(**kw)
    found: list[Violation] = []
    states: list[object] = []
    for batch in batches:
        found += v.feed_many(batch)
        states.append(state(v))
    return found + v.close(), states


@given(
    valid_lines(),
    st.lists(st.tuples(MUTATIONS, st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
    st.lists(st.tuples(st.integers(0, 10_000), LINE_SPLICES), max_size=8),
    st.lists(st.integers(0, 10_000), max_size=5),
    MAX_BYTES,
    MAX_PAYLOAD,
    PROFILES,
)
@example([], [], [(0, "[DONE]"), (1, env("text", False, "after", "a1"))], [], 2048, 1000, "default")
@example(
    [meta_init("a1").encode()], [], [(1, env("tool_call", False, "{}", "a1", name="f"))], [], 2048, 1000, "default"
)
@example([meta_init("a1").encode()], [], [(1, meta_init("a1"))], [], 2048, 1000, "default")
@example(
    [meta_init("a1").encode()],
    [],
    [(1, env("meta_files", False, '{"files": [' + " " * 50, "a1"))],
    [],
    2048,
    40,
    "default",
)
@example([meta_init("a1").encode()], [], [(1, env("meta_files", False, '{"files": [', "a1"))], [], 2048, 1000, "seed")
@example(  # a meta_init after [DONE] starts the next response inside the batch loop (spec §8.5)
    [
        env("meta_init", False, '{"format": "json", ', "a1").encode(),
        meta_init("a1").encode(),
        meta_final("a1").encode(),
    ],
    [],
    [(0, "[DONE]"), (0, env("text", False, "hi", "a1"))],
    [],
    120,
    4,
    "default",
)
def test_feed_many_equals_feed_on_raw_lines(
    lines: list[bytes],
    mutations: list[tuple[str, int, int]],
    inserts: list[tuple[int, str]],
    cuts: list[int],
    max_bytes: int,
    max_payload: int,
    profile: str,
) -> None:
    """Valid, damaged and spliced lines as ``RawLine`` lists, cut into batches anywhere."""
    batches = parts(raw_lines(envelope_lines(lines, mutations, inserts)), cuts)
    kw: dict[str, Any] = {"max_bytes": max_bytes, "max_payload_bytes": max_payload, "profile": profile}
    assert many(batches, **kw) == line_by_line(batches, **kw)


@given(
    valid_lines(),
    st.lists(st.tuples(MUTATIONS, st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
    st.lists(st.tuples(st.integers(0, 10_000), LINE_SPLICES), max_size=8),
    st.lists(st.integers(0, 10_000), max_size=5),
    MAX_BYTES,
    MAX_PAYLOAD,
    PROFILES,
)
def test_feed_many_equals_feed_on_reader_batches(
    lines: list[bytes],
    mutations: list[tuple[str, int, int]],
    inserts: list[tuple[int, str]],
    cuts: list[int],
    max_bytes: int,
    max_payload: int,
    profile: str,
) -> None:
    """An SSE capture of those lines through ``StreamReader.feed_batch`` + ``feed_many``, in
    any chunks, against ``StreamReader.feed`` + ``feed`` per line (the batches hold bytes)."""
    texts = [t for t in envelope_lines(lines, mutations, inserts) if "\n" not in t and "\r" not in t]
    data = b"".join(b"data: " + t.encode("utf-8", "replace") + b"\n\n" for t in texts)
    kw: dict[str, Any] = {"max_bytes": max_bytes, "max_payload_bytes": max_payload, "profile": profile}
    fast_reader, slow_reader = StreamReader("sse"), StreamReader("sse")
    fast_v, slow_v = Validator(**kw), Validator(**kw)
    found_fast: list[Violation] = []
    found_slow: list[Violation] = []
    for piece in chunks(data, cuts):
        found_fast += fast_v.feed_many(fast_reader.feed_batch(piece))
        for raw in slow_reader.feed(piece):
            found_slow += slow_v.feed(raw)
        assert state(fast_v) == state(slow_v)
    assert fast_reader.close() == slow_reader.close() == []
    assert found_fast + fast_v.close() == found_slow + slow_v.close()


@given(st.lists(LINE_SPLICES | st.binary(max_size=60), max_size=12), st.lists(st.integers(0, 10_000), max_size=4))
def test_feed_many_equals_feed_on_plain_lines(items: list[str | bytes], cuts: list[int]) -> None:
    """Plain bytes and str lines (numbered as a JSON-lines file) take ``feed``'s path, in order."""
    batches = parts(items, cuts)
    assert many(batches) == line_by_line(batches)


def test_feed_many_takes_the_batch_loop() -> None:
    """On a clean capture, ``feed``'s own path sees only the lines the loop must hand it."""
    body = [env("text", False, f"part {i}", "a1") for i in range(40)] + [env("text", True, "", "a1")]
    lines = [meta_init("a1"), *body, meta_final("a1"), "[DONE]"]
    seen: list[int] = []

    class Counting(Validator):
        def _slow(self, line: bytes | str, at: tuple[int, int], out: list[Violation]) -> None:
            seen.append(at[0])
            super()._slow(line, at, out)

    raws = raw_lines(lines)
    checker = Counting()
    found = checker.feed_many(raws) + checker.close()
    assert found == []
    assert seen == [raws[0].line, raws[-1].line]  # the agent's first line, [DONE]
    assert many([raws]) == line_by_line([raws])


def test_stream_validator_takes_the_batch_loop() -> None:
    """``StreamValidator`` on a clean capture in 64 KiB reads: nearly every line goes through
    the batch loop (the lines that end or start a chunk go through ``feed``'s path)."""
    lines = [meta_init("a1").encode()] + [env("text", False, f"part {i}", "a1").encode() for i in range(3000)]
    data = as_sse([*lines, env("text", True, "", "a1").encode(), meta_final("a1").encode()])
    slow: list[int] = []

    class Counting(Validator):
        def _slow(self, line: bytes | str, at: tuple[int, int], out: list[Violation]) -> None:
            slow.append(at[0])
            super()._slow(line, at, out)

    checker = StreamValidator()
    checker.validator = Counting()  # type: ignore[misc]  # Final: swapped for the count only
    found: list[Violation] = []
    for at in range(0, len(data), 65536):
        found += checker.feed(data[at : at + 65536])
    found += checker.close()
    assert found == []
    assert len(slow) <= 2  # meta_init (the agent's first line) and [DONE]; the rest inline
    assert found == by_line(data, list(range(0, len(data), 65536)), DEFAULT_MAX_LINE_BYTES)


def test_feed_many_edges() -> None:
    """An empty batch changes nothing; a lone surrogate in a RawLine is E100; after close() it raises."""
    v = Validator()
    assert v.feed_many([]) == []
    assert v.feed_many(iter([])) == []
    (bad,) = v.feed_many([RawLine('{"type":"text","agent":"a","final":false,"delta":"\ud800"}', 3, 10)])
    assert (bad.code, bad.line, bad.offset) == ("E100", 3, 10)
    assert [x.code for x in v.close()] == ["W161"]
    with pytest.raises(DecodeError, match="after close"):
        v.feed_many([])
