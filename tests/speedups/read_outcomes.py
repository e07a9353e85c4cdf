"""What the read path makes of adversarial streams, one digest per case, for one build.

``python tests/speedups/read_outcomes.py`` prints ``{case: [outcome...]}`` as JSON for the
``envelope`` it imports; ``test_read_builds.py`` runs it compiled and with
``ENVELOPE_PURE=1`` and requires the same output (issue 43 §1: the compiled pass over the
continuation lines, ``_cread``, against the pure reference).

Each case is a stream drawn, under a fixed seed, from lines built to sit on either side of
``feed_many``'s fast path: continuation lines of text, thinking and tool_result blocks
(with their ids and names, or other ones), strings with every kind of escape (surrogate
pairs, lone surrogates, bad hex, controls), raw bytes that are not UTF-8, whitespace and
trailing bytes, ``[DONE]`` and the next response, block limits small enough to be met.
Each stream is read three ways: SSE bytes through ``StreamReader.feed_batch`` in pieces
into ``feed_many``, the lines as lists into ``feed_many``, and ``feed`` per line; the
outcome of each is the transcript, the open blocks, ``done``, and the error (type,
message, position) if one was raised.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from envelope import EnvelopeError, Reconstructor, StreamReader

SEEDS = (1, 2, 3, 43, 2026)
STREAMS_PER_SEED = 60

AGENTS = ["a", "b", "agent-\u03b2", 'q"uote']
GOOD = [
    '"plain words"',
    '""',
    '"tab\\tnew\\nline\\r\\b\\f\\/\\\\\\""',
    '"\\u0000\\u001f\\u007f\\u00e9\\u20ac\\uffff"',
    '"\\ud83d\\ude00 pair"',
    '"\\uD83D\\uDE00 upper pair"',
    '"raw \u00e9\u6f22\U0001f600"',
    '"x" ',
]
#: Strings that are not one JSON string this codec reads (or are, with bytes around them).
BAD = [
    '"\\ud800 lone high"',
    '"lone low \\udc00"',
    '"\\ud800"',
    '"\\u12G4"',
    '"\\u12"',
    '"\\x"',
    ' "x"',
]
RAW = [b'"\xff"', b'"\xed\xa0\x80"', b'"\x01"', b'"\xe6\xbc"', b'"ok"']


def _encode(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _line(rng: random.Random, opened: dict[tuple[str, str], str], bad: float) -> bytes:
    agent = rng.choice(AGENTS)
    kind = rng.choice(["text", "thinking", "tool_result", "tool_result", "tool_call"])
    final = rng.random() < 0.15
    head = f'{{"type":{_encode(kind)},"agent":{_encode(agent)},"final":{"true" if final else "false"},"delta":'
    if rng.random() < bad:
        body = rng.choice(BAD).encode() if rng.random() < 0.7 else rng.choice(RAW)
    elif rng.random() < 0.7:
        body = rng.choice(GOOD).encode()
    else:
        body = _encode("".join(rng.choice('ab \n"\\\u00e9') for _ in range(rng.randint(0, 300)))).encode()
    tail = "}"
    if kind in ("tool_result", "tool_call"):
        key = (agent, kind)
        wid = opened.setdefault(key, f"t{rng.randint(1, 3)}")
        if rng.random() < bad:
            wid = "other"
        name = "read_file" if rng.random() < 0.9 else "grep"
        tail = rng.choice(
            [
                f',"id":{_encode(wid)},"name":{_encode(name)}}}',
                f',"id":{_encode(wid)},"name":{_encode(name)}}}',
                f',"id":{_encode(wid)}}}',
                f',"name":{_encode(name)},"id":{_encode(wid)}}}',
                "}",
            ]
        )
        if final:
            opened.pop(key, None)
    if rng.random() < bad:
        tail += rng.choice([" ", "}", "\t"])
    return head.encode() + body + tail.encode()


def _stream(rng: random.Random) -> list[bytes]:
    opened: dict[tuple[str, str], str] = {}
    bad = rng.choice([0.0, 0.002, 0.01, 0.05])
    lines = [b'{"type":"meta_init","agent":"a","final":true,"delta":"{}"}']
    for _ in range(rng.randint(1, 120)):
        roll = rng.random()
        if roll < 0.01:
            lines.append(b"[DONE]")
            if rng.random() < 0.8:
                lines.append(b'{"type":"meta_init","agent":"a","final":true,"delta":"{}"}')
        elif roll < 0.02:
            lines.append(b'{"type":"meta_init","agent":"b","final":true,"delta":"{}"}')
        else:
            lines.append(_line(rng, opened, bad))
    return lines


def _outcome(rec: Reconstructor, error: EnvelopeError | None) -> dict[str, Any]:
    return {
        "transcript": rec.transcript().to_dict(),
        "open": [list(key) for key in rec.open_blocks()],
        "done": rec.done,
        "error": None if error is None else [type(error).__name__, str(error), repr(error.position)],
    }


def _by_sse(lines: list[bytes], limit: int, rng: random.Random) -> dict[str, Any]:
    body = b"".join(b"data: " + line + b"\n\n" for line in lines)
    reader = StreamReader("sse")
    rec = Reconstructor(max_block_bytes=limit)
    try:
        at = 0
        while at < len(body):
            step = rng.choice([7, 300, 4096, 65536])
            rec.feed_many(reader.feed_batch(body[at : at + step]))
            at += step
        rec.feed_many(reader.close())
    except EnvelopeError as exc:
        return _outcome(rec, exc)
    return _outcome(rec, None)


def _by_lists(lines: list[bytes], limit: int, cut: int) -> dict[str, Any]:
    rec = Reconstructor(max_block_bytes=limit)
    try:
        rec.feed_many(lines[:cut])
        rec.feed_many(lines[cut:])
    except EnvelopeError as exc:
        return _outcome(rec, exc)
    return _outcome(rec, None)


def _one_by_one(lines: list[bytes], limit: int) -> dict[str, Any]:
    rec = Reconstructor(max_block_bytes=limit)
    try:
        for line in lines:
            rec.feed(line)
    except EnvelopeError as exc:
        return _outcome(rec, exc)
    return _outcome(rec, None)


def main() -> None:
    """Print every case's outcomes as JSON."""
    out: dict[str, list[dict[str, Any]]] = {}
    for seed in SEEDS:
        rng = random.Random(seed)
        for n in range(STREAMS_PER_SEED):
            lines = _stream(rng)
            limit = rng.choice([300, 5000, 1 << 20, 1 << 20])
            cut = rng.randint(0, len(lines))
            out[f"{seed}/{n}"] = [
                _by_sse(lines, limit, random.Random(seed * 1000 + n)),
                _by_lists(lines, limit, cut),
                _one_by_one(lines, limit),
            ]
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
