"""Growth: the migrator's time is linear in its input on the worst shapes found (issue 18 §1, §5).

Each case migrates an input of size n and one of size 10n in the same run and compares
the two CPU times (best of a few tries, ``time.process_time``, so neighbours on a shared
machine count less): linear work gives a ratio near 10, quadratic near 100. The bound is
loose (25) and nothing is compared against a clock; each input is sized so that its
small run still takes milliseconds, well above the timer's resolution. A ratio over the
bound is measured again (three times in all) before the test fails.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

import pytest

from envelope import XmlMigrator

if TYPE_CHECKING:
    from collections.abc import Callable

A = "11111111-1111-1111-1111-111111111111"
#: Linear is about 10; quadratic about 100 (spec/validation.md §6.2: bounded work per byte).
MAX_RATIO = 25.0


def _frame(records: list[bytes]) -> bytes:
    return b"".join(b"data: " + r + b"\n\n" for r in records)


def _call(n: int) -> bytes:
    arguments = b"{&quot;a&quot;: &quot;" + b"x" * n + b"&quot;}"
    return b'<content-block-tool_call id="t" name="n" arguments="' + arguments + b'"></content-block-tool_call>'


_DEEP_CALL: Final = b'<content-block-tool_call id="t" name="n" arguments="' + b"[" * 250 + b"]" * 250 + b'"/>'

#: name -> (input of about n bytes, feed size, options)
SHAPES: dict[str, Callable[[int], tuple[bytes, int, dict[str, Any]]]] = {
    # A tool call's `arguments` holding a whole file, fed as a server sends it.
    "long attribute in 1 KiB chunks": lambda n: (_call(n), 1024, {}),
    "long attribute, raw SSE, 1 KiB chunks": lambda n: (_frame([_call(n)]), 1024, {}),
    "long text body in 1 KiB chunks": lambda n: (
        b"<content-block-text>" + b"ab\n" * (n // 3) + b"</content-block-text>",
        1024,
        {},
    ),
    # Era undecided (backslashes, no line feed): the block is held until its end (§M3.1-c).
    "long held text body": lambda n: (
        b"<content-block-text>" + b"a\\\\" * (n // 3) + b"</content-block-text>",
        1024,
        {},
    ),
    # CDATA bodies end only at a close tag preceded by `]]>` (§M2.3): many false ends, fed whole.
    "body with many false close tags, whole": lambda n: (
        b'<content-block-tool_result id="t" name="n"><![CDATA['
        + b"x</content-block-tool_result>" * (n // 29)
        + b"]]></content-block-tool_result>",
        1 << 40,
        {},
    ),
    "many tiny raw SSE records": lambda n: (
        _frame([b"<content-block-text>", *[b"a"] * (n // 9), b"</content-block-text>"]),
        4096,
        {},
    ),
    "many tags in one feed": lambda n: (b"<content-block-text>a</content-block-text>" * (n // 42), 1 << 40, {}),
    "many results in one feed": lambda n: (
        b'<content-block-tool_result id="t" name="n"><![CDATA[x]]></content-block-tool_result>' * (n // 84),
        1 << 40,
        {},
    ),
    "whitespace after an empty element": lambda n: (
        b'<meta_init data="{}">' + b" " * n + b"</meta_init>",
        1024,
        {"lenient": True},
    ),
    # Nesting as deep as a payload may go (MAX_NESTING_DEPTH is 256), many times.
    "deeply nested arguments, many calls": lambda n: (_DEEP_CALL * (n // len(_DEEP_CALL)), 1024, {}),
}


def _cost(data: bytes, size: int, options: dict[str, Any], tries: int) -> float:
    best = float("inf")
    for _ in range(tries):
        migrator = XmlMigrator(agent=A, **options)
        start = time.process_time()
        for at in range(0, len(data), size):
            migrator.feed(data[at : at + size])
        migrator.close()
        best = min(best, time.process_time() - start)
    return best


#: The n of shapes whose per-byte cost is high, sized to keep the test short while the
#: quadratic term still dominates at 10n (each failed at 3x to 10x the bound before its fix).
SIZES: Final = {"long held text body": 100_000, "many tags in one feed": 150_000, "many results in one feed": 150_000}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_migration_time_grows_linearly(shape: str) -> None:
    n = SIZES.get(shape, 400_000)
    small, size, options = SHAPES[shape](n)
    large, _, _ = SHAPES[shape](10 * n)
    ratios: list[float] = []
    for _ in range(3):  # a ratio over the bound is measured again: noise passes once, quadratic never
        ratios.append(_cost(large, size, options, 2) / _cost(small, size, options, 3))
        if ratios[-1] < MAX_RATIO:
            return
    raise AssertionError(f"{shape}: 10x the input took {', '.join(f'{r:.0f}' for r in ratios)}x the time")
