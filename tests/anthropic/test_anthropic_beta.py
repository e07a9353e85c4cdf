"""Every stream event, content block and delta type the pinned SDK can deliver is classified [A5.4-a].

The type names are read from the installed SDK's own unions (raw and beta), so a newer
SDK that adds a type fails here until the translator and spec/anthropic-adapter.md say
what happens to it. A hand-written beta recording (compaction with its delta, a
fallback hop, an unknown block) is replayed through the real beta client.
"""

from __future__ import annotations

import typing
from typing import Any

import pytest
from anthropic.lib.streaming import _beta_types, _types
from anthropic.types import raw_content_block_delta, raw_content_block_start_event
from anthropic.types.beta import beta_raw_content_block_delta, beta_raw_content_block_start_event

import envelope._anthropic_adapter as adapter
from agent_ref.models.replay import load_events, split_calls
from anthropic_support import AGENT, DATA, api_view, stream_calls
from envelope.anthropic import AnthropicTranslator
from validating import assert_valid


def _literals(tp: Any) -> set[str]:
    """The ``type`` literals of every model in a (possibly annotated, nested) union."""
    out: set[str] = set()
    for arg in typing.get_args(tp):
        if typing.get_origin(arg) is typing.Union or typing.get_origin(arg) is typing.Annotated:
            out |= _literals(arg)
        elif hasattr(arg, "model_fields") and "type" in arg.model_fields:
            out |= {str(v) for v in typing.get_args(arg.model_fields["type"].annotation)}
    return out


EVENTS = _literals(_types.ParsedMessageStreamEvent) | _literals(_beta_types.ParsedBetaMessageStreamEvent)
BLOCKS = _literals(raw_content_block_start_event.RawContentBlockStartEvent.model_fields["content_block"].annotation)
BLOCKS |= _literals(
    beta_raw_content_block_start_event.BetaRawContentBlockStartEvent.model_fields["content_block"].annotation
)
DELTAS = _literals(raw_content_block_delta.RawContentBlockDelta) | _literals(
    beta_raw_content_block_delta.BetaRawContentBlockDelta
)
#: The block each delta belongs to. A delta type missing here fails the test: classify it.
DELTA_BLOCK = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": "tool_use",
    "compaction_delta": "compaction",
}
MESSAGE_START = {"type": "message_start", "message": {"id": "m", "model": "claude-sonnet-4-6"}}


def test_the_sdk_unions_were_read() -> None:
    assert {"message_start", "content_block_delta", "text", "compaction"} <= EVENTS
    assert {"text", "tool_use", "compaction", "fallback", "mcp_tool_result"} <= BLOCKS
    assert {"text_delta", "compaction_delta"} <= DELTAS


@pytest.mark.parametrize("kind", sorted(EVENTS))
def test_every_sdk_event_type_is_known_A5_4_a(kind: str) -> None:
    """[A5.4-a] raw events are translated, derived ones ignored: none is an unknown type."""
    t = AnthropicTranslator(AGENT)
    t.feed(MESSAGE_START)
    t.feed({"type": kind, "index": 0})
    assert not any("unknown stream event type" in w for w in t.warnings)


@pytest.mark.parametrize("kind", sorted(BLOCKS))
def test_every_sdk_block_type_is_classified_A5_4_a(kind: str) -> None:
    """[A5.4-a] each block type is translated or kept for history, without a warning."""
    t = AnthropicTranslator(AGENT)
    block = {"type": kind, "id": "b", "name": "n", "input": {}, "tool_use_id": "b", "content": []}
    lines = [*t.feed(MESSAGE_START), *t.feed({"type": "content_block_start", "index": 0, "content_block": block})]
    lines += t.feed({"type": "content_block_stop", "index": 0})
    assert t.warnings == []
    assert [b["type"] for b in t.finalize()] == [kind]
    silent = kind in adapter._SILENT_BLOCKS
    assert silent == (not lines), "a block either has an envelope or is silent, never both"


@pytest.mark.parametrize("kind", sorted(DELTAS))
def test_every_sdk_delta_type_is_read_for_its_block_A5_4_a(kind: str) -> None:
    """[A5.4-a] each delta type is read for the block the SDK reads it for, without a warning."""
    t = AnthropicTranslator(AGENT)
    block = {"type": DELTA_BLOCK[kind], "id": "b", "name": "n", "input": {}, "text": "", "thinking": ""}
    t.feed(MESSAGE_START)
    t.feed({"type": "content_block_start", "index": 0, "content_block": block})
    delta: dict[str, Any] = {"type": kind, "text": "x", "thinking": "x", "signature": "s", "partial_json": "{}"}
    delta["content"] = "c"
    delta["citation"] = {"type": "char_location", "cited_text": "x"}
    t.feed({"type": "content_block_delta", "index": 0, "delta": delta})
    t.feed({"type": "content_block_stop", "index": 0})
    assert t.warnings == []


def test_beta_compaction_and_fallback_replayed_through_the_sdk_A5_4_a() -> None:
    """[A5.4-a] compaction's delta reaches history, a fallback hop updates ``model``, one unknown block warns."""
    events = load_events(DATA / "beta_compaction_fallback.json")
    (run,) = stream_calls(split_calls(events), beta=True)
    t = run.translator
    assert t.finalize() == api_view(run.final)
    assert t.finalize()[0]["content"].startswith("Summary:")
    assert t.model == run.final.model == "claude-opus-4-6"
    assert t.warnings == ["unknown content block type 'hologram_block' at index 3: kept for finalize(), not sent"]
    assert t.close() == []
    assert [line for line in run.lines if b'"text"' not in line] == []  # compaction and fallback send nothing
    assert_valid(run.lines, expect=["W163", "W161"])  # a fragment: no meta_init, no [DONE]
    # The same events as plain dicts give the same lines and history.
    t_dict = AnthropicTranslator(AGENT)
    assert [line for event in events for line in t_dict.feed(event)] == run.lines
    assert t_dict.finalize() == t.finalize()


def test_the_dispatch_tables_match_the_sdk_A5_4_a() -> None:
    """[A5.4-a] the translator's tables handle exactly the SDK's delta types, and every SDK event type."""
    assert set(adapter._DELTAS) == DELTAS == set(DELTA_BLOCK)
    assert set(adapter._EVENTS) >= EVENTS | {"error", "ping"}
    assert all(adapter._DELTAS[kind][0] >= {DELTA_BLOCK[kind]} for kind in DELTAS)
