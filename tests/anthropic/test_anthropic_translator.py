"""Unit and property tests of ``AnthropicTranslator`` on plain-dict events.

Each test names the decision of ``spec/anthropic-adapter.md`` it checks.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from typing import Any, ClassVar

import msgspec
import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

import envelope._anthropic_adapter as adapter
from anthropic_support import AGENT, rebuilt_blocks
from envelope import BlockKey, DecodeError, EncodeError, EnvelopeError, SequenceError, reconstruct
from envelope.anthropic import AnthropicTranslator, error_payload
from validating import assert_valid


def start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, d: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": d}


def stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def text_delta(index: int, text: str) -> dict[str, Any]:
    return delta(index, {"type": "text_delta", "text": text})


def json_delta(index: int, partial: str) -> dict[str, Any]:
    return delta(index, {"type": "input_json_delta", "partial_json": partial})


MESSAGE_START = {
    "type": "message_start",
    "message": {
        "id": "msg_unit_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [],
        "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 7},
    },
}


def feed_all(t: AnthropicTranslator, events: list[Any]) -> list[bytes]:
    return [line for event in events for line in t.feed(event)]


def decoded(lines: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines]


# ---------------------------------------------------------------- streamed text / thinking


def test_text_deltas_stream_then_final_marker_A3_1_a() -> None:
    """[A3.1-a]"""
    t = AnthropicTranslator(AGENT)
    lines = feed_all(t, [MESSAGE_START, start(0, {"type": "text", "text": ""}), text_delta(0, "Hel")])
    assert decoded(lines) == [{"type": "text", "agent": AGENT, "final": False, "delta": "Hel"}]
    lines = feed_all(t, [text_delta(0, "lo"), stop(0)])
    assert decoded(lines) == [
        {"type": "text", "agent": AGENT, "final": False, "delta": "lo"},
        {"type": "text", "agent": AGENT, "final": True, "delta": ""},
    ]


def test_signature_delta_is_not_streamed_but_kept_A3_2_a() -> None:
    """[A3.2-a]"""
    t = AnthropicTranslator(AGENT)
    events = [
        MESSAGE_START,
        start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "hmm"}),
        delta(0, {"type": "signature_delta", "signature": "SIG=="}),
        stop(0),
    ]
    lines = feed_all(t, events)
    assert [d["delta"] for d in decoded(lines)] == ["hmm", ""]
    assert all(b"SIG" not in line for line in lines)
    assert t.finalize() == [{"type": "thinking", "thinking": "hmm", "signature": "SIG=="}]


def test_redacted_thinking_emits_nothing_and_round_trips_A3_2_b() -> None:
    """[A3.2-b], [A5.1-a]: no envelope, no warning, kept for history."""
    t = AnthropicTranslator(AGENT)
    block = {"type": "redacted_thinking", "data": "opaque=="}
    assert feed_all(t, [MESSAGE_START, start(0, block), stop(0)]) == []
    assert t.finalize() == [block]
    assert t.warnings == []


#: Smallest workable bound for a text line of AGENT (spec §6.6): the fixed part plus 6 bytes.
TEXT_MIN_BOUND = (
    len(json.dumps({"type": "text", "agent": AGENT, "final": False, "delta": ""}, separators=(",", ":"))) + 6
)


@given(
    text=st.text(min_size=1, max_size=600),
    max_bytes=st.integers(min_value=TEXT_MIN_BOUND, max_value=TEXT_MIN_BOUND + 300),
)
@example(text='"' * 300, max_bytes=TEXT_MIN_BOUND)
@example(text="\x01" * 200, max_bytes=TEXT_MIN_BOUND)
@example(text="🏔" * 200, max_bytes=TEXT_MIN_BOUND + 1)
def test_oversized_text_delta_is_chunked_within_the_bound_A3_1_b(text: str, max_bytes: int) -> None:
    """[A3.1-b]"""
    t = AnthropicTranslator(AGENT, max_bytes)
    lines = feed_all(t, [MESSAGE_START, start(0, {"type": "text", "text": ""}), text_delta(0, text), stop(0)])
    assert all(len(line) <= max_bytes for line in lines)
    assert t.oversize == []
    assert rebuilt_blocks(lines) == [{"type": "text", "complete": True, "content": text, "citations": []}]


@given(parts=st.lists(st.text(max_size=40), max_size=30))
def test_any_split_of_text_rebuilds_the_same_text(parts: list[str]) -> None:
    t = AnthropicTranslator(AGENT)
    events = [MESSAGE_START, start(0, {"type": "thinking", "thinking": "", "signature": ""})]
    events += [delta(0, {"type": "thinking_delta", "thinking": p}) for p in parts]
    lines = feed_all(t, [*events, stop(0)])
    assert rebuilt_blocks(lines) == [{"type": "thinking", "complete": True, "content": "".join(parts)}]
    assert t.finalize()[0]["thinking"] == "".join(parts)


# ---------------------------------------------------------------- citations


def test_citations_follow_the_final_marker_last_one_final_A3_3_a() -> None:
    """[A3.3-a] order and finality; [A3.3-b] field mapping, nulls and API-only fields left out."""
    t = AnthropicTranslator(AGENT)
    c1 = {
        "type": "char_location",
        "cited_text": "grass is green",
        "document_index": 0,
        "document_title": None,
        "start_char_index": 4,
        "end_char_index": 18,
        "file_id": None,
    }
    c2 = {
        "type": "web_search_result_location",
        "cited_text": "sky",
        "url": "https://example.com",
        "title": "Ex",
        "encrypted_index": "E1",
    }
    events = [
        MESSAGE_START,
        start(0, {"type": "text", "text": ""}),
        text_delta(0, "The grass is green."),
        delta(0, {"type": "citations_delta", "citation": c1}),
        delta(0, {"type": "citations_delta", "citation": c2}),
        stop(0),
    ]
    out = decoded(feed_all(t, events))
    assert [(d["type"], d["final"]) for d in out] == [
        ("text", False),
        ("text", True),
        ("citation", False),
        ("citation", True),
    ]
    assert out[2] == {
        "type": "citation",
        "agent": AGENT,
        "final": False,
        "delta": "grass is green",
        "citation_type": "char_location",
        "document_index": 0,
        "start_char_index": 4,
        "end_char_index": 18,
    }
    assert out[3]["url"] == "https://example.com"
    assert "encrypted_index" not in out[3]
    # finalize keeps the API citations unchanged (nulls and encrypted_index included)
    assert t.finalize()[0]["citations"] == [c1, c2]


# ---------------------------------------------------------------- tool calls


def test_tool_input_is_buffered_and_emitted_once_at_stop_A4_1_a() -> None:
    """[A4.1-a]"""
    t = AnthropicTranslator(AGENT)
    events = [MESSAGE_START, start(0, {"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {}})]
    assert feed_all(t, events) == []
    assert feed_all(t, [json_delta(0, '{"a": '), json_delta(0, ""), json_delta(0, "1}")]) == []
    out = decoded(t.feed(stop(0)))
    assert out == [
        {"type": "tool_call", "agent": AGENT, "final": True, "id": "toolu_1", "name": "calc", "delta": '{"a": 1}'}
    ]
    assert t.finalize() == [{"type": "tool_use", "id": "toolu_1", "name": "calc", "input": {"a": 1}}]


def test_tool_input_json_is_parsed_once_not_per_delta_A4_1_a(monkeypatch: pytest.MonkeyPatch) -> None:
    """[A4.1-a]"""
    calls: list[int] = []
    real = adapter._json_decode

    def counting(data: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(len(data))
        return real(data, *args, **kwargs)

    monkeypatch.setattr(adapter, "_json_decode", counting)
    t = AnthropicTranslator(AGENT)
    payload = json.dumps({"items": list(range(500)), "s": "x" * 1000})
    feed_all(t, [MESSAGE_START, start(0, {"type": "tool_use", "id": "t", "name": "n", "input": {}})])
    for i in range(0, len(payload), 7):
        t.feed(json_delta(0, payload[i : i + 7]))
    assert calls == []  # nothing parsed while deltas arrive
    lines = t.feed(stop(0))
    assert calls == [len(payload)]  # parsed exactly once, whole, at block stop
    assert t.finalize()[0]["input"] == json.loads(payload)
    assert calls == [len(payload)]  # finalize reuses the parsed value
    assert all(len(line) <= 2048 for line in lines)
    assert "".join(d["delta"] for d in decoded(lines)) == payload


def test_tool_without_deltas_uses_the_start_input() -> None:
    """[A4.1-b] a tool_use with no deltas sends its start input."""
    t = AnthropicTranslator(AGENT)
    lines = feed_all(t, [MESSAGE_START, start(0, {"type": "tool_use", "id": "t", "name": "n", "input": {}}), stop(0)])
    assert decoded(lines)[0]["delta"] == "{}"


def test_tool_json_cut_by_max_tokens_is_read_as_the_sdk_reads_it_A4_1_c() -> None:
    """[A4.1-c] a cut input (a prefix of JSON) is no error: the call carries what the SDK recovers."""
    t = AnthropicTranslator(AGENT)
    feed_all(t, [MESSAGE_START, start(2, {"type": "tool_use", "id": "t", "name": "n", "input": {}})])
    t.feed(json_delta(2, '{"a": [1, {"b": tr'))
    (line,) = decoded(t.feed(stop(2)))
    assert line["delta"] == '{"a": [1, {}]}'  # the model's text up to its last complete value, closed
    assert t.finalize() == [{"type": "tool_use", "id": "t", "name": "n", "input": {"a": [1, {}]}}]
    assert len(t.warnings) == 1
    assert "cut" in t.warnings[0]


def test_invalid_tool_json_raises_and_is_never_history_with_null_input_A4_1_c() -> None:
    """[A4.1-c] not a prefix of JSON: ``DecodeError``; the block stays open for ``abort()``, out of history."""
    t = AnthropicTranslator(AGENT)
    feed_all(t, [MESSAGE_START, start(2, {"type": "tool_use", "id": "t", "name": "n", "input": {}})])
    t.feed(json_delta(2, '{"a": }'))
    with pytest.raises(DecodeError) as info:
        t.feed(stop(2))
    assert info.value.key == (AGENT, "tool_call")
    assert info.value.section == "A4.1-c"
    assert "block 2" in str(info.value)
    assert t.finalize() == []  # never `input: None`
    lines = t.abort(info.value)
    assert [d["type"] for d in decoded(lines)] == ["error"]  # the call sent nothing, so nothing to close
    assert t.close() == [BlockKey(AGENT, "tool_call")]


@pytest.mark.parametrize("kind", ["server_tool_use", "mcp_tool_use"])
def test_server_and_mcp_tool_use_become_server_tool_call_A4_2_a(kind: str) -> None:
    """[A4.2-a]"""
    t = AnthropicTranslator(AGENT)
    block = {"type": kind, "id": "srv_1", "name": "web_search", "input": {}}
    if kind == "mcp_tool_use":
        block["server_name"] = "files"
    lines = feed_all(t, [MESSAGE_START, start(0, block), json_delta(0, '{"q":"x"}'), stop(0)])
    assert decoded(lines) == [
        {
            "type": "server_tool_call",
            "agent": AGENT,
            "final": True,
            "id": "srv_1",
            "name": "web_search",
            "delta": '{"q":"x"}',
        }
    ]
    assert t.finalize() == [{**block, "input": {"q": "x"}}]


@pytest.mark.parametrize(
    ("kind", "content"),
    [
        ("web_search_tool_result", [{"type": "web_search_result", "url": "u", "title": "t", "page_age": None}]),
        ("web_fetch_tool_result", {"type": "web_fetch_result", "url": "u", "content": {"type": "document"}}),
        ("code_execution_tool_result", {"type": "code_execution_result", "stdout": "4\n", "return_code": 0}),
        ("mcp_tool_result", [{"type": "text", "text": "done"}]),
        ("web_search_tool_result", {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"}),
    ],
)
def test_every_tool_result_block_becomes_server_tool_result_with_json_A4_3_a(kind: str, content: Any) -> None:
    """[A4.3-a] any ``*_tool_result`` block; [A4.3-b] its content as real JSON."""
    t = AnthropicTranslator(AGENT)
    block = {"type": kind, "tool_use_id": "srv_9", "content": content}
    lines = feed_all(t, [MESSAGE_START, start(0, block)])
    assert lines == []  # complete at start, but emitted at block stop (seed: content_block_stop)
    out = decoded(t.feed(stop(0)))
    assert [(d["type"], d["id"], d["name"], d["final"]) for d in out] == [("server_tool_result", "srv_9", kind, True)]
    assert json.loads(out[0]["delta"]) == content  # real JSON, never a repr
    assert t.finalize() == [block]


def test_large_server_tool_result_is_chunked() -> None:
    t = AnthropicTranslator(AGENT, 300)
    content = {"stdout": 'é\n"' * 2000}
    lines = feed_all(
        t,
        [
            MESSAGE_START,
            start(0, {"type": "code_execution_tool_result", "tool_use_id": "s", "content": content}),
            stop(0),
        ],
    )
    assert len(lines) > 10
    assert all(len(line) <= 300 for line in lines)
    assert rebuilt_blocks(lines)[0]["content"] == content


# ---------------------------------------------------------------- derived events


def test_derived_events_are_ignored_A2_2_a() -> None:
    """[A2.2-a] What ``messages.stream()`` yields after each raw delta, as dicts: no doubled output."""
    raw = [
        MESSAGE_START,
        start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "a"}),
        delta(0, {"type": "signature_delta", "signature": "S"}),
        stop(0),
        start(1, {"type": "text", "text": ""}),
        text_delta(1, "hi"),
        delta(1, {"type": "citations_delta", "citation": {"type": "char_location", "cited_text": "h"}}),
        stop(1),
        start(2, {"type": "tool_use", "id": "t", "name": "n", "input": {}}),
        json_delta(2, '{"k":1}'),
        stop(2),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    derived_after = {
        3: {"type": "thinking", "thinking": "a", "snapshot": "a"},
        4: {"type": "signature", "signature": "S"},
        7: {"type": "text", "text": "hi", "snapshot": "hi"},
        8: {"type": "citation", "citation": {"type": "char_location", "cited_text": "h"}, "snapshot": []},
        11: {"type": "input_json", "partial_json": '{"k":1}', "snapshot": {"k": 1}},
    }
    with_derived: list[Any] = []
    for i, event in enumerate(raw, 1):
        with_derived.append(event)
        if i in derived_after:
            with_derived.append(derived_after[i])
    a, b = AnthropicTranslator(AGENT), AnthropicTranslator(AGENT)
    assert feed_all(a, raw) == feed_all(b, with_derived)
    assert a.finalize() == b.finalize()
    assert b.warnings == []


# ---------------------------------------------------------------- cut streams, errors, unknowns


def test_stream_cut_mid_text_block_is_reported_by_close_A8_1_a() -> None:
    """[A8.1-a]"""
    t = AnthropicTranslator(AGENT)
    events = [
        MESSAGE_START,
        start(0, {"type": "tool_use", "id": "t", "name": "n", "input": {}}),
        json_delta(0, "{}"),
        stop(0),
        start(1, {"type": "text", "text": ""}),
        text_delta(1, "half a sent"),
    ]
    lines = feed_all(t, events)
    assert t.close() == [BlockKey(AGENT, "text")]
    assert all(not (d["type"] == "text" and d["final"]) for d in decoded(lines))  # no final marker invented
    assert [b["type"] for b in t.finalize()] == ["tool_use"]  # the cut block is not history
    assert "stream ended before message_stop" in t.warnings
    blocks = reconstruct(lines).to_dict()["agents"][AGENT]["blocks"]
    assert blocks[-1] == {"type": "text", "complete": False, "content": "half a sent", "citations": []}


def test_stream_cut_mid_tool_and_result_reports_both() -> None:
    t = AnthropicTranslator(AGENT)
    events = [
        MESSAGE_START,
        start(0, {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}),
        json_delta(0, '{"q": "x'),
        start(1, {"type": "web_search_tool_result", "tool_use_id": "s", "content": []}),
    ]
    assert feed_all(t, events) == []
    assert t.close() == [BlockKey(AGENT, "server_tool_call"), BlockKey(AGENT, "server_tool_result")]
    assert t.finalize() == []


def test_feed_after_close_is_a_sequence_error_A2_1_b() -> None:
    """[A2.1-b]"""
    t = AnthropicTranslator(AGENT)
    t.close()
    with pytest.raises(SequenceError):
        t.feed(MESSAGE_START)


def test_mid_stream_error_event_closes_open_blocks_then_errors_A7_1_a() -> None:
    """[A7.1-a], [A8.2-a]"""
    t = AnthropicTranslator(AGENT)
    events = [
        MESSAGE_START,
        start(0, {"type": "text", "text": ""}),
        text_delta(0, "partial"),
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    ]
    lines = feed_all(t, events)
    out = decoded(lines)
    assert out[-2:] == [
        {"type": "text", "agent": AGENT, "final": True, "delta": ""},
        {
            "type": "error",
            "agent": AGENT,
            "final": True,
            "delta": '{"type":"overloaded_error","message":"Overloaded"}',
        },
    ]
    assert_valid(lines, expect=["W163", "W161"])  # a fragment (no meta_init, no [DONE]); nothing open
    assert t.finish() == []  # the error is out already
    assert t.close() == [BlockKey(AGENT, "text")]
    assert t.finalize() == []
    with pytest.raises(SequenceError):
        t.feed(text_delta(0, "more"))


def test_finish_of_a_complete_stream_is_empty_A8_2_a() -> None:
    t = AnthropicTranslator(AGENT)
    feed_all(t, [MESSAGE_START, start(0, {"type": "text", "text": ""}), text_delta(0, "a"), stop(0)])
    feed_all(t, [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}}, {"type": "message_stop"}])
    assert t.finish() == []
    assert t.close() == []
    assert t.warnings == []


@pytest.mark.parametrize(
    ("events", "closing", "cut"),
    [
        ([], ["error"], "before message_stop"),
        ([MESSAGE_START], ["error"], "before message_stop"),
        ([MESSAGE_START, start(0, {"type": "thinking", "thinking": ""})], ["error"], "cut: thinking"),
        (
            [MESSAGE_START, start(0, {"type": "thinking", "thinking": "hm"}), start(1, {"type": "text", "text": ""})],
            ["thinking", "error"],
            "cut: thinking, text",
        ),
        (
            [MESSAGE_START, start(0, {"type": "text", "text": ""}), text_delta(0, "x"), {"type": "message_stop"}],
            ["text", "error"],
            "with blocks left open; cut: text",
        ),
    ],
)
def test_finish_of_a_cut_stream_closes_and_errors_A8_2_a(
    events: list[dict[str, Any]], closing: list[str], cut: str
) -> None:
    """[A8.2-a] final markers only for blocks open on the wire, then ``incomplete_stream``."""
    t = AnthropicTranslator(AGENT)
    lines = feed_all(t, events)
    end = t.finish()
    assert [d["type"] for d in decoded(end)] == closing
    error = json.loads(decoded(end)[-1]["delta"])
    assert error["type"] == "incomplete_stream"
    assert cut in error["message"]
    assert_valid(lines + end, expect=["W163", "W161"])  # a fragment; nothing left open
    assert t.abort(RuntimeError("late")) == []  # one error per stream


def test_second_message_start_closes_the_first_messages_open_text_A2_1_c() -> None:
    """[A2.1-c] the earlier message's open text gets its final marker, so the two texts never join."""
    t = AnthropicTranslator(AGENT)
    lines = feed_all(t, [MESSAGE_START, start(0, {"type": "text", "text": ""}), text_delta(0, "a")])
    lines += feed_all(t, [MESSAGE_START, start(0, {"type": "text", "text": ""}), text_delta(0, "b"), stop(0)])
    lines += feed_all(t, [{"type": "message_stop"}])
    lines += t.finish()
    texts = [b["content"] for b in reconstruct(lines).to_dict()["agents"][AGENT]["blocks"] if b["type"] == "text"]
    assert texts == ["a", "b"]
    assert_valid(lines, expect=["W163", "W161"])
    assert json.loads(decoded(lines)[-1]["delta"])["type"] == "incomplete_stream"


