"""``_depth.too_deep`` against a reference that walks the parsed value (spec/limits.md)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from envelope._depth import too_deep, value_too_deep

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab\n'),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(alphabet='[]{}"\\a'), inner, max_size=3),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(_values, st.integers(min_value=0, max_value=8), st.booleans())
def test_too_deep_agrees_with_the_parsed_depth(value: Any, limit: int, as_bytes: bool) -> None:
    text = json.dumps(value)
    found = too_deep(text.encode() if as_bytes else text, limit)
    assert (found is not None) == (_depth(value) > limit)
    if found is not None:
        assert text[found] in "[{"


def test_depth_offsets_are_bytes_for_bytes() -> None:
    assert too_deep('"é"[[', 1) == 4
    assert too_deep('"é"[['.encode(), 1) == 5


@given(_values, st.integers(min_value=0, max_value=8))
def test_value_too_deep_agrees_with_the_text(value: Any, limit: int) -> None:
    """``value_too_deep`` on a parsed value says what ``too_deep`` says on its JSON text."""
    found = value_too_deep(value, limit)
    assert (found is not None) == (too_deep(json.dumps(value), limit) is not None)
    if found is not None:
        assert found.startswith("$")


def test_value_too_deep_needs_no_recursion() -> None:
    top: list[Any] = []
    here = top
    for _ in range(50_000):
        inner: list[Any] = []
        here.append(inner)
        here = inner
    assert value_too_deep(top, 256) == "$" + "[0]" * 256
