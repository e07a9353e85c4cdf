"""spec/limits.md L1: each bound of the read path, crossed once, and the table against ``_limits.py``."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT
from envelope import DecodeError, Reconstructor, SSEReader, StreamReader, _limits

TEXT = b'{"type":"text","agent":"a","final":false,"delta":"abcdef"}'


def _crossings() -> list[tuple[str, DecodeError]]:
    out: list[tuple[str, DecodeError]] = []

    def catch(name: str, run: object) -> None:
        try:
            run()  # type: ignore[operator]  # a zero-argument callable
        except DecodeError as exc:
            out.append((name, exc))
        else:  # pragma: no cover  # the test below then fails naming it
            out.append((name, DecodeError("no error")))

    catch("sse line", lambda: SSEReader(max_line_bytes=16).feed(b"data: " + b"x" * 20))
    catch("sse event data", lambda: SSEReader(max_line_bytes=16).feed(b"data: 1234567\n" * 3))
    catch("jsonl line", lambda: StreamReader("jsonl", max_line_bytes=16).feed(TEXT + b"\n"))
    catch("leading blank bytes", lambda: StreamReader(max_line_bytes=16).feed(b" " * 17))

    def blocks() -> None:
        rec = Reconstructor(max_open_blocks=1)
        rec.feed(TEXT)
        rec.feed(TEXT.replace(b'"text"', b'"thinking"'))

    catch("open blocks", blocks)
    catch("block bytes", lambda: Reconstructor(max_block_bytes=5).feed(TEXT))
    deep = TEXT[:-1] + b',"url":' + b"[" * 300 + b"]" * 300 + b"}"
    catch("nesting", lambda: Reconstructor().feed(deep.replace(b'"text"', b'"citation"')))
    return out


@pytest.mark.parametrize(("name", "error"), _crossings(), ids=lambda x: x if isinstance(x, str) else "")
def test_l1_a_each_bound_gives_a_decode_error_with_its_position(name: str, error: DecodeError) -> None:
    """[L1-a] past a bound: a DecodeError that names the bound and says where."""
    assert error.message != "no error", name
    assert re.search(r"max_\w+=\d+|MAX_NESTING_DEPTH=256|no content in the first bytes", error.message), name
    assert error.position.offset is not None or error.position.index is not None, name


def test_l1_a_the_table_names_every_constant_of_limits() -> None:
    """[L1-a] spec/limits.md lists each bound of ``_limits.py``, and no bound that is not there."""
    text = (ROOT / "spec" / "limits.md").read_text()
    constants = {name for name in vars(_limits) if name.isupper()}
    table = text[text.index("## L1.") : text.index("## L2.")]
    named = set(re.findall(r"^\| `([A-Z_]+)`", table, flags=re.MULTILINE))
    assert constants <= named, f"bounds missing from spec/limits.md: {sorted(constants - named)}"
    assert named - constants <= {"MAX_PENDING_IDS"}, sorted(named - constants)  # the validator's own
