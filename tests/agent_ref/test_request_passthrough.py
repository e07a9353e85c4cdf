"""Request options pass through to the SDK; usage keeps the counters pricing needs (issue 12 §5).

spec/agent-ref.md §11.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent_ref import Agent, ReplayModel, ScriptedModel, default_tools
from agent_ref.errors import ConfigError
from agent_ref_support import drop, fast_retry, meta, run


def test_spec_11_1_a_request_options_reach_every_call_and_betas_use_the_beta_client() -> None:
    """betas, extra_headers, extra_body and plain options on every request [R11.1-a] [R11.1-b]."""
    model = ScriptedModel()
    options = {
        "betas": ["context-management-2025-06-27"],
        "extra_headers": {"x-trace-id": "t-1"},
        "extra_body": {"custom_field": 7},
        "metadata": {"user_id": "u-42"},
        "stop_sequences": ["\n\nEND"],
    }
    agent = Agent(model, tools=default_tools(), retry=fast_retry(), request_options=options)
    result = run(agent.run("What is 5 + (10 * 2)?", drop))
    assert result.stop_reason == "end_turn"
    assert len(model.requests) == 2
    # (plain messages.create refuses `betas`: these calls went through the beta client)
    for body, headers in zip(model.requests, model.request_headers, strict=True):
        assert body["metadata"] == {"user_id": "u-42"}
        assert body["stop_sequences"] == ["\n\nEND"]
        assert body["custom_field"] == 7
        assert "betas" not in body
        assert headers["anthropic-beta"] == "context-management-2025-06-27"
        assert headers["x-trace-id"] == "t-1"


def test_spec_11_1_a_plain_calls_use_the_messages_client() -> None:
    """Without betas: no beta header, the plain endpoint [R11.1-b]."""
    model = ScriptedModel()
    run(Agent(model, tools=default_tools(), retry=fast_retry()).run("Hello", drop))
    assert "anthropic-beta" not in model.request_headers[0]


def test_spec_11_1_a_options_the_sdk_does_not_take_are_refused_up_front() -> None:
    """An option the installed SDK does not know: a ConfigError naming it, before any call [R11.1-a]."""
    with pytest.raises(ConfigError, match="does not take no_such_option"):
        Agent(ScriptedModel(), request_options={"no_such_option": 1})


@pytest.mark.parametrize("key", ["messages", "tools", "model", "stream", "max_tokens"])
def test_spec_11_1_a_agent_owned_keys_are_refused(key: str) -> None:
    """Keys the agent sets are refused, with the Agent argument to use instead [R11.1-a]."""
    with pytest.raises(ConfigError, match=f"cannot set {key}"):
        Agent(ScriptedModel(), request_options={key: None})


def _call(usage_start: dict[str, Any], usage_end: dict[str, Any], **delta: Any) -> list[dict[str, Any]]:
    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "model": "replay-x", "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": usage_start}
    return [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn", **delta}, "usage": usage_end},
        {"type": "message_stop"},
    ]


def test_spec_11_2_a_usage_keeps_1h_cache_writes_and_server_tool_requests() -> None:
    """cache_creation.ephemeral_1h_input_tokens and server_tool_use counters reach Usage [R11.2-a]."""
    start = {
        "input_tokens": 10,
        "output_tokens": 1,
        "cache_creation_input_tokens": 300,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
    }
    end = {"output_tokens": 20, "server_tool_use": {"web_search_requests": 3, "web_fetch_requests": 1}}
    lines: list[bytes] = []
    result = run(Agent(ReplayModel([_call(start, end)]), retry=fast_retry()).run("hi", lines.append))
    assert result.usage["cache_creation_input_tokens"] == 300
    assert result.usage["cache_creation_1h_input_tokens"] == 200
    assert result.usage["web_search_requests"] == 3
    assert result.usage["web_fetch_requests"] == 1
    assert result.usage["output_tokens"] == 20
    assert meta(lines, "meta_final")["cumulative_usage"]["web_search_requests"] == 3


def test_spec_11_1_c_the_container_the_api_gives_is_sent_back() -> None:
    """A container id from the response goes into the next request [R11.1-c]."""
    usage = {"input_tokens": 1, "output_tokens": 1}
    first = _call(usage, usage, container={"id": "container_abc", "expires_at": "2026-11-24T12:00:00Z"})
    model = ReplayModel([first, _call(usage, usage)])
    agent = Agent(model, retry=fast_retry())
    run(agent.run("one", drop))
    run(agent.run("two", drop))
    assert "container" not in model.server.requests[0]
    assert model.server.requests[1]["container"] == "container_abc"
    assert agent.state.container_id == "container_abc"
