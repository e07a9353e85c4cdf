"""The validator, compiled and pure, finds the same in every stream (spec VF1-c).

``valid_outcomes.py`` checks the recordings under ``fixtures/`` and ``spec/conformance/`` and
streams drawn under fixed seeds around ``_cvalid.take_run``'s test (the ordinary lines it
counts, and the near misses it must leave to the Python path); both builds must print the
same findings, byte for byte. The properties below draw broken streams with hypothesis
under fixed seeds and compare, in this process, the batch loop with and without the C pass
(in the pure build both sides are the Python path and the property compares it with itself).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from envelope import StreamValidator, Validator, Violation, _speedups
from envelope import _validator_lines as lines_module
from envelope._validator_rules import _OTHER_SSE_LINE
from envelope._validator_stream import _scan_span
from validator._streams import meta_final, meta_init

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

SCRIPT = str(Path(__file__).with_name("valid_outcomes.py"))


def _run(pure: str) -> str:
    env = {**os.environ, "ENVELOPE_PURE": pure}
    done = subprocess.run([sys.executable, SCRIPT], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_spec_vf1_c_compiled_and_pure_find_the_same() -> None:
    """[VF1-c] Every recording and every drawn stream: the same findings, the same bytes, in both builds.

    On a machine without a compiler both runs are pure and this compares a build with
    itself; CI requires the compiled build (``test_the_mode_is_the_one_this_run_asked_for``).
    """
    import msgspec

    pure = _run("1")
    compiled = _run("0")
    cases: dict[str, list[list[dict[str, object]]]] = msgspec.json.decode(pure)
    # The cases reach both sides: clean streams, and findings of many codes.
    codes = {f["code"] for case in cases.values() for way in case for f in way}
    assert {"E100", "E101", "E105", "E106", "E107", "E117", "E127", "E160", "E164", "W149"} <= codes
    assert sum(1 for case in cases.values() if not any(case)) >= 10
    assert len([name for name in cases if name.startswith(("fixtures/", "spec/"))]) > 100
    assert compiled == pure


@contextmanager
def _python_path_only() -> Iterator[None]:
    """The batch loop without the C pass (``_run`` reads ``_take_run`` at each call)."""
    saved = lines_module._take_run
    lines_module._take_run = None  # type: ignore[misc]  # Final: swapped for the comparison only
    try:
        yield
    finally:
        lines_module._take_run = saved  # type: ignore[misc]


AGENT = st.sampled_from(["a", "a", "b", 'q"uote', "\u03b2"])
GOOD = st.text(st.characters(codec="utf-8"), max_size=30).map(
    lambda s: json.dumps(s, ensure_ascii=False)[1:-1].encode()
)
#: Bodies of a delta string that take_run must leave: surrogate escapes, bad escapes, bytes that
#: are not UTF-8 (or encode a surrogate), a raw control, an unescaped quote or backslash.
BAD = st.sampled_from(
    [b"\\ud800", b"\\udc00x", b"\\uD83D\\uDE00", b"\\u12", b"\\q", b"\xff", b"\xed\xa0\x80", b"\x01", b'"', b"\\"]
)
STRING = st.one_of(GOOD, GOOD, GOOD, BAD)
OPEN_TYPES = st.sampled_from(["text", "thinking", "tool_result", "tool_call"])
CONTROL = st.sampled_from(
    [
        b"[DONE]",
        b'{"type":"meta_final","agent":"a","final":true,"delta":"{}"}',
        b'{"type":"meta_init","agent":"b","final":true,"delta":"{}"}',
    ]
)


@st.composite
def _line(draw: st.DrawFn) -> bytes:
    kind = draw(OPEN_TYPES)
    agent = draw(AGENT).replace('"', '\\"')
    final = draw(st.sampled_from([b"false", b"false", b"false", b"true"]))
    ids = b""
    if kind in ("tool_result", "tool_call"):
        ids = draw(st.sampled_from([b'"id":"t1","name":"n",', b'"id":"t2","name":"n",', b'"id":"t1",', b""]))
    body = b'"' + draw(STRING) + b'"'
    tail = draw(st.sampled_from([b"}", b"}", b"}", b"}", b" }", b',"x":1}', b"}}"]))
    return (
        b'{"type":"'
        + kind.encode()
        + b'","agent":"'
        + agent.encode()
        + b'","final":'
        + final
        + b","
        + ids
        + b'"delta":'
        + body
        + tail
    )


@st.composite
def _stream(draw: st.DrawFn) -> list[bytes]:
    """Chunks of blocks, with at most three control lines ([DONE], a meta_final, a meta_init) among them."""
    lines = draw(st.lists(_line(), max_size=60))
    for _ in range(draw(st.integers(0, 3))):
        lines.insert(draw(st.integers(0, len(lines))), draw(CONTROL))
    return lines


STREAMS = _stream()


HEAD = [b'{"type":"meta_init","agent":"%s","final":true,"delta":"{}"}' % a for a in (b"a", b"b")]


def _checked(lines: list[bytes], max_bytes: int, max_payload: int) -> list[Violation]:
    """The lines through the batch loop (``_run``, as ``StreamValidator`` feeds it: bytes), twice."""
    v = Validator(max_bytes=max_bytes, max_payload_bytes=max_payload)
    out: list[Violation] = []
    v._run([*HEAD, *lines], lambda k: (k + 1, 100 * k), out)
    v._run(lines, lambda k: (k + 1000, 100 * k), out)
    return out + v.close()


def _both(lines: list[bytes], max_bytes: int, max_payload: int) -> tuple[list[Violation], list[Violation]]:
    with_c = _checked(lines, max_bytes, max_payload)
    with _python_path_only():
        without = _checked(lines, max_bytes, max_payload)
    return with_c, without


@seed(43)
@settings(max_examples=150, deadline=None, database=None)
@given(STREAMS, st.sampled_from([90, 200, 16384]), st.sampled_from([10, 1 << 20]))
def test_spec_vf1_a_the_c_pass_finds_what_the_python_path_finds(lines: list[bytes], max_bytes: int, cap: int) -> None:
    """[VF1-a] Broken streams (seed 43): the batch loop with the C pass finds what it finds without."""
    with_c, without = _both(lines, max_bytes, cap)
    assert with_c == without


@seed(2026)
@settings(max_examples=150, deadline=None, database=None)
@given(STREAMS, st.sampled_from([90, 200, 16384]), st.sampled_from([10, 1 << 20]))
def test_spec_vf1_a_the_c_pass_finds_what_the_python_path_finds_other_seed(
    lines: list[bytes], max_bytes: int, cap: int
) -> None:
    """[VF1-a] The same under another fixed seed (2026)."""
    with_c, without = _both(lines, max_bytes, cap)
    assert with_c == without


def test_spec_vf1_b_the_c_pass_takes_the_ordinary_lines() -> None:
    """[VF1-b] On a clean stream the C pass counts the chunks of open blocks: ``feed``'s path sees the rest only."""
    if _speedups.loaded() != "compiled":
        pytest.skip("the pure build has no C pass")
    chunk = b'{"type":"text","agent":"a","final":false,"delta":"part \\u00e9 \xc3\xa9"}'
    call = b'{"type":"tool_call","agent":"a","final":true,"id":"t1","name":"n","delta":"{}"}'
    result = b'{"type":"tool_result","agent":"a","final":false,"id":"t1","name":"n","delta":"x"}'
    lines = [
        meta_init("a").encode(),
        *[chunk] * 4,
        b'{"type":"text","agent":"a","final":true,"delta":""}',
        call,
        *[result] * 5,
        b'{"type":"tool_result","agent":"a","final":true,"id":"t1","name":"n","delta":""}',
        meta_final("a").encode(),
        b"[DONE]",
    ]
    seen: list[int] = []
    taken: list[int] = []
    take = lines_module._take_run
    assert take is not None

    def counting_take(data: Sequence[bytes | str], start: int, prefixes: tuple[bytes, ...], max_bytes: int) -> int:
        stop = take(data, start, prefixes, max_bytes)
        taken.extend(range(start + 1, stop + 1))  # the line numbers it counted
        return stop

    class Counting(Validator):
        def _slow(self, line: bytes | str, at: tuple[int, int], out: list[Violation]) -> None:
            seen.append(at[0])
            super()._slow(line, at, out)

    checker = Counting()
    out: list[Violation] = []
    lines_module._take_run = counting_take  # type: ignore[misc]  # Final: swapped for the count only
    try:
        checker._run(lines, lambda k: (k + 1, 0), out)
    finally:
        lines_module._take_run = take  # type: ignore[misc]
    assert out + checker.close() == []
    assert seen == [1, 15]  # the meta_init (the agent's first line) and [DONE] take feed's path
    # the chunks that continue an open block; the Python loop opens and closes the blocks
    assert taken == [3, 4, 5, 9, 10, 11, 12]
    stream = StreamValidator()
    body = b"".join(b"data: " + line + b"\n\n" for line in lines)
    assert stream.feed(body) + stream.close() == []


