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
"""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from envelope import StreamValidator, Validator, Violation
from envelope._limits import DEFAULT_MAX_LINE_BYTES
from validator.test_validator_robustness import MUTATIONS, as_jsonl, as_sse, chunks, valid_lines

CAPS = st.sampled_from([64, 200, 1000, 5000, DEFAULT_MAX_LINE_BYTES])

#: Lines spliced into a capture at line boundaries: reported (W112, W113, E100, E109,
#: E111), ignored (comments, ids, retry, ``event: message``), and odd line ends.
SPLICES = st.sampled_from(
    [
        b"event: tool\n",
        b"event: message\n",
        b"event:\n",
        b"id: 7\n",
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


def mutate(lines: list[bytes], mutations: list[tuple[str, int, int]]) -> list[bytes]:
    """Envelope-level damage, as in the robustness tests: flipped bits, cut, repeated, moved lines."""
    lines = list(lines)
    for kind, at, byte in mutations:
        if not lines:
            break
        i = at % len(lines)
        line = lines[i]
        if kind == "flip" and line:
            j = byte % len(line)
            lines[i] = line[:j] + bytes([line[j] ^ (1 << (byte % 8))]) + line[j + 1 :]
        elif kind == "cut" and line:
            j = byte % len(line)
            lines[i : i + 1] = [line[:j], line[j:]]
        elif kind == "duplicate":
            lines.insert(i, line)
        elif kind == "swap" and len(lines) > 1:
            k = byte % len(lines)
            lines[i], lines[k] = lines[k], lines[i]
        elif kind == "drop":
            del lines[i]
        elif kind == "truncate":
            lines = lines[:i]
    return lines


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
