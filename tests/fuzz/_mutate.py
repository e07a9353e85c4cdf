"""Byte mutations for the fuzzer: the shapes a broken proxy, a crawler or a hostile tool produce.

Each mutation takes the input, a random source and the other seed inputs, and returns
new bytes plus a short description (kept for the failure report, so a failure can be
replayed from its seed and step alone).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import random
    from collections.abc import Callable, Sequence

#: Depth of the nesting mutation: far past MAX_NESTING_DEPTH (256) and msgspec's own
#: recursion limit (near 1,000), the case plain byte mutation cannot reach (issue 18 §2).
DEEP = 1000
_DELTA = re.compile(rb'"delta":"')
_OBJECT = re.compile(rb'(?:^|\n|data: ?)\{"type"')
_INSERTS = (b"\r", b"\n", b"\x00", b"\x80", b"\r\n", b"\n\n", b"\xef\xbb\xbf", b"data: ", b"[DONE]")


def flip(data: bytes, rng: random.Random, _: Sequence[bytes]) -> tuple[bytes, str]:
    if not data:
        return data, "flip(empty)"
    at = rng.randrange(len(data))
    value = rng.randrange(256) if rng.random() < 0.5 else data[at] ^ (1 << rng.randrange(8))
    return data[:at] + bytes([value]) + data[at + 1 :], f"flip({at},{value})"


def delete(data: bytes, rng: random.Random, _: Sequence[bytes]) -> tuple[bytes, str]:
    at = rng.randrange(len(data) + 1)
    size = rng.choice((1, 1, 2, 8, 64, 512))
    return data[:at] + data[at + size :], f"delete({at},{size})"


def duplicate(data: bytes, rng: random.Random, _: Sequence[bytes]) -> tuple[bytes, str]:
    start = rng.randrange(len(data) + 1)
    piece = data[start : start + rng.choice((1, 8, 64, 512, 4096))]
    at = rng.randrange(len(data) + 1)
    return data[:at] + piece * rng.choice((1, 2, 16)) + data[at:], f"duplicate({start},{len(piece)},{at})"


def insert(data: bytes, rng: random.Random, _: Sequence[bytes]) -> tuple[bytes, str]:
    at = rng.randrange(len(data) + 1)
    piece = rng.choice(_INSERTS)
    return data[:at] + piece + data[at:], f"insert({at},{piece!r})"


def splice(data: bytes, rng: random.Random, others: Sequence[bytes]) -> tuple[bytes, str]:
    other = rng.choice(others)
    start = rng.randrange(len(other) + 1)
    piece = other[start : start + rng.choice((16, 256, 4096))]
    at = rng.randrange(len(data) + 1)
    cut = rng.choice((0, 0, len(piece)))
    return data[:at] + piece + data[at + cut :], f"splice({start},{len(piece)},{at},{cut})"


def nest(data: bytes, rng: random.Random, _: Sequence[bytes]) -> tuple[bytes, str]:
    """Nest something 1,000 deep: a payload (inside one delta or across two), or a whole member."""
    deltas = [m.end() for m in _DELTA.finditer(data)]
    choice = rng.randrange(3)
    if choice == 0 and deltas:
        # A payload wrapped whole: brackets at the start of one delta, and at the end of
        # the same or a later delta (a payload chunked over several lines).
        first = rng.randrange(len(deltas))
        start = deltas[first]
        last = deltas[rng.randrange(first, len(deltas))]
        end = _string_end(data, last)
        return (
            data[:start] + b"[" * DEEP + data[start:end] + b"]" * DEEP + data[end:],
            f"nest(payload,{start},{end})",
        )
    objects = [m.end() - len(b'"type"') for m in _OBJECT.finditer(data)]
    if not objects:
        return data, "nest(none)"
    at = rng.choice(objects)
    name = b'"url"' if choice == 1 else b'"zz"'  # a citation extra (kept), or an unknown member (skipped)
    member = name + b":" + b"[" * DEEP + b"]" * DEEP + b","
    return data[:at] + member + data[at:], f"nest(member,{name.decode()},{at})"


def _string_end(data: bytes, start: int) -> int:
    """The offset of the quote that ends the JSON string whose body starts at ``start``."""
    at = start
    while at < len(data):
        if data[at] == 0x5C:  # a backslash escapes the next byte
            at += 2
            continue
        if data[at] in (0x22, 0x0A, 0x0D):
            return at
        at += 1
    return len(data)


MUTATIONS: tuple[Callable[[bytes, random.Random, Sequence[bytes]], tuple[bytes, str]], ...] = (
    flip,
    delete,
    duplicate,
    insert,
    splice,
    nest,
)


def mutate(data: bytes, rng: random.Random, others: Sequence[bytes]) -> tuple[bytes, list[str]]:
    """Apply one to four random mutations; return the result and what was done."""
    done: list[str] = []
    for _ in range(rng.choice((1, 1, 2, 4))):
        data, what = rng.choice(MUTATIONS)(data, rng, others)
        done.append(what)
    return data, done


def chunks(data: bytes, rng: random.Random) -> tuple[list[bytes], str]:
    """Split ``data`` as a network might: whole, byte by byte (small inputs), or at random cuts."""
    kind = rng.randrange(4)
    if kind == 0:
        return [data], "whole"
    if kind == 1 and len(data) <= 4096:
        return [data[i : i + 1] for i in range(len(data))], "bytes"
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 12)))
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return pieces, f"cuts{cuts}"