def test_spec_vf1_b_take_run_refuses_what_is_not_its_own() -> None:
    """[VF1-b] ``take_run`` on its own: only a list of bytes, prefixes a tuple of bytes; a bad call is a TypeError."""
    if _speedups.loaded() != "compiled":
        pytest.skip("the pure build has no C pass")
    take = lines_module._take_run
    assert take is not None
    prefix = b'{"type":"text","agent":"a","final":false,"delta":'
    good = prefix + b'"x"}'
    assert take([good, good, b"[DONE]"], 0, (prefix,), 100) == 2
    assert take([good, good], 1, (prefix,), 100) == 2
    assert take((good, good), 0, (prefix,), 100) == 0  # a tuple: the caller's
    assert take([good.decode()], 0, (prefix,), 100) == 0  # a str line: the caller's
    assert take([good], 0, (prefix,), len(good) - 1) == 0  # over max_bytes
    assert take([good], 0, (), 100) == 0
    with pytest.raises(TypeError):
        take([good], 0, [prefix], 100)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        take([good], 0, ("text",), 100)  # type: ignore[arg-type]


CHUNK = b'{"type":"text","agent":"a","final":false,"delta":"x"}'
CALL = b'{"type":"tool_call","agent":"a","final":false,"id":"c1","name":"n","delta":"{\\"k\\":"}'
CALL_MORE = b'{"type":"tool_call","agent":"a","final":false,"id":"c1","name":"n","delta":"1"}'
RESULT = b'{"type":"tool_result","agent":"a","final":false,"id":"c1","name":"n","delta":"r"}'
#: Streams whose chunks continue an open block but must not be counted by the C pass alone,
#: one per condition of ``_fast_prefixes`` and ``take_run``: each finds something.
NEAR_MISSES = {
    "after meta_final (E164)": [CHUNK, b'{"type":"meta_final","agent":"a","final":true,"delta":"{}"}', CHUNK, CHUNK],
    "a kept JSON payload (E140)": [
        CALL,
        CALL_MORE,
        CALL_MORE,
        b'{"type":"tool_call","agent":"a","final":true,"id":"c1","name":"n","delta":""}',
    ],
    "another id (E127)": [
        b'{"type":"tool_call","agent":"a","final":true,"id":"c1","name":"n","delta":"{}"}',
        RESULT,
        RESULT.replace(b'"c1"', b'"c2"'),
    ],
    "a lone surrogate (E117)": [CHUNK, CHUNK.replace(b'"x"', b'"\\ud800"')],
    "not UTF-8 (E100)": [CHUNK, CHUNK.replace(b'"x"', b'"\xed\xa0\x80"')],
    "over the bound (E107)": [CHUNK, CHUNK.replace(b'"x"', b'"' + b"y" * 200 + b'"')],
    "an extra field (E105)": [CHUNK, CHUNK.replace(b"}", b',"z":1}')],
}


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_spec_vf1_b_near_misses_find_what_the_python_path_finds(name: str) -> None:
    """[VF1-b] Each condition that keeps a chunk from the C pass: the same findings with it and without."""
    with_c, without = _both(NEAR_MISSES[name], 200, 1 << 20)
    code = name.rpartition("(")[2].rstrip(")")
    assert code in [v.code for v in without]
    assert with_c == without


