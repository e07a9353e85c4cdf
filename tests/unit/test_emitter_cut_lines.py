"""The emitter's one-pass cut of a large payload (issue 31) against a slow reference, as properties.

``_chunker.cut_lines`` escapes nothing itself: it takes the payload escaped once by
msgspec, cuts the escaped bytes at legal places and frames each piece as a line, in one
loop (compiled by mypyc in the built extension). The reference here shares no code with
it: it escapes the text one code point at a time and packs whole code points greedily,
so a cut inside an escape sequence or a character, a piece that is not maximal, or a
piece over its budget makes the two differ. The properties run on whichever build the
suite runs (compiled, and again with ``ENVELOPE_PURE=1``), under several fixed seeds as
well as hypothesis' own draws.
"""

from __future__ import annotations

import itertools
import json
import random

import msgspec
import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from envelope import Emitter, EncodeError, ToolResult
from envelope._chunker import cut_lines, escape, legal_cuts
from validating import assert_valid

AGENT = "0f8fad5b-d9cb-469f-a165-70867728950e"
TOOL_ID, TOOL_NAME = "toolu_01", "search"

#: Characters whose escaped length differs (1, 2 or 6 bytes; 2 to 4 bytes of UTF-8), the
#: letters an escape is made of, and lone surrogates (which UTF-8 cannot carry).
_TRICKY = ['"', "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f", "/", "u", "0", "a"]
_WIDE = ["é", "\u2028", "\u2029", "中", "\uffff", "😀", "\U00010348", "\U0010ffff"]
_SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff"]
texts = st.text(
    alphabet=st.one_of(st.sampled_from(_TRICKY + _WIDE), st.characters(codec="utf-8")),
    max_size=600,
)
texts_with_surrogates = st.text(alphabet=st.sampled_from(_TRICKY + _WIDE + _SURROGATES), min_size=1, max_size=200)


def reference_pieces(text: str, budget: int, last_budget: int) -> list[str]:
    """The text cut where the escaped pieces are maximal: code point by code point, slowly."""
    sizes = [len(msgspec.json.encode(ch)) - 2 for ch in text]
    pieces: list[str] = []
    start = 0
    while sum(sizes[start:]) > last_budget:
        end, used = start, 0
        while end < len(sizes) and used + sizes[end] <= budget:
            used += sizes[end]
            end += 1
        pieces.append(text[start:end])
        start = end
    pieces.append(text[start:])
    return pieces


def reference_lines(text: str, max_bytes: int) -> list[bytes]:
    """The lines of ``Emitter.buffered("tool_result", ...)`` built from the reference pieces.

    Each line is msgspec's encode of a whole ``ToolResult`` Struct, so the framing is checked
    too. The budgets come from the envelope with an empty delta (spec §6.1): a non-last
    line carries ``false``, a byte longer than the last line's ``true``.
    """

    def line(piece: str, final: bool) -> bytes:
        return msgspec.json.encode(ToolResult(agent=AGENT, final=final, id=TOOL_ID, name=TOOL_NAME, delta=piece))

    budget = max_bytes - len(line("", False))
    last_budget = max_bytes - len(line("", True))
    pieces = reference_pieces(text, budget, last_budget)
    return [line(piece, i == len(pieces) - 1) for i, piece in enumerate(pieces)]


def check(text: str, extra: int) -> None:
    """Emitter lines == reference lines; each within the bound; they rebuild the text; valid stream."""
    fixed = len(msgspec.json.encode(ToolResult(agent=AGENT, final=False, id=TOOL_ID, name=TOOL_NAME, delta="")))
    bound = fixed + 6 + extra  # room for at least one code point of any kind (spec §6.5)
    em = Emitter(AGENT, bound)
    lines = em.tool_result(TOOL_ID, TOOL_NAME, text)
    assert lines == reference_lines(text, bound)
    assert em.oversize == []
    assert max(map(len, lines)) <= bound
    assert "".join(json.loads(line)["delta"] for line in lines) == text
    call = em.buffered("tool_call", "{}", id=TOOL_ID, name=TOOL_NAME)
    start = em.buffered(
        "meta_init", json.dumps({"format": "json", "user_query": "q", "agent_uuid": AGENT, "model": "m"})
    )
    end = em.buffered("meta_final", json.dumps({"stop_reason": "end_turn", "total_steps": 1}))
    assert_valid([*start, *call, *lines, *end, b"[DONE]"], max_bytes=bound)


