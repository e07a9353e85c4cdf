"""Finding the first byte of a byte string that is not UTF-8, and saying what is wrong there.

Owns: ``utf8_fault(data)`` and ``utf8_reason(data, at)``, the one place that locates invalid UTF-8 and words the
fault (spec/limits.md L5): the byte offset of the first ill-formed sequence and a reason
in this library's words. Every reader (the SSE and stream readers, ``decode``, the
validator, the migrator) reports invalid UTF-8 through it.
Does not own: raising. Each caller raises its own error class (or reports its own
finding) with its own position, and adds the offset found here to where the bytes start.

Why our own check: a JSON parser's error for invalid UTF-8 is its own. msgspec 0.22
let Python's ``UnicodeDecodeError`` through (with the offset), 0.23 raises its own
``DecodeError`` with no offset, and neither wording is ours to promise. The check is
Python's own strict decoder, which implements the Unicode standard's table of
well-formed byte sequences (Unicode §3.9, Table 3-7); the reason is derived here from
the bytes at the offset, not from the decoder's text. Error paths only: no reader calls
this on bytes it has already decoded.
"""

from __future__ import annotations

from typing import Final

__all__ = ["utf8_fault", "utf8_reason"]

#: Lead bytes whose second byte has a narrower range than 0x80-0xBF (Table 3-7): below it
#: an overlong form (E0, F0), above it a surrogate (ED) or a code point past U+10FFFF (F4).
_SECOND: Final = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF), 0xF4: (0x80, 0x8F)}


def utf8_fault(data: bytes) -> tuple[int, str] | None:
    """Where ``data`` stops being UTF-8, and why; ``None`` when all of it is UTF-8.

    Args:
        data: the bytes of one line or chunk, complete (a character cut at the end counts
            as a fault: callers that read incrementally pass only what cannot be completed).

    Returns:
        ``(offset, reason)``: the 0-based offset in ``data`` of the first byte of the
        first ill-formed sequence, and one phrase saying what is wrong with it.
    """
    if data.isascii():
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start, utf8_reason(data, exc.start)
    return None


def utf8_reason(data: bytes, at: int) -> str:
    """What is wrong with the sequence that starts at ``data[at]``, known to be ill-formed.

    For a caller that has the offset already (an incremental decoder's ``exc.start``
    into ``exc.object``).
    """
    lead = data[at]
    if 0x80 <= lead <= 0xBF:
        return f"byte 0x{lead:02x} continues a character that did not start"
    if lead in (0xC0, 0xC1) or lead >= 0xF5:
        return f"byte 0x{lead:02x} never occurs in UTF-8"
    need = 1 if lead < 0xE0 else 2 if lead < 0xF0 else 3
    for k in range(1, need + 1):
        if at + k >= len(data):
            return f"the bytes end inside the character that byte 0x{lead:02x} starts"
        low, high = _SECOND.get(lead, (0x80, 0xBF)) if k == 1 else (0x80, 0xBF)
        byte = data[at + k]
        if not low <= byte <= high:
            return f"byte 0x{byte:02x} cannot follow 0x{lead:02x} in a character"
    # Python's decoder and Table 3-7 agree on every sequence, so a fault is found above.
    return f"byte 0x{lead:02x} starts no character"  # pragma: no cover
