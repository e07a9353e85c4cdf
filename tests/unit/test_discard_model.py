"""Discarded attempts (spec §7.7) against a plain model: which blocks remain, which text a citation cites.

The reconstructor finds the text that a later citation cites after a discard by walking
links between text blocks (linear, issue 18 §1); the model rescans the whole block list
each time, as the rule reads: "the last completed text block that remains" (spec §7.4-a,
§7.7-a). The ops include an error block held open while other blocks open after it, so the
signal is not always the last block of its agent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from envelope import Reconstructor, SequenceError

A = "a"
ops = st.lists(
    st.one_of(
        st.just(("text", 0)),
        st.just(("thinking", 0)),
        st.just(("open_error", 0)),
        st.tuples(st.just("discard"), st.integers(0, 4)),
        st.just(("cite", 0)),
    ),
    max_size=30,
)


def _line(kind: str, final: bool, delta: str = "", **extra: Any) -> str:
    return json.dumps({"type": kind, "agent": A, "final": final, "delta": delta, **extra})


def _signal(n: int) -> str:
    return json.dumps({"type": "attempt_discarded", "discard_blocks": n})


def _run(script: list[tuple[str, int]]) -> None:
    rec = Reconstructor()
    # The model: one dict per block, in the order they opened.
    model: list[dict[str, Any]] = []
    error_open: dict[str, Any] | None = None
    for step, (op, arg) in enumerate(script):
        if op in ("text", "thinking"):
            rec.feed(_line(op, True, f"{op}{step}"))
            model.append({"type": op, "content": f"{op}{step}", "cites": []})
        elif op == "open_error":
            if error_open is not None:
                continue
            rec.feed(_line("error", False, ""))
            error_open = {"type": "error", "content": "", "cites": []}
            model.append(error_open)
        elif op == "discard":
            block = error_open
            if block is None:
                block = {"type": "error", "content": "", "cites": []}
                model.append(block)
            error_open = None
            at = next(i for i in range(len(model)) if model[i] is block)
            if arg > at:
                try:
                    rec.feed(_line("error", True, _signal(arg)))
                except SequenceError:
                    return
                raise AssertionError("a discard of more blocks than precede it was accepted")
            rec.feed(_line("error", True, _signal(arg)))
            block["content"] = _signal(arg)
            del model[at - arg : at]
        else:
            texts = [b for b in model if b["type"] == "text"]
            line = _line("citation", True, f"c{step}", citation_type="char_location")
            if not texts:
                try:
                    rec.feed(line)
                except SequenceError:
                    continue
                raise AssertionError("a citation with no text before it was accepted")
            rec.feed(line)
            texts[-1]["cites"].append(f"c{step}")
    got = [(b.type, b.content, [c["cited_text"] for c in b.citations]) for b in rec.transcript().agents.get(A, ())]
    assert got == [(b["type"], b["content"], b["cites"]) for b in model]


@given(ops)
@example([("text", 0), ("open_error", 0), ("text", 0), ("discard", 1), ("cite", 0)])
@example([("text", 0), ("text", 0), ("open_error", 0), ("text", 0), ("discard", 2), ("cite", 0)])
@example([("text", 0), ("discard", 1), ("text", 0), ("discard", 1), ("cite", 0)])
@example([("text", 0), ("text", 0), ("discard", 2), ("cite", 0)])
@example([("text", 0), ("text", 0), ("text", 0), ("discard", 2), ("cite", 0)])
@example(
    [
        ("text", 0),
        ("open_error", 0),
        ("text", 0),
        ("text", 0),
        ("discard", 1),
        ("open_error", 0),
        ("discard", 3),
        ("cite", 0),
    ]
)
def test_discards_agree_with_the_model(script: list[tuple[str, int]]) -> None:
    _run(script)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_discards_agree_with_the_model_under_fixed_seeds(n: int) -> None:
    # CI derandomises hypothesis; these run other fixed seeds so more shapes are tried there.
    seed(n)(settings(derandomize=False)(given(ops)(_run)))()