@given(text=texts, extra=st.integers(0, 300))
@example(text='"' * 64, extra=0)
@example(text="\\" * 63 + "u0041", extra=1)
@example(text="\x01" * 30 + "\\u" * 10, extra=2)
@example(text="😀" * 40 + "a", extra=3)
@example(text="a\\" + "\x1f" * 9, extra=4)
def test_any_text_at_any_bound_gives_the_reference_lines(text: str, extra: int) -> None:
    """[6.2-a] [6.3-a] cuts never fall inside an escape or a character, and every non-last piece is maximal."""
    check(text, extra)


@pytest.mark.parametrize("n", [31, 32, 33, 34])
def test_the_reference_lines_under_fixed_seeds(n: int) -> None:
    """The same property under fixed seeds (CI runs hypothesis derandomised)."""

    @seed(n)
    @settings(derandomize=False, max_examples=60)
    @given(text=texts, extra=st.integers(0, 120))
    def prop(text: str, extra: int) -> None:
        check(text, extra)

    prop()


@pytest.mark.parametrize("n", [41, 42])
def test_a_lone_surrogate_is_refused_with_its_index(n: int) -> None:
    """[6.4-a] a text UTF-8 cannot carry is an EncodeError naming the first lone surrogate, at any size."""

    @seed(n)
    @settings(derandomize=False, max_examples=60)
    @given(text=texts_with_surrogates, pad=st.integers(0, 3000))
    def prop(text: str, pad: int) -> None:
        text = "x" * pad + text
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            with pytest.raises(EncodeError, match=f"at index {exc.start} "):
                Emitter(AGENT, 200).tool_result(TOOL_ID, TOOL_NAME, text)
        else:
            check(text, pad % 97)

    prop()


@pytest.mark.parametrize("n", [51, 52, 53])
def test_cut_lines_frames_the_same_pieces_as_legal_cuts(n: int) -> None:
    """``cut_lines`` (the fused loop) and ``legal_cuts`` (the offsets) agree on every budget pair."""

    @seed(n)
    @settings(derandomize=False, max_examples=80)
    @given(text=texts, budget=st.integers(6, 90), more=st.integers(0, 3))
    def prop(text: str, budget: int, more: int) -> None:
        quoted = escape(text)
        cuts = [1, *legal_cuts(quoted, 1, len(quoted) - 1, budget, budget + more), len(quoted) - 1]
        want = [b"<" + quoted[a:b] + b">" for a, b in itertools.pairwise(cuts)]
        want[-1] = b"[" + want[-1][1:]
        assert cut_lines(quoted, budget, budget + more, b"<", b"[", b">") == want

    prop()


def test_a_large_escape_heavy_payload_gives_the_reference_lines() -> None:
    """The size the benchmark measures (scaled down): thousands of lines, every kind of escape."""
    rng = random.Random(31)
    alphabet = _TRICKY + _WIDE + ["word ", "a longer run of plain ASCII words "]
    text = "".join(rng.choice(alphabet) for _ in range(60_000))
    lines = Emitter(AGENT).tool_result(TOOL_ID, TOOL_NAME, text)
    assert len(lines) > 100
    assert lines == reference_lines(text, 2048)


@pytest.mark.parametrize(("budget", "last_budget"), [(5, 5), (0, 10), (10, 9), (-1, -1)])
def test_cut_lines_refuses_a_budget_below_one_code_point(budget: int, last_budget: int) -> None:
    with pytest.raises(ValueError, match="budget must be >= 6"):
        cut_lines(b'"abc"', budget, last_budget, b"", b"", b"")