def test_error_payload_from_exception_shapes() -> None:
    class StatusError(Exception):
        body: ClassVar[dict[str, Any]] = {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "slow down"},
        }

    assert error_payload(StatusError("x")) == {"type": "rate_limit_error", "message": "slow down"}
    assert error_payload(TimeoutError("took too long")) == {"type": "TimeoutError", "message": "took too long"}
    assert error_payload({"type": "api_error", "message": "m"}) == {"type": "api_error", "message": "m"}
    assert error_payload("boom") == {"type": "api_error", "message": "boom"}


def test_unknown_events_blocks_and_deltas_warn_never_crash_A5_2_a() -> None:
    """[A5.2-a]"""
    t = AnthropicTranslator(AGENT)
    events = [
        MESSAGE_START,
        {"type": "future_event", "x": 1},
        start(0, {"type": "hologram", "payload": {"a": 1}, "extra": None}),
        delta(0, {"type": "hologram_delta", "bits": "..."}),
        stop(0),
        start(1, {"type": "text", "text": ""}),
        delta(1, {"type": "input_json_delta", "partial_json": "{"}),  # wrong delta for the block
        text_delta(7, "nowhere"),  # never started
        stop(1),
        stop(1),  # already closed
        {"type": "message_stop"},
    ]
    lines = feed_all(t, events)
    assert decoded(lines) == [{"type": "text", "agent": AGENT, "final": True, "delta": ""}]
    assert len(t.warnings) == 6
    assert t.finalize() == [{"type": "hologram", "payload": {"a": 1}}, {"type": "text", "text": ""}]
    assert t.close() == []


