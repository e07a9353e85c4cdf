"""Completing a JSON text that was cut short, the way the Anthropic SDK reads a cut tool input.

Owns: ``complete_prefix``, which turns a *prefix* of a JSON text (a tool call's input
that ``max_tokens`` cut) into the JSON text of what can be recovered from it: the text
up to the last complete value, with the containers still open closed after it.
Does not own: deciding when a cut input is acceptable, or any error (the Anthropic
adapter decides both, spec/anthropic-adapter.md [A4.1-c]). Nothing here parses values:
the result is handed to the codec's one JSON parser (msgspec) by the caller.

What "recoverable" means is the SDK's rule, not ours. ``MessageStream`` accumulates a
tool input with ``jiter.from_json(buf, partial_mode=True)`` after every delta, and on a
cut stream its final message holds that value. In that mode (measured on jiter 0.11):

* a container still open is closed: ``{"a": [1, 2`` gives ``{"a": [1, 2]}``;
* an unfinished string is dropped, with its key when it is a member value:
  ``{"a": 1, "b": "he`` gives ``{"a": 1}``; a key without its value likewise;
* a number or literal at the very end is kept when it is complete by JSON's grammar
  (``12``, ``1.5``, ``true``) and dropped when it is not (``12.``, ``1e``, ``-``, ``tru``);
* a top-level value that never started (only whitespace) or a top-level scalar that is
  unfinished cannot be recovered: the SDK raises.

The scan is one left-to-right pass of a token regex, linear in the text. The stack of
open containers is never copied: between the last good cut and the end of the text
only commas, colons, keys and one unfinished token can occur, none of which opens or
closes a container, so the containers open at the end are those open at the cut.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["complete_prefix"]

#: One token after optional whitespace: a structural character, a whole string, a
#: whole number (JSON grammar: no leading zeros, digits after ``.`` and ``e``), a literal.
_TOKEN: Final = re.compile(
    r"""[ \t\n\r]*(?:
        (?P<punct>[{}\[\],:])
      | (?P<string>"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")
      | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
      | (?P<literal>true|false|null)
    )""",
    re.VERBOSE,
)
#: An unfinished token that runs to the end of the text (checked with ``fullmatch``).
#: Every alternative is unambiguous: whole escapes inside the loop, an unfinished one
#: only at the end. (An optional tail inside the loop, ``\\(?:u[0-9a-f]{0,3})?``, let
#: ``\\u0041`` match in several ways and made a failing match exponential.)
_UNFINISHED: Final = re.compile(
    r"""[ \t\n\r]*(?:
        "(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*(?:\\(?:u[0-9a-fA-F]{0,3})?)?
      | -?(?:0|[1-9][0-9]*)?(?:\.[0-9]*)?(?:[eE][+-]?[0-9]*)?
      | t(?:r(?:u)?)?|f(?:a(?:l(?:s)?)?)?|n(?:u(?:l)?)?
    )""",
    re.VERBOSE,
)
_CLOSERS: Final = {"{": "}", "[": "]"}

# What the scanner expects next.
_VALUE: Final = 0  # a value (top level, after ``:``, after ``[`` or ``,`` in an array)
_KEY_OR_END: Final = 1  # right after ``{``: a key or ``}``
_KEY: Final = 2  # after ``,`` in an object
_COLON: Final = 3  # after a key
_NEXT: Final = 4  # after a value inside a container: ``,`` or the closer
_VALUE_OR_END: Final = 5  # right after ``[``: a value or ``]``


def complete_prefix(text: str) -> str | None:
    """The JSON text the SDK's partial parse of ``text`` would stand for, or ``None``.

    Args:
        text: a JSON text that may have been cut anywhere (the joined partial JSON of
            one tool input). A complete JSON text is returned unchanged.

    Returns:
        ``text`` cut after its last complete value (or after the last container it
        opened) with the open containers closed, which is valid JSON if ``text`` was
        a prefix of JSON; ``None`` when ``text`` is not a prefix of any JSON text, or
        is a prefix from which no value can be recovered (see the module docstring).
    """
    stack: list[str] = []
    expect = _VALUE
    cut = -1  # the end of the last complete value or opened container; -1: none yet
    pos = 0
    end = len(text)
    while True:
        match = _TOKEN.match(text, pos)
        if match is None:
            break  # no whole token here: an unfinished one, trailing blanks, or junk
        kind = match.lastgroup
        token_end = match.end()
        if kind == "number" and token_end < end and _UNFINISHED.fullmatch(text, match.start()):
            break  # ``12.`` or ``1e`` at the very end: unfinished, dropped
        if kind == "punct":
            char = text[token_end - 1]
            after = _punct(char, stack, expect)
            if after is None:
                return None
            expect = after
            if char not in ",:":  # a container opened or closed
                cut = token_end
        elif kind == "string" and expect in (_KEY, _KEY_OR_END):
            expect = _COLON
        else:  # a string, number or literal value
            if expect not in (_VALUE, _VALUE_OR_END):
                return None
            expect = _NEXT if stack else -1
            cut = token_end
        pos = token_end
        if expect == -1:
            # The top-level value is complete: only blanks may follow.
            return text if _blank(text, pos) == end - pos else None
    if pos < end and _UNFINISHED.fullmatch(text, pos) is None:
        return None  # junk, not an unfinished token
    if cut < 0:
        return None  # nothing recoverable: only blanks, or an unfinished top-level scalar
    return text[:cut] + "".join(_CLOSERS[c] for c in reversed(stack))


def _punct(char: str, stack: list[str], expect: int) -> int | None:
    """What the scanner expects after the punctuation ``char`` (``stack`` updated), or None where it cannot come."""
    if char in _CLOSERS:
        if expect not in (_VALUE, _VALUE_OR_END, _KEY_OR_END):
            return None
        stack.append(char)
        return _KEY_OR_END if char == "{" else _VALUE_OR_END
    if char in "}]":
        if not stack or _CLOSERS[stack[-1]] != char:
            return None
        if expect not in (_NEXT, _KEY_OR_END if char == "}" else _VALUE_OR_END):
            return None
        stack.pop()
        return _NEXT if stack else -1
    if char == ",":
        if expect != _NEXT:
            return None
        return _KEY if stack[-1] == "{" else _VALUE
    # ":"
    if expect != _COLON:
        return None
    return _VALUE


def _blank(text: str, pos: int) -> int:
    """The number of JSON whitespace characters at ``pos``."""
    start = pos
    end = len(text)
    while pos < end and text[pos] in " \t\n\r":
        pos += 1
    return pos - start
