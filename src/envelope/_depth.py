"""JSON nesting depth, measured without parsing (the one place that knows how).

Owns: finding the first byte at which a JSON text nests deeper than a limit, in one pass,
and the first container of a parsed value (dicts and lists, as a caller hands them) that
does, without recursion.
Does not own: the limit (``_limits.MAX_NESTING_DEPTH``) or what a caller does about it
(each parser reports its own coded diagnostic with its position).
"""

from __future__ import annotations

import re
from typing import Any, Final

#: The bytes that change depth or string state; everything else is skipped by the regex.
_TOKENS: Final = re.compile(rb'[\[\]{}"\\]')
_TOKENS_STR: Final = re.compile(r'[\[\]{}"\\]')


def too_deep(text: bytes | str, limit: int) -> int | None:
    """The offset of the first ``[`` or ``{`` that opens level ``limit + 1``, or None.

    Brackets inside JSON strings do not count. The scan is linear in ``len(text)`` and
    returns at once when the text holds no more than ``limit`` opening brackets.
    The offset is in bytes for ``bytes``, in characters for ``str``.

    Args:
        text: a JSON text (need not be valid JSON: the scan only counts).
        limit: the deepest nesting allowed.
    """
    if isinstance(text, bytes):
        if text.count(b"[") + text.count(b"{") <= limit:
            return None
        return _scan(text, _TOKENS, (ord("["), ord("{")), (ord("]"), ord("}")), ord('"'), ord("\\"), limit)
    if text.count("[") + text.count("{") <= limit:
        return None
    return _scan(text, _TOKENS_STR, ("[", "{"), ("]", "}"), '"', "\\", limit)


def _scan(
    text: bytes | str,
    tokens: re.Pattern[bytes] | re.Pattern[str],
    opens: tuple[object, object],
    closes: tuple[object, object],
    quote: object,
    backslash: object,
    limit: int,
) -> int | None:
    depth = 0
    in_string = False
    escaped_at = -2
    for match in tokens.finditer(text):  # type: ignore[arg-type]  # pattern and text share a kind
        at = match.start()
        char = text[at]
        if in_string:
            if char == backslash:
                # "\\": the second backslash is itself escaped and escapes nothing after it
                escaped_at = at if escaped_at != at - 1 else -2
            elif char == quote and escaped_at != at - 1:
                in_string = False
            continue
        if char == quote:
            in_string = True
        elif char in opens:
            depth += 1
            if depth > limit:
                return at
        elif char in closes:
            depth -= 1
    return None


def value_too_deep(value: Any, limit: int) -> str | None:
    """The ``$.path`` of the first dict or list of ``value`` at level ``limit + 1``, or None.

    Counts as ``too_deep`` counts in the JSON text of ``value``: the outermost container is
    level 1. Iterative, so a value nested far past the interpreter's recursion limit is
    measured too; each container is visited once, and none below level ``limit + 1``.

    Args:
        value: a value as a JSON parser gives it (dicts, lists, scalars).
        limit: the deepest nesting allowed.
    """
    stack: list[tuple[Any, int, str]] = [(value, 1, "$")]
    while stack:
        here, depth, path = stack.pop()
        if isinstance(here, dict):
            items: Any = here.items()
        elif isinstance(here, list | tuple):
            items = enumerate(here)
        else:
            continue
        if depth > limit:
            return path
        for key, inner in items:
            if isinstance(inner, dict | list | tuple):
                stack.append((inner, depth + 1, f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"))
    return None
