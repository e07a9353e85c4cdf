"""``frame``'s cost as a ratio to the bare concatenation it wraps, in one process.

Run: ``python -m benchmarks.frame_ab`` with the build to measure installed (or an older
build's ``src`` first on ``PYTHONPATH``), once per build, alternately: each run prints,
per line size, the median and quartiles of nine per-round ratios of ``frame(line)`` to
``b"data: " + line + b"\n\n"`` timed in the same round (CPU time), so two builds compare
by their ratios whatever the load. This is how the CR/LF check's cost was quoted
before and after it changed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from envelope import Emitter, frame


def main(argv: list[str] | None = None) -> int:
    """Time both, print one JSON line of ratios."""
    argparse.ArgumentParser(
        prog="python -m benchmarks.frame_ab",
        description="frame(line)'s CPU time as a ratio to the bare concatenation it wraps, per line size "
        "(median and quartiles of nine rounds); prints one JSON line.",
    ).parse_args(argv)
    em = Emitter("0f8fad5b-d9cb-469f-a165-70867728950e")
    lines = {
        "20 B delta": em.streamed("text", "hello world, twenty b")[0],
        "2 KiB line": em.buffered("tool_result", "x" * 3000, id="t", name="n")[0],
    }
    out: dict[str, list[float]] = {}
    for name, line in lines.items():
        n = 100_000
        ratios: list[float] = []
        for _ in range(9):
            start = time.process_time()
            for _ in range(n):
                frame(line)
            framed = time.process_time() - start
            start = time.process_time()
            for _ in range(n):
                b"data: " + line + b"\n\n"  # the reference: the concat alone
            bare = time.process_time() - start
            ratios.append(framed / bare)
        q1, median, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
        out[name] = [round(median, 2), round(q1, 2), round(q3, 2)]
    print(json.dumps({"frame / concat (median, q1, q3)": out}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
