"""The validator's ordinary line in C (built with the mypyc group): a chunk of an open block, counted.

Owns ``take_run`` and ``scan_span``. ``take_run`` is the compiled build's form of
``Validator._run``'s commonest case: a line that continues an open block whose deltas the
validator does not keep (its ``parts`` is ``None``) and breaks no rule. Such a line starts
with one of ``prefixes`` (the encoding of its type, agent, ``final: false`` and, for the id
types, its block's id and name, as ``_validator_lines._fast_prefixes`` builds them), then
holds one JSON string (strict UTF-8, no surrogate escape, no control byte) and ``}``, within
``max_bytes``: the reference would count it and report nothing, which is all ``take_run``
does. Any other line (another encoding, whitespace, a surrogate escape, bytes that are not
UTF-8, a ``str``) is left to the
Python path, the reference, which holds every check (spec/envelope-v1.md VF1).
``scan_span`` is the compiled build's one pass over a span of complete lines for
``StreamValidator._whole_ok`` (spec VF1-d): whether it is strict UTF-8, whether an SSE line
ends in a lone CR, how many LF it holds, and where the first line other than ``data:`` or a
blank one starts, which the Python checks of SSE field lines then read on from.
Does not own: when they are used (``_validator_lines``, ``_validator_stream``; only when ``_speedups.loaded()`` is
``"compiled"``; ``ENVELOPE_PURE=1`` runs the Python reference).
Source: ``_cvalid.c``, built by ``setup.py`` (``C_EXTENSIONS``).
"""

from collections.abc import Sequence

def take_run(data: Sequence[bytes | str], start: int, prefixes: tuple[bytes, ...], max_bytes: int, /) -> int:
    """The index of the first line of ``data[start:]`` not taken (``start`` when none is).

    Args:
        data: the lines (only a ``list`` is read; any other sequence is left whole).
        start: the first line to try.
        prefixes: the prefixes of the lines that continue an open block the validator only counts.
        max_bytes: the bound on one line (spec §6.1): a longer line is left.

    Raises:
        TypeError: ``prefixes`` is not a tuple of bytes, or an argument of another type.
    """

def scan_span(chunk: bytes, start: int, stop: int, /) -> tuple[bool, bool, int, int]:
    """One pass over ``chunk[start:stop]``, complete lines after the LF at ``chunk[start - 1]``.

    Returns:
        ``(utf8, lone_cr, lines, other)``: whether the span is UTF-8 as ``str(span, "utf-8")``
        reads it (strict); whether a CR in it is not followed by LF; its LF count (complete
        only when ``utf8``); and the offset of the first LF, from ``start - 1`` on and before
        the span's last byte, that is followed by a line other than ``data:``, LF or CR LF
        (``_OTHER_SSE_LINE``'s match), or -1.

    Raises:
        TypeError: ``chunk`` is not bytes.
        ValueError: not ``1 <= start <= stop <= len(chunk)``.
    """
