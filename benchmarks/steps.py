"""The timing loop the step-by-step benchmarks share: candidates alternated round by round, ratios to one.

``alternate`` times every candidate once a round, in an order rotated round by round, the
garbage collected before each, in CPU time; ``print_ratios`` prints each candidate's
median and quartiles of its per-round ratio to the reference timed in the same rounds
(so the ratios hold whatever the load; the spread says how noisy the run was). Used by
``benchmarks.emit_ab``, ``emit_floor`` and ``read_floor``. Does not own: the stages,
inputs or targets (``benchmarks.engine``).
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable


def alternate(candidates: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """Each candidate's CPU times, one a round, in an order rotated round by round."""
    times: dict[str, list[float]] = {name: [] for name in candidates}
    order = list(candidates.items())
    for r in range(rounds):
        shift = r % len(order)
        for name, run in order[shift:] + order[:shift]:
            gc.collect()
            start = time.process_time()
            run()
            times[name].append(time.process_time() - start)
    return times


def print_ratios(header: str, times: dict[str, list[float]], reference: str) -> None:
    """``header``, then a line a candidate: median ratio to ``reference`` per round, quartiles, median time."""
    print(header)
    width = max(map(len, times)) + 1
    base = times[reference]
    for name, values in times.items():
        ratios = [v / b for v, b in zip(values, base, strict=True)]
        q1, median, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
        print(
            f"  {name:<{width}} {median:5.2f}x  (q {q1:.2f}-{q3:.2f}; median {statistics.median(values) * 1000:.1f} ms)"
        )
