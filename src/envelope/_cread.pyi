"""The read path's hot passes in C (built with the mypyc group): routing and UTF-8.

Owns: ``split_lines``, the compiled build's split of a batch of SSE events
(``_sse.SSEReader._batch``), ``is_utf8``, the compiled build's check of a batch of SSE lines (``_sse._is_utf8``:
the answer of strict ``bytes.decode("utf-8")`` without building the str), and
``route_run``, the compiled build's form of ``Reconstructor._feed_run``'s fast path over a
run of lines: each line that is exactly a known prefix (type, agent, ``final: false``,
as this codec encodes them), one JSON string, and its open block's tail (``_Open.tail``)
has its delta appended to that block, in C, with no call per line: as UTF-8 to the block's
``buf`` (a bytearray, made when it is ``None``), which ``_Open.flush`` decodes to one str. The same test as the
Python fast path, and a subset of what it takes: a line with an escaped surrogate, paired
or lone, whitespace, bytes that are not UTF-8, or a block at ``max_block_bytes`` is left to
the Python path, which is the reference and holds every check (spec §6.4, spec/limits.md
L1, L5). Does not own: when it is used (``_reconstruct._feed_run``, only when
``_speedups.loaded()`` is ``"compiled"``; ``ENVELOPE_PURE=1`` runs the Python reference).
Source: ``_cread.c``, built by ``setup.py`` (``C_EXTENSIONS``).
"""

from collections.abc import Sequence
from typing import Any

def route_run(
    data: Sequence[bytes | str],
    start: int,
    fast: dict[bytes, tuple[str, str]],
    sizes: list[int],
    opened: dict[tuple[str, str], Any],
    max_size: int,
    /,
) -> int:
    """Append the deltas of the continuation lines ``data[start:]`` takes; the index of the first it leaves.

    Args:
        data: the lines (only a ``list`` is read; any other sequence is left whole).
        start: the first line to try.
        fast: each known prefix and its ``(agent, type)`` key.
        sizes: the distinct lengths of the prefixes.
        opened: the open blocks by key; each has ``buf``, ``size`` and ``tail``.
        max_size: ``max_block_bytes``: a line that would take its block past it is left.

    Raises:
        TypeError: an argument of another type.
    """

def split_lines(data: bytes, max_line: int, /) -> tuple[list[bytes], int] | None:
    """The data lines of ``data[:cut]``, ``cut`` just after its last blank line, when each event there is one line.

    Each event of ``data[:cut]`` must be ``data: `` + a line + two LFs, the line UTF-8 (as
    ``is_utf8``) and at most ``max_line - 6`` bytes long: what ``_sse.SSEReader._split``
    returns, in one pass (spec [RF1-a]). ``None`` when ``data`` is not that (no blank
    line, another field, a line with no space after ``data:``, a long line, bad UTF-8).

    Raises:
        TypeError: ``data`` is not bytes, or ``max_line`` not an int.
    """

def is_utf8(data: bytes, /) -> bool:
    """Whether ``data`` is UTF-8 as ``data.decode("utf-8")`` reads it (strict), without decoding it.

    Raises:
        TypeError: ``data`` is not bytes.
    """
