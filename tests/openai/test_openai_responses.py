"""``ResponsesTranslator``: recorded Responses API streams through the real ``openai`` SDK, offline.

Every stream here goes through the strict validator; what the envelopes rebuild is
compared with the SDK's own accumulation (``get_final_response()``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envelope import BlockKey, SequenceError, reconstruct
from envelope.openai import ResponsesTranslator
from openai_support import AGENT, FIXTURES, RESPONSES, content_blocks, rebuilt, responses_expected, responses_run
from validating import assert_valid

DONE = [b"[DONE]"]
COMPLETED = [p for p in RESPONSES if p.stem not in ("error_midstream", "failed", "incomplete")]


def _events(stem: str) -> list[Any]:
    body = (FIXTURES / "responses" / f"{stem}.sse").read_text()
    return [json.loads(line[6:]) for line in body.split("\n") if line.startswith("data: ")]


def _api_items(final: Any) -> list[Any]:
    """The SDK's output items as the API sent them: without the SDK-only ``parsed``/``parsed_arguments``."""
    items = [i.to_dict(mode="json") for i in final.output]
    for item in items:
        item.pop("parsed_arguments", None)
        for part in item.get("content") or []:
            part.pop("parsed", None)
    return items


def _kinds(lines: list[bytes]) -> list[str]:
    return [json.loads(line)["type"] for line in lines]


@pytest.mark.parametrize("path", RESPONSES, ids=lambda p: p.stem)
def test_every_recording_gives_a_strictly_valid_stream(path: Any) -> None:
    """[O2-a] [O8-a] a whole stream from meta=True, failed and cut responses included."""
    run = responses_run(path)
    assert run.raised is None
    assert_valid(run.lines + DONE)
    assert _kinds(run.lines)[0] == "meta_init"
    assert _kinds(run.lines)[-1] == "meta_final"


@pytest.mark.parametrize("path", COMPLETED, ids=lambda p: p.stem)
@pytest.mark.parametrize("helper", [True, False], ids=["stream", "create"])
def test_rebuilt_blocks_equal_the_sdk_accumulation(path: Any, helper: bool) -> None:
    """[O3-a] [O3-d] [O3-f] [O4-d] [O6-a] SDK parity: text, citations, summaries, calls, server tools."""
    run = responses_run(path, helper=helper)
    if helper:
        assert content_blocks(run.lines) == responses_expected(run.final)
        calls = [json.loads(x) for x in run.lines if b'"type":"tool_call"' in x]
        sdk = [i for i in run.final.output if i.type == "function_call"]
        assert [c["delta"] for c in calls] == [i.arguments for i in sdk]  # verbatim [O4-a]
        assert run.translator.finalize() == _api_items(run.final)  # [O6-b]
    else:
        assert run.lines == responses_run(path).lines


def test_dicts_of_a_capture_give_the_bytes_of_sdk_objects() -> None:
    """[O1-a] SDK objects and the wire JSON as dicts give the same lines."""
    for path in RESPONSES:
        t = ResponsesTranslator(AGENT, meta=True, user_query="replay")
        lines = [line for e in _events(path.stem) for line in t.feed(e)] + t.finish()
        assert lines == responses_run(path).lines, path.stem


def test_reasoning_summaries_are_thinking_blocks_and_calls_use_call_id() -> None:
    """[O3-f] one thinking block per summary part; [O4-d] call_id is the tool id; stop_reason tool_calls."""
    run = responses_run(FIXTURES / "responses" / "reasoning_tool_calls.sse")
    blocks = content_blocks(run.lines)
    assert [b["type"] for b in blocks] == ["thinking", "thinking", "tool_call", "tool_call"]
    assert [b["id"] for b in blocks[2:]] == ["call_Ra1", "call_Rb2"]
    assert blocks[3]["input"] == {"city": "Lima", "note": 'say "hi"\n'}
    final = rebuilt(run.lines)[-1]["data"]
    assert final["stop_reason"] == "tool_calls"  # [O2-d]
    assert final["cumulative_usage"]["output_tokens_details"] == {"reasoning_tokens": 256}


