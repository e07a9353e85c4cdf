"""The validator's ordinary line in C (built with the mypyc group): a chunk of an open block, counted.

Owns ``take_run``, the compiled build's form of ``Validator._run``'s commonest case: a line
that continues an open block whose deltas the validator does not keep (its ``parts`` is
``None``) and breaks no rule. Such a line starts with one of ``prefixes`` (the encoding of
its type, agent, ``final: false`` and, for the id types, its block's id and name, as
``Validator._fast_prefixes`` builds them), then holds one JSON string (strict UTF-8, no
surrogate escape, no control byte) and ``}``, within ``max_bytes``: the reference would
count it and report nothing, which is all ``take_run`` does. Any other line (another
encoding, whitespace, a surrogate escape, bytes that are not UTF-8, a ``str``) is left to the
Python path, the reference, which holds every check (spec/envelope-v1.md VF1).
Does not own: when it is used (``_validator_lines``, only when ``_speedups.loaded()`` is
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
