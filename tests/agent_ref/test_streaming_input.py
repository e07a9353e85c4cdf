"""Streaming input: ``Agent.send`` during a run, given to the model at the next step boundary (spec §S2)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent_ref import Agent, MemoryStore, ScriptedModel, StateError, default_tools
from agent_ref_support import assert_valid_responses, fast_retry, meta

CONFIRM = "Please confirm, then tell me what is 6 * 7"


def _agent(model: ScriptedModel, store: MemoryStore) -> Agent:
    return Agent(model, tools=default_tools(), store=store, retry=fast_retry(), stream_history=True)


def _user_texts(message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    assert isinstance(content, list)
    return [b["text"] for b in content if b.get("type") == "text"]


def test_sent_message_reaches_the_model_at_the_next_step_boundary() -> None:
    """A message sent during step 1 joins the user turn of step 2's call [SE2.1-a] [SE2.2-b]."""
    model = ScriptedModel()
    store = MemoryStore()
    agent = _agent(model, store)
    lines: list[bytes] = []
    sent: list[int] = []

    def sink(line: bytes) -> None:
        lines.append(line)
        if not sent and b'"tool_call"' in line:
            sent.append(agent.send("Also, what is 8 + 1?"))

    result = asyncio.run(agent.run("What is 5 + (10 * 2)?", sink))
    assert sent == [1]
    assert_valid_responses(lines)
    assert result.stop_reason == "end_turn"
    # step 1 did not have it; step 2 did, in the user turn after the tool results
    assert "8 + 1" not in json.dumps(model.requests[0]["messages"])
    second = model.requests[1]["messages"][-1]
    assert second["role"] == "user"
    assert [b["type"] for b in second["content"]] == ["tool_result", "text"]
    assert _user_texts(second) == ["Also, what is 8 + 1?"]
    assert "9" in result.final_text  # the model answered the new message
    history = meta(lines, "meta_final")["conversation_history"]
    assert history == result.conversation_history
    user_turns = [m for m in history if m["role"] == "user"]
    assert any(_user_texts(m) == ["Also, what is 8 + 1?"] for m in user_turns)  # [SE2.2-b]
    records = asyncio.run(store.runs(agent.agent_uuid))
    assert records[0].messages == history
    finals = [json.loads(x) for x in lines if x != b"[DONE]"]
    assert sum(1 for e in finals if e["type"] == "meta_init" and e["final"]) == 1  # no envelope of its own


def test_message_during_the_final_step_gets_one_more_step() -> None:
    """The model ended its turn but a message waits: a new user turn and one more step [SE2.2-a]."""
    model = ScriptedModel()
    agent = _agent(model, MemoryStore())
    lines: list[bytes] = []
    sent: list[int] = []

    def sink(line: bytes) -> None:
        lines.append(line)
        if not sent and b'"text"' in line:
            sent.append(agent.send("What is 3 * 3?"))

    result = asyncio.run(agent.run("hello there", sink))
    assert_valid_responses(lines)
    assert sent == [1]
    assert len(model.requests) >= 2
    roles = [m["role"] for m in agent.state.messages]
    assert roles[:3] == ["user", "assistant", "user"]
    assert _user_texts(agent.state.messages[2]) == ["What is 3 * 3?"]
    assert "9" in result.final_text


def test_send_without_a_working_run_is_refused() -> None:
    """No run working, or the run is over: StateError, never a silent drop [SE2.3-a]."""
    agent = _agent(ScriptedModel(), MemoryStore())
    with pytest.raises(StateError, match="no run is working"):
        agent.send("hi")
    asyncio.run(agent.run("hello there", lambda _line: None))
    with pytest.raises(StateError, match="no run is working"):
        agent.send("too late")
    with pytest.raises(TypeError, match="non-empty"):
        agent.send("  ")


def test_message_left_at_a_pause_is_delivered_by_the_resume() -> None:
    """Accepted but the response paused: it waits and the resume's first boundary delivers it [SE2.3-b]."""
    model = ScriptedModel()
    agent = _agent(model, MemoryStore())
    lines: list[bytes] = []

    def sink(line: bytes) -> None:
        lines.append(line)
        if b'"tool_call"' in line and b'"confirm"' in line:
            agent.send("Note: answer briefly")

    paused = asyncio.run(agent.run(CONFIRM, sink))
    assert_valid_responses(lines)
    assert paused.stop_reason == "awaiting_frontend_tools"
    assert "answer briefly" not in json.dumps(agent.state.messages)
    (call,) = paused.pending_frontend_tools
    more: list[bytes] = []
    done = asyncio.run(
        agent.continue_with_tool_results([{"tool_use_id": call.tool_use_id, "content": "yes"}], more.append)
    )
    assert_valid_responses(more)
    assert done.stop_reason == "end_turn"
    last = model.requests[-1]["messages"]
    assert "Note: answer briefly" in json.dumps(last)
