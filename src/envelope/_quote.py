"""How a diagnostic quotes what it read: escaped and bounded (spec/validation.md §3.4).

Owns: ``quote`` (a piece of input, bytes or text, as one printable, single-quoted literal
of at most ``QUOTE_CHARS`` characters of it), ``show`` (any decoded JSON value the same
way) and ``excerpt`` (the longer quotation of a refused HTTP body, spec check §2.1-a).
Does not own: which messages quote what (the validator's rules, ``_check``), or the
position a message is printed at.

Why: a finding's message is printed to a terminal or a log one line at a time. Input
echoed raw can hold escape sequences that repaint the terminal, line ends that forge a
second finding, bidirectional controls that reorder the line, bytes that are no UTF-8,
and be megabytes long; ``repr`` of a ``str`` escapes only some of that, does not bound
it, and by then the undecodable bytes have become U+FFFD.
"""

from __future__ import annotations

from typing import Final

__all__ = ["EXCERPT_CHARS", "QUOTE_CHARS", "excerpt", "quote", "show"]

#: Most characters of the input a quotation shows (a field name, a type, an id).
QUOTE_CHARS: Final = 40

#: Most characters of a refused body that ``E200`` shows (spec check §2.1-a).
EXCERPT_CHARS: Final = 160

#: The short escapes, as a Python or JSON reader would write them.
_SHORT: Final = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _char(c: str) -> str:
    """One character as it appears inside the quotes."""
    short = _SHORT.get(c)
    if short is not None:
        return short
    if c.isprintable():  # letters of every script stay; controls, format characters (bidi), separators do not
        return c
    code = ord(c)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def quote(value: str | bytes, limit: int = QUOTE_CHARS, *, sized: bool = True) -> str:
    """``value`` as a single-quoted literal of at most ``limit`` of its characters.

    Bytes that are no UTF-8 show as ``\\xNN``, each one (never U+FFFD); control, format
    and separator characters as ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``; a backslash and a
    quote escaped, so the literal reads back to the input. Past ``limit`` characters the
    literal stops and ``… (N bytes)`` (or ``N characters`` for text) follows it, outside
    the quotes.

    Args:
        value: the input as read (bytes) or decoded (text).
        limit: the most characters of it shown.
        sized: say the size of ``value`` after a cut (else ``…`` alone: the caller read only
            a part, so the size would mislead).

    Returns:
        The quotation, on one line, with nothing but printable characters.
    """
    if isinstance(value, bytes):
        text = value.decode("utf-8", "surrogateescape")  # an invalid byte -> one lone surrogate
        size = f"{len(value)} bytes"
    else:
        text = value
        size = f"{len(value)} characters"
    parts = []
    for c in text[:limit]:
        code = ord(c)
        if 0xDC80 <= code <= 0xDCFF and isinstance(value, bytes):
            parts.append(f"\\x{code - 0xDC00:02x}")  # the byte surrogateescape stood for
        else:
            parts.append(_char(c))
    shown = "'" + "".join(parts) + "'"
    if len(text) <= limit:
        return shown
    return f"{shown}… ({size})" if sized else f"{shown}…"


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The start of some prose (a body's text) on one line: whitespace runs made one space, then ``quote``d.

    A cut excerpt ends in ``…`` without a size: the text given is already a part.
    """
    return quote(" ".join(text.split()), limit, sized=False)


def show(value: object, limit: int = QUOTE_CHARS) -> str:
    """A decoded JSON value in a message: text and bytes ``quote``d; any other value by its ``repr``, cut.

    A number, ``None`` or a container is shown as Python writes it (its strings are
    escaped by ``repr``), at most ``limit`` characters, then ``…`` when cut.
    """
    if isinstance(value, str | bytes):
        return quote(value, limit)
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