def test_second_message_start_starts_over_and_reports_lost_blocks_A2_1_c() -> None:
    """[A2.1-c]"""
    t = AnthropicTranslator(AGENT)
    feed_all(t, [MESSAGE_START, start(0, {"type": "text", "text": ""}), text_delta(0, "a")])
    second = {**MESSAGE_START, "message": {**MESSAGE_START["message"], "id": "msg_2"}}  # type: ignore[dict-item]
    feed_all(t, [second, start(0, {"type": "text", "text": ""}), text_delta(0, "b"), stop(0), {"type": "message_stop"}])
    assert t.message_id == "msg_2"
    assert t.finalize() == [{"type": "text", "text": "b"}]
    assert t.close() == [BlockKey(AGENT, "text")]
    assert any("second message_start" in w for w in t.warnings)


def test_usage_and_stop_reason_follow_running_totals() -> None:
    t = AnthropicTranslator(AGENT)
    feed_all(
        t,
        [
            MESSAGE_START,
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 40},
            },
        ],
    )
    assert t.usage == {"input_tokens": 10, "output_tokens": 40, "cache_read_input_tokens": 7}
    assert t.stop_reason == "end_turn"
    assert t.model == "claude-sonnet-4-6"


# ---------------------------------------------------------------- sans-I/O


