"""Growth checks: the cost of an entry point at n and at 10n, compared in one run (issue 18 §5).

No absolute time is asserted anywhere: a linear entry point takes about 10x as long on
10x the input, a quadratic one about 100x, so a ratio bound of 30 tells them apart on
any machine while leaving room for noise. Each size is timed as the best of a few runs of
CPU time (``time.process_time``), with the garbage collector off, so that other processes
on a shared machine and collection pauses do not count; a ratio over the bound is measured
once more before the test fails, since one unlucky run must not fail CI, while a
quadratic entry point fails every time.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

#: The bound on ``time(10n) / time(n)``: linear gives ~10, quadratic ~100.
MAX_RATIO = 30.0


def _best(run: Callable[[int], object], n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        try:
            start = time.process_time()
            run(n)
            best = min(best, time.process_time() - start)
        finally:
            gc.enable()
    return best


def ratio(run: Callable[[int], object], n: int, *, repeat: int = 3) -> float:
    """``time(10n) / time(n)`` for ``run``, the best of ``repeat`` runs at each size."""
    small = max(_best(run, n, repeat), 1e-6)
    return _best(run, 10 * n, repeat) / small


def assert_linear(run: Callable[[int], object], n: int, *, repeat: int = 3) -> float:
    """Fail unless ``run`` grows about linearly from ``n`` to ``10n``; return the ratio.

    Args:
        run: does the work for input size ``n`` (builds nothing it then times twice).
        n: the smaller size; choose it so that ``run(n)`` takes some milliseconds.
        repeat: runs per size; the fastest counts.
    """
    found = ratio(run, n, repeat=repeat)
    if found > MAX_RATIO:
        found = min(found, ratio(run, n, repeat=repeat))  # one retry against noise, see the module
    assert found <= MAX_RATIO, f"time grew {found:.1f}x from n={n} to 10n (linear: ~10x, bound {MAX_RATIO})"
    return found


def peak_bytes(run: Callable[[], object]) -> int:
    """The peak of memory allocated by Python while ``run()`` runs (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