def _scan_reference(chunk: bytes, start: int, stop: int) -> tuple[bool, bool, int, int]:
    """What ``scan_span`` answers, by the pure build's steps (``_whole_ok``'s Python branch)."""
    try:
        str(chunk[start:stop], "utf-8")
        utf8 = True
    except UnicodeDecodeError:
        utf8 = False
    lone_cr = chunk.count(b"\r", start, stop) != chunk.count(b"\r\n", start, stop)
    found = _OTHER_SSE_LINE.search(chunk, start - 1)
    other = found.start() if found is not None and found.start() < stop - 1 else -1
    return utf8, lone_cr, chunk.count(b"\n", start, stop), other


SPAN_PIECES = st.sampled_from(
    [
        *[
            b"data: {}\n",
            b"data: x\r\n",
            b"\n",
            b"\r\n",
            b"\r",
            b": c\n",
            b"id: 1\n",
            b"retry: 5\n",
            b"dat\n",
            b"data:",
        ],
        *[b"\xc3\xa9", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe6\xbc", b"\xff", b"\xf0\x9f\x98\x80", b"abcdefghij"],
    ]
)


@seed(7)
@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(SPAN_PIECES, max_size=30), st.lists(SPAN_PIECES, max_size=3))
def test_spec_vf1_d_scan_span_answers_what_the_python_steps_answer(pieces: list[bytes], after: list[bytes]) -> None:
    """[VF1-d] On spans of SSE pieces and UTF-8 edge bytes: the C pass's four answers are the Python steps'."""
    if _scan_span is None:
        pytest.skip("the pure build has no C pass")
    body = b"".join(pieces) + b"\n"
    chunk = b"\n" + body + b"".join(after)
    want = _scan_reference(chunk, 1, 1 + len(body))
    got = _scan_span(chunk, 1, 1 + len(body))
    if not want[0]:
        assert not got[0]  # not UTF-8: the other answers are not read
    else:
        assert got == want