def test_envelope_anthropic_imports_no_sdk_or_io_library() -> None:
    """[A1-a] STYLE §1: importing and using the adapter loads neither the SDK nor httpx/httpx2/asyncio."""
    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in ('anthropic', 'httpx', 'httpx2', 'asyncio'):\n"
        "            raise ImportError('forbidden: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from envelope.anthropic import AnthropicTranslator\n"
        "t = AnthropicTranslator('a')\n"
        "t.feed({'type': 'message_start', 'message': {'id': 'm', 'model': 'x', 'usage': {}}})\n"
        "t.feed({'type': 'content_block_start', 'index': 0, 'content_block': {'type': 'text', 'text': ''}})\n"
        "d = {'type': 'text_delta', 'text': 'x'}\n"
        "print(len(t.feed({'type': 'content_block_delta', 'index': 0, 'delta': d})))\n"
    )
    src = str(adapter.__file__).rsplit("/envelope/", 1)[0]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": src}, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"


def test_sdk_objects_are_read_without_model_dump_per_delta(monkeypatch: pytest.MonkeyPatch) -> None:
    """[A1-b] Deltas are read by attribute access; ``to_dict`` runs only for whole blocks."""
    from anthropic.types import RawContentBlockDeltaEvent, TextDelta

    dumps: list[str] = []

    def spy(name: str) -> Any:
        def dump(*_args: Any, **_kwargs: Any) -> dict[str, Any]:
            dumps.append(name)
            return {}

        return dump

    monkeypatch.setattr(TextDelta, "to_dict", spy("to_dict"))
    monkeypatch.setattr(TextDelta, "model_dump", spy("model_dump"))
    t = AnthropicTranslator(AGENT)
    feed_all(t, [MESSAGE_START, start(0, {"type": "text", "text": ""})])
    event = RawContentBlockDeltaEvent(
        type="content_block_delta", index=0, delta=TextDelta(type="text_delta", text="ok")
    )
    assert decoded(t.feed(event))[0]["delta"] == "ok"
    assert dumps == []


