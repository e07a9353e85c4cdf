"""Seed 000's result: ``final_message``, ``container_id``, ``agent_logs``, and the history as the API saw it (spec §SF).

Every response is validated strictly by the autouse tee (tests/agent_ref_validating.py)
and here with ``assert_valid_responses``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

from agent_ref import Agent, MemoryStore, ReplayModel, ScriptedModel, default_tools
from agent_ref_support import assert_valid_responses, fast_retry, meta, run


def _call(text: str, **delta: Any) -> list[dict[str, Any]]:
    usage = {"input_tokens": 1, "output_tokens": 1}
    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "model": "replay-x", "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": usage}
    return [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", **delta}, "usage": usage},
        {"type": "message_stop"},
    ]


def test_sf2_a_final_message_and_container_id() -> None:
    """``final_message`` is the last assistant message; ``container_id`` the API's container [SF2-a]."""
    container = {"id": "container_abc", "expires_at": "2026-11-24T12:00:00Z"}
    agent = Agent(ReplayModel([_call("done", container=container)]), retry=fast_retry())
    lines: list[bytes] = []
    result = run(agent.run("hello", lines.append))
    assert_valid_responses(lines)
    assert result.final_message == {"role": "assistant", "content": [{"type": "text", "text": "done"}]}
    assert result.final_message == result.conversation_history[-1]
    assert result.container_id == "container_abc"
    plain = run(Agent(ScriptedModel(), retry=fast_retry()).run("hello", lines.append))
    assert plain.container_id is None


def test_sf2_b_agent_logs_record_the_turns_tool_results_and_end() -> None:
    """``agent_logs``: one entry a model turn (with its calls), a tool result, and the stop [SF2-b]."""
    agent = Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry())
    lines: list[bytes] = []
    result = run(agent.run("What is 5 + (10 * 2)?", lines.append))
    assert_valid_responses(lines)
    (call,) = [b for b in result.conversation_history[1]["content"] if b["type"] == "tool_use"]
    assert result.agent_logs == [
        {"action": "model_turn", "step": 1, "tool_calls": ["calculator"]},
        {"action": "tool_result", "tool_use_id": call["id"], "is_error": False},
        {"action": "model_turn", "step": 2, "tool_calls": []},
        {"action": "stop", "stop_reason": "end_turn"},
    ]
    assert result.final_message == result.conversation_history[-1]
    assert "25" in json.dumps(result.final_message)


def test_sf3_a_a_sent_message_is_recorded_in_the_user_turn_the_api_got() -> None:
    """A message sent during a run joins the tool results' user turn in the history, as in the request [SF3-a]."""
    model = ScriptedModel()
    store = MemoryStore()
    agent = Agent(model, tools=default_tools(), store=store, retry=fast_retry(), stream_history=True)
    lines: list[bytes] = []
    sent: list[int] = []

    def sink(line: bytes) -> None:
        lines.append(line)
        if not sent and b'"tool_call"' in line:
            sent.append(agent.send("Also, what is 8 + 1?"))

    result = asyncio.run(agent.run("What is 5 + (10 * 2)?", sink))
    assert sent == [1]
    assert_valid_responses(lines)
    history = result.conversation_history
    roles = [m["role"] for m in history]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles  # no two user messages in a row
    sent_turn = model.requests[1]["messages"][-1]
    assert [b["type"] for b in sent_turn["content"]] == ["tool_result", "text"]
    assert history[2] == sent_turn  # the history's turn is the one the API saw
    assert meta(lines, "meta_final")["conversation_history"] == history
    (record,) = asyncio.run(store.runs(agent.agent_uuid))
    assert record.messages == history
