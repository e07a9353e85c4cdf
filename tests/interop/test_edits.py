"""An edited tool call through AG-UI and the AI SDK and back (envelope-v1 §4.6-a, spec/interop.md I4-e, I5-e).

The model asked for one input and the call ran with another: the stream has a second
``tool_call`` of the id, right before its result. Each bridge carries it where the other
protocol's own client ends with the input that ran (``test_clients.py`` runs their
clients), and the way back rebuilds both blocks. Every stream here passes the strict
validator first.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, seed, settings

from envelope import Reconstructor
from envelope.cli import main
from envelope.interop import InteropError
from envelope.interop.agui import AguiToEnvelope
from envelope.interop.vercel import VercelToEnvelope
from interop.cases import PROTOCOLS, ROOT, Run, errors, from_other, read_lines, runs, to_other, transcript
from validating import assert_valid

ON_RESUME = ROOT / "spec" / "conformance" / "valid" / "tool_call_edited_on_resume.sse"
IN_RESPONSE = ROOT / "spec" / "conformance" / "valid" / "tool_call_edited_in_response.jsonl"
ASKED, RAN = '{"expression": "6 * 7"}', '{"expression": "6 * 8"}'


def _edits(lines: list[bytes]) -> dict[str, list[str]]:
    """The ids of every edit the reconstructor marks, per agent, in each agent's order.

    Per agent: the order in which agents first appear may differ after a crossing (a
    transcript is per agent, and so is an edit's place, right before its result).
    """
    rebuilt = Reconstructor()
    rebuilt.feed_many(lines)
    rebuilt.close()
    agents = rebuilt.transcript().to_dict()["agents"]
    found = {a: [b["id"] for b in v["blocks"] if b.get("edit")] for a, v in agents.items()}
    return {a: ids for a, ids in found.items() if ids}


def _edited(run: Run) -> bool:
    return bool(_edits(run.lines))


def _round_trip(run: Run, protocol: str) -> None:
    assert errors(run.lines) == []
    back = from_other(protocol, to_other(protocol, run.lines))
    assert errors(back) == []
    assert transcript(back) == transcript(run.lines)
    assert _edits(back) == _edits(run.lines)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@settings(max_examples=30, deadline=None)
@given(run=runs().filter(_edited))
def test_generated_runs_with_edits_round_trip(run: Run, protocol: str) -> None:
    """[I4-e] [I5-e] [I2-a] Runs with edited calls, interleaved across agents, come back with both blocks."""
    _round_trip(run, protocol)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("n", [1, 27, 2026])
def test_generated_runs_with_edits_round_trip_seeded(n: int, protocol: str) -> None:
    run_it = settings(max_examples=10, deadline=None, derandomize=False)(given(run=runs().filter(_edited))(_round_trip))
    seed(n)(run_it)(protocol=protocol)


def _second_response(path: Any) -> list[bytes]:
    lines = read_lines(path)
    first_done = lines.index(b"[DONE]")
    return lines[first_done + 1 :]


def test_ag_ui_carries_the_edit_on_the_call_without_arguments() -> None:
    """[I4-e] No TOOL_CALL_ARGS for the edit (the reducer would append them); the input that ran rides on END."""
    events = to_other("agui", read_lines(IN_RESPONSE))
    of_call = [e for e in events if e.get("toolCallId") == "toolu_01"]
    assert [e["type"] for e in of_call] == [
        "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",  # the model's call
        "TOOL_CALL_START", "TOOL_CALL_END",  # its edit
        "TOOL_CALL_RESULT",
    ]  # fmt: skip
    assert of_call[1]["delta"] == ASKED
    assert of_call[3]["metadata"] == {"envelope": {"edit": True}}
    assert of_call[4]["metadata"] == {"envelope": {"edit": True, "input": RAN}}


def test_the_ai_sdk_part_gets_the_input_that_ran_and_keeps_the_models() -> None:
    """[I5-e] The edit streams into the call's part; its metadata keeps the input it replaces."""
    chunks = [c for c in to_other("vercel", read_lines(IN_RESPONSE)) if isinstance(c, dict)]
    starts = [c for c in chunks if c["type"] == "tool-input-start"]
    available = [c for c in chunks if c["type"] == "tool-input-available"]
    assert [c.get("providerMetadata") for c in starts] == [
        None,
        {"envelope": {"edit": True, "original": json.loads(ASKED)}},
    ]
    assert [c["input"] for c in available] == [json.loads(ASKED), json.loads(RAN)]
    assert available[1]["providerMetadata"] == starts[1]["providerMetadata"]
    # no step between a call and its edit: the SDK updates a part only in its step
    kinds = [c["type"] for c in chunks]
    assert "start-step" not in kinds[kinds.index("tool-input-start") : kinds.index("tool-output-available")]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_resumed_response_converted_alone_keeps_its_edit(protocol: str) -> None:
    """[I4-e] [I5-e] A server converts each response apart: the resumed one's edit is known by meta_init.resume."""
    lines = _second_response(ON_RESUME)
    assert errors(lines) == []
    events = to_other(protocol, lines)
    if protocol == "agui":
        types = [e["type"] for e in events if e.get("toolCallId") == "toolu_01"]
        assert types == ["TOOL_CALL_START", "TOOL_CALL_END", "TOOL_CALL_RESULT"]  # nothing to append to a client's call
    else:
        (start,) = [e for e in events if isinstance(e, dict) and e["type"] == "tool-input-start"]
        assert start["providerMetadata"] == {"envelope": {"edit": True}}  # the model's input is in the earlier message
    back = from_other(protocol, events)
    assert errors(back) == []
    assert transcript(back) == transcript(lines)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("path", [IN_RESPONSE, ON_RESUME], ids=["in_response", "on_resume"])
def test_validate_from_the_other_dialect_agrees(
    tmp_path: Any, capsys: pytest.CaptureFixture[str], protocol: str, path: Any
) -> None:
    """[I4-e] [I5-e] ``envelope validate --from`` a converted recording with an edit: clean, as the envelopes are."""
    there = tmp_path / "run.sse"
    assert main(["convert", "--from", "envelope", "--to", protocol, str(path), "-o", str(there)]) == 0
    assert main(["validate", "--strict", "--from", protocol, str(there)]) == 0
    capsys.readouterr()


def test_validate_from_ag_ui_reports_an_edit_after_its_result(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recording whose edit comes after the call's result is E168, at the line that carried it."""
    events = to_other("agui", read_lines(IN_RESPONSE))
    edit = [i for i, e in enumerate(events) if e.get("toolCallId") == "toolu_01"][3:5]
    result = next(i for i, e in enumerate(events) if e["type"] == "TOOL_CALL_RESULT")
    moved = [e for i, e in enumerate(events) if i not in edit]
    at = moved.index(events[result]) + 1
    moved[at:at] = [events[i] for i in edit]
    bad = tmp_path / "late.jsonl"
    bad.write_text("".join(json.dumps(e) + "\n" for e in moved))
    assert main(["validate", "--from", "agui", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:{at + 2}:1: E168 " in out, out  # the edit's TOOL_CALL_END, which writes its line


def _ours_agui(*events: dict[str, Any]) -> list[dict[str, Any]]:
    run = {"type": "RUN_STARTED", "threadId": "t", "runId": "r", "metadata": {"envelope": {"agent": "a"}}}
    return [run, *events]


def test_ag_ui_edits_that_do_not_follow_the_rule_are_coded() -> None:
    """An edit's END without the input, or arguments streamed into an edit: I202, I204 at the event."""
    start = {
        "type": "TOOL_CALL_START",
        "toolCallId": "c",
        "toolCallName": "t",
        "metadata": {"envelope": {"edit": True}},
    }
    for tail, code, at in (
        ([{"type": "TOOL_CALL_END", "toolCallId": "c"}], "I202", 3),
        ([{"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{}"}], "I204", 3),
    ):
        conv = AguiToEnvelope()
        *before, last = _ours_agui(start, *tail)
        for event in before:
            conv.feed(event)
        with pytest.raises(InteropError) as caught:
            conv.feed(last)
        assert caught.value.code == code
        assert caught.value.position is not None
        assert caught.value.position.line == at


def test_a_foreign_ai_sdk_stream_that_repeats_a_call_reads_as_an_edit() -> None:
    """A second ``tool-input-available`` of an id (the SDK's way to change a part's input) is the call's edit."""
    chunks: list[Any] = [
        {"type": "start"},
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": {"x": 1}, "dynamic": True},
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "t", "input": {"x": 2}, "dynamic": True},
        {"type": "tool-output-available", "toolCallId": "c", "output": "2", "dynamic": True},
        {"type": "finish"},
        "[DONE]",
    ]
    conv = VercelToEnvelope()
    lines = [line for c in chunks for line in conv.feed(c if isinstance(c, str) else json.dumps(c))] + conv.close()
    assert errors(lines) == []
    assert _edits(lines) == {"agent": ["c"]}
    blocks = transcript(lines)["agents"]["agent"]["blocks"]
    assert [(b["type"], b.get("input")) for b in blocks[1:]] == [
        ("tool_call", {"x": 1}),
        ("tool_call", {"x": 2}),
        ("tool_result", None),
    ]


def test_a_step_waits_for_a_call_whose_input_is_streaming() -> None:
    """[I5-f] The run's agent speaks after results while a subagent's call streams: its start-step waits for that call."""
    main_agent, sub_agent = "6c1d0e2f-3a4b-4c5d-8e9f-0a1b2c3d4e5f", "7d2e1f30-4b5c-4d6e-9f00-1b2c3d4e5f60"

    def line(kind: str, agent: str, delta: str, *, final: bool = True, **extra: str) -> bytes:
        return json.dumps({"type": kind, "agent": agent, "final": final, "delta": delta, **extra}).encode()

    def meta(agent: str) -> str:
        return json.dumps({"format": "json", "user_query": "q", "agent_uuid": agent, "model": "m"})

    lines = [
        line("meta_init", main_agent, meta(main_agent)),
        line("meta_init", sub_agent, meta(sub_agent)),
        line("tool_call", main_agent, '{"expression": "6 * 7"}', id="toolu_01", name="calculator"),
        line("tool_result", main_agent, "42", id="toolu_01", name="calculator"),
        line("tool_call", sub_agent, '{"query": ', final=False, id="toolu_02", name="search"),
        line("text", main_agent, "6 * 7 = 42", final=False),  # a new step of the run's agent is due
        line("tool_call", sub_agent, '"sky"}', id="toolu_02", name="search"),
        line("text", main_agent, ""),
        line("meta_final", sub_agent, json.dumps({"stop_reason": "end_turn", "total_steps": 1})),
        line("meta_final", main_agent, json.dumps({"stop_reason": "end_turn", "total_steps": 1})),
        b"[DONE]",
    ]
    assert_valid(lines)
    kinds = [(c["type"], c.get("toolCallId")) for c in to_other("vercel", lines) if isinstance(c, dict) and "type" in c]
    steps = [n for n, k in enumerate(kinds) if k[0] == "start-step"]
    opened = kinds.index(("tool-input-start", "toolu_02"))
    available = kinds.index(("tool-input-available", "toolu_02"))
    assert len(steps) == 2  # the first step, then the one the run's agent began after its result
    assert steps[1] == available + 1  # right after the streaming call completes, not inside it
    assert not any(opened < n < available for n in steps)