def test_spec_vf1_d_scan_span_refuses_bad_arguments() -> None:
    """[VF1-d] A span that does not follow a byte of the chunk, or runs past it, is a ValueError."""
    if _scan_span is None:
        pytest.skip("the pure build has no C pass")
    assert _scan_span(b"\ndata: x\n", 1, 9) == (True, False, 1, -1)
    assert _scan_span(b"\nevent: x\ndata: y\n", 1, 18) == (True, False, 2, 0)
    with pytest.raises(ValueError, match="start"):
        _scan_span(b"\nx\n", 0, 3)
    with pytest.raises(ValueError, match="start"):
        _scan_span(b"\nx\n", 1, 9)
    with pytest.raises(TypeError):
        _scan_span("\nx\n", 1, 3)  # type: ignore[arg-type]


# -- VF2: the prefixes follow every change; positions asked in order --------------------------

TEXT_OPEN = b'{"type":"text","agent":"a","final":false,"delta":"x"}'
#: A closing text line with a delta (E121): it takes feed's path, which closes the block.
TEXT_CLOSE_SLOW = b'{"type":"text","agent":"a","final":true,"delta":"y"}'
#: The cases where a line the Python path takes ends a block the C pass counted: each must
#: rebuild the prefixes, or the next chunk of that (agent, type) is counted as a continuation.
VF2_CASES = {
    # closed in the batch loop, then reopened and left open: E120 for the second block
    "closed by the batch loop": (
        [TEXT_OPEN, TEXT_OPEN, b'{"type":"text","agent":"a","final":true,"delta":""}', TEXT_OPEN, TEXT_OPEN],
        "E120",
    ),
    # closed on feed's path, then reopened and left open: E120 for the second block
    "closed by feed's path": ([TEXT_OPEN, TEXT_OPEN, TEXT_CLOSE_SLOW, TEXT_OPEN, TEXT_OPEN], "E120"),
    # the agent's meta_final while its text is open: a chunk after it is E164
    "after meta_final": ([TEXT_OPEN, TEXT_OPEN, meta_final("a").encode(), TEXT_OPEN], "E164"),
    # a next response (spec §8.5) forgets the open blocks: the reopened one is unclosed (E120)
    "next response": (
        [TEXT_OPEN, TEXT_OPEN, b"[DONE]", meta_init("a").encode(), TEXT_OPEN, TEXT_OPEN, TEXT_OPEN],
        "E120",
    ),
}


@pytest.mark.parametrize("name", sorted(VF2_CASES))
def test_spec_vf2_a_the_prefixes_follow_each_change(name: str) -> None:
    """[VF2-a] A block ended on the Python path leaves the C pass's prefixes: the finding is the reference's."""
    lines, code = VF2_CASES[name]
    body = [meta_init("a").encode(), *lines]
    v = Validator()
    with_c: list[Violation] = []
    v._run(body, lambda k: (k + 1, 100 * k), with_c)
    with_c += v.close()
    with _python_path_only():
        v = Validator()
        without: list[Violation] = []
        v._run(body, lambda k: (k + 1, 100 * k), without)
        without += v.close()
    assert with_c == without
    assert code in {f.code for f in without}
    stream = StreamValidator()
    assert code in {f.code for f in stream.feed(b"".join(b"data: " + x + b"\n\n" for x in body)) + stream.close()}


@seed(43)
@settings(max_examples=200, deadline=None, database=None)
@given(
    st.lists(st.text(max_size=20).map(str.encode), min_size=1, max_size=30),
    st.integers(0, 50),
    st.integers(0, 1000),
    st.data(),
)
def test_spec_vf2_b_a_batch_places_its_lines_in_any_order(
    data: list[bytes], first_line: int, first_offset: int, draw: st.DataObject
) -> None:
    """[VF2-b] ``_LineBatch.at`` on the SSE fast path: each event two lines and its length plus 8 bytes, asked in any order."""
    from envelope._structs import _LineBatch

    batch = _LineBatch(data, first_line=first_line, first_offset=first_offset)
    order = draw.draw(st.lists(st.integers(-len(data), len(data) - 1), max_size=20))
    for index in order:
        k = index % len(data)
        expected = (first_line + 2 * k, first_offset + sum(len(d) + 8 for d in data[:k]))
        assert batch.at(index) == expected
        at = batch.position(index)
        assert (at.line, at.offset) == expected
        assert (batch[index].line, batch[index].offset) == expected
