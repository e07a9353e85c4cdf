"""The read path's C passes (``envelope._cread``) against their Python references (issue 43).

``is_utf8(data)`` must answer what strict ``data.decode("utf-8")`` answers, on every code
point, every 1- to 4-byte window over the bytes that matter to UTF-8, and adversarial byte
strings under fixed seeds. ``route_run`` must take exactly the lines the pure fast path of
``Reconstructor._feed_run`` takes with the same deltas (``test_reconstruct_fast_path`` and
``test_read_builds`` compare the whole read path, compiled and pure); here it is called
directly: what it takes, where it stops, the sizes it writes back, and no leak.

The C extension is built with the mypyc group (``setup.py``). On a machine without a C
compiler it is absent and this module skips, saying so; CI builds it
(``ENVELOPE_REQUIRE_COMPILED=1``), where a missing extension fails here.
"""

from __future__ import annotations

import gc
import os
import sys
import tracemalloc

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from envelope import Reconstructor

try:
    from envelope import _cread
except ImportError:  # pragma: no cover - only on a machine without a C compiler
    if os.environ.get("ENVELOPE_REQUIRE_COMPILED") == "1":
        raise
    pytest.skip("envelope._cread is not built (no C compiler): the pure build runs", allow_module_level=True)


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


#: Bytes at the edges of UTF-8's ranges: ASCII, continuation bounds, overlong and surrogate
#: and past-U+10FFFF leads.
EDGES = bytes([0x00, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF])  # fmt: skip


def test_is_utf8_on_every_code_point() -> None:
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            assert not _cread.is_utf8(chr(cp).encode("utf-8", "surrogatepass"))
        else:
            assert _cread.is_utf8(b"ab" + chr(cp).encode() + b"cdefghij")


def test_is_utf8_on_every_short_window_of_edge_bytes() -> None:
    for a in EDGES:
        for b in EDGES:
            for c in EDGES:
                for d in (0x41, 0x80, 0xBF, 0xC2):
                    for window in (bytes([a]), bytes([a, b]), bytes([a, b, c]), bytes([a, b, c, d])):
                        assert _cread.is_utf8(window) == _decodes(window), window
                        padded = b"x" * 7 + window
                        assert _cread.is_utf8(padded) == _decodes(padded), padded


@seed(43)
@settings(max_examples=2000)
@given(st.lists(st.one_of(st.sampled_from([bytes([x]) for x in EDGES]), st.binary(max_size=9)), max_size=40))
def test_is_utf8_on_adversarial_bytes(pieces: list[bytes]) -> None:
    data = b"".join(pieces)
    assert _cread.is_utf8(data) == _decodes(data)


def test_is_utf8_refuses_a_str() -> None:
    with pytest.raises(TypeError):
        _cread.is_utf8("text")  # type: ignore[arg-type]


HEAD = b'{"type":"tool_result","agent":"a","final":false,"delta":'
TAIL = b',"id":"t1","name":"read_file"}'


def _opened(max_block_bytes: int = 1 << 20) -> Reconstructor:
    """A reconstructor with one open tool_result block (``t1``), learnt by ``feed_many``."""
    rec = Reconstructor(max_block_bytes=max_block_bytes)
    rec.feed_many([HEAD + b'"first"' + TAIL])
    return rec


def _run(rec: Reconstructor, lines: list[bytes], start: int = 0) -> int:
    return _cread.route_run(lines, start, rec._fast, rec._fast_sizes, rec._open, rec.max_block_bytes)


def test_route_run_takes_continuation_lines_and_stops_at_the_first_other() -> None:
    rec = _opened()
    lines = [
        HEAD + b'"a\\n\\u00e9\\u0000\\/"' + TAIL,
        HEAD + b'"\xe6\xbc\xa2"' + TAIL,
        HEAD + b'""' + TAIL,
        HEAD + b'"\\ud83d\\ude00"' + TAIL,  # a surrogate pair: the Python path's
        HEAD + b'"never"' + TAIL,
    ]
    assert _run(rec, lines) == 3
    (block,) = rec.transcript().agents["a"]
    assert block.content == "firsta\n\u00e9\x00/\u6f22"
    assert rec._open[("a", "tool_result")].size == len(block.content)
    assert _run(rec, lines, 4) == 5


