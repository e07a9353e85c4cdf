"""``StreamReader``: recorded streams (SSE or JSON lines) to envelope lines with positions; the CLI's errors."""

from __future__ import annotations

import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envelope import DecodeError, RawLine, StreamReader
from envelope.cli import main

if TYPE_CHECKING:
    from pathlib import Path

LINE = b'{"type":"text","agent":"a","final":true,"delta":"x"}'


def _all(reader: StreamReader, data: bytes, cuts: list[int]) -> list[RawLine]:
    out: list[RawLine] = []
    last = 0
    for cut in [*sorted(cuts), len(data)]:
        out += reader.feed(data[last:cut])
        last = max(last, cut)
    return out + reader.close()


@given(cuts=st.lists(st.integers(0, 200), max_size=8), crlf=st.booleans())
def test_jsonl_positions_do_not_depend_on_splits(cuts: list[int], crlf: bool) -> None:
    nl = b"\r\n" if crlf else b"\n"
    data = b"\xef\xbb\xbf" + nl + LINE + nl + nl + b"  " + nl + LINE + nl + b"[DONE]"
    got = _all(StreamReader(), data, cuts)
    step = len(nl)
    assert [(r.data, r.line) for r in got] == [(LINE.decode(), 2), (LINE.decode(), 5), ("[DONE]", 6)]
    assert got[0].offset == 3 + step
    assert got[1].offset == 3 + step + len(LINE) + 3 * step + 2


def test_detects_sse_and_positions() -> None:
    reader = StreamReader()
    got = _all(reader, b"\n: hello\ndata: " + LINE + b"\n\ndata: [DONE]\n\n", [3])
    assert reader.format == "sse"
    assert [(r.line, r.offset, r.data[:8]) for r in got] == [
        (3, 9, '{"type":'),
        (5, 9 + len(b"data: ") + len(LINE) + 2, "[DONE]"),
    ]


def test_forced_format_and_empty_input() -> None:
    reader = StreamReader("jsonl")
    assert _all(reader, LINE, []) == [RawLine(LINE.decode(), 1, 0)]
    empty = StreamReader()
    assert _all(empty, b" \n\n", []) == []
    assert empty.format is None


def test_limits_and_bad_utf8() -> None:
    with pytest.raises(DecodeError, match="no content in the first bytes"):
        StreamReader(max_line_bytes=4).feed(b"\n" * 10)
    with pytest.raises(DecodeError, match="line longer than max_line_bytes=8") as info:
        StreamReader(max_line_bytes=8).feed(b"{" + b"x" * 20)
    assert info.value.position.line == 1
    with pytest.raises(DecodeError, match="line longer than max_line_bytes=8"):
        StreamReader(max_line_bytes=8).feed(b"{" + b"x" * 8 + b"\n")
    reader = StreamReader()
    # The line before the bad one is returned; the error comes with the next call.
    assert reader.feed(LINE + b"\n{\xff}\n") == [RawLine(LINE.decode(), 1, 0)]
    with pytest.raises(DecodeError, match="invalid UTF-8") as bad:
        reader.close()
    assert (bad.value.position.line, bad.value.position.offset) == (2, len(LINE) + 2)
    with pytest.raises(DecodeError, match="invalid UTF-8"):
        reader.feed(LINE + b"\n")  # and with every call after it


def test_cli_reports_errors_with_positions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(LINE + b"\n" + b'{"type":"text","agent":"a","final":"no","delta":""}\n')
    assert main(["reconstruct", str(bad)]) == 2
    err = capsys.readouterr().err
    # spec/cli.md C8-a: line from 1, byte offset and envelope index from 0, each named
    assert err.startswith(f"{bad}: error: line 2, byte offset {len(LINE) + 1}, envelope index 1: expected a boolean")
    assert "Traceback" not in err
    assert main(["reconstruct", str(tmp_path / "missing.sse")]) == 2
    assert "No such file or directory" in capsys.readouterr().err


def test_python_dash_m_envelope(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(LINE + b"\n")
    done = subprocess.run(
        [sys.executable, "-m", "envelope", "reconstruct", str(path)], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert b'"content": "x"' in done.stdout
    usage = subprocess.run([sys.executable, "-m", "envelope"], capture_output=True, check=False)
    assert usage.returncode == 2
    assert b"usage: envelope" in usage.stderr