def test_web_search_is_a_server_call_and_result_then_cited_text() -> None:
    """[O6-a] web_search_call: server_tool_call (the action), server_tool_result (the rest); [O3-d] citation."""
    run = responses_run(FIXTURES / "responses" / "web_search.sse")
    blocks = content_blocks(run.lines)
    assert [b["type"] for b in blocks] == ["server_tool_call", "server_tool_result", "text"]
    assert blocks[0]["name"] == "web_search"
    assert blocks[1]["name"] == "web_search_tool_result"
    assert json.loads(blocks[1]["content"]) == {"status": "completed"}
    assert blocks[2]["citations"][0]["cited_text"] == "Example News"
    assert blocks[2]["citations"][0]["citation_type"] == "web_search_result_location"


def test_refusal_part_streams_as_text() -> None:
    """[O3-c] a refusal content part is a text block."""
    run = responses_run(FIXTURES / "responses" / "refusal.sse")
    assert content_blocks(run.lines) == [
        {"type": "text", "complete": True, "content": "I'm sorry, I can't help with that.", "citations": []}
    ]


@pytest.mark.parametrize("stem", ["failed", "error_midstream"])
def test_failed_and_error_events_close_what_is_open_then_one_error(stem: str) -> None:
    """[O7-a] [O7-b] response.failed and the error event: final markers, the error, meta_final."""
    run = responses_run(FIXTURES / "responses" / f"{stem}.sse")
    kinds = _kinds(run.lines)
    assert kinds[-2:] == ["error", "meta_final"]
    assert kinds.count("error") == 1
    error = next(b for b in rebuilt(run.lines) if b["type"] == "error")["data"]
    if stem == "failed":
        assert error == {
            "type": "server_error",
            "message": "The model failed to generate a response.",
            "code": "server_error",
        }
    else:
        assert error == {
            "type": "rate_limit_exceeded",
            "message": "Rate limit reached for requests",
            "code": "rate_limit_exceeded",
        }
    assert run.translator.close() == [BlockKey(AGENT, "text")]
    with pytest.raises(SequenceError):  # [O1-b]
        run.translator.feed(_events("text_citation")[0])


def test_incomplete_keeps_the_text_and_drops_the_cut_call() -> None:
    """[O2-d] max_output_tokens: the text is closed and kept, the unfinished call never sent."""
    run = responses_run(FIXTURES / "responses" / "incomplete.sse")
    assert _kinds(run.lines) == ["meta_init", "text", "text", "text", "meta_final"]
    assert rebuilt(run.lines)[-1]["data"]["stop_reason"] == "max_output_tokens"
    assert "never completed" in run.translator.warnings[0]
    assert run.translator.close() == [BlockKey(AGENT, "tool_call")]


def test_a_stream_cut_before_completed_ends_with_incomplete_stream() -> None:
    """[O8-a] the events stop mid-text: the text closed, incomplete_stream, meta_final."""
    events = _events("text_citation")[:6]
    t = ResponsesTranslator(AGENT, meta=True)
    lines = [line for e in events for line in t.feed(e)] + t.finish()
    assert_valid(lines + DONE)
    assert _kinds(lines)[-2:] == ["error", "meta_final"]
    assert json.loads(json.loads(lines[-2])["delta"])["type"] == "incomplete_stream"


def test_escape_heavy_text_within_a_small_bound() -> None:
    """[O3-a] a 5 kB escape-heavy delta at max_bytes=160: every line within it, the text exact."""
    run = responses_run(FIXTURES / "responses" / "escape_heavy.sse", max_bytes=160)
    assert_valid(run.lines + DONE, max_bytes=160)
    assert content_blocks(run.lines) == responses_expected(run.final)


