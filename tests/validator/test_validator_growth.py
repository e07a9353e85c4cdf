"""The validator's time grows linearly on the worst shapes found (issue 18 §1, §5).

Each test times the same shape at size n and 10n in one run (the best of three runs
each, in CPU time of this process, to damp a shared machine's noise) and asserts the ratio is well under the 100x a
quadratic cost would give; linear is about 10x. A ratio over the bound is measured again,
up to ``ATTEMPTS`` times, before the test fails. No absolute time is asserted.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import pytest

from envelope import StreamValidator

if TYPE_CHECKING:
    from collections.abc import Callable

#: Linear is ~10; quadratic ~100. Loose, for a shared machine.
MAX_RATIO = 35


def best_time(run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


#: Measurements of a ratio before the test fails: a linear cost passes on a quiet one, a
#: quadratic one fails them all, so one unlucky measurement on a busy machine is not a failure.
ATTEMPTS = 3


def assert_linear(make: Callable[[int], Callable[[], object]], n: int) -> None:
    small, large = make(n), make(10 * n)
    small()  # warm up
    ratios: list[float] = []
    for _ in range(ATTEMPTS):
        ratios.append(best_time(large) / max(best_time(small), 1e-9))
        if ratios[-1] < MAX_RATIO:
            return
    raise AssertionError(f"time at 10n was {', '.join(f'{r:.1f}' for r in ratios)}x the time at n (bound {MAX_RATIO})")


def validate_chunks(data: bytes, size: int) -> list[object]:
    checker = StreamValidator()
    found: list[object] = []
    for i in range(0, len(data), size):
        found += checker.feed(data[i : i + size])
    return found + checker.close()


def test_blank_lines_before_content_are_linear() -> None:
    """100k blank lines then [DONE], format auto: the validator restarts its reader per blank line."""

    def make(n: int) -> Callable[[], object]:
        data = b"\n" * n + b"data: [DONE]\n\n"
        return lambda: validate_chunks(data, len(data))

    assert validate_chunks(b"\n" * 10 + b"data: [DONE]\n\n", 3) == []
    assert_linear(make, 10_000)


def test_blank_lines_in_tiny_chunks_are_linear() -> None:
    def make(n: int) -> Callable[[], object]:
        data = b"\n" * n + b"data: [DONE]\n\n"
        return lambda: validate_chunks(data, 7)

    assert_linear(make, 5_000)


@pytest.mark.parametrize("sse", [True, False], ids=["sse", "jsonl"])
def test_one_long_line_in_small_chunks_is_linear(sse: bool) -> None:
    """The partial line is held by the validator and fed to the reader once, at its end."""

    def make(n: int) -> Callable[[], object]:
        line = b'{"type":"text","agent":"a","final":true,"delta":"' + b"x" * n + b'"}'
        data = b"data: " + line + b"\n\ndata: [DONE]\n\n" if sse else line + b"\n[DONE]\n"
        return lambda: validate_chunks(data, 1024)

    assert_linear(make, 400_000)


def test_leading_spaces_in_small_chunks_are_linear() -> None:
    def make(n: int) -> Callable[[], object]:
        data = b" " * n + b"\ndata: [DONE]\n\n"
        return lambda: validate_chunks(data, 1024)

    assert_linear(make, 1_000_000)


def test_attempt_discarded_errors_are_linear() -> None:
    payload = json.dumps({"type": "attempt_discarded", "discard_blocks": 0})
    line = json.dumps({"type": "error", "agent": "a", "final": True, "delta": payload}).encode()

    def make(n: int) -> Callable[[], object]:
        data = (b"data: " + line + b"\n\n") * n + b"data: [DONE]\n\n"
        return lambda: validate_chunks(data, 4096)

    assert_linear(make, 5_000)


def test_unreadable_lines_are_linear() -> None:
    """Each unreadable line restarts the reader: the cost stays per line."""

    def make(n: int) -> Callable[[], object]:
        data = b"data: \x80\r" * n
        return lambda: validate_chunks(data, 4096)

    assert_linear(make, 5_000)
