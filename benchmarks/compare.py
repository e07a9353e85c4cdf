"""Run the peer comparison as a script: the same as ``envelope bench``.

Usage (from the repository root)::

    .venv/bin/python benchmarks/compare.py [--size-mb N] [--rounds R] [--out DIR]

It prints the table (events/s, MB/s, peak memory, time relative to ours, lines over
the bound), checks the targets, and writes ``DIR/bench.md`` and ``DIR/bench.png``.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    """Run ``envelope bench`` with ``argv``; use ``src/`` when the package is not installed."""
    try:
        import envelope  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from envelope.cli import main as cli_main

    return cli_main(["bench", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
