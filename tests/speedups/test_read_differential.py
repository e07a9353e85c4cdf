"""The compiled read path against the pure one, differentially, on drawn streams (spec [RF1-c]).

Two workers (``read_worker.py``), one per build, read the same cases: streams of
interleaved agents whose continuation lines are the shape ``_cread`` takes (and near misses
it must leave: escaped surrogates, lone ones, another id, a block at its limit, ``[DONE]``
and the next response), cut at drawn byte offsets, each piece fed by a drawn mix of
``feed_many`` on the batch or a list, ``feed`` per line, half and half, and ``transcript()``
between pieces (which flushes the buffers the C pass fills, spec [RF1-b]). Both builds must
give the same snapshots, blocks, open keys, ``done`` and error (class, message, line, byte
offset, envelope index, field, section, key), under fixed seeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

if TYPE_CHECKING:
    from collections.abc import Iterator

WORKER = str(Path(__file__).with_name("read_worker.py"))
SEEDS = (1, 43, 2026)
AGENTS = ["a", "b", "agent-\u03b2", 'q"uote']
KINDS = ["text", "thinking", "tool_result"]
#: Delta texts: plain, escapes of every kind, non-ASCII, a character outside the BMP.
TEXTS = st.text(alphabet=st.sampled_from(list('ab \n\t"\\/\x00\x1f\x7f\u00e9\u20ac\u6f22\U0001f600')), max_size=12)
#: Lines that are no continuation the C pass may take, put in the streams now and then.
ODD = [
    '"\\ud800 lone"',  # a lone surrogate: refused (spec §6.4)
    '"\\ud83d\\ude00 pair"',  # an escaped pair: the Python path's
    '"x" ',  # whitespace after the string
    '"\\u12G4"',  # bad hex
]


def _line(kind: str, agent: str, final: bool, delta: bytes, block: int) -> bytes:
    enc = msgspec.json.encode
    head = b'{"type":' + enc(kind) + b',"agent":' + enc(agent) + b',"final":' + (b"true" if final else b"false")
    tail = b',"id":' + enc(f"t{block}") + b',"name":"read"}' if kind == "tool_result" else b"}"
    return head + b',"delta":' + delta + tail


@st.composite
def _streams(draw: st.DrawFn) -> bytes:
    """SSE bytes: blocks of interleaved agents, a few odd lines, maybe ``[DONE]`` and more."""
    events: list[bytes] = []
    opened: dict[str, tuple[str, int]] = {}
    for step in range(draw(st.integers(1, 40))):
        agent = draw(st.sampled_from(AGENTS))
        kind, block = opened.get(agent, (draw(st.sampled_from(KINDS)), step))
        text = draw(TEXTS)
        # As the codec writes it (raw UTF-8), or all ASCII with \u escapes (pairs outside the BMP).
        delta = msgspec.json.encode(text) if draw(st.booleans()) else json.dumps(text).encode()
        roll = draw(st.integers(0, 19))
        if roll == 0:
            delta = draw(st.sampled_from(ODD)).encode()
        elif roll == 1:
            block += 1  # another id: refused while the block is open (spec §7.2-d)
        final = roll == 2 or draw(st.integers(0, 9)) == 0
        events.append(_line(kind, agent, final, delta, block))
        if final:
            opened.pop(agent, None)
        else:
            opened[agent] = (kind, block)
        if roll == 3:
            events.append(b"[DONE]")
            opened.clear()
            if draw(st.booleans()):
                events.append(b'{"type":"meta_init","agent":"a","final":true,"delta":"{}"}')
    return b"".join(b"data: " + e + b"\n\n" for e in events)


@st.composite
def _cases(draw: st.DrawFn) -> dict[str, Any]:
    data = draw(_streams())
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(data) - 1)), max_size=8))))
    modes = draw(st.lists(st.sampled_from(["many", "list", "each", "half", "snap"]), min_size=1, max_size=6))
    return {"sse": data.hex(), "cuts": cuts, "modes": modes, "max_block": draw(st.sampled_from([6, 40, 1 << 20]))}


class _Worker:
    def __init__(self, pure: str) -> None:
        env = {**os.environ, "ENVELOPE_PURE": pure}
        self.proc = subprocess.Popen(
            [sys.executable, WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def ask(self, line: str) -> Any:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, "the worker stopped"
        return json.loads(answer)

    def close(self) -> None:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[_Worker, _Worker]]:
    pure, compiled = _Worker("1"), _Worker("0")
    yield pure, compiled
    pure.close()
    compiled.close()


@pytest.mark.parametrize("fixed", SEEDS)
def test_spec_rf1_c_compiled_and_pure_read_mixed_feeds_alike(fixed: int, workers: tuple[_Worker, _Worker]) -> None:
    """[RF1-c], and [RF1-a], [RF1-b] as they meet the Python path: the same outcome, both builds.

    On a machine without a compiler both workers are pure and this compares a build with
    itself; CI requires the compiled build (``test_speedups``).
    """
    pure, compiled = workers
    seen = {"errors": 0, "content": 0, "snaps": 0}

    @seed(fixed)
    @settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=_cases())
    def check(case: dict[str, Any]) -> None:
        line = json.dumps(case)
        want = pure.ask(line)
        assert compiled.ask(line) == want
        seen["errors"] += want["error"] is not None
        seen["snaps"] += bool(want["snaps"])
        seen["content"] += any(
            b.get("content") for agent in want["transcript"]["agents"].values() for b in agent["blocks"]
        )

    check()
    # The draws reach both sides: errors, rebuilt content, snapshots between pieces.
    assert min(seen.values()) > 5, seen
