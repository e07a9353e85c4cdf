"""Every finding of the validator over a fixed set of inputs, as JSON: for before/after comparisons.

Run from the repository root, once on each version, and compare the two files::

    .venv/bin/python tests/validator/identity_snapshot.py before.json
    .venv/bin/python tests/validator/identity_snapshot.py after.json
    cmp before.json after.json

The inputs: every golden stream, every conformance case, every corpus copy in
``fixtures/``, and a few hundred streams generated and damaged with fixed seeds (SSE
framing with ``event:``, ``id:``, unknown fields, comments and CR/CRLF line ends; both
profiles; two bounds). Each is judged by ``StreamValidator`` whole and in chunks of
several sizes, and its envelope lines by ``Validator.feed`` and ``feed_many``. A finding
is kept whole: code, severity, line, offset, column, agent, type, message, section.
Uses only the public API, so it runs on any version of the validator.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any, Literal

from envelope import Emitter, EnvelopeError, ImageRef, StreamReader, StreamValidator, Validator, Violation

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from validator._streams import mutate  # noqa: E402  # after the path is set

AGENTS = ("a1", "b2")
KINDS = ("text", "thinking", "tool", "image", "server", "compaction", "citation", "error", "files")


def _row(v: Violation) -> list[Any]:
    return [v.code, v.severity, v.line, v.offset, v.column, v.agent, v.type, v.message, v.section]


def _stream_rows(data: bytes, profile: str, max_bytes: int, size: int) -> list[list[Any]]:
    checker = StreamValidator(profile=profile, max_bytes=max_bytes)  # type: ignore[arg-type]  # literals
    found: list[Violation] = []
    step = size or max(1, len(data))
    for i in range(0, len(data), step):
        found += checker.feed(data[i : i + step])
    found += checker.close()
    return [_row(v) for v in found]


def _line_rows(data: bytes, profile: str, max_bytes: int) -> dict[str, Any]:
    try:
        reader = StreamReader("auto")
        lines = [*reader.feed(data), *reader.close()]
    except EnvelopeError as exc:  # an unreadable input: its verdict is the stream one
        return {"unreadable": type(exc).__name__}
    one = Validator(profile=profile, max_bytes=max_bytes)  # type: ignore[arg-type]  # literals
    by_line = [v for line in lines for v in one.feed(line)] + one.close()
    many = Validator(profile=profile, max_bytes=max_bytes)  # type: ignore[arg-type]  # literals
    half = len(lines) // 2
    batched = many.feed_many(lines[:half]) + many.feed_many(lines[half:]) + many.close()
    return {"feed": [_row(v) for v in by_line], "feed_many": [_row(v) for v in batched]}


def judge(data: bytes, profile: str = "default", max_bytes: int = 2048) -> dict[str, Any]:
    """Every verdict the validator gives on ``data``, by every path."""
    out: dict[str, Any] = {str(size): _stream_rows(data, profile, max_bytes, size) for size in (0, 4096, 97, 7)}
    out.update(_line_rows(data, profile, max_bytes))
    small = StreamValidator(profile=profile, max_bytes=max_bytes, max_line_bytes=300)  # type: ignore[arg-type]  # E109
    out["cap300"] = [_row(v) for v in [*small.feed(data), *small.close()]]
    try:
        lines = [*StreamReader("auto").feed(data)]
    except EnvelopeError:  # unreadable: judged above
        lines = []
    held = Validator(profile=profile, max_bytes=max_bytes, max_payload_bytes=40)  # type: ignore[arg-type]  # W149
    out["payload40"] = [_row(v) for v in [*held.feed_many(lines), *held.close()]]
    return out


def _generated(rng: random.Random) -> tuple[bytes, str, int]:
    bound = rng.choice([120, 300, 2048])
    profile = rng.choice(["default", "seed"])
    per_agent: list[list[bytes]] = []
    for agent in AGENTS[: rng.randint(1, 2)]:
        em = Emitter(agent, max_bytes=bound)
        meta = {"format": "json", "user_query": "q" * rng.randint(0, 300), "agent_uuid": agent, "model": "m"}
        lines = em.buffered("meta_init", json.dumps(meta))
        for i in range(rng.randint(0, 6)):
            kind = rng.choice(KINDS)
            words = 'w\u00e9"\n' * rng.randint(0, 80)
            if kind in ("text", "thinking", "citation"):
                streamed: Literal["text", "thinking"] = "thinking" if kind == "thinking" else "text"
                lines += [*em.streamed(streamed, words or "x"), em.end(streamed)]
                if kind == "citation":
                    line = {
                        "type": "citation",
                        "agent": agent,
                        "final": True,
                        "delta": "c",
                        "citation_type": "char_location",
                    }
                    lines.append(json.dumps(line, separators=(",", ":")).encode())
            elif kind == "tool":
                lines += em.buffered("tool_call", json.dumps({"q": words}), id=f"t{i}", name="f")
                lines += em.tool_result(f"t{i}", "f", words)
            elif kind == "image":
                lines += em.buffered("tool_call", "{}", id=f"t{i}", name="shot")
                lines += em.tool_result(
                    f"t{i}", "shot", "", [ImageRef(src="data:image/png;base64,AA==", media_type="image/png")]
                )
            elif kind == "server":
                lines += em.buffered("server_tool_call", "{}", id=f"s{i}", name="web_search")
                lines += em.buffered("server_tool_result", words, id=f"s{i}", name="web_search_tool_result")
            elif kind == "compaction":
                lines += em.buffered(
                    "meta_compaction", json.dumps({"trigger": "auto", "pre_tokens": i, "strategy": words})
                )
            elif kind == "error":
                lines += em.buffered("error", json.dumps({"type": "x", "message": words}))
            else:
                files = [
                    {"file_id": f"f{k}", "filename": words, "storage_location": "s"} for k in range(rng.randint(0, 3))
                ]
                lines += em.buffered("meta_files", json.dumps({"files": files}))
        lines += em.buffered("meta_final", json.dumps({"stop_reason": "end_turn", "total_steps": 1}))
        per_agent.append(lines)
    merged: list[bytes] = []
    while any(per_agent):
        merged.append(per_agent[rng.choice([i for i, x in enumerate(per_agent) if x])].pop(0))
    merged.append(b"[DONE]")
    kinds = ["flip", "cut", "duplicate", "swap", "drop", "truncate"]
    damage = [
        (rng.choice(kinds), rng.randrange(10_000), rng.randrange(10_000)) for _ in range(rng.choice([0, 0, 1, 2, 4]))
    ]
    merged = mutate(merged, damage)
    return _frame(rng, merged), profile, bound


def _frame(rng: random.Random, lines: list[bytes]) -> bytes:
    if rng.random() < 0.3:
        return b"".join(x + b"\n" for x in lines)
    end = rng.choice([b"\n", b"\r\n", b"\r"]) if rng.random() < 0.3 else b"\n"
    out: list[bytes] = []
    ident = rng.randint(0, 5)
    for line in lines:
        extra = rng.random()
        if extra < 0.08:
            out.append(b"event: " + rng.choice([b"message", b"update", b""]) + end)
        elif extra < 0.2:
            ident += rng.choice([1, 1, 1, -1, 0])
            out.append(b"id: run:" + str(ident).encode() + end)
        elif extra < 0.23:
            out.append(rng.choice([b"date: now", b": keep-alive", b"retry: 100", b"x"]) + end)
        out.append(b"data: " + line + end + end)
    if rng.random() < 0.1:
        out.append(b"data: cut")
    return b"".join(out)


def main(path: str) -> None:
    cases: dict[str, Any] = {}
    files = sorted(
        [*ROOT.glob("fixtures/golden/*/input.sse"), *ROOT.glob("fixtures/golden/*/envelopes.jsonl")]
        + [p for p in ROOT.glob("spec/conformance/*/*") if p.suffix in (".sse", ".jsonl")]
        + [p for p in ROOT.glob("fixtures/corpus/*") if p.suffix in (".jsonl", ".txt")]
    )
    for file in files:
        name = str(file.relative_to(ROOT))
        for profile in ("default", "seed"):
            cases[f"{name} {profile}"] = judge(file.read_bytes(), profile)
    for n in range(300):
        data, profile, bound = _generated(random.Random(n))
        cases[f"generated {n}"] = judge(data, profile, bound)
    Path(path).write_text(json.dumps(cases, indent=0, sort_keys=True, ensure_ascii=True), encoding="utf-8")
    count = sum(len(rows) for case in cases.values() for rows in case.values() if isinstance(rows, list))
    print(f"{len(cases)} inputs ({len(files)} files x 2 profiles + 300 generated), {count} findings -> {path}")


if __name__ == "__main__":
    main(sys.argv[1])