def test_msgspec_decode_is_the_parser() -> None:
    assert adapter._json_decode is msgspec.json.decode


# ---------------------------------------------------------------- robustness

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_types = st.sampled_from(
    [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "error",
        "text",
        "ping",
        "weird",
    ]
)
_block = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text", "thinking", "tool_use", "server_tool_use", "web_search_tool_result", "redacted_thinking", "x"]
        )
    },
    optional={"id": _json, "name": _json, "input": _json, "content": _json, "text": _json, "tool_use_id": _json},
)
_delta = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            ["text_delta", "thinking_delta", "input_json_delta", "citations_delta", "signature_delta", "y"]
        )
    },
    optional={"text": _json, "thinking": _json, "partial_json": _json, "citation": _json, "signature": _json},
)
_event = st.fixed_dictionaries(
    {"type": _types},
    optional={
        "index": st.integers(min_value=-1, max_value=3) | _json,
        "content_block": _block | _json,
        "delta": _delta | _json,
        "message": _json,
        "usage": _json,
        "error": _json,
    },
)


@given(events=st.lists(_event, max_size=25))
def test_arbitrary_events_raise_only_envelope_errors(events: list[dict[str, Any]]) -> None:
    """STYLE §5: any exception from ``feed()`` other than an ``EnvelopeError`` is a bug."""
    t = AnthropicTranslator(AGENT)
    for event in events:
        try:
            for line in t.feed(event):
                assert len(line) <= 2048 or t.oversize
        except EnvelopeError:
            pass
    t.close()
    json.dumps(t.finalize())


