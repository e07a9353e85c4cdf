"""``ChatTranslator``: recorded Chat Completions streams through the real ``openai`` SDK, offline.

Every stream here goes through the strict validator, and what the envelopes rebuild is
compared with what the SDK's own accumulation (``get_final_completion()``) holds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai import APIError

from envelope import BlockKey, SequenceError, reconstruct
from envelope.openai import ChatTranslator, error_payload
from openai_support import AGENT, CHAT, FIXTURES, chat_expected, chat_run, content_blocks, joined
from validating import assert_valid

DONE = [b"[DONE]"]
COMPLETE = [p for p in CHAT if p.stem not in ("error_midstream", "cut")]


def _chunks(path_stem: str) -> list[Any]:
    """The recording's chunks as dicts (what a capture holds), [DONE] and the error chunk included."""
    body = (FIXTURES / "chat" / f"{path_stem}.sse").read_text()
    return [json.loads(e[6:]) for e in body.split("\n\n") if e.startswith("data: {")]


@pytest.mark.parametrize("path", CHAT, ids=lambda p: p.stem)
def test_every_recording_gives_a_strictly_valid_stream(path: Any) -> None:
    """[O2-a] [O8-a] meta=True: a whole stream, whatever the recording holds (errors and cuts too)."""
    run = chat_run(path)
    assert_valid(run.lines + DONE)
    kinds = [json.loads(line)["type"] for line in run.lines]
    assert kinds[0] == "meta_init"
    assert kinds[-1] == "meta_final"


@pytest.mark.parametrize("path", COMPLETE, ids=lambda p: p.stem)
@pytest.mark.parametrize("helper", [True, False], ids=["stream", "create"])
def test_rebuilt_text_and_calls_equal_the_sdk_accumulation(path: Any, helper: bool) -> None:
    """[O3-a] [O4-a] [O4-b] SDK parity: the transcript is the SDK's final message, calls verbatim."""
    run = chat_run(path, helper=helper)
    assert run.raised is None
    if helper:
        assert content_blocks(run.lines) == chat_expected(run.final)
        message = run.final.choices[0].message
        sent = [json.loads(line) for line in run.lines if b'"type":"tool_call"' in line]
        # verbatim: the delta is the very string the SDK accumulated
        assert [s["delta"] for s in sent] == [c.function.arguments or "{}" for c in message.tool_calls or []]
    else:
        # create(stream=True): the raw chunks; the same lines as the helper's chunk events
        assert run.lines == chat_run(path).lines


def test_dicts_of_a_capture_give_the_bytes_of_sdk_objects() -> None:
    """[O1-a] the translator reads SDK objects and the same chunks as dicts alike."""
    for stem in ("text", "tool_calls", "refusal", "escape_heavy"):
        t = ChatTranslator(AGENT, meta=True, user_query="replay")
        lines = [line for c in _chunks(stem) for line in t.feed(c)] + t.finish()
        assert lines == chat_run(FIXTURES / "chat" / f"{stem}.sse").lines, stem


def test_tool_call_fragments_merge_by_index_and_come_after_the_text() -> None:
    """[O4-b] index 0 gets fragments after index 1 began; calls go out at finish_reason, in index order."""
    run = chat_run(FIXTURES / "chat" / "tool_calls.sse")
    blocks = content_blocks(run.lines)
    assert [b["type"] for b in blocks] == ["text", "tool_call", "tool_call", "tool_call"]
    assert blocks[1]["input"] == {"city": "Paris", "unit": "celsius"}
    assert blocks[2]["input"] == {"city": 'Tōkyō "東京"'}
    assert blocks[3] == {"type": "tool_call", "complete": True, "id": "call_Qc3", "name": "now", "input": {}}
    t = run.translator
    assert t.stop_reason == "tool_calls"
    assert t.usage["total_tokens"] == 149  # [O2-c]: the usage chunk after finish_reason
    assert t.finalize()["tool_calls"][2] == {
        "id": "call_Qc3",
        "type": "function",
        "function": {"name": "now", "arguments": "{}"},
    }  # [O6-b]


