"""``meta_status`` across the bridges (spec/interop.md I4-g, I5-g; envelope-v1 §4.16).

The AG-UI verifier's verdict on these streams is ``test_clients.py``'s (the conformance case
``valid/meta_status.jsonl`` and generated runs with steps that start twice, finish unstarted
or stay open); here, which events each bridge sends and that the status comes back whole.
"""

from __future__ import annotations

import json
from typing import Any

from envelope import Emitter
from interop.cases import ROOT, from_other, read_lines, to_other, transcript
from validating import assert_valid

MAIN = "main-agent"
SUB = "sub-agent"


def _status(em: Emitter, **payload: Any) -> list[bytes]:
    return em.buffered("meta_status", json.dumps(payload))


def _stream() -> list[bytes]:
    """A run whose agent starts step 1 twice, finishes step 9 unstarted, leaves step 2 open; a subagent's step too."""
    main, sub = Emitter(MAIN), Emitter(SUB)
    init = {"format": "json", "user_query": "q", "model": "m"}
    final = json.dumps({"stop_reason": "end_turn", "total_steps": 2})
    lines = [*main.buffered("meta_init", json.dumps({**init, "agent_uuid": MAIN}))]
    lines += _status(main, kind="step_start", step=1)
    lines += _status(main, kind="step_start", step=1)
    lines += main.buffered("tool_call", "{}", id="toolu_1", name="spawn_subagent")
    sub_init = {**init, "agent_uuid": SUB, "parent_agent": MAIN, "parent_tool_use_id": "toolu_1"}
    lines += sub.buffered("meta_init", json.dumps(sub_init))
    lines += _status(sub, kind="step_start", step=1)
    lines += sub.buffered("meta_final", final)
    lines += main.buffered("tool_result", "done", id="toolu_1", name="spawn_subagent")
    lines += _status(main, kind="step_finish", step=1, usage={"input_tokens": 3}, cost=None)
    lines += _status(main, kind="step_finish", step=9, usage={})
    lines += _status(main, kind="step_start", step=2)
    lines += main.buffered("meta_final", final)
    return [*lines, b"[DONE]"]


def test_I4_g_steps_cross_to_agui_as_its_own_step_events_and_come_back_whole() -> None:
    """[I4-g] STEP_STARTED/FINISHED beside each CUSTOM; none twice or unstarted; open ones closed before the end."""
    lines = _stream()
    assert_valid(lines)
    events = to_other("agui", lines)
    steps = [(e["type"], e["stepName"], e.get("subagentRunId")) for e in events if e["type"].startswith("STEP_")]
    assert steps == [
        ("STEP_STARTED", "step 1", None),
        ("STEP_STARTED", "step 1", SUB),
        ("STEP_FINISHED", "step 1", SUB),  # closed before the subagent's SUBAGENT_FINISHED
        ("STEP_FINISHED", "step 1", None),
        ("STEP_STARTED", "step 2", None),
        ("STEP_FINISHED", "step 2", None),  # left open: closed before RUN_FINISHED
    ]
    kinds = [e["type"] for e in events]
    assert kinds.index("STEP_FINISHED", kinds.index("SUBAGENT_STARTED")) < kinds.index("SUBAGENT_FINISHED")
    assert kinds[-2:] == ["STEP_FINISHED", "RUN_FINISHED"]
    customs = [e for e in events if e["type"] == "CUSTOM" and e["name"] == "envelope.meta_status"]
    assert len(customs) == 6
    assert customs[0]["value"]["data"] == {"kind": "step_start", "step": 1}
    back = from_other("agui", events)
    assert_valid(back)
    assert transcript(back) == transcript(lines)


def test_I5_g_statuses_cross_to_the_ai_sdk_as_data_parts_and_add_no_steps() -> None:
    """[I5-g] a data-meta-status part per status; start-step only by its own rule, finish-step never."""
    lines = _stream()
    events = to_other("vercel", lines)
    parts = [e for e in events if isinstance(e, dict) and e.get("type") == "data-meta-status"]
    seen = [(p["data"]["agent"], p["data"]["data"]["kind"]) for p in parts]
    assert seen == [
        (MAIN, "step_start"),
        (MAIN, "step_start"),
        (SUB, "step_start"),
        (MAIN, "step_finish"),
        (MAIN, "step_finish"),
        (MAIN, "step_start"),
    ]
    assert not [e for e in events if isinstance(e, dict) and e.get("type") == "finish-step"]
    without = [line for line in lines if b'"meta_status"' not in line]
    steps_with = [e for e in events if isinstance(e, dict) and e.get("type") == "start-step"]
    steps_without = [e for e in to_other("vercel", without) if isinstance(e, dict) and e.get("type") == "start-step"]
    assert len(steps_with) == len(steps_without)
    back = from_other("vercel", events)
    assert_valid(back)
    assert transcript(back) == transcript(lines)


def test_I4_g_the_conformance_status_stream_round_trips_through_both() -> None:
    """[I4-g] [I5-g] valid/meta_status.jsonl: every status comes back, in its place, from both protocols."""
    lines = read_lines(ROOT / "spec" / "conformance" / "valid" / "meta_status.jsonl")
    for protocol in ("agui", "vercel"):
        back = from_other(protocol, to_other(protocol, lines))
        assert_valid(back)
        assert transcript(back) == transcript(lines), protocol
