"""Retries with backoff and the discarded-attempt signal (spec/agent-ref.md §6)."""

from __future__ import annotations

import random

import anthropic
import httpx2
import pytest

from agent_ref import Agent, Fault, RetryPolicy, ScriptedModel, default_tools
from agent_ref.run.retry import IncompleteStreamError, classify
from agent_ref_support import blocks, drop, envelopes, fast_retry, meta, run, types

PROMPT = "What is 5 + (10 * 2)?"


def _clean_blocks() -> list[dict[str, object]]:
    lines: list[bytes] = []
    run(Agent(ScriptedModel(), tools=default_tools()).run(PROMPT, lines.append))
    return _strip(blocks(lines))


def _strip(bs: list[dict[str, object]]) -> list[dict[str, object]]:
    """Blocks without the per-run ids (meta blocks carry the run id)."""
    return [b for b in bs if not str(b["type"]).startswith("meta_")]


@pytest.mark.parametrize("status", [529, 500, 429])
def test_spec_6_1_transient_status_before_output_is_retried_silently(status: int) -> None:
    """Transient failures before output are retried without a signal [R6.1-a] [R6.4-b]."""
    lines: list[bytes] = []
    model = ScriptedModel(faults=[Fault("status", status=status), Fault("status", status=status)])
    result = run(Agent(model, tools=default_tools(), retry=fast_retry()).run(PROMPT, lines.append))
    assert result.stop_reason == "end_turn"
    assert len(model.requests) == 4  # two failed attempts, then two steps
    assert "error" not in types(lines)  # nothing was streamed by the failed attempts (spec §6.4-b)
    assert _strip(blocks(lines)) == _clean_blocks()


@pytest.mark.parametrize("fault", [Fault("cut", after=6), Fault("error_event", after=6)])
def test_spec_6_4_failure_after_partial_output_is_discarded_then_retried(fault: Fault) -> None:
    """Partial output: close, discard signal, retry; no duplicate after the rule [R6.4-a]."""
    lines: list[bytes] = []
    model = ScriptedModel(faults=[fault])
    result = run(Agent(model, tools=default_tools(), retry=fast_retry()).run(PROMPT, lines.append))
    assert result.stop_reason == "end_turn"
    discards = [e for e in envelopes(lines) if e["type"] == "error"]
    assert len(discards) == 1
    import json

    signal = json.loads(discards[0]["delta"])
    assert signal["type"] == "attempt_discarded"
    assert signal["retrying"] is True
    assert signal["attempt"] == 1
    assert signal["discard_blocks"] >= 1
    # the cut text block was closed before the signal (spec §6.4-a)
    kinds = types(lines)
    assert kinds[: kinds.index("error") + 1][-2] in ("thinking", "text")
    # with the rule applied, the stream shows exactly what a clean run shows: no duplicate
    assert _strip(blocks(lines)) == _clean_blocks()
    # history has only the successful attempt
    assert result.conversation_history[1]["content"][0]["type"] == "thinking"
    assert len(result.conversation_history) == 4


def test_spec_6_3_non_retryable_error_ends_the_run_with_an_error_envelope() -> None:
    """A 400 ends the run: error envelope, meta_final, [DONE] [R6.3-a]."""
    lines: list[bytes] = []
    model = ScriptedModel(faults=[Fault("status", status=400)])
    result = run(Agent(model, tools=default_tools(), retry=fast_retry()).run(PROMPT, lines.append))
    assert result.stop_reason == "error"
    assert len(model.requests) == 1
    error = meta(lines, "error")
    assert error["type"] == "invalid_request_error"
    assert error["retryable"] is False
    assert meta(lines, "meta_final")["stop_reason"] == "error"
    assert lines[-1] == b"[DONE]"
    text = b"".join(lines).decode()
    assert "Traceback" not in text
    assert "scripted-offline-no-key" not in text


def test_spec_6_2_retries_are_bounded() -> None:
    """At most max_attempts attempts [R6.2-a]."""
    lines: list[bytes] = []
    model = ScriptedModel(faults=[Fault("cut", after=5)] * 3)
    result = run(Agent(model, tools=default_tools(), retry=fast_retry(attempts=3)).run(PROMPT, lines.append))
    assert result.stop_reason == "error"
    assert len(model.requests) == 3
    signals = [e for e in envelopes(lines) if e["type"] == "error"]
    import json

    payloads = [json.loads(s["delta"]) for s in signals]
    assert [p.get("retrying") for p in payloads[:3]] == [True, True, False]
    assert payloads[-1]["type"] == "connection_error"
    assert payloads[-1]["attempts"] == 3
    # the discards leave only meta blocks and the final error
    # the step's start and its retries are statuses (envelope-v1 [4.16-c]), kept
    assert [b["type"] for b in blocks(lines) if b["type"] != "meta_status"] == ["meta_init", "error", "meta_final"]


def test_spec_6_2_backoff_is_exponential_with_full_jitter_and_capped() -> None:
    """Full jitter within the exponential cap [R6.2-a]."""
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0, rng=random.Random(7))
    for attempt in range(1, 10):
        cap = min(4.0, 0.5 * 2 ** (attempt - 1))
        delays = [policy.delay(attempt) for _ in range(50)]
        assert all(0.0 <= d <= cap for d in delays)
        assert max(delays) > cap / 2  # jitter spreads over the range


def test_spec_6_2_the_sleeps_are_the_policy_delays() -> None:
    """The agent sleeps the policy's delays [R6.2-a]."""
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    policy = RetryPolicy(max_attempts=4, base_delay=1.0, max_delay=10.0, rng=random.Random(1), sleep=sleep)
    expected = RetryPolicy(base_delay=1.0, max_delay=10.0, rng=random.Random(1))
    model = ScriptedModel(faults=[Fault("status", status=529)] * 3)
    result = run(Agent(model, tools=default_tools(), retry=policy).run(PROMPT, drop))
    assert result.stop_reason == "end_turn"
    assert waited == [expected.delay(1), expected.delay(2), expected.delay(3)]


def test_spec_6_1_classification() -> None:
    """Which failures are transient; public messages [R6.1-a] [R6.3-a]."""
    request = httpx2.Request("POST", "http://x.invalid/v1/messages")
    assert classify(httpx2.ReadError("cut")).transient
    assert classify(IncompleteStreamError()).transient
    assert classify(anthropic.APIConnectionError(request=request)).transient
    assert classify(anthropic.APITimeoutError(request)).transient
    bad = classify(TypeError("a bug: sk-ant-abc"))
    assert not bad.transient
    assert bad.type == "internal_error"
    assert "sk-ant" not in bad.message
    assert "TypeError" not in bad.message
    response = httpx2.Response(
        401,
        request=request,
        json={"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
    )
    auth = classify(anthropic.AuthenticationError("401", response=response, body=response.json()))
    assert not auth.transient
    assert auth.type == "authentication_error"