def test_refusal_streams_as_text_and_stays_apart_in_finalize() -> None:
    """[O3-c] the refusal is shown as text; finalize() gives it back as `refusal`."""
    run = chat_run(FIXTURES / "chat" / "refusal.sse")
    assert content_blocks(run.lines) == chat_expected(run.final)
    assert run.translator.finalize() == {
        "role": "assistant",
        "content": None,
        "refusal": "I'm sorry, but I can't help with that.",
    }


def test_switching_between_content_and_refusal_starts_a_new_block() -> None:
    """[O3-c] content, then refusal: two text blocks, each closed."""
    t = ChatTranslator(AGENT)
    base = {"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": []}
    lines: list[bytes] = []
    for delta in ({"content": "Sure"}, {"refusal": "Actually no."}):
        lines += t.feed({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    lines += t.feed({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    lines += t.finish()
    assert [b["content"] for b in content_blocks(lines)] == ["Sure", "Actually no."]
    assert_valid(lines, expect=["W163", "W161"])  # a fragment: no meta_init, no [DONE]


def test_error_chunk_mid_stream_closes_the_text_then_one_error() -> None:
    """[O7-a] [O7-b] the SDK raises APIError on the error chunk; abort(exc) = feeding the chunk."""
    run = chat_run(FIXTURES / "chat" / "error_midstream.sse")
    assert isinstance(run.raised, APIError)
    kinds = [json.loads(line)["type"] for line in run.lines]
    assert kinds == ["meta_init", "text", "text", "text", "error", "meta_final"]
    error = reconstruct(run.lines).to_dict()["agents"][AGENT]["blocks"][2]["data"]
    assert error == {
        "type": "server_error",
        "message": "The server had an error while processing your request. Sorry about that!",
    }
    t = ChatTranslator(AGENT, meta=True, user_query="replay")
    fed = [line for c in _chunks("error_midstream") for line in t.feed(c)]
    assert fed == run.lines
    assert t.close() == [BlockKey(AGENT, "text")]
    with pytest.raises(SequenceError):  # [O1-b]
        t.feed(_chunks("text")[0])


def test_a_cut_stream_ends_with_incomplete_stream() -> None:
    """[O8-a] no finish_reason and no [DONE]: the open text is closed, then incomplete_stream."""
    run = chat_run(FIXTURES / "chat" / "cut.sse")
    blocks = reconstruct(run.lines).to_dict()["agents"][AGENT]["blocks"]
    assert blocks[1] == {"type": "text", "complete": True, "content": "Half a sen", "citations": []}
    assert blocks[2]["data"]["type"] == "incomplete_stream"
    assert blocks[3]["data"]["stop_reason"] == "error"
    assert run.translator.close() == [BlockKey(AGENT, "text")]


def test_two_choices_one_translator_each() -> None:
    """[O5-a] choice 0 by default, choice 1 passed over with one warning; choice=1 follows the other."""
    chunks = _chunks("two_choices")
    first, second = ChatTranslator(AGENT), ChatTranslator("second-agent", choice=1)
    lines0 = [line for c in chunks for line in first.feed(c)] + first.finish()
    lines1 = [line for c in chunks for line in second.feed(c)] + second.finish()
    assert [b["content"] for b in content_blocks(lines0)] == ["Red."]
    assert [b["content"] for b in reconstruct(lines1).to_dict()["agents"]["second-agent"]["blocks"]] == ["Blue."]
    assert first.other_choices == {1}
    assert len(first.warnings) == 1
    assert "[O5-a]" in first.warnings[0]


def test_escape_heavy_delta_is_cut_within_the_bound_and_the_split_pair_joined() -> None:
    """[O3-a] [O3-b] a 5 kB delta of quotes, backslashes and controls: every line within 200 bytes."""
    run = chat_run(FIXTURES / "chat" / "escape_heavy.sse", max_bytes=200)
    assert_valid(run.lines + DONE, max_bytes=200)
    assert max(len(line) for line in run.lines if b'"type":"text"' in line) <= 200
    text = content_blocks(run.lines)[0]["content"]
    assert text == joined(run.final.choices[0].message.content)
    assert text.endswith(" \U0001f600 done")


def test_derived_events_give_nothing() -> None:
    """[O2-b] the stream helper's content.delta and friends are read through the chunk event only."""
    run = chat_run(FIXTURES / "chat" / "tool_calls.sse")
    kinds = {e.type for e in run.yielded}
    assert {"chunk", "content.delta", "tool_calls.function.arguments.delta"} <= kinds
    t = ChatTranslator(AGENT)
    assert all(t.feed(e) == [] for e in run.yielded if e.type != "chunk")


def test_unknown_input_is_passed_over_with_a_warning() -> None:
    """[O9-a] not a chunk, a legacy function_call, an index-less fragment: warnings, never exceptions."""
    t = ChatTranslator(AGENT)
    assert t.feed({"object": "chat.completion", "choices": []}) == []
    base = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    assert t.feed({**base, "choices": [{"index": 0, "delta": {"function_call": {"name": "f"}}}]}) == []
    assert t.feed({**base, "choices": [{"index": 0, "delta": {"tool_calls": [{"function": {}}]}}]}) == []
    assert len(t.warnings) == 3


def test_a_call_without_id_gets_one_with_a_warning() -> None:
    """[O4-c] some compatible servers send no id: call_<index>, said in warnings."""
    t = ChatTranslator(AGENT)
    base = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    call = {"index": 3, "function": {"name": "f", "arguments": '{"a": 1}'}}
    t.feed({**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
    lines = t.feed({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    assert json.loads(lines[0])["id"] == "call_3"
    assert "[O4-c]" in t.warnings[0]


def test_arguments_cut_by_length_are_completed_and_garbage_is_refused() -> None:
    """[O4-a] a prefix of JSON is completed with a warning; text that is no JSON prefix is a DecodeError."""
    from envelope import DecodeError

    base = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    for arguments, expect in (('{"path": "/tmp", "n": ', {"path": "/tmp"}), ("not json", None)):
        t = ChatTranslator(AGENT)
        call = {"index": 0, "id": "call_x", "function": {"name": "f", "arguments": arguments}}
        t.feed({**base, "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        end = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
        if expect is None:
            with pytest.raises(DecodeError, match="not JSON"):
                t.feed(end)
            closing = t.abort(RuntimeError("boom"))
            assert [json.loads(x)["type"] for x in closing] == ["error"]
        else:
            lines = t.feed(end)
            assert json.loads(json.loads(lines[0])["delta"]) == expect
            assert "cut" in t.warnings[0]


def test_error_payload_shapes() -> None:
    """[O7-a] type from the API's type, else its code; code and param kept."""
    assert error_payload({"error": {"message": "m", "type": "server_error", "code": None}}) == {
        "type": "server_error",
        "message": "m",
    }
    assert error_payload({"type": "error", "code": "rate_limit_exceeded", "message": "slow", "param": None}) == {
        "type": "rate_limit_exceeded",
        "message": "slow",
        "code": "rate_limit_exceeded",
    }
    assert error_payload(ValueError("x")) == {"type": "ValueError", "message": "x"}


@given(pieces=st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=12), bound=st.integers(120, 400))
def test_any_deltas_at_any_bound_rebuild_their_text(pieces: list[str], bound: int) -> None:
    """[O3-a] [O3-b] whatever the deltas and the bound: valid lines, the text rebuilt exactly."""
    surrogate_free = [p for p in pieces if not any("\ud800" <= ch <= "\udfff" for ch in p)]
    if not surrogate_free:
        return
    t = ChatTranslator(AGENT, bound, meta=True)
    base = {"id": "c", "object": "chat.completion.chunk", "model": "m"}
    lines: list[bytes] = []
    for p in surrogate_free:
        lines += t.feed({**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
    lines += t.feed({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    lines += t.finish()
    assert_valid(lines + DONE, max_bytes=bound)
    assert content_blocks(lines)[0]["content"] == "".join(surrogate_free)
