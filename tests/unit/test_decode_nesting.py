"""Deeply nested JSON in a line is a ``DecodeError``, never msgspec's ``RecursionError`` (STYLE §5)."""

from __future__ import annotations

import pytest

from envelope import DecodeError, Reconstructor

#: An unknown member nested past msgspec's depth limit: the lenient reader still walks it.
DEEP = b'{"type":"text","agent":"a","final":false,"delta":"x","zz":' + b"[" * 5000 + b"]" * 5000 + b"}"


@pytest.mark.parametrize("line", [DEEP, DEEP.decode()])
def test_reconstructor_refuses_deep_nesting_with_its_position(line: bytes | str) -> None:
    rec = Reconstructor()
    rec.feed(b'{"type":"text","agent":"a","final":false,"delta":"ok"}')
    with pytest.raises(DecodeError, match="nested too deeply") as caught:
        rec.feed(line)
    assert caught.value.position.index == 1
    with pytest.raises(DecodeError, match="nested too deeply"):
        Reconstructor().feed_many([line])
