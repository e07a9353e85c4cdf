"""Recordings of several responses back to back (spec §8.5, issue 12 §1)."""

from __future__ import annotations

import json

from envelope import StreamValidator, validate

from ._streams import env, meta_final, meta_init, sse, text

CALL = env("tool_call", True, "{}", id="t", name="confirm")
PAUSE = env("awaiting_frontend_tools", True, json.dumps([{"tool_use_id": "t", "name": "confirm", "input": {}}]))
PAUSED = [meta_init(), CALL, PAUSE, "[DONE]"]
RESUMED = [
    meta_init(resume={"step": 2, "response": 1, "tool_use_ids": ["t"]}),
    env("tool_result", True, "yes", id="t", name="confirm"),
    *text("done"),
    meta_final(),
    "[DONE]",
]


def pairs(lines: list[str]) -> list[tuple[str, int]]:
    plain = [(v.code, v.line) for v in validate(lines)]
    checker = StreamValidator()
    data = sse(*lines)
    found = [v for i in range(0, len(data), 50) for v in checker.feed(data[i : i + 50])] + checker.close()
    assert [(v.code, (v.line + 1) // 2) for v in found] == plain  # SSE: two physical lines per event
    return plain


def test_spec_08_5_a_paused_then_resumed_response_is_valid() -> None:
    """[8.5-a] a meta_init after [DONE] starts the next response; its resume ids announce the results."""
    assert pairs(PAUSED + RESUMED) == []


def test_spec_08_5_a_the_next_response_is_judged_afresh() -> None:
    """[8.5-a] state does not carry over: an unannounced result warns, and open blocks end with their response."""
    unannounced = [meta_init(), env("tool_result", True, "yes", id="t", name="confirm"), meta_final(), "[DONE]"]
    assert pairs(PAUSED + unannounced) == [("W165", 6)]
    left_open = [meta_init(), env("text", False, "cut"), "[DONE]"]
    assert pairs(left_open + RESUMED) == [("E120", 2)]


def test_spec_08_5_b_anything_else_after_done_is_e160() -> None:
    """[8.5-b] only a meta_init continues a recording; a second meta_init within a response stays E162."""
    assert pairs([*PAUSED, *text("late")]) == [("E160", 5)]
    assert pairs([*PAUSED, "[DONE]"]) == [("E160", 5)]
    assert pairs([*PAUSED, meta_init(), meta_init(), meta_final(), "[DONE]"]) == [("E162", 6)]
    # a chunked meta_init opens the next response too
    payload = json.dumps({"format": "json", "user_query": "q", "agent_uuid": "agent-a", "model": "m"})
    split = [env("meta_init", False, payload[:10]), env("meta_init", True, payload[10:])]
    assert [c for c, _ in pairs([*PAUSED, *split, meta_final(), "[DONE]"])] == []
