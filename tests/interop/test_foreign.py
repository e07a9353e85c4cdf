"""Streams other servers wrote (not our converters'), and bad input: what converts, and the code for what does not.

spec/interop.md §4.2-§4.3, §5.2-§5.3, §6. Every stream that converts is judged by the
strict validator; every refusal is an ``InteropError`` with its code and the 1-based
number of the event at fault.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from envelope import Reconstructor, validate
from envelope.interop import InteropError
from envelope.interop.agui import AguiToEnvelope
from envelope.interop.vercel import VercelToEnvelope

RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
DONE = {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}
START = {"type": "start"}


def _agui(events: list[Any]) -> list[bytes]:
    conv = AguiToEnvelope()
    return [line for e in events for line in conv.feed(e)] + conv.close()


def _vercel(chunks: list[Any]) -> list[bytes]:
    conv = VercelToEnvelope()
    return [line for c in chunks for line in conv.feed(c)] + conv.close()


def _blocks(lines: list[bytes]) -> dict[str, list[dict[str, Any]]]:
    problems = [f"{v.code} {v.message}" for v in validate(lines)]
    assert problems == []  # strict: no error, no warning
    rebuilt = Reconstructor()
    for line in lines:
        rebuilt.feed(line)
    return {a: [b.to_dict() for b in bs] for a, bs in rebuilt.transcript().agents.items()}


def test_a_foreign_agui_run_with_subagents_and_errors() -> None:
    lines = _agui(
        [
            RUN,
            {"type": "STEP_STARTED", "stepName": "s"},
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "spawn"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "SUBAGENT_STARTED", "subagentRunId": "sub", "name": "researcher", "parentToolCallId": "c1"},
            {"type": "TEXT_MESSAGE_START", "messageId": "m", "subagentRunId": "sub"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "found", "subagentRunId": "sub"},
            {"type": "TEXT_MESSAGE_END", "messageId": "m", "subagentRunId": "sub"},
            {"type": "SUBAGENT_ERROR", "subagentRunId": "sub", "message": "boom"},
            {
                "type": "TOOL_CALL_RESULT",
                "messageId": "r1",
                "toolCallId": "c1",
                "content": [
                    {"type": "text", "text": "see "},
                    {
                        "type": "image",
                        "source": {"type": "url", "value": "https://x.invalid/a.png", "mimeType": "image/png"},
                    },
                    {"type": "text", "text": "this"},
                ],
            },
            {"type": "STEP_FINISHED", "stepName": "s"},
            {"type": "RUN_ERROR", "message": "over", "code": "quota"},
        ]
    )
    blocks = _blocks(lines)
    main, sub = blocks["agent"], blocks["sub"]
    assert main[0]["data"]["migrated_from"] == "agui"
    assert sub[0]["data"]["parent_agent"] == "agent"
    assert sub[0]["data"]["parent_tool_use_id"] == "c1"
    assert [b["type"] for b in sub] == ["meta_init", "text", "error"]
    assert sub[2]["data"] == {"type": "subagent_error", "message": "boom"}
    result = next(b for b in main if b["type"] == "tool_result")
    assert result["content"] == "see this"
    assert result["images"] == [{"src": "https://x.invalid/a.png", "media_type": "image/png"}]
    assert main[-1]["data"] == {"type": "quota", "message": "over"}
    assert lines[-1] == b"[DONE]"


def test_a_foreign_ui_message_stream() -> None:
    lines = _vercel(
        [
            START,
            {"type": "start-step"},
            {"type": "tool-input-available", "toolCallId": "c1", "toolName": "search", "input": {"q": "x"}},
            {"type": "tool-input-start", "toolCallId": "c2", "toolName": "fetch"},
            {"type": "tool-input-available", "toolCallId": "c2", "toolName": "fetch", "input": {"u": 1}},
            {"type": "tool-output-error", "toolCallId": "c2", "errorText": "404"},
            {"type": "tool-output-available", "toolCallId": "c1", "output": {"hits": 2}},
            {"type": "text-start", "id": "t"},
            {"type": "text-delta", "id": "t", "delta": "two"},
            {"type": "text-end", "id": "t"},
            {"type": "source-url", "sourceId": "s1", "url": "https://x.invalid/", "title": "X"},
            {"type": "source-document", "sourceId": "s2", "mediaType": "text/plain", "title": "Doc"},
            {"type": "error", "errorText": "slow"},
            {"type": "tool-input-available", "toolCallId": "c3", "toolName": "confirm", "input": {"ok": True}},
            {"type": "finish-step"},
            {"type": "finish", "finishReason": "tool-calls"},
            "[DONE]",
        ]
    )
    blocks = _blocks(lines)["agent"]
    by_type: dict[str, list[dict[str, Any]]] = {}
    for b in blocks:
        by_type.setdefault(b["type"], []).append(b)
    assert by_type["tool_call"][0]["input"] == {"q": "x"}
    assert [r["content"] for r in by_type["tool_result"]] == ["404", '{"hits":2}']
    cites = by_type["text"][0]["citations"]
    assert [c["citation_type"] for c in cites] == ["web_search_result_location", "char_location"]
    assert by_type["error"][0]["data"] == {"type": "error", "message": "slow"}
    (paused,) = by_type["awaiting_frontend_tools"]
    assert paused["data"] == [{"tool_use_id": "c3", "name": "confirm", "input": {"ok": True}}]


def test_an_aborted_ui_message_stream_is_cut() -> None:
    lines = _vercel(
        [START, {"type": "text-start", "id": "t"}, {"type": "text-delta", "id": "t", "delta": "x"}, {"type": "abort"}]
    )
    assert b"[DONE]" not in lines
    rebuilt = Reconstructor()
    for line in lines:
        rebuilt.feed(line)
    t = rebuilt.transcript()
    assert t.done is False
    assert [b.complete for b in t.agents["agent"]] == [True, False]  # meta_init made whole; the text cut


def _code(convert: Any, events: list[Any]) -> tuple[str, int | None]:
    with pytest.raises(InteropError) as caught:
        convert(events)
    return caught.value.code, caught.value.position.line


TEXT = [{"type": "TEXT_MESSAGE_START", "messageId": "m"}]


@pytest.mark.parametrize(
    ("events", "code", "at"),
    [
        ([{"type": "TEXT_MESSAGE_START", "messageId": "m"}], "I204", 1),
        ([RUN, RUN], "I204", 2),
        ([RUN, {"type": "RUN_ERROR"}], "I202", 2),
        ([RUN, {"type": "SUBAGENT_ERROR", "subagentRunId": "s"}], "I202", 2),
        ([RUN, {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "user"}], "I203", 2),
        ([RUN, {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "x"}], "I204", 2),
        ([RUN, {**DONE, "outcome": {"type": "success", "pendingToolCallIds": ["nope"]}}], "I204", 2),
        ([RUN, {"type": "TOOL_CALL_RESULT", "messageId": "r", "toolCallId": "c", "content": "x"}], "I202", 2),
        (
            [
                RUN,
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "r",
                    "toolCallId": "c",
                    "content": 3,
                    "metadata": {"envelope": {"name": "n"}},
                },
            ],
            "I202",
            2,
        ),
        ([RUN, {"type": "CUSTOM", "name": "envelope.meta_init", "value": 3}], "I202", 2),
        (
            [
                RUN,
                *TEXT,
                {"type": "TEXT_MESSAGE_END", "messageId": "m"},
                {
                    "type": "CUSTOM",
                    "name": "envelope.citation",
                    "value": {"cited_text": "", "citation_type": "x", "final": 1},
                },
            ],
            "I202",
            4,
        ),
        ([RUN, {"type": "CUSTOM", "name": "envelope.nothing", "value": {}}], "I203", 2),
        ([RUN, {"type": "CUSTOM", "name": "mine", "value": {}}], "I203", 2),
        (
            [
                RUN,
                {
                    "type": "CUSTOM",
                    "name": "envelope.piece",
                    "value": {"type": "tool_result", "text": "", "final": True, "id": "c", "name": "n", "images": [3]},
                },
            ],
            "I202",
            2,
        ),
        (
            [RUN, {"type": "CUSTOM", "name": "envelope.piece", "value": {"type": "text", "text": "", "final": True}}],
            "I202",
            2,
        ),
        (
            [
                RUN,
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "r",
                    "toolCallId": "c",
                    "content": [3],
                    "metadata": {"envelope": {"name": "n"}},
                },
            ],
            "I202",
            2,
        ),
        (
            [
                RUN,
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "r",
                    "toolCallId": "c",
                    "content": [{"type": "image", "source": {"type": "file", "value": "f"}}],
                    "metadata": {"envelope": {"name": "n"}},
                },
            ],
            "I203",
            2,
        ),
        (
            [
                RUN,
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "r",
                    "toolCallId": "c",
                    "content": [{"type": "audio", "source": {"type": "url", "value": "u"}}],
                    "metadata": {"envelope": {"name": "n"}},
                },
            ],
            "I203",
            2,
        ),
        (
            [
                RUN,
                {
                    "type": "TOOL_CALL_RESULT",
                    "messageId": "r",
                    "toolCallId": "c",
                    "content": [{"type": "image", "source": {"type": "url", "value": "u", "mimeType": "image/png"}}],
                    "metadata": {"envelope": {"name": "n", "type": "server_tool_result"}},
                },
            ],
            "I203",
            2,
        ),
        ([RUN, *TEXT, {"type": "TEXT_MESSAGE_END", "messageId": "m"}, DONE, RUN, {**DONE, "runId": 5}], "I202", 6),
        ([RUN, *TEXT, DONE], "I205", 3),
        ([RUN, {"type": "STATE_SNAPSHOT", "snapshot": {}}], "I203", 2),
    ],
)
def test_bad_agui_input_is_refused_with_its_code(events: list[Any], code: str, at: int) -> None:
    assert _code(_agui, events) == (code, at)


@pytest.mark.parametrize(
    ("chunks", "code", "at"),
    [
        ([{"type": "text-start", "id": "t"}], "I204", 1),
        ([START, START], "I204", 2),
        ([{**START, "messageMetadata": {"a": 1}}], "I203", 1),
        ([START, {"type": "finish", "messageMetadata": {"a": 1}}], "I203", 2),
        ([START, {"type": "error"}], "I202", 2),
        ([START, {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "x"}], "I204", 2),
        ([START, {"type": "tool-input-available", "toolCallId": "c", "toolName": "n"}], "I202", 2),
        ([START, {"type": "tool-output-available", "toolCallId": "c", "output": 1}], "I204", 2),
        (
            [
                START,
                {"type": "tool-input-start", "toolCallId": "c", "toolName": "n"},
                {"type": "tool-output-available", "toolCallId": "c"},
            ],
            "I202",
            3,
        ),
        (
            [
                START,
                {"type": "tool-input-start", "toolCallId": "c", "toolName": "n", "providerExecuted": True},
                {
                    "type": "tool-output-available",
                    "toolCallId": "c",
                    "output": "",
                    "providerExecuted": True,
                    "providerMetadata": {"envelope": {"images": [{"src": "s", "media_type": "m"}]}},
                },
            ],
            "I203",
            3,
        ),
        (
            [
                START,
                {"type": "tool-input-start", "toolCallId": "c", "toolName": "n"},
                {
                    "type": "tool-output-available",
                    "toolCallId": "c",
                    "output": "",
                    "providerMetadata": {"envelope": {"images": [1]}},
                },
            ],
            "I202",
            3,
        ),
        (
            [
                START,
                {"type": "text-start", "id": "t"},
                {"type": "text-end", "id": "t"},
                {
                    "type": "source-url",
                    "sourceId": "s",
                    "url": "u",
                    "providerMetadata": {
                        "envelope": {"citation": {"cited_text": "", "citation_type": "x"}, "final": "no"}
                    },
                },
            ],
            "I202",
            4,
        ),
        ([START, {"type": "file", "url": "u", "mediaType": "image/png"}], "I203", 2),
        ([START, {"type": "data-weather", "data": 1}], "I203", 2),
        ([START, {"type": "data-weather", "data": {"agent": "a"}}], "I203", 2),
        ([START, {"type": "tool-approval-request", "approvalId": "a", "toolCallId": "c"}], "I203", 2),
        ([START, {"type": "text-start", "id": "t"}, {"type": "finish"}], "I205", 3),
        (
            [START, {"type": "data-envelope-piece", "data": {"agent": "a", "type": "x", "text": "", "final": True}}],
            "I202",
            2,
        ),
    ],
)
def test_bad_vercel_input_is_refused_with_its_code(chunks: list[Any], code: str, at: int) -> None:
    assert _code(_vercel, chunks) == (code, at)


def test_a_held_block_over_the_limit_is_refused() -> None:
    from envelope import Emitter
    from envelope.interop.agui import EnvelopeToAgui
    from envelope.interop.vercel import EnvelopeToVercel

    em = Emitter("a", 100)
    lines = em.buffered("tool_call", json.dumps({"k": "v" * 500}), id="c", name="n")
    conv: Any = EnvelopeToVercel(max_block_bytes=200)  # keeps a call's input for tool-input-available
    with pytest.raises(InteropError) as caught:
        _feed_all(conv, lines)
    assert caught.value.code == "I208"
    held = em.buffered("meta_files", json.dumps({"files": [], "pad": "p" * 500}))
    conv = EnvelopeToAgui(max_block_bytes=200)
    with pytest.raises(InteropError) as caught:
        _feed_all(conv, held)
    assert caught.value.code == "I208"


def _feed_all(conv: Any, lines: list[bytes]) -> None:
    for line in lines:
        conv.feed(line)


def test_requests_read_as_the_servers_own_and_refusals() -> None:
    """[I7-a] A RunAgentInput or useChat body as /agent/run or /agent/tool_results, or a coded refusal."""
    from envelope.interop.agui import request_from_run_input
    from envelope.interop.vercel import request_from_chat

    base = {"threadId": "t", "runId": "r"}
    tool_error = {
        "id": "x",
        "role": "tool",
        "toolCallId": "c",
        "content": [{"type": "text", "text": "no"}],
        "error": "e",
    }
    got = request_from_run_input({**base, "messages": [tool_error]})
    assert got.body == {"tool_results": [{"tool_use_id": "c", "content": "no", "is_error": True}]}
    pause = {"type": "data-awaiting-frontend-tools", "data": {"agent": "a", "text": "", "data": [{"tool_use_id": "c"}]}}
    failed = {"type": "dynamic-tool", "toolCallId": "c", "toolName": "n", "state": "output-error", "errorText": "no"}
    chat = {"id": "chat", "messages": [{"id": "m", "role": "assistant", "parts": [pause, failed]}]}
    assert request_from_chat(chat).body == {"tool_results": [{"tool_use_id": "c", "content": "no", "is_error": True}]}
    image = {"type": "image", "source": {"type": "url", "value": "u"}}
    refusals: list[tuple[Any, Any, str]] = [
        (request_from_run_input, {**base, "messages": []}, "I204"),
        (request_from_run_input, {**base, "messages": [{"id": "u", "role": "user", "content": [image]}]}, "I203"),
        (request_from_run_input, {**base, "messages": [{"id": "u", "role": "user", "content": 3}]}, "I202"),
        (request_from_run_input, {"threadId": "t", "messages": []}, "I202"),
        (request_from_chat, {"id": "c", "messages": [], "trigger": "regenerate-message"}, "I203"),
        (request_from_chat, {"id": "c", "messages": []}, "I204"),
        (request_from_chat, {"id": "c", "messages": [{"id": "m", "role": "assistant", "parts": []}]}, "I204"),
        (request_from_chat, {"id": "c", "messages": [{"id": "m", "role": "assistant", "parts": [pause]}]}, "I204"),
        (request_from_chat, {"id": "c", "messages": [{"id": "m", "role": "system", "parts": []}]}, "I204"),
        (
            request_from_chat,
            {"id": "c", "messages": [{"id": "m", "role": "user", "parts": [{"type": "file"}]}]},
            "I203",
        ),
    ]
    for read, body, code in refusals:
        with pytest.raises(InteropError) as caught:
            read(body)
        assert caught.value.code == code, body
