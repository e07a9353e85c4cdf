"""spec/interop.md [I6-a], spec/limits.md [L2-c]: the converters measure nesting before reading.

Issue 38 §8: an AG-UI event or a Vercel chunk nested 1,000 deep (about 6 KB) raised
``RecursionError`` out of ``feed()``; the command line printed a traceback. Now each is
``I209`` at its position, as text and as a parsed dict alike, and one at the limit still
converts to a strictly valid stream.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from envelope._limits import MAX_NESTING_DEPTH
from envelope.cli import main
from envelope.interop import InteropError
from envelope.interop.agui import AguiToEnvelope, request_from_run_input
from envelope.interop.vercel import VercelToEnvelope, request_from_chat
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

RUN = {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}


def nested(levels: int) -> Any:
    """A value of ``levels`` nested objects (``levels`` >= 1), built without recursion."""
    top: dict[str, Any] = {}
    here = top
    for _ in range(levels - 1):
        inner: dict[str, Any] = {}
        here["x"] = inner
        here = inner
    return top


def nested_text(levels: int) -> str:
    """The JSON text of ``nested(levels)``, built without recursion."""
    return '{"x":' * (levels - 1) + "{}" + "}" * (levels - 1)


def as_json(event: dict[str, Any], levels: int) -> str:
    """``event`` as JSON text with its ``output`` written as ``nested_text(levels)``."""
    shallow = {k: (0 if k == "output" else v) for k, v in event.items()}
    return json.dumps(shallow).replace('"output": 0', '"output": ' + nested_text(levels))


def vercel_result(output_levels: int) -> list[dict[str, Any]]:
    call = {"type": "tool-input-available", "toolCallId": "c", "toolName": "n", "input": {}}
    return [
        {"type": "start"},
        call,
        {"type": "tool-output-available", "toolCallId": "c", "output": nested(output_levels)},
    ]


@pytest.mark.parametrize("as_text", [True, False])
def test_i6_a_a_deep_agui_event_is_i209_at_its_position(as_text: bool) -> None:
    """[I6-a] 1,000 levels in a CUSTOM event's value: refused before parsing, at event 2."""
    conv = AguiToEnvelope()
    conv.feed(json.dumps(RUN))
    deep = {"type": "CUSTOM", "name": "x", "value": "[" * 1_000 + "]" * 1_000}
    text = json.dumps(deep).replace('"' + "[" * 1_000 + "]" * 1_000 + '"', "[" * 1_000 + "]" * 1_000)
    with pytest.raises(InteropError) as caught:
        conv.feed(text if as_text else {"type": "CUSTOM", "name": "x", "value": nested(1_000)})
    assert caught.value.code == "I209"
    assert caught.value.position.line == 2
    assert f"MAX_NESTING_DEPTH={MAX_NESTING_DEPTH}" in str(caught.value)


@pytest.mark.parametrize("as_text", [True, False])
def test_i6_a_a_deep_vercel_chunk_is_i209_with_the_path(as_text: bool) -> None:
    """[I6-a] a tool output 2,000 deep: as text the offset, as a dict the ``$.path``."""
    conv = VercelToEnvelope()
    events = vercel_result(2_000)
    for event in events[:2]:
        conv.feed(event)
    with pytest.raises(InteropError) as caught:
        conv.feed(as_json(events[2], 2_000) if as_text else events[2])
    assert caught.value.code == "I209"
    assert caught.value.position.line == 3
    if not as_text:
        assert caught.value.field == "$.output" + ".x" * (MAX_NESTING_DEPTH + 1 - 2)  # level 257


@pytest.mark.parametrize("as_text", [True, False])
def test_l2_c_an_event_at_the_limit_converts_to_a_valid_stream(as_text: bool) -> None:
    """[L2-c] 256 levels with the event itself (254 in the output) is read; 257 is not."""
    conv = VercelToEnvelope()
    out: list[bytes] = []
    for event in vercel_result(MAX_NESTING_DEPTH - 1):
        out += conv.feed(as_json(event, MAX_NESTING_DEPTH - 1) if "output" in event and as_text else event)
    out += conv.feed({"type": "finish"}) + conv.feed("[DONE]") + conv.close()
    assert_valid(out)
    over = VercelToEnvelope()
    events = vercel_result(MAX_NESTING_DEPTH)
    for event in events[:2]:
        over.feed(event)
    with pytest.raises(InteropError, match="I209"):
        over.feed(as_json(events[2], MAX_NESTING_DEPTH) if as_text else events[2])


def test_i6_a_deep_request_bodies_are_i209() -> None:
    """[I6-a] the request readers: a body nested 3,000 deep, not a RecursionError."""
    agui = {"threadId": "t", "runId": "r", "messages": [{"role": "user", "content": "q", "x": nested(3_000)}]}
    with pytest.raises(InteropError) as caught:
        request_from_run_input(agui)
    assert caught.value.code == "I209"
    assert caught.value.field is not None
    assert caught.value.field.startswith("$.messages[0].x.x")
    chat = {"id": "c", "messages": [{"role": "user", "parts": [nested(3_000)]}]}
    with pytest.raises(InteropError, match="I209"):
        request_from_chat(chat)


@pytest.mark.parametrize("command", [["convert", "--from", "agui", "--to", "envelope"], ["validate", "--from", "agui"]])
def test_i6_a_the_command_line_reports_i209_at_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    recording = tmp_path / "deep.jsonl"
    deep = '{"type":"CUSTOM","name":"x","value":' + "[" * 1_000 + "]" * 1_000 + "}"
    recording.write_text(json.dumps(RUN) + "\n" + deep + "\n")
    code = main([*command, str(recording)])
    err = capsys.readouterr()
    assert "Traceback" not in err.err + err.out
    assert "I209" in err.err + err.out
    assert ":2" in err.err + err.out or "line 2" in err.err + err.out
    assert code in (1, 2)
