"""What the validator finds in recordings and adversarial streams, one list per case, for one build.

``python tests/speedups/valid_outcomes.py`` prints ``{case: [findings...]}`` as JSON for the
``envelope`` it imports; ``test_valid_builds.py`` runs it compiled and with
``ENVELOPE_PURE=1`` and requires the same output, byte for byte (spec VF1-c: the compiled
pass over the ordinary lines, ``_cvalid``, against the pure reference).

The cases: every recording under ``fixtures/`` and ``spec/conformance/`` (``.sse`` and
``.jsonl``), fed whole and in small pieces; and streams drawn under fixed seeds from lines
built to sit on either side of ``take_run``'s test: chunks of open text, thinking and
tool_result blocks (their ids and names, or other ones, or none), strings with every kind
of escape (surrogate pairs, lone surrogates, bad hex, controls), raw bytes that are not
UTF-8, whitespace and extra fields, final lines with a delta, chunks after the agent's
``meta_final`` or after ``[DONE]``, and bounds small enough to be met (``max_bytes``,
``max_payload_bytes``), under both profiles. Each stream is checked as SSE and as JSON lines
through ``StreamValidator`` in pieces (its batch loop, where ``take_run`` runs), and line by
line through ``Validator.feed``.
A finding is every field of its ``Violation`` (code, severity, line, offset, column, agent,
type, section, message).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import msgspec

from envelope import StreamValidator, Validator, Violation

ROOT = Path(__file__).resolve().parent.parent.parent
SEEDS = (1, 2, 3, 43, 2026)
STREAMS_PER_SEED = 60

AGENTS = ["a", "b", "agent-\u03b2", 'q"uote']
GOOD = [
    '"plain words"',
    '""',
    '"tab\\tnew\\nline\\r\\b\\f\\/\\\\\\""',
    '"\\u0000\\u001f\\u007f\\u00e9\\u20ac\\uffff\\uD7FF\\uE000"',
    '"\\ud83d\\ude00 pair"',
    '"raw \u00e9\u6f22\U0001f600\ufffe"',
]
#: Strings that are not one JSON string ``take_run`` takes (or are, with bytes around them).
BAD = [
    '"\\ud800 lone high"',
    '"lone low \\udc00"',
    '"\\uDBFF"',
    '"\\u12G4"',
    '"\\u12"',
    '"\\x"',
    '"\\',
    ' "x"',
    '"x" ',
    '"x"}',
    '"x",',
    '"unterminated',
    "17",
    "null",
]
RAW = [b'"\xff"', b'"\xed\xa0\x80"', b'"\x01"', b'"\xe6\xbc"', b'"\xc0\xaf"', b'"\xf4\x90\x80\x80"', b'"\xe0\x80\x80"']
TAILS = ["", "", "", ',"extra":1', ',"id":"t1"', ',"name":"n"', ',"final":true']


def _encode(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _body(rng: random.Random, bad: float) -> bytes:
    if rng.random() < bad:
        return rng.choice(BAD).encode() if rng.random() < 0.7 else rng.choice(RAW)
    if rng.random() < 0.6:
        return rng.choice(GOOD).encode()
    return _encode("".join(rng.choice('ab \n"\\\u00e9\U0001f600') for _ in range(rng.randint(0, 300)))).encode()


def _line(rng: random.Random, opened: dict[tuple[str, str], tuple[str, str]], bad: float) -> bytes:
    agent = rng.choice(AGENTS)
    kind = rng.choice(["text", "text", "thinking", "tool_result", "tool_result", "tool_call", "server_tool_result"])
    final = rng.random() < 0.12
    head = f'{{"type":{_encode(kind)},"agent":{_encode(agent)},"final":{"true" if final else "false"},'
    if kind in ("tool_result", "tool_call", "server_tool_result"):
        key = (agent, kind)
        wid, name = opened.setdefault(key, (f"t{rng.randint(1, 3)}", rng.choice(["read_file", "web_search"])))
        if rng.random() < bad:
            wid = "other"
        if rng.random() < bad:
            head += f'"id":{_encode(wid)},'  # no name: E106
        elif rng.random() < 0.9:
            head += f'"id":{_encode(wid)},"name":{_encode(name)},'
        else:
            head += f'"name":{_encode(name)},"id":{_encode(wid)},'
        if final:
            opened.pop(key, None)
    tail = rng.choice(TAILS) if rng.random() < bad else ""
    return head.encode() + b'"delta":' + _body(rng, bad) + tail.encode() + b"}"


def _control(rng: random.Random, lines: list[bytes]) -> None:
    roll = rng.random()
    agent = rng.choice(AGENTS)
    if roll < 0.3:
        lines.append(b"[DONE]")
        if rng.random() < 0.7:
            lines.append(f'{{"type":"meta_init","agent":{_encode(agent)},"final":true,"delta":"{{}}"}}'.encode())
    elif roll < 0.6:
        delta = _encode(json.dumps({"stop_reason": "end_turn", "total_steps": 1}))
        lines.append(f'{{"type":"meta_final","agent":{_encode(agent)},"final":true,"delta":{delta}}}'.encode())
    else:
        delta = _encode(json.dumps({"format": "json", "user_query": "q", "agent_uuid": agent, "model": "m"}))
        lines.append(f'{{"type":"meta_init","agent":{_encode(agent)},"final":true,"delta":{delta}}}'.encode())


def _stream(rng: random.Random) -> list[bytes]:
    opened: dict[tuple[str, str], tuple[str, str]] = {}
    bad = rng.choice([0.0, 0.002, 0.01, 0.05])
    lines: list[bytes] = []
    for agent in rng.sample(AGENTS, rng.randint(1, len(AGENTS))):
        delta = _encode(json.dumps({"format": "json", "user_query": "q", "agent_uuid": agent, "model": "m"}))
        lines.append(f'{{"type":"meta_init","agent":{_encode(agent)},"final":true,"delta":{delta}}}'.encode())
    for _ in range(rng.randint(1, 150)):
        if rng.random() < 0.03:
            _control(rng, lines)
        else:
            lines.append(_line(rng, opened, bad))
    if rng.random() < 0.8:
        lines.append(b"[DONE]")
    return lines


def _findings(found: list[Violation]) -> list[Any]:
    return [msgspec.to_builtins(v) for v in found]


def _by_stream(body: bytes, pieces: list[int], **options: Any) -> list[Any]:
    checker = StreamValidator(**options)
    found: list[Violation] = []
    at = 0
    for step in pieces:
        found += checker.feed(body[at : at + step])
        at += step
    found += checker.feed(body[at:])
    return _findings(found + checker.close())


def _by_lines(lines: list[bytes], options: dict[str, Any]) -> list[Any]:
    one = Validator(**options)
    return _findings([v for line in lines for v in one.feed(line)] + one.close())


def _recordings() -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    paths = [*sorted((ROOT / "fixtures").rglob("*")), *sorted((ROOT / "spec" / "conformance").rglob("*"))]
    for path in paths:
        if path.suffix not in (".sse", ".jsonl") or not path.is_file():
            continue
        body = path.read_bytes()
        name = str(path.relative_to(ROOT))
        out[name] = [_by_stream(body, []), _by_stream(body, [7] * (len(body) // 7 // 3) + [4096] * 4)]
    return out


def main() -> None:
    """Print every case's findings as JSON."""
    out: dict[str, list[Any]] = _recordings()
    for seed in SEEDS:
        rng = random.Random(seed)
        for n in range(STREAMS_PER_SEED):
            lines = _stream(rng)
            options: dict[str, Any] = {
                "max_bytes": rng.choice([120, 400, 16384, 16384]),
                "profile": rng.choice(["default", "default", "seed"]),
                "continuation": rng.random() < 0.15,
            }
            payload = {"max_payload_bytes": rng.choice([40, 1 << 20])}
            body = b"".join(b"data: " + line + b"\n\n" for line in lines)
            pieces = [rng.choice([7, 300, 4096, 65536]) for _ in range(len(body) // 300 + 1)]
            jsonl = b"".join(line + b"\n" for line in lines)
            out[f"{seed}/{n}"] = [
                _by_stream(body, pieces, **options),
                _by_stream(jsonl, pieces, format="jsonl", **options),
                _by_lines(lines, {**options, **payload}),
            ]
    json.dump(out, sys.stdout, sort_keys=True, ensure_ascii=False)


if __name__ == "__main__":
    main()