def test_parts_of_two_items_interleaved_close_the_open_one_first() -> None:
    """[O3-e] one text block open at a time: a second item's text part closes the first, with a warning."""
    t = ResponsesTranslator(AGENT)
    lines: list[bytes] = []
    for i in (0, 1):
        lines += t.feed(
            {"type": "response.output_item.added", "output_index": i, "item": {"type": "message", "id": f"m{i}"}}
        )
    for i, text in ((0, "a"), (1, "b"), (0, "c")):
        lines += t.feed({"type": "response.output_text.delta", "output_index": i, "content_index": 0, "delta": text})
    assert any("another was open" in w for w in t.warnings)
    assert [b["content"] for b in content_blocks(lines + t.finish())] == ["a", "b", "c"]


def test_unknown_and_silent_input() -> None:
    """[O9-a] unknown events and items warn; [O9-b] progress events and known silent items do not."""
    t = ResponsesTranslator(AGENT)
    assert t.feed({"type": "response.web_search_call.searching", "output_index": 0}) == []
    assert t.feed({"type": "response.output_item.added", "output_index": 0, "item": {"type": "mcp_list_tools"}}) == []
    assert t.warnings == []
    assert t.feed({"type": "response.brand_new"}) == []
    assert t.feed({"type": 7}) == []
    assert t.feed({"type": "response.output_item.added", "output_index": 1, "item": {"type": "hologram"}}) == []
    assert t.feed({"type": "response.output_text.delta", "output_index": 9, "content_index": 0, "delta": "x"}) == []
    assert len(t.warnings) == 4


def test_custom_and_shell_calls_are_tool_calls() -> None:
    """[O4-e] custom_tool_call: {"input": text}; shell_call: the item's action, named by type."""
    t = ResponsesTranslator(AGENT)
    items = [
        {"type": "custom_tool_call", "id": "ct1", "call_id": "call_c", "name": "grammar", "input": "SELECT 1"},
        {"type": "shell_call", "id": "sh1", "call_id": "call_s", "status": "completed", "action": {"commands": ["ls"]}},
    ]
    lines: list[bytes] = []
    for i, item in enumerate(items):
        lines += t.feed({"type": "response.output_item.added", "output_index": i, "item": item})
        lines += t.feed({"type": "response.output_item.done", "output_index": i, "item": item})
    blocks = content_blocks(lines)
    assert [(b["id"], b["name"], b["input"]) for b in blocks] == [
        ("call_c", "grammar", {"input": "SELECT 1"}),
        ("call_s", "shell_call", {"action": {"commands": ["ls"]}}),
    ]


# A citation line is never split (spec §5.4): the bound leaves room for the first piece, 6 bytes a character.
@given(pieces=st.lists(st.text(min_size=1, max_size=30), min_size=1, max_size=10), bound=st.integers(420, 800))
def test_any_deltas_rebuild_their_text_with_citations(pieces: list[str], bound: int) -> None:
    """[O3-a] [O3-d] any deltas at any bound: valid, the text exact, the citation's text its slice."""
    pieces = [p for p in pieces if not any("\ud800" <= ch <= "\udfff" for ch in p)]
    if not pieces:
        return
    text = "".join(pieces)
    t = ResponsesTranslator(AGENT, bound, meta=True)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {"id": "r", "model": "m", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m0"}},
    ]
    events += [
        {"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": p} for p in pieces
    ]
    note = {"type": "url_citation", "start_index": 0, "end_index": len(pieces[0]), "url": "https://e.x", "title": "t"}
    events += [
        {"type": "response.output_text.annotation.added", "output_index": 0, "content_index": 0, "annotation": note},
        {"type": "response.content_part.done", "output_index": 0, "content_index": 0, "part": {"type": "output_text"}},
        {"type": "response.completed", "response": {"id": "r", "status": "completed", "usage": {"total_tokens": 1}}},
    ]
    lines = [line for e in events for line in t.feed(e)] + t.finish()
    assert_valid(lines + DONE, max_bytes=bound)
    block = content_blocks(lines)[0]
    assert block["content"] == text
    assert block["citations"][0]["cited_text"] == pieces[0]
    assert reconstruct(lines).to_dict()["done"] is False  # no [DONE]: the caller's to send
