"""Cutting an already JSON-escaped string body into pieces that fit a byte budget.

Owns: the escape step (``escape``) and the cut rule (``split_escaped``): where a JSON
string body may be cut so that every piece is itself a valid JSON string body and the
pieces, decoded and joined, give back the payload exactly; and ``cut_lines``, the
cut and the framing of each piece into its line in one loop (the emitter's hot path for
a payload that needs several lines); ``fused_lines``, the two at once, which the compiled
build runs in C (``_cescape``).
Does not own: envelopes, templates or the bound on a whole line (``_encoder`` turns a
line bound into the budgets given here).

Why cut *after* escaping: the seed's algorithm measures the envelope with an empty
delta and then cuts the raw UTF-8 payload, so a quote (2 bytes escaped), a newline
(2) or a control character (6) makes the line longer than measured and breaks the
bound. Escaping once and cutting the escaped bytes keeps the bound exact and costs a
single encode of the payload, however many pieces it becomes. (spec §6.1, §6.2)

A cut at byte ``p`` of the escaped body is legal when (spec §6.2):

* ``body[p]`` is not a UTF-8 continuation byte (``0b10xxxxxx``): a cut never falls
  inside a character. Non-ASCII characters are never escaped by the encoder, so they
  appear as raw UTF-8 of 2 to 4 bytes;
* ``p`` is not inside an escape sequence. Escapes are ``\\X`` (2 bytes) or
  ``\\u00XX`` (6 bytes), all ASCII, and each starts with a backslash. Since a literal
  backslash is itself escaped as two backslashes, a backslash at ``r`` starts an escape
  exactly when the run of backslashes that ends at ``r`` has odd length counted from a
  known boundary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import msgspec

from ._errors import EncodeError
from ._limits import MAX_CODE_POINT_BYTES
from ._speedups import loaded

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["cut_lines", "escape", "fused_lines", "legal_cuts", "split_escaped"]

_BACKSLASH: Final = 0x5C
_LETTER_U: Final = 0x75
_encode_str = msgspec.json.Encoder().encode


def escape(text: str, *, field: str = "$.delta") -> bytes:
    """Encode ``text`` as a JSON string, quotes included, as compact UTF-8.

    Args:
        text: any ``str``.
        field: the field path to name in an error.

    Returns:
        The JSON string literal, for example ``b'"a\\\\"b"'`` for ``a"b``.

    Raises:
        EncodeError: ``text`` holds a lone surrogate, which UTF-8 cannot carry (spec §6.4).
    """
    try:
        return _encode_str(text)
    except UnicodeEncodeError as exc:
        point = ord(text[exc.start])
        raise EncodeError(
            f"lone surrogate U+{point:04X} at index {exc.start} cannot be encoded as UTF-8",
            field=field,
            section="6.4",
        ) from None


def _legal_cut(body: bytes, start: int, p: int) -> int:
    """Return the largest legal cut ``q`` with ``start < q <= p``, for ``start < p < len(body)``.

    ``start`` must itself be a legal cut. Callers keep ``p - start >= 6`` so that a
    whole code point or escape always fits and the result is greater than ``start``.

    Written with byte indexing and plain loops only (no ``bytes.rfind``): mypyc compiles
    ``body[i]`` to a native load, so a cut costs a few machine loads instead of a method
    call (issue 31: the cut ran once per line of a 10 MiB payload, 6,500 times).
    """
    if body[p] & 0xC0 == 0x80:
        # Inside a multi-byte character: step back over at most three continuation
        # bytes to its lead byte. A lead byte is never part of an escape (escapes are ASCII).
        p -= 1
        while body[p] & 0xC0 == 0x80:
            p -= 1
        return p
    # The escape that could straddle p starts at most 5 bytes before it: find the last
    # backslash in body[max(start, p - 5):p].
    low = max(start, p - (MAX_CODE_POINT_BYTES - 1))
    r = p - 1
    while r >= low and body[r] != _BACKSLASH:
        r -= 1
    if r < low:
        return p
    # Count the run of backslashes ending at r, back to a non-backslash or to `start`
    # (a legal cut, so an escape begins there). Bounded by the piece, so linear overall.
    j = r
    while j > start and body[j - 1] == _BACKSLASH:
        j -= 1
    if (r - j) % 2 == 1:
        # r is the second byte of an escaped backslash, which ends at r + 1 <= p.
        return p
    length = MAX_CODE_POINT_BYTES if body[r + 1] == _LETTER_U else 2
    return r if r + length > p else p


def legal_cuts(body: bytes, start: int, end: int, budget: int, last_budget: int) -> list[int]:
    """Where to cut ``body[start:end]``, an escaped JSON string body, into maximal legal pieces.

    The same cuts as ``split_escaped`` gives pieces for, as offsets into ``body``, so that a
    caller can slice the bytes it already holds (the quoted string ``escape`` returned:
    ``start=1, end=len(quoted) - 1``) without first copying the body out of them.

    Args:
        body: bytes holding the escaped body between ``start`` and ``end``.
        start: where the body starts (a legal cut).
        end: where it ends.
        budget: room for a non-last piece; at least 6 (``MAX_CODE_POINT_BYTES``).
        last_budget: room for the last piece; at least ``budget``.

    Returns:
        The ends of every piece but the last (the last ends at ``end``); empty when the
        whole body fits ``last_budget``.
    """
    if budget < MAX_CODE_POINT_BYTES or last_budget < budget:
        raise ValueError("budget must be >= 6 and last_budget >= budget")
    cuts: list[int] = []
    while end - start > last_budget:
        start = _legal_cut(body, start, start + budget)
        cuts.append(start)
    return cuts


def split_escaped(body: bytes, budget: int, last_budget: int) -> list[bytes]:
    """Cut an escaped JSON string body (no quotes) into maximal legal pieces.

    Every piece but the last has at most ``budget`` bytes and could not take one more
    code point; the last has at most ``last_budget`` bytes. Pieces join to ``body``.
    An empty body gives one empty piece.

    Args:
        body: the bytes between the quotes of ``escape(text)``.
        budget: room for a non-last piece; at least 6 (``MAX_CODE_POINT_BYTES``).
        last_budget: room for the last piece (a final line's ``true`` is a byte
            shorter than ``false``); at least ``budget``.

    Returns:
        The pieces, in order.
    """
    start = 0
    pieces: list[bytes] = []
    for cut in legal_cuts(body, 0, len(body), budget, last_budget):
        pieces.append(body[start:cut])
        start = cut
    pieces.append(body[start:])
    return pieces


def cut_lines(
    quoted: bytes,
    budget: int,
    last_budget: int,
    opening: bytes,
    last_opening: bytes,
    close: bytes,
) -> list[bytes]:
    """Cut a quoted escaped string into maximal legal pieces and frame each as a line.

    The pieces are those of ``legal_cuts(quoted, 1, len(quoted) - 1, budget, last_budget)``;
    each becomes ``opening + piece + close`` (``last_opening`` for the last). Cutting and
    framing are one loop, so no list of offsets is built, and each piece is copied once,
    straight from ``quoted`` into its line (through a memoryview, never a bytes slice).

    Args:
        quoted: ``escape(text)``: the JSON string, quotes included.
        budget: room for a non-last piece; at least 6 (``MAX_CODE_POINT_BYTES``).
        last_budget: room for the last piece; at least ``budget``.
        opening: the bytes before a non-last piece (the head and the opening quote).
        last_opening: the bytes before the last piece.
        close: the bytes after every piece (the closing quote and the tail).

    Returns:
        The lines, in order; one line when the body fits ``last_budget``.
    """
    if budget < MAX_CODE_POINT_BYTES or last_budget < budget:
        raise ValueError("budget must be >= 6 and last_budget >= budget")
    view = memoryview(quoted)
    join = b"".join
    lines: list[bytes] = []
    start = 1
    end = len(quoted) - 1
    while end - start > last_budget:
        cut = _legal_cut(quoted, start, start + budget)
        lines.append(join((opening, view[start:cut], close)))
        start = cut
    lines.append(join((last_opening, view[start:end], close)))
    return lines


def _load_fused() -> Callable[[str, int, int, bytes, bytes, bytes], list[bytes] | None] | None:
    """``_cescape.escape_lines`` in the compiled build; ``None`` in the pure one (all or none)."""
    if loaded() != "compiled":
        return None
    from ._cescape import escape_lines  # only the compiled build has it

    return escape_lines


_escape_lines: Final = _load_fused()


def fused_lines(
    text: str,
    budget: int,
    last_budget: int,
    opening: bytes,
    last_opening: bytes,
    close: bytes,
    *,
    field: str = "$.delta",
) -> list[bytes]:
    """``cut_lines(escape(text, field=field), budget, last_budget, opening, last_opening, close)``.

    The compiled build does both in one pass in C (``_cescape.escape_lines``): each piece
    is escaped straight into its line, never copied out of a whole escaped payload
    (issue 31). The pure build, and a ``text`` with a lone surrogate in either build,
    take the two Python steps above, which are the reference.

    Args:
        text: the payload.
        budget: room for a non-last piece; at least 6 (``MAX_CODE_POINT_BYTES``).
        last_budget: room for the last piece; at least ``budget``.
        opening: the bytes before a non-last piece.
        last_opening: the bytes before the last piece.
        close: the bytes after every piece.
        field: the field path an error names.

    Returns:
        The lines, in order; one line when the escaped body fits ``last_budget``.

    Raises:
        EncodeError: ``text`` holds a lone surrogate (spec §6.4).
    """
    if _escape_lines is not None:
        lines = _escape_lines(text, budget, last_budget, opening, last_opening, close)
        if lines is not None:
            return lines
    return cut_lines(escape(text, field=field), budget, last_budget, opening, last_opening, close)