def test_non_json_block_content_is_refused_never_repred_A4_3_b() -> None:
    """[A4.3-b] content that is not JSON data raises ``EncodeError``; no ``repr()`` reaches the wire."""
    t = AnthropicTranslator(AGENT)
    feed_all(
        t, [MESSAGE_START, start(0, {"type": "code_execution_tool_result", "tool_use_id": "s", "content": object()})]
    )
    with pytest.raises(EncodeError, match="object"):
        t.feed(stop(0))


def test_tool_input_nested_too_deep_is_a_coded_decode_error_A4_1_d() -> None:
    """[A4.1-d] 1000 levels: a ``DecodeError`` naming the offset, not a ``RecursionError``."""
    t = AnthropicTranslator(AGENT)
    feed_all(t, [MESSAGE_START, start(0, {"type": "tool_use", "id": "t", "name": "n", "input": {}})])
    t.feed(json_delta(0, '{"a": ' + "[" * 1000))
    t.feed(json_delta(0, "]" * 1000 + "}"))
    with pytest.raises(DecodeError) as info:
        t.feed(stop(0))
    assert info.value.section == "A4.1-d"
    assert info.value.field == "$.delta"
    # The object is level 1 and the arrays start at index 6, so level 257 opens at 6 + 255.
    assert "character 261" in str(info.value)
    assert t.finalize() == []
    # 256 levels in all (the object and 255 arrays) are within the limit.
    ok = AnthropicTranslator(AGENT)
    feed_all(ok, [MESSAGE_START, start(0, {"type": "tool_use", "id": "t", "name": "n", "input": {}})])
    ok.feed(json_delta(0, '{"a": ' + "[" * 255 + "]" * 255 + "}"))
    assert decoded(ok.feed(stop(0)))[0]["type"] == "tool_call"


