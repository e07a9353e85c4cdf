"""Peak RSS of validating a large generated stream, streamed from a generator.

Run: ``PYTHONPATH=src python -m benchmarks.rss_validate [MB]`` (default 200).
Each mode runs in its own process (peak RSS is per process): ``baseline`` only builds
the generator and imports; ``stream`` feeds SSE bytes to ``StreamValidator``; ``lines``
feeds envelope lines to ``Validator``. Nothing is written to disk. Prints the peak RSS
of each mode, its growth over the baseline, and that growth per MB of input.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def _child(mode: str, mb: int) -> None:
    from benchmarks.validate_data import sse_chunks, stream_lines
    from envelope import StreamValidator, Validator

    total = mb * 1024 * 1024
    fed = 0
    found = 0
    start = time.perf_counter()
    if mode == "stream":
        checker = StreamValidator()
        for chunk in sse_chunks(total):
            fed += len(chunk)
            found += len(checker.feed(chunk))
        found += len(checker.close())
    elif mode == "lines":
        lines = Validator()
        for line in stream_lines(total):
            fed += len(line) + 1
            found += len(lines.feed(line))
        found += len(lines.close())
    else:
        next(iter(sse_chunks(total)))
    elapsed = time.perf_counter() - start
    print(f"{mode} {fed} {found} {_peak_mb():.1f} {elapsed:.2f}")


def main(argv: list[str] | None = None) -> None:
    """Run each mode in its own child and print its peak RSS (or, as a child, run one mode)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.rss_validate",
        description="Peak RSS of validating a large generated stream, streamed; each mode in its own process.",
    )
    parser.add_argument("mb", nargs="?", type=int, default=200, help="stream size in MiB (default 200)")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "MB"), help=argparse.SUPPRESS)  # one mode, in a child
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child[0], int(args.child[1]))
        return
    mb = args.mb
    results = {}
    for mode in ("baseline", "stream", "lines"):
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.rss_validate", "--child", mode, str(mb)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        results[mode] = (int(out[1]), int(out[2]), float(out[3]), float(out[4]))
    base = results["baseline"][2]
    print(f"baseline peak RSS {base:.1f} MB (interpreter, envelope, one generated turn)")
    for mode in ("stream", "lines"):
        fed, found, peak, secs = results[mode]
        growth = peak - base
        size = fed / 1024 / 1024
        print(
            f"{mode:6s}: {size:.0f} MB in {secs:.1f} s ({size / secs:.0f} MB/s), {found} violations, "
            f"peak RSS {peak:.1f} MB, +{growth:.1f} MB over baseline = {growth / size * 1024:.2f} KB per MB of input"
        )


if __name__ == "__main__":
    main()
