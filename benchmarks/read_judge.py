"""The read and validate targets judged on a loaded machine: alternated rounds, each candidate's least of N.

Run: ``python -m benchmarks.read_judge [--size-mb N] [--rounds R] [--repeat K] [--callgrind]``
(the build installed). On the ``read`` stage's stream (4 interleaved agents, 64 KiB reads):

* ``bare msgspec``: the read targets' reference (``engine.read_msgspec``);
* ``read + reconstruct``: ``StreamReader.feed_batch`` + ``Reconstructor.feed_many`` +
  ``transcript()`` (``engine.read_ours``);
* ``validate``: ``StreamValidator`` (``engine.validate_ours``), judged against read +
  reconstruct;
* ``json.loads + dicts``: the read target's baseline (``engine.read_json_loads``).

Why the least of ``--repeat`` runs a round: other jobs on a shared machine only ever add
CPU time to a run (cache and core contention, page faults), never remove it, so a round's
least time per candidate is the closest to its own cost and the per-round ratios of those
least times spread far less than ratios of single runs (the delivery benchmark's JS part
does the same). Within a round the candidates run in an order rotated round by round,
each repeat with the collector run first. The ratios printed are medians of the
per-round ratios, with their quartiles; a goal is met when the upper quartile is within
it (``envelope bench``'s rule).

``--callgrind`` instead runs each candidate once under ``valgrind --tool=callgrind
--cache-sim=yes`` in its own process, beside a process that builds the input and runs
nothing, and prints each candidate's instructions, D1 and last-level data misses minus
that process's: counts that do not move with the load, the other half of the judgement
(a candidate can match another's instructions and still take longer when it touches more
fresh memory). Does not own: the stages or inputs (``benchmarks.engine``,
``benchmarks.inputs``).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from envelope._speedups import loaded

from .engine import MB, _pieces, read_json_loads, read_msgspec, read_ours, validate_ours
from .inputs import iter_sse

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

#: The candidates, by name: each reads the whole stream's pieces.
READERS: dict[str, Callable[[Iterable[bytes]], int]] = {
    "bare msgspec": read_msgspec,
    "read + reconstruct": read_ours,
    "validate": validate_ours,
    "json.loads + dicts": read_json_loads,
}
#: (candidate, reference, goal, what the goal says): the targets this judges.
TARGETS = (
    ("read + reconstruct", "bare msgspec", 1.2, "at most 1.2x its time"),
    ("json.loads + dicts", "read + reconstruct", 3.5, "at least 3.5x ours (ours >= 3.5x faster)"),
    ("validate", "read + reconstruct", 1.2, "at most 1.2x its time"),
)


def least_rounds(data: bytes, rounds: int, repeat: int) -> dict[str, list[float]]:
    """Each candidate's least CPU time of ``repeat`` runs, one a round, in an order rotated run by run."""
    names = list(READERS)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        best: dict[str, float] = {}
        for k in range(repeat):
            shift = (r * repeat + k) % len(names)
            for name in names[shift:] + names[:shift]:
                gc.collect()
                start = time.process_time()
                READERS[name](_pieces(data))
                spent = time.process_time() - start
                best[name] = min(best.get(name, spent), spent)
        for name in names:
            times[name].append(best[name])
    return times


def judge(times: dict[str, list[float]]) -> list[str]:
    """The targets' lines: per-round ratio medians with quartiles, and whether the upper quartile meets the goal."""
    out = []
    for candidate, reference, goal, says in TARGETS:
        ratios = [c / r for c, r in zip(times[candidate], times[reference], strict=True)]
        if len(ratios) > 1:
            q1, median, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
        else:
            q1 = median = q3 = ratios[0]
        if reference == "read + reconstruct" and candidate == "json.loads + dicts":
            met = "met" if q1 >= goal else ("missed" if q3 < goal else "too noisy")
        else:
            met = "met" if q3 <= goal else ("missed" if q1 > goal else "too noisy")
        out.append(f"  {candidate} / {reference}: {median:.2f}x (q {q1:.2f}-{q3:.2f}); goal {says}: {met}")
    return out


_COUNTS = re.compile(r"^==\d+== (I   refs|D1  misses|LLd misses): +([\d,]+)", re.M)


def callgrind(size_mb: float) -> dict[str, dict[str, int]]:
    """Instructions and data misses of each candidate, less those of a process that runs none."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise FileNotFoundError("valgrind is not on PATH")
    counts: dict[str, dict[str, int]] = {}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parent.parent), *sys.path]))
    with tempfile.TemporaryDirectory(prefix="read-judge-") as tmp:
        for name in ("none", *READERS):
            command = [valgrind, "--tool=callgrind", "--cache-sim=yes", f"--callgrind-out-file={tmp}/out"]
            child = ["-m", "benchmarks.read_judge", "--child", name, "--size-mb", str(size_mb)]
            done = subprocess.run(
                [*command, sys.executable, *child],
                capture_output=True,
                text=True,
                env=env,
                check=False,
            )
            if done.returncode != 0:
                raise RuntimeError(f"callgrind of {name} failed: {done.stderr.strip()[-400:]}")
            counts[name] = {key: int(value.replace(",", "")) for key, value in _COUNTS.findall(done.stderr)}
    base = counts.pop("none")
    return {name: {key: value - base[key] for key, value in found.items()} for name, found in counts.items()}


def _print_counts(counts: dict[str, dict[str, int]]) -> None:
    ref = counts["bare msgspec"]
    print("callgrind, each candidate's process less one that runs none; ratios to bare msgspec:")
    for name, found in counts.items():
        cells = ", ".join(
            f"{key.split()[0]} {value:,} ({value / max(ref[key], 1):.2f}x)" for key, value in found.items()
        )
        print(f"  {name:<20} {cells}")
    ours = counts["read + reconstruct"]
    for name in ("validate", "json.loads + dicts"):
        print(f"  {name} / read + reconstruct, instructions: {counts[name]['I   refs'] / ours['I   refs']:.2f}x")


def main(argv: list[str] | None = None) -> int:
    """Parse the options; time (or count) the candidates; print the ratios and the targets."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.read_judge", description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=10.0, help="stream size in MiB (default: 10)")
    parser.add_argument("--rounds", type=int, default=15, help="alternated rounds (default: 15)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of each candidate a round, the least kept (default: 3)"
    )
    parser.add_argument(
        "--callgrind", action="store_true", help="count instructions and misses under callgrind instead"
    )
    parser.add_argument("--child", choices=["none", *READERS], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    data = b"".join(iter_sse(int(args.size_mb * MB)))
    if args.child is not None:
        if args.child != "none":
            READERS[args.child](_pieces(data))
        return 0
    if args.callgrind:
        _print_counts(callgrind(args.size_mb))
        return 0
    for run in READERS.values():  # warm-up: every path's first call out of the timing
        run(_pieces(data[: data.find(b"\n\n", 1 << 16) + 2]))
    times = least_rounds(data, args.rounds, args.repeat)
    print(
        f"build: {loaded()}; {len(data)} bytes of SSE; {args.rounds} rounds, least of {args.repeat} runs a round;"
        " CPU time"
    )
    ref = times["bare msgspec"]
    for name, values in times.items():
        ratios = [v / b for v, b in zip(values, ref, strict=True)]
        print(
            f"  {name:<20} {statistics.median(ratios):5.2f}x bare msgspec;"
            f" median {statistics.median(values) * 1000:.1f} ms"
        )
    for line in judge(times):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
