"""A JSON string escaper that writes straight into framed lines (C, built with the mypyc group).

Owns: ``escape_lines``, the compiled build's fused form of the emitter's buffered path:
``_chunker.cut_lines(_chunker.escape(text), budget, last_budget, opening, last_opening,
close)`` in one pass over ``text``'s UTF-8, each escaped piece written once, into the
``bytes`` of its own line (issue 31: copying pieces out of a whole escaped payload cost
about half of msgspec's encode of it). Byte-identical to that reference: msgspec's
escaping (``"``, ``\\``, ``\\b \\t \\n \\f \\r``, ``\\u00xx`` for the other controls, all else
raw UTF-8, DEL and U+2028/U+2029 included) and spec §6.2's maximal legal cuts.
Does not own: when it is used (``_chunker.fused_lines``, only when
``_speedups.loaded()`` is ``"compiled"``; ``ENVELOPE_PURE=1`` runs the Python reference),
or the error for a lone surrogate (it returns ``None`` and the caller's Python path raises
``EncodeError``). Source: ``_cescape.c``, built by ``setup.py`` (``C_EXTENSIONS``).
"""

def escape_lines(
    text: str, budget: int, last_budget: int, opening: bytes, last_opening: bytes, close: bytes, /
) -> list[bytes] | None:
    """The lines of ``cut_lines(escape(text), ...)``, or ``None`` when ``text`` holds a lone surrogate.

    Args:
        text: the payload.
        budget: room for a non-last piece; at least 6.
        last_budget: room for the last piece; at least ``budget``.
        opening: the bytes before a non-last piece.
        last_opening: the bytes before the last piece.
        close: the bytes after every piece.

    Raises:
        ValueError: ``budget < 6`` or ``last_budget < budget``.
    """
