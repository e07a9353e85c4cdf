"""What ``envelope``'s subcommands share, apart from ``cli.py`` (issue 28 §3).

``envelope.cli`` builds the parser and adds ``envelope check``'s subcommand from
``envelope.check`` lazily; ``check`` needs a few of the same pieces. They live here so
neither module imports the other: the ``--max-line-bytes`` option, the advice added to a
violation's message, a positive-integer argument type, and ``discard`` for a stream that
failed.
"""

from __future__ import annotations

import argparse
import os
from typing import Final

from ._limits import DEFAULT_MAX_LINE_BYTES

__all__ = ["add_max_line_bytes", "code_advice", "discard"]

#: The same for violations, by code (spec/cli.md C2-c): the flag that changes the verdict.
_CODE_ADVICE: Final = {
    "E109": "the cap is --max-line-bytes N (now {max_line_bytes})",
}


def code_advice(code: str, max_line_bytes: int) -> str:
    """The ``; WHAT TO DO`` part the command line adds to a violation's message ("" when none)."""
    advice = _CODE_ADVICE.get(code)
    return f"; {advice.format(max_line_bytes=max_line_bytes)}" if advice else ""


def discard(stream: object) -> None:
    """Point a failed stream's descriptor at /dev/null: the interpreter's last flush at exit
    then succeeds (a failing one would turn any exit status into 120)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())  # type: ignore[attr-defined]  # a file object
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_max_line_bytes(parser: argparse.ArgumentParser) -> None:
    """``--max-line-bytes N``: the reader's cap on one physical line (spec §2.3, E109's remedy)."""
    parser.add_argument(
        "--max-line-bytes",
        type=_positive,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="N",
        help=f"the reader's cap on one physical line in bytes; a longer line is refused (E109) "
        f"(default: {DEFAULT_MAX_LINE_BYTES})",
    )
