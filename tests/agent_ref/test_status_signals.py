"""Routine events travel as ``meta_status``, never as ``error`` (envelope-v1 §4.16, issue 41 item 5).

Every run goes through a real ``Agent`` on the scripted model (the real ``AsyncAnthropic``
client over a mock transport), and every stream through the strict validator.
"""

from __future__ import annotations

import json
from typing import Any

from agent_ref import Agent, Fault, ScriptedModel, default_tools
from agent_ref_support import assert_valid_responses, envelopes, fast_retry, run
from validating import assert_valid


def _run(prompt: str, model: ScriptedModel | None = None, **options: Any) -> tuple[Any, list[bytes]]:
    lines: list[bytes] = []
    options.setdefault("tools", default_tools())
    result = run(Agent(model or ScriptedModel(), **options).run(prompt, lines.append))
    return result, lines


def _statuses(lines: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(e["delta"]) for e in envelopes(lines) if e["type"] == "meta_status"]


def test_spec_4_16_c_count_slowly_to_12_sends_no_error_envelope() -> None:
    """[4.16-c] [R2.6-b] a successful "count slowly to 12": progress as meta_status, no ``error`` at all."""
    result, lines = _run("count slowly to 12")
    assert result.stop_reason == "end_turn"
    assert_valid_responses(lines)
    kinds = [e["type"] for e in envelopes(lines)]
    assert "error" not in kinds
    progress = [s for s in _statuses(lines) if s["kind"] == "tool_progress"]
    assert progress, "the count reported no progress"
    assert {s["name"] for s in progress} == {"count_slowly"}
    assert all(s["message"].startswith("counting ") for s in progress)
    # each progress line comes after its call and before its result
    first_progress = kinds.index("meta_status", kinds.index("tool_call"))
    assert kinds.index("tool_call") < first_progress < kinds.index("tool_result")


def test_spec_4_16_d_each_step_starts_and_finishes_with_its_own_usage_and_cost() -> None:
    """[4.16-d] step_start then step_finish per step, in order; the finish after the step's tool results."""
    _result, lines = _run("count slowly to 3")
    steps = [s for s in _statuses(lines) if s["kind"] in ("step_start", "step_finish")]
    assert [(s["kind"], s["step"]) for s in steps] == [
        ("step_start", 1),
        ("step_finish", 1),
        ("step_start", 2),
        ("step_finish", 2),
    ]
    finishes = [s for s in steps if s["kind"] == "step_finish"]
    assert [s["stop_reason"] for s in finishes] == ["tool_use", "end_turn"]
    assert finishes[-1]["run_stop"] == "end_turn"
    assert "run_stop" not in finishes[0]
    # the steps' own usage sums to the run's (meta_final's cumulative_usage)
    (final,) = [json.loads(e["delta"]) for e in envelopes(lines) if e["type"] == "meta_final"]
    for key, total in final["cumulative_usage"].items():
        assert sum(s["usage"][key] for s in finishes) == total, key
    assert finishes[0]["usage"]["output_tokens"] > 0
    assert finishes[0]["usage"] != finishes[1]["usage"]
    # a priced step's cost names the model; an unpriced one is null (the scripted model has no price)
    for s in finishes:
        assert s["cost"] is None or set(s["cost"]) == {"model", "usd"}
    # order on the wire: the first step's finish after its tool result, before the next step's start
    types = [
        (e["type"], json.loads(e["delta"]).get("kind") if e["type"] == "meta_status" else None)
        for e in envelopes(lines)
    ]
    assert types.index(("tool_result", None)) < types.index(("meta_status", "step_finish"))


def test_spec_4_16_d_step_cost_is_the_calls_price_when_the_model_has_one() -> None:
    """[4.16-d] with a price for the model, each step_finish carries its own cost; they sum to the run's."""
    from agent_ref.models.pricing import Price

    prices = {"scripted": Price(input=3.0, output=15.0)}
    _, lines = _run("count slowly to 2", prices=prices)
    finishes = [s for s in _statuses(lines) if s["kind"] == "step_finish"]
    (final,) = [json.loads(e["delta"]) for e in envelopes(lines) if e["type"] == "meta_final"]
    assert all(s["cost"]["model"] == "scripted" for s in finishes)
    assert abs(sum(s["cost"]["usd"] for s in finishes) - final["cost"]["total_usd"]) < 1e-12


def test_spec_10_2_e_seed_profile_sends_no_status_and_no_error() -> None:
    """[10.2-e] under --profile seed the same run sends neither meta_status nor a routine error."""
    result, lines = _run("count slowly to 12", profile="seed")
    assert result.stop_reason == "end_turn"
    kinds = {e["type"] for e in envelopes(lines)}
    assert "meta_status" not in kinds
    assert "error" not in kinds
    assert_valid(lines, profile="seed")


def test_spec_4_16_d_the_last_call_past_max_steps_is_a_step_too() -> None:
    """[4.16-d] max_steps=1: the tool step, then the last call (agent-ref §5.2) started and finished as step 2."""
    result, lines = _run("count slowly to 2", max_steps=1)
    assert result.stop_reason == "max_steps"
    assert_valid_responses(lines)
    steps = [(s["kind"], s["step"]) for s in _statuses(lines) if s["kind"] in ("step_start", "step_finish")]
    assert steps == [("step_start", 1), ("step_finish", 1), ("step_start", 2), ("step_finish", 2)]
    assert _statuses(lines)[-1]["run_stop"] == "max_steps"
    assert "error" not in {e["type"] for e in envelopes(lines)}


def test_spec_4_16_c_a_retried_call_is_a_retry_status_and_the_run_sends_no_error() -> None:
    """[4.16-c] an overloaded first attempt (no output yet): one ``retry`` status, then the answer; no ``error``."""
    model = ScriptedModel(faults=[Fault(kind="status", status=529)])
    result, lines = _run("What is 2 + 2?", model, retry=fast_retry())
    assert result.stop_reason == "end_turn"
    assert_valid_responses(lines)
    (retry,) = [s for s in _statuses(lines) if s["kind"] == "retry"]
    assert retry["attempt"] == 1
    assert retry["delay"] >= 0
    assert "overloaded" in retry["message"]
    assert "error" not in {e["type"] for e in envelopes(lines)}
