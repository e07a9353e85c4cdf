"""SSE ids: accepted for resumption (spec §2.1-c), strictly increasing when sent (§2.1-d, W118)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from envelope import StreamValidator, Violation
from envelope._validator import _id_key

from ._streams import complete, env, meta_final, meta_init, text

if TYPE_CHECKING:
    from collections.abc import Sequence


def with_ids(lines: list[str], ids: Sequence[str | None]) -> bytes:
    out = b""
    for line, event_id in zip(lines, ids, strict=True):
        if event_id is not None:
            out += b"id: " + event_id.encode() + b"\n"
        out += b"data: " + line.encode() + b"\n\n"
    return out


def run(data: bytes, step: int = 0) -> list[Violation]:
    checker = StreamValidator()
    if not step:
        return checker.feed(data) + checker.close()
    return [v for i in range(0, len(data), step) for v in checker.feed(data[i : i + step])] + checker.close()


LINES = complete(*text("hi"))


@pytest.mark.parametrize("step", [0, 1, 7, 64])
def test_spec_02_1_c_id_lines_are_accepted_without_warning(step: int) -> None:
    """[2.1-c] producers may send ids; no W112 (unknown field) and nothing else, at any chunking."""
    ids = [f"run-1:{n}" for n in range(1, len(LINES) + 1)]
    assert run(with_ids(LINES, ids), step) == []


@pytest.mark.parametrize("step", [0, 1, 64])
def test_spec_02_1_d_id_not_increasing_is_w118_once(step: int) -> None:
    """[2.1-d] run-1:10 after run-1:9 increases (numbers compare as numbers); a repeat or a step back does not."""
    ids = ["run-1:9", "run-1:10", "run-1:10", "run-1:3", "run-1:11"]
    found = run(with_ids(LINES, ids), step)
    assert [(v.code, v.line) for v in found] == [("W118", 7)]  # the third event's id line
    assert "'run-1:10' does not increase on the id before it ('run-1:10')" in found[0].message


def test_events_without_ids_and_empty_ids_are_not_compared() -> None:
    ids = ["5", None, "", "6", "7"]
    assert run(with_ids(LINES, ids)) == []


def test_ids_restart_after_done_in_a_recording() -> None:
    """The next response of a recording (spec §8.5) may start its ids afresh."""
    first = [meta_init(), env("text", True, ""), meta_final(), "[DONE]"]
    second = [meta_init(), meta_final(), "[DONE]"]
    ids = ["a:1", "a:2", "a:3", "a:4", "a:1", "a:2", "a:3"]
    assert run(with_ids(first + second, ids)) == []


def test_id_order() -> None:
    assert _id_key("r:9") < _id_key("r:10")
    assert _id_key("9") < _id_key("10")
    assert _id_key("r:10") < _id_key("s:1")
    assert _id_key("abc") < _id_key("abd")
    assert _id_key("r:9") < _id_key("r:x")  # numbers first within a prefix