def test_lone_surrogate_in_tool_input_is_an_encode_error_spec_6_4() -> None:
    """spec §6.4: a lone surrogate in ``partial_json`` is refused with its index, not a ``UnicodeEncodeError``."""
    t = AnthropicTranslator(AGENT)
    feed_all(t, [MESSAGE_START, start(0, {"type": "tool_use", "id": "t", "name": "n", "input": {}})])
    t.feed(json_delta(0, '{"a": "x\ud800"}'))
    with pytest.raises(EncodeError) as info:
        t.feed(stop(0))
    assert info.value.section == "6.4"
    assert "U+D800 at index 8" in str(info.value)


# ---------------------------------------------------------------- surrogate pairs split across deltas


def _utf16_units(text: str) -> str:
    """``text`` as the API's JSON escapes can deliver it: astral characters as two surrogate code points."""
    data = text.encode("utf-16-le")
    return "".join(chr(int.from_bytes(data[i : i + 2], "little")) for i in range(0, len(data), 2))


def _split_text_block(text: str, cuts: list[int], kind: str = "text") -> tuple[AnthropicTranslator, list[bytes]]:
    units = _utf16_units(text)
    bounds = sorted({0, len(units), *(c % (len(units) + 1) for c in cuts)})
    pieces = [units[a:b] for a, b in itertools.pairwise(bounds)]
    t = AnthropicTranslator(AGENT, 200)
    field = "text" if kind == "text" else "thinking"
    events = [MESSAGE_START, start(0, {"type": kind, field: ""})]
    events += [delta(0, {"type": f"{field}_delta", field: p}) for p in pieces]
    return t, feed_all(t, [*events, stop(0), {"type": "message_stop"}])


