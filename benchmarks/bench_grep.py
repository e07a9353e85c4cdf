"""Grep's two searches on one generated tree: ripgrep (when on PATH) against Python's ``re``, as a ratio.

Run: ``PYTHONPATH=src python -m benchmarks.bench_grep [--files N] [--rounds R]`` (default 10,000
files, 3 rounds). Builds a tree of N small source-like files (a hundred directories, a
match in one file of fifty) in a temporary directory, then times ``search.grep`` in each
output mode with each backend, best of R rounds, and prints a table with the ratio
python / ripgrep (above 1: ripgrep is faster). Both searches are checked to give the
same output before any time is reported. Without ``rg`` on PATH only Python's times are
printed, and that is said.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Literal

from agent_ref.tools.workspace import Workspace, search

Backend = Literal["ripgrep", "python"]
MODES: tuple[search.OutputMode, ...] = ("files_with_matches", "count", "content")


def build_tree(root: Path, files: int) -> None:
    """``files`` files of about 40 lines under ``root``, in a hundred directories; one in fifty holds NEEDLE."""
    body = "".join(f"def function_{n}(value):\n    return value * {n}  # plain line\n" for n in range(20))
    for n in range(files):
        folder = root / f"pkg{n % 100:02d}" / f"sub{n % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        extra = f"# NEEDLE {n}\n" if n % 50 == 0 else ""
        (folder / f"module_{n}.py").write_text(body + extra, encoding="utf-8")


def best_of(ws: Workspace, query: search.GrepQuery, use: Backend, rounds: int) -> tuple[float, str]:
    """The fastest of ``rounds`` searches in seconds, and the output."""
    best = float("inf")
    out = ""
    for _ in range(rounds):
        start = time.perf_counter()
        out = search.grep(ws, query, use=use)
        best = min(best, time.perf_counter() - start)
    return best, out


def main(argv: list[str] | None = None) -> int:
    """Build the tree, time each mode with each backend, print the table (0; 1 when the outputs differ)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_grep", description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000, help="files in the generated tree (default: 10000)")
    parser.add_argument("--rounds", type=int, default=3, help="searches per backend and mode; the best counts")
    args = parser.parse_args(argv)
    if args.files < 1 or args.rounds < 1:
        parser.error("--files and --rounds must be at least 1")
    have_rg = shutil.which("rg") is not None
    with tempfile.TemporaryDirectory(prefix="bench-grep-") as tmp:
        build_tree(Path(tmp), args.files)
        ws = Workspace.at(tmp)
        print(f"grep over {args.files:,} files, best of {args.rounds}")
        print("| mode | python s | ripgrep s | python / ripgrep |")
        print("|---|---|---|---|")
        for mode in MODES:
            query = search.GrepQuery("NEEDLE [0-9]+", output_mode=mode)
            py, py_out = best_of(ws, query, "python", args.rounds)
            if not have_rg:
                print(f"| {mode} | {py:.3f} | (rg not on PATH) | - |")
                continue
            rg, rg_out = best_of(ws, query, "ripgrep", args.rounds)
            if rg_out != py_out:
                print(f"| {mode} | outputs differ: not timed |")
                return 1
            print(f"| {mode} | {py:.3f} | {rg:.3f} | {py / rg:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
