"""The bound on one tool result's bytes, and the note that says what was cut (spec agent-ref §2.4-e).

Owns: ``DEFAULT_MAX_TOOL_RESULT_BYTES``, ``MIN_TOOL_RESULT_BYTES`` and ``bound_result``,
which keeps a result's head and tail within the bound and puts the note the model reads
(``TRUNCATED_NOTE``) between them. Pure: no I/O, no state.
Does not own: where the bound is applied (``tools.outcome``, for every tool: Python,
MCP, demo), nor the option that sets it (``AgentOptions.max_tool_result_bytes``).

What is measured: the UTF-8 bytes of the text plus the bytes of each image's source (a
data URI carries the image itself). Text goes first, since it is what the model reads;
images are kept in order while they fit, and the ones that do not are counted in the note.
Cuts fall on code point boundaries (never inside a UTF-8 sequence), so the kept text is
the original's exact head and tail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Sequence

    from envelope import ImageRef

__all__ = ["DEFAULT_MAX_TOOL_RESULT_BYTES", "MIN_TOOL_RESULT_BYTES", "TRUNCATED_NOTE", "bound_result"]

#: Bytes one tool result may hold by default (256 KiB): some 65,000 tokens of text, a third
#: of a 200,000-token context window, so one result cannot crowd out the conversation; a
#: 20 MB result took 372 MB of memory and 88 MB of database before (issue 38 §7).
DEFAULT_MAX_TOOL_RESULT_BYTES: Final = 256 * 1024
#: The smallest bound accepted: the note and some of the head and tail must fit.
MIN_TOOL_RESULT_BYTES: Final = 1024
#: The note put where the result was cut (spec §2.4-e names it); ``{...}`` are filled in.
TRUNCATED_NOTE: Final = (
    "\n[agent-ref: tool result truncated: {total:,} bytes, over max_tool_result_bytes={limit:,}; "
    "{omitted:,} bytes of text omitted here{images}]\n"
)
#: Bytes kept free for the note (its longest form, with seven-digit counts of every kind, is under this).
_NOTE_ROOM: Final = 320
#: Share of the kept text taken from the head; the rest is the tail (where a log's error usually is).
_HEAD_SHARE: Final = 0.75


def _head(raw: bytes, n: int) -> bytes:
    """The first ``n`` bytes of ``raw`` or fewer, ending on a code point boundary."""
    if n >= len(raw):
        return raw
    while n > 0 and raw[n] & 0xC0 == 0x80:  # raw[n] continues the code point before it
        n -= 1
    return raw[:n]


def _tail(raw: bytes, n: int) -> bytes:
    """The last ``n`` bytes of ``raw`` or fewer, starting on a code point boundary."""
    if n <= 0:
        return b""
    start = max(0, len(raw) - n)
    while start < len(raw) and raw[start] & 0xC0 == 0x80:
        start += 1
    return raw[start:]


def bound_result(text: str, images: Sequence[ImageRef], limit: int | None) -> tuple[str, tuple[ImageRef, ...], bool]:
    """``text`` and ``images`` within ``limit`` bytes; whether anything was cut.

    Args:
        text: the result's text.
        images: its images (data URIs count with their whole source).
        limit: the bound (at least ``MIN_TOOL_RESULT_BYTES``); ``None``: no bound.

    Returns:
        The text (its head, the note, its tail when cut), the images kept, and True when cut.
    """
    raw = text.encode("utf-8", "surrogatepass")
    sizes = [len(image.src.encode("utf-8", "surrogatepass")) for image in images]
    total = len(raw) + sum(sizes)
    if limit is None or total <= limit:
        return text, tuple(images), False
    budget = max(0, limit - _NOTE_ROOM)
    keep_text = min(len(raw), budget)
    room = budget - keep_text
    kept: list[ImageRef] = []
    dropped = dropped_bytes = 0
    for image, size in zip(images, sizes, strict=True):
        if size <= room:
            kept.append(image)
            room -= size
        else:
            dropped += 1
            dropped_bytes += size
    head = _head(raw, int(keep_text * _HEAD_SHARE))
    tail = _tail(raw, keep_text - len(head)) if keep_text < len(raw) else b""
    if keep_text >= len(raw):
        head, tail = raw, b""
    omitted = len(raw) - len(head) - len(tail)
    extra = f"; {dropped} image(s) of {dropped_bytes:,} bytes omitted" if dropped else ""
    note = TRUNCATED_NOTE.format(total=total, limit=limit, omitted=omitted, images=extra)
    out = head.decode("utf-8", "surrogatepass") + note + tail.decode("utf-8", "surrogatepass")
    return out, tuple(kept), True
