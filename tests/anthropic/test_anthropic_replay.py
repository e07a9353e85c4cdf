"""``agent_ref.models.replay``: recordings to wire SSE, served to the real SDK client offline."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import anthropic
import pytest
from anthropic._streaming import SSEDecoder

from agent_ref.models.replay import (
    ReplayError,
    ReplayServer,
    load_events,
    replay_client,
    split_calls,
    sse_body,
    wire_event,
)
from anthropic_support import AGENT, MODEL
from envelope import BlockKey
from envelope.anthropic import AnthropicTranslator
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

MESSAGES: Any = [{"role": "user", "content": "hi"}]


def test_split_calls_of_corpus_file_0(corpus: Path) -> None:
    calls = split_calls(load_events(corpus / "anthropic_events_0.json"))
    assert len(calls) == 3  # the corpus README: 46 events, 3 message_start
    assert sum(len(c) for c in calls) == 46
    assert all(c[0]["type"] == "message_start" and c[-1]["type"] == "message_stop" for c in calls)


def test_sse_body_is_wire_data_per_the_sdk_decoder(corpus: Path) -> None:
    """[A9-b] Differential oracle: the SDK's own SSE decoder reads back each wire event, snapshots stripped."""
    events = load_events(corpus / "anthropic_events_1.json")
    decoded = list(SSEDecoder().iter_bytes(iter([sse_body(events)])))
    assert len(decoded) == len(events)
    for sse, event in zip(decoded, events, strict=True):
        assert sse.event == event["type"]
        data = sse.json()
        assert data == wire_event(event)
        assert "content_block" not in data or data["type"] == "content_block_start"
        assert "message" not in data or data["type"] == "message_start"
        assert "parsed_output" not in json.dumps(data)


def test_wire_event_drops_derived_events() -> None:
    assert wire_event({"type": "text", "text": "a", "snapshot": "a"}) is None
    assert sse_body([{"type": "input_json", "partial_json": "", "snapshot": {}}]) == b""


def test_load_events_refuses_non_recordings(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "message_start"}')
    with pytest.raises(ReplayError, match="JSON array"):
        load_events(bad)
    bad.write_text("[1]")
    with pytest.raises(ReplayError, match="event 0"):
        load_events(bad)
    bad.write_text("[")
    with pytest.raises(ReplayError, match="not JSON"):
        load_events(bad)
    with pytest.raises(ReplayError):
        ReplayServer([])


def test_requests_are_recorded_and_exhaustion_is_a_clean_sdk_error(corpus: Path) -> None:
    """[A9-c] request bodies recorded; past the last call the SDK raises BadRequestError."""
    calls = split_calls(load_events(corpus / "anthropic_events_0.json"))[:1]
    server = ReplayServer(calls)

    async def run() -> None:
        async with server.client() as client:
            async with client.messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream:
                await stream.get_final_message()
            with pytest.raises(anthropic.BadRequestError, match="no recorded call left"):
                await client.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)

    asyncio.run(run())
    assert [r["model"] for r in server.requests] == [MODEL, MODEL]
    assert server.requests[0]["stream"] is True


def _cut_with_error() -> list[dict[str, Any]]:
    return [
        {
            "type": "message_start",
            "message": {
                "id": "msg_err_1",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half"}},
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]


def test_mid_stream_error_through_the_real_sdk_gives_the_same_envelope_A7_1_b() -> None:
    """[A7.1-b] The SDK raises on an ``error`` event; ``t.abort(exc)`` equals what the recorded dict gives."""
    events = _cut_with_error()
    t = AnthropicTranslator(AGENT)
    lines: list[bytes] = []

    async def run() -> None:
        async with (
            replay_client(events) as client,
            client.messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream,
        ):
            async for event in stream:
                lines.extend(t.feed(event))

    with pytest.raises(anthropic.APIStatusError) as info:
        asyncio.run(run())
    lines.extend(t.abort(info.value))
    assert t.close() == [BlockKey(AGENT, "text")]
    assert_valid(lines, expect=["W163", "W161"])  # a fragment: no meta_init, no [DONE]; nothing left open

    t_dict = AnthropicTranslator(AGENT)
    dict_lines = [line for event in events for line in t_dict.feed(event)]
    assert lines == dict_lines
    assert json.loads(lines[-1]) == {
        "type": "error",
        "agent": AGENT,
        "final": True,
        "delta": '{"type":"overloaded_error","message":"Overloaded"}',
    }


def test_replay_uses_the_sdks_own_http_library_A9_a() -> None:
    """[A9-a] the SDK is built on httpx2; the replay client's transport is httpx2's MockTransport."""
    import anthropic._base_client as base
    import httpx2

    assert vars(base)["httpx2"] is httpx2
    client = ReplayServer([_cut_with_error()]).client()
    assert isinstance(client._client, httpx2.AsyncClient)
    assert isinstance(client._client._transport, httpx2.MockTransport)


def test_record_refuses_to_run_without_a_key_A9_d(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """[A9-d] record() makes a live call only with ANTHROPIC_API_KEY; tests never provide one."""
    from agent_ref.models.replay import record

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="ANTHROPIC_API_KEY"):
        asyncio.run(record(tmp_path / "out.json", model=MODEL, max_tokens=16, messages=MESSAGES))
    assert not (tmp_path / "out.json").exists()
