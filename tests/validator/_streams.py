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