@given(text=st.text(min_size=1, max_size=80), cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12))
@example(text="😀", cuts=[1])
@example(text="a😀😀b", cuts=[2, 3, 4])
@example(text="😀" * 3, cuts=[1, 3, 5])
def test_surrogate_pair_split_across_deltas_is_joined_A3_1_c(text: str, cuts: list[int]) -> None:
    """[A3.1-c] any split of the UTF-16 code units rebuilds the text; every line is valid UTF-8 JSON."""
    t, lines = _split_text_block(text, cuts)
    assert "".join(d["delta"] for d in decoded(lines)) == text
    assert t.finalize() == [{"type": "text", "text": text}]
    assert_valid(lines, max_bytes=200, expect=["W163", "W161"])  # a fragment: no meta_init, no [DONE]


@pytest.mark.parametrize("n", [11, 12, 13])
def test_surrogate_pair_split_across_deltas_is_joined_fixed_seeds_A3_1_c(n: int) -> None:
    """[A3.1-c] the same property under fixed seeds (CI runs hypothesis derandomised)."""

    @seed(n)
    @settings(derandomize=False, max_examples=100)
    @given(
        text=st.text(alphabet=st.sampled_from('a"😀🏔é\n'), min_size=1, max_size=60),
        cuts=st.lists(st.integers(min_value=0, max_value=120), max_size=15),
        kind=st.sampled_from(["text", "thinking"]),
    )
    def prop(text: str, cuts: list[int], kind: str) -> None:
        _t, lines = _split_text_block(text, cuts, kind)
        assert "".join(d["delta"] for d in decoded(lines)) == text
        assert_valid(lines, max_bytes=200, expect=["W163", "W161"])

    prop()


def test_lone_high_surrogate_at_block_end_is_an_encode_error_spec_6_4() -> None:
    """spec §6.4: a high surrogate with no low one after it is still refused, at the block's stop."""
    t = AnthropicTranslator(AGENT)
    lines = feed_all(t, [MESSAGE_START, start(0, {"type": "text", "text": ""}), text_delta(0, "ok\ud83d")])
    assert decoded(lines) == [{"type": "text", "agent": AGENT, "final": False, "delta": "ok"}]
    with pytest.raises(EncodeError) as info:
        t.feed(stop(0))
    assert info.value.section == "6.4"
    assert "U+D83D" in str(info.value)
    end = t.abort(info.value)  # the block is still open: abort closes it
    assert [d["type"] for d in decoded(end)] == ["text", "error"]
    assert t.finalize() == []
    # A lone low surrogate is refused at once.
    t = AnthropicTranslator(AGENT)
    feed_all(t, [MESSAGE_START, start(0, {"type": "text", "text": ""})])
    with pytest.raises(EncodeError):
        t.feed(text_delta(0, "\udc00"))


def test_surrogate_pair_split_across_tool_json_deltas_is_joined() -> None:
    t = AnthropicTranslator(AGENT)
    feed_all(t, [MESSAGE_START, start(0, {"type": "tool_use", "id": "t", "name": "n", "input": {}})])
    feed_all(t, [json_delta(0, '{"a": "\ud83d'), json_delta(0, '\ude00"}')])
    assert json.loads(decoded(t.feed(stop(0)))[0]["delta"]) == {"a": "😀"}
    assert t.finalize()[0]["input"] == {"a": "😀"}
