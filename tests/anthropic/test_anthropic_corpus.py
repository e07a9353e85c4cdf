"""Corpus replay: every recorded call, served to the real SDK client, translated, and rebuilt.

For each call of ``fixtures/corpus/anthropic_events_*.json`` (file 0 holds three
calls) and of the hand-written ``data/web_search_citations.json`` (citations, redacted
thinking, a web search; the corpus has neither), the envelopes the translator gives for
what ``AsyncAnthropic().messages.stream()`` yields must reconstruct (codec) to the same
text, thinking, tool inputs, server tool results and citations as the SDK's own
``get_final_message()``; and ``finalize()`` must equal that message's content.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from anthropic.resources.messages import messages as sdk_messages

from agent_ref.models.replay import load_events, split_calls
from anthropic_support import (
    AGENT,
    DATA,
    MODEL,
    api_view,
    expected_blocks,
    raw_calls,
    rebuilt_blocks,
    stream_calls,
)
from envelope.anthropic import AnthropicTranslator
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

RECORDINGS = ["anthropic_events_0.json", "anthropic_events_1.json"]
#: Hand-written in the API's wire shape, for what the corpus lacks (replayed through the real SDK all the same).
HAND_WRITTEN = ["web_search_citations.json", "search_result_citations.json"]


def _calls(corpus: Path, name: str) -> list[list[dict[str, Any]]]:
    path = corpus / name if name.startswith("anthropic_events_") else DATA / name
    return split_calls(load_events(path))


@pytest.mark.parametrize("name", [*RECORDINGS, *HAND_WRITTEN])
def test_replay_through_sdk_reconstructs_like_final_message(corpus: Path, name: str) -> None:
    calls = _calls(corpus, name)
    runs = stream_calls(calls)
    assert len(runs) == len(calls) >= 1
    for run in runs:
        assert run.translator.close() == []
        assert run.translator.warnings == []
        expected = expected_blocks(run.final)
        assert expected, "a recording with no content would prove nothing"
        assert rebuilt_blocks(run.lines) == expected


@pytest.mark.parametrize("name", [*RECORDINGS, *HAND_WRITTEN])
def test_finalize_and_metadata_equal_sdk_final_message(corpus: Path, name: str) -> None:
    """[A6.1-a], [A6.1-b]: finalize() is the SDK's final content, dumped the same way."""
    for run in stream_calls(_calls(corpus, name)):
        t = run.translator
        assert t.finalize() == api_view(run.final)
        assert t.stop_reason == run.final.stop_reason
        assert t.message_id == run.final.id
        assert t.model == run.final.model
        usage = run.final.usage
        assert t.usage["input_tokens"] == usage.input_tokens
        assert t.usage["output_tokens"] == usage.output_tokens
        if usage.cache_read_input_tokens is not None:
            assert t.usage["cache_read_input_tokens"] == usage.cache_read_input_tokens


def test_corpus_file_0_holds_three_calls_served_in_order(corpus: Path) -> None:
    """[A2.1-a] one translator per API call; [A9-c] calls served in order."""
    runs = stream_calls(_calls(corpus, "anthropic_events_0.json"))
    assert [r.final.stop_reason for r in runs] == ["tool_use", "tool_use", "end_turn"]
    assert len({r.final.id for r in runs}) == 3


@pytest.mark.parametrize("name", [*RECORDINGS, *HAND_WRITTEN])
def test_derived_events_do_not_double_output(corpus: Path, name: str) -> None:
    """``messages.stream()`` yields text/thinking/input_json/citation/signature events too.

    The lines from everything it yields must equal the lines from the raw events alone
    (``messages.create(stream=True)``), and from the recorded dicts fed directly.
    """
    calls = _calls(corpus, name)
    runs = stream_calls(calls)
    raws = raw_calls(calls)
    for run, raw, recorded in zip(runs, raws, calls, strict=True):
        derived = {e.type for e in run.yielded} - {e.type for e in raw}
        assert derived, "messages.stream() yielded no derived event: the case is not exercised"
        t_raw = AnthropicTranslator(AGENT)
        raw_lines = [line for event in raw for line in t_raw.feed(event)]
        t_dict = AnthropicTranslator(AGENT)
        dict_lines = [line for event in recorded for line in t_dict.feed(event)]
        assert run.lines == raw_lines == dict_lines
        assert t_dict.finalize() == run.translator.finalize()


def test_citations_fixture_exercises_what_the_corpus_lacks() -> None:
    """The hand-written recording must keep covering citations, redacted thinking and signatures."""
    events = load_events(DATA / "web_search_citations.json")
    deltas = {e["delta"]["type"] for e in events if e["type"] == "content_block_delta"}
    blocks = {e["content_block"]["type"] for e in events if e["type"] == "content_block_start"}
    assert {"citations_delta", "signature_delta", "input_json_delta", "text_delta", "thinking_delta"} <= deltas
    assert {"redacted_thinking", "web_search_tool_result", "server_tool_use", "tool_use"} <= blocks
    assert all(e["message"]["model"] == MODEL for e in events if e["type"] == "message_start")
    # The SDK's own table, read where the Messages resource reads it (2.13 stopped
    # re-exporting it there for type checkers; the runtime name is the one it checks).
    deprecated: Mapping[str, str] = getattr(sdk_messages, "DEPRECATED_MODELS")  # noqa: B009
    assert MODEL not in deprecated  # the SDK warns (an error under our pytest config) on deprecated ones
    run = stream_calls(split_calls(events))[0]
    citations = [c for line in run.lines if (c := json.loads(line))["type"] == "citation"]
    assert [c["final"] for c in citations] == [True, False, True]
    assert "document_title" not in citations[2]  # null in the API citation: absent on the wire (spec §3.3)


@pytest.mark.parametrize("name", [*RECORDINGS, *HAND_WRITTEN])
def test_beta_client_events_translate_the_same(corpus: Path, name: str) -> None:
    """The beta stream's typed events (``BetaRaw…``) give the same lines and history as the recorded dicts."""
    calls = _calls(corpus, name)
    for run, recorded in zip(stream_calls(calls, beta=True), calls, strict=True):
        t_dict = AnthropicTranslator(AGENT)
        assert run.lines == [line for event in recorded for line in t_dict.feed(event)]
        assert run.translator.warnings == []
        assert run.translator.finalize() == api_view(run.final)


def test_search_result_citation_keeps_its_source_on_the_wire_A3_3_c() -> None:
    """[A3.3-c] ``search_result_location``: ``source`` travels as ``url``, ``title`` as ``title``."""
    (run,) = stream_calls(split_calls(load_events(DATA / "search_result_citations.json")))
    citations = [c for line in run.lines if (c := json.loads(line))["type"] == "citation"]
    assert [(c["citation_type"], c.get("url"), c.get("title")) for c in citations] == [
        ("search_result_location", "https://example.com/kb/mont-blanc-survey", "Mont Blanc survey 2024"),
        ("search_result_location", "kb://glaciology/notes-17", None),
        ("content_block_location", None, None),
    ]
    assert citations[2]["document_title"] == "Alpine notes"
    # The API's citation types are known to the validator (V4.5-a): no W114.
    assert_valid(run.lines, expect=["W163", "W161"])
