"""The Anthropic adapter page's relay recipe runs, offline, as printed (``docs/anthropic.md``;
the README's "Translate Anthropic streams in your server" until issue 28 §4 moved it).

Every way an API call can end goes through the real SDK client (served by a local
``httpx2.MockTransport``) and the recipe copied from the page, and every stream it
writes must pass the strict validator (issue 12 §1): a complete call, a call whose
tool JSON ``max_tokens`` cut, a mid-stream ``error`` event, a stream cut before
``message_stop``, a connection dropped while the body is read, tool JSON that is not
JSON at all, and an event the translator refuses.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any

import httpx2

from agent_ref.models.replay import OFFLINE_API_KEY, OFFLINE_BASE_URL, ReplayServer, load_events, split_calls, sse_body
from anthropic_support import DATA, MODEL, api_view, expected_blocks, rebuilt_blocks, stream_calls
from conftest import ROOT
from envelope import DONE, StreamReader
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from anthropic import AsyncAnthropic

PAGE = ROOT / "docs" / "anthropic.md"
HEADING = "# The Anthropic adapter\n"
AGENT = "agent-1"


def _section() -> str:
    """The page, which is about the adapter alone (its one python block is the relay)."""
    text = PAGE.read_text(encoding="utf-8")
    assert text.startswith(HEADING)
    return text


def _relay() -> Callable[..., AsyncIterator[bytes]]:
    (code,) = re.findall(r"```python\n(.*?)```", _section(), re.S)
    assert "async def relay(" in code
    scope: dict[str, Any] = {"__name__": "relay_recipe"}  # not __main__: define relay, do not run the page's demo
    exec(code, scope)
    relay: Callable[..., AsyncIterator[bytes]] = scope["relay"]
    return relay


def _run(client: AsyncAnthropic, history: list[Any]) -> bytes:
    relay = _relay()

    async def run() -> list[bytes]:
        async with client:
            return [chunk async for chunk in relay(client, AGENT, history, model=MODEL, max_tokens=64)]

    chunks = asyncio.run(run())
    assert chunks[-1] == DONE
    body = b"".join(chunks)
    assert_valid(body)  # strict: no error, no warning
    return body


def _envelopes(body: bytes) -> list[dict[str, Any]]:
    reader = StreamReader("sse")
    return [json.loads(raw.data) for raw in reader.feed(body) if raw.data != "[DONE]"]


def _tail(body: bytes) -> list[tuple[str, bool]]:
    """(type, final) of every envelope after meta_init."""
    return [(e["type"], e["final"]) for e in _envelopes(body)[1:]]


def _error(body: bytes) -> dict[str, Any]:
    (error,) = [e for e in _envelopes(body) if e["type"] == "error"]
    payload: dict[str, Any] = json.loads(error["delta"])
    return payload


def _message_start(msg_id: str) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [],
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    }


TEXT_START = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}


def _text(s: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": s}}


def test_complete_call_from_the_corpus(corpus: Path) -> None:
    history: list[Any] = [{"role": "user", "content": "Make an invoice image"}]
    body = _run(ReplayServer(load_events(corpus / "anthropic_events_1.json")).client(), history)
    envelopes = _envelopes(body)
    assert len(envelopes) == 128  # the number the page states
    assert "128 lines" in _section()
    assert envelopes[0]["type"] == "meta_init"
    assert envelopes[-1]["type"] == "meta_final"
    assert [e for e in envelopes if e["type"] == "error"] == []
    # The history got the assistant turn, equal to what the SDK reconstructs.
    assert history[-1]["role"] == "assistant"
    assert [b["type"] for b in history[-1]["content"]][:2] == ["thinking", "text"]
    (run,) = stream_calls(split_calls(load_events(corpus / "anthropic_events_1.json")))
    assert history[-1]["content"] == api_view(run.final)
    assert rebuilt_blocks([json.dumps(e) for e in envelopes], AGENT)[1:-1] == expected_blocks(run.final)


def test_max_tokens_cutting_tool_json_sends_what_the_sdk_recovers_A4_1_c() -> None:
    """[A4.1-c] no exception; the call carries the SDK's own partial parse, history equals the SDK's."""
    events = load_events(DATA / "max_tokens_cut_tool_call.json")
    history: list[Any] = [{"role": "user", "content": "Weather?"}]
    body = _run(ReplayServer(events).client(), history)
    (run,) = stream_calls(split_calls(events))
    assert run.final.stop_reason == "max_tokens"
    assert history[-1]["content"] == api_view(run.final)  # not `input: null`
    (call,) = [e for e in _envelopes(body) if e["type"] == "tool_call"]
    assert json.loads(call["delta"]) == {"city": "Paris", "days": [1, 2, 3]} == history[-1]["content"][1]["input"]
    assert json.loads(_envelopes(body)[-1]["delta"])["stop_reason"] == "max_tokens"
    assert "error" not in dict(_tail(body))


def test_error_event_mid_text_closes_the_block_then_errors_A8_2_a() -> None:
    events = [
        _message_start("msg_err"),
        TEXT_START,
        _text("Half"),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    history: list[Any] = [{"role": "user", "content": "hi"}]
    body = _run(ReplayServer([events]).client(), history)
    assert _tail(body) == [("text", False), ("text", True), ("error", True), ("meta_final", True)]
    assert _error(body) == {"type": "overloaded_error", "message": "Overloaded"}
    assert history == [{"role": "user", "content": "hi"}]  # the cut text is not history


def test_stream_cut_before_message_stop_A8_2_a() -> None:
    events = [_message_start("msg_cut"), TEXT_START, _text("Hal")]
    body = _run(ReplayServer([events]).client(), [{"role": "user", "content": "hi"}])
    assert _tail(body) == [("text", False), ("text", True), ("error", True), ("meta_final", True)]
    assert _error(body)["type"] == "incomplete_stream"
    assert "cut: text" in _error(body)["message"]


def test_stream_cut_inside_a_tool_call_sends_no_half_call_A8_2_a() -> None:
    events = [
        _message_start("msg_cut_tool"),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "n"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a'}},
    ]
    body = _run(ReplayServer([events]).client(), [{"role": "user", "content": "hi"}])
    assert _tail(body) == [("error", True), ("meta_final", True)]
    assert "cut: tool_call" in _error(body)["message"]


def test_connection_dropped_while_reading_the_body_A8_2_a() -> None:
    """An exception while iterating (the transport fails mid-body) ends the stream validly."""
    events = [_message_start("msg_drop"), TEXT_START, _text("Hello "), _text("wor")]

    async def body() -> AsyncIterator[bytes]:
        yield sse_body(events)
        raise httpx2.ReadError("connection reset by peer")

    def handler(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    client = _client(handler)
    stream = _run(client, [{"role": "user", "content": "hi"}])
    assert _tail(stream) == [("text", False), ("text", False), ("text", True), ("error", True), ("meta_final", True)]
    assert "connection reset" in _error(stream)["message"]


def test_tool_json_that_is_not_json_A4_1_c() -> None:
    """Not a prefix of JSON: the SDK itself raises while accumulating; the relay aborts validly."""
    events = [
        _message_start("msg_bad_json"),
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "n"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"a": }'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_stop"},
    ]
    body = _run(ReplayServer([events]).client(), [{"role": "user", "content": "hi"}])
    assert _tail(body) == [("error", True), ("meta_final", True)]
    assert "JSON" in _error(body)["message"]


def test_an_event_the_translator_refuses_A8_2_a() -> None:
    """A lone surrogate in text (spec §6.4) is an ``EncodeError`` from ``feed()``; the relay aborts validly."""
    events = [
        _message_start("msg_lone"),
        TEXT_START,
        _text("ok "),
        _text("\udc00!"),
        {"type": "content_block_stop", "index": 0},
    ]
    # JSON escapes carry the lone surrogate on the wire (``\udc00``), as a broken upstream could send it.
    wire = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)

    def handler(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=wire, headers={"content-type": "text/event-stream"})

    body = _run(_client(handler), [{"role": "user", "content": "hi"}])
    assert _tail(body) == [("text", False), ("text", True), ("error", True), ("meta_final", True)]
    assert _error(body)["type"] == "EncodeError"


def _client(handler: Callable[[httpx2.Request], httpx2.Response]) -> AsyncAnthropic:
    from anthropic import AsyncAnthropic

    return AsyncAnthropic(
        api_key=OFFLINE_API_KEY,
        base_url=OFFLINE_BASE_URL,
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler)),
    )
