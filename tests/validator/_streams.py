"""Building blocks for the validator tests: envelope lines written out by hand."""

from __future__ import annotations

import json

A = "agent-a"
B = "agent-b"


def env(type: str, final: bool, delta: str, agent: str = A, **extra: object) -> str:
    """One envelope line, in wire order, compact."""
    d: dict[str, object] = {"type": type, "agent": agent, "final": final}
    for key in ("id", "name"):
        if key in extra:
            d[key] = extra.pop(key)
    d["delta"] = delta
    d.update(extra)
    return json.dumps(d, separators=(",", ":"), ensure_ascii=False)


def meta_init(agent: str = A, **over: object) -> str:
    """A valid one-line meta_init of ``agent`` (``over`` replaces payload keys)."""
    payload: dict[str, object] = {"format": "json", "user_query": "q", "agent_uuid": agent, "model": "m"}
    payload.update(over)
    return env("meta_init", True, json.dumps(payload), agent)


def meta_final(agent: str = A) -> str:
    """A valid one-line meta_final of ``agent``."""
    return env("meta_final", True, json.dumps({"stop_reason": "end_turn", "total_steps": 1}), agent)


def text(content: str, agent: str = A) -> list[str]:
    """A text block: one delta and the final marker."""
    return [env("text", False, content, agent), env("text", True, "", agent)]


def jsonl(*lines: str | bytes) -> bytes:
    """The lines as a JSON-lines file."""
    return b"".join((x.encode() if isinstance(x, str) else x) + b"\n" for x in lines)


def sse(*lines: str | bytes) -> bytes:
    """The lines as SSE events (``data: LINE`` and a blank line each)."""
    return b"".join(b"data: " + (x.encode() if isinstance(x, str) else x) + b"\n\n" for x in lines)


def complete(*body: str) -> list[str]:
    """``body`` wrapped in meta_init ... meta_final, [DONE]: a stream that is otherwise valid."""
    return [meta_init(), *body, meta_final(), "[DONE]"]


def mutate(lines: list[bytes], mutations: list[tuple[str, int, int]]) -> list[bytes]:
    """Envelope-level damage, as in the robustness tests: flipped bits, cut, repeated, moved lines."""
    lines = list(lines)
    for kind, at, byte in mutations:
        if not lines:
            break
        i = at % len(lines)
        line = lines[i]
        if kind == "flip" and line:
            j = byte % len(line)
            lines[i] = line[:j] + bytes([line[j] ^ (1 << (byte % 8))]) + line[j + 1 :]
        elif kind == "cut" and line:
            j = byte % len(line)
            lines[i : i + 1] = [line[:j], line[j:]]
        elif kind == "duplicate":
            lines.insert(i, line)
        elif kind == "swap" and len(lines) > 1:
            k = byte % len(lines)
            lines[i], lines[k] = lines[k], lines[i]
        elif kind == "drop":
            del lines[i]
        elif kind == "truncate":
            lines = lines[:i]
    return lines