@pytest.mark.parametrize(
    "line",
    [
        HEAD + b'"x"' + b',"id":"t2","name":"read_file"}',  # another id
        HEAD + b'"x"' + b',"id":"t1"}',  # not the block's tail
        HEAD + b'"x" ' + TAIL,  # whitespace
        HEAD + b'"x\\q"' + TAIL,  # a bad escape
        HEAD + b'"\\u12"' + TAIL,  # a short \u escape
        HEAD + b'"\\udc00"' + TAIL,  # a lone surrogate
        HEAD + b'"\x01"' + TAIL,  # a raw control
        HEAD + b'"\xff"' + TAIL,  # not UTF-8
        HEAD + b'"a"b"' + TAIL,  # a quote inside
        b'{"type":"tool_result","agent":"a","final":true,"delta":"x"' + TAIL,
        b'{"type":"text","agent":"a","final":false,"delta":"x"}',  # no open block
        b"[DONE]",
    ],
)
def test_route_run_leaves_what_the_python_path_must_judge(line: bytes) -> None:
    rec = _opened()
    assert _run(rec, [line]) == 0
    assert rec.transcript().agents["a"][0].content == "first"


def test_route_run_leaves_a_line_past_the_block_limit() -> None:
    rec = _opened(max_block_bytes=8)
    assert _run(rec, [HEAD + b'"abc"' + TAIL, HEAD + b'"d"' + TAIL]) == 1
    assert rec._open[("a", "tool_result")].size == 8


def test_route_run_leaves_a_sequence_that_is_not_a_list() -> None:
    rec = _opened()
    assert _run(rec, (HEAD + b'"x"' + TAIL,)) == 0  # type: ignore[arg-type]


def test_route_run_refuses_arguments_of_another_type() -> None:
    rec = _opened()
    with pytest.raises(TypeError):
        _cread.route_run([], 0, [], rec._fast_sizes, rec._open, 10)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _cread.route_run([], -1, rec._fast, rec._fast_sizes, rec._open, 10)


def test_route_run_and_is_utf8_leak_nothing() -> None:
    lines = [HEAD + b'"piece \\n of text"' + TAIL] * 200 + [HEAD + b'"\\ud800"' + TAIL]
    text = ("é漢😀" * 500).encode()

    def rounds() -> None:
        for _ in range(50):
            rec = _opened()
            assert _run(rec, lines) == 200
            rec.transcript()
            assert _cread.is_utf8(text)
            assert not _cread.is_utf8(text + b"\xff")

    rounds()
    gc.collect()
    refs = sys.gettotalrefcount() if hasattr(sys, "gettotalrefcount") else None
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    rounds()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert after - before < 64 * 1024
    if refs is not None:  # pragma: no cover - a debug build of Python
        assert sys.gettotalrefcount() - refs < 100


def test_spec_rf1_b_route_run_fills_a_buffer_left_empty_by_an_earlier_call() -> None:
    """[RF1-b]: a call that made room but took nothing leaves the buffer empty, with memory; the next fills it.

    (An empty bytearray's ``PyByteArray_AS_STRING`` is a static empty string, not its memory.)
    """
    rec = Reconstructor()
    rec.feed_many([HEAD + b'""' + TAIL])
    assert _run(rec, [HEAD + b'"\\ud800"' + TAIL]) == 0  # room made, the line left to Python
    assert _run(rec, [HEAD + b'"abc"' + TAIL, HEAD + b'"de"' + TAIL]) == 2
    assert rec.transcript().agents["a"][0].content == "abcde"
