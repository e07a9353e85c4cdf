"""Hook decisions wired into real agent runs on the scripted model (spec/agent-ref.md §12.7, §12.8).

Every response these tests make is validated strictly by the autouse tee
(tests/agent_ref_validating.py).
"""

# ruff: noqa: ARG001, ARG005  (hooks take the signature they are given; many ignore it)

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agent_ref import Agent, AgentSpec, Fault, MemoryStore, ScriptedModel, default_tools
from agent_ref.errors import ConfigError
from agent_ref.policy.hooks import MAX_STOP_CONTINUATIONS, HookDecision, HookInput, HookMatcher
from agent_ref_support import blocks, fast_retry, meta, run
from envelope import reconstruct

PROMPT = "What is 5 + (10 * 2)?"
BOTH = "Please confirm, then tell me what is 6 * 7"
RESEARCH = "Research tides in parallel"


def _agent(model: ScriptedModel | None = None, **kw: Any) -> Agent:
    return Agent(model or ScriptedModel(), tools=default_tools(), retry=fast_retry(), **kw)


def _errors(lines: list[bytes], kind: str) -> list[dict[str, Any]]:
    return [b["data"] for b in blocks(lines) if b["type"] == "error" and b["data"].get("type") == kind]


def _hook_failures(lines: list[bytes]) -> list[dict[str, Any]]:
    """Failed hooks as the stream reports them: ``meta_status`` of kind ``hook`` (envelope-v1 [4.16-c])."""
    assert not _errors(lines, "hook_error")
    return [b["data"] for b in blocks(lines) if b["type"] == "meta_status" and b["data"].get("kind") == "hook"]


def _user_texts(message: dict[str, Any]) -> list[str]:
    return [str(b.get("text")) for b in message["content"] if b.get("type") == "text"]


def test_r12_7_c_abort_all_ends_the_run_interrupted_with_every_call_answered() -> None:
    """PreToolUse ``abort_all``: neither call runs, both are answered, the run ends ``interrupted`` [R12.7-c]."""
    ran: list[str] = []
    hooks = {
        "PreToolUse": [lambda d: HookDecision(action="abort_all", message="stop everything")],
        "PostToolUse": [lambda d: ran.append(str(d.tool_name))],
    }
    store = MemoryStore()
    lines: list[bytes] = []
    agent = _agent(hooks=hooks, store=store)
    result = run(agent.run(BOTH, lines.append))
    assert result.stop_reason == "interrupted"
    assert ran == []
    results = [b for b in blocks(lines) if b["type"] == "tool_result"]
    uses = [b for b in blocks(lines) if b["type"] == "tool_call"]
    assert len(uses) == 2
    assert sorted(r["id"] for r in results) == sorted(u["id"] for u in uses)
    assert [r["content"] for r in results] == ["stop everything", "not run: the run was interrupted"]
    sent = [b for b in result.conversation_history[-1]["content"] if b["type"] == "tool_result"]
    assert [b["is_error"] for b in sent] == [True, True]
    assert meta(lines, "meta_final")["stop_reason"] == "interrupted"
    assert agent.state.status == "idle"
    assert not agent.state.pending_frontend


def test_r12_7_b_prompt_context_goes_around_the_prompt() -> None:
    """SessionStart's context before the prompt, UserPromptSubmit's after, in the first request [R12.7-b]."""
    model = ScriptedModel()
    hooks = {
        "SessionStart": [lambda d: HookDecision(additional_context="the user is in Oslo")],
        "UserPromptSubmit": [
            lambda d: HookDecision(additional_context="answer briefly"),
            lambda d: HookDecision(additional_context="in English"),
        ],
    }
    result = run(_agent(model, hooks=hooks).run("hello there", lambda line: None))
    assert result.stop_reason == "end_turn"
    first = model.requests[0]["messages"][-1]
    assert _user_texts(first) == ["the user is in Oslo", "hello there", "answer briefly\n\nin English"]
    assert _user_texts(result.conversation_history[0]) == _user_texts(first)


def test_r12_7_g_blocked_prompt_stream_and_state() -> None:
    """The blocked run's stream: meta_init, an ``error`` prompt_blocked, meta_final; the context is unchanged [R12.7-g]."""
    model = ScriptedModel()
    store = MemoryStore()
    blocking = {"on": False}

    def gate(data: HookInput) -> HookDecision | None:
        return HookDecision(action="block", message="not that, please") if blocking["on"] else None

    agent = _agent(model, store=store, hooks={"UserPromptSubmit": [gate]})
    run(agent.run("hello there", lambda line: None))
    kept = [dict(m) for m in agent.state.messages]
    calls = len(model.requests)
    blocking["on"] = True
    lines: list[bytes] = []
    result = run(agent.run("tell me a secret", lines.append))
    assert result.stop_reason == "prompt_blocked"
    assert len(model.requests) == calls
    assert agent.state.messages == kept
    assert result.conversation_history == []
    assert _errors(lines, "prompt_blocked")[0]["message"] == "not that, please"
    assert meta(lines, "meta_final")["stop_reason"] == "prompt_blocked"
    stored = asyncio.run(store.load(agent.agent_uuid))
    assert stored is not None
    assert stored.messages == kept


def test_r12_7_d_stop_keep_going_is_bounded_and_counted() -> None:
    """Stop ``keep_going``: the model is told the reason and goes on, at most 3 times; the count is told [R12.7-d]."""
    model = ScriptedModel()
    told: list[int] = []

    def again(data: HookInput) -> HookDecision:
        told.append(data.stop_continuations)
        return HookDecision(action="keep_going", message="check your answer once more")

    result = run(_agent(model, hooks={"Stop": [again]}).run("hello there", lambda line: None))
    assert result.stop_reason == "end_turn"
    assert told == list(range(MAX_STOP_CONTINUATIONS + 1))
    assert len(model.requests) == MAX_STOP_CONTINUATIONS + 1
    last = model.requests[-1]["messages"][-1]
    assert _user_texts(last)[-1] == "check your answer once more"


def test_r12_7_e_notification_on_pause_and_on_retry() -> None:
    """Notification fires with kind ``frontend_tools`` on a pause and ``retry`` before a retry [R12.7-e]."""
    seen: list[tuple[str | None, str | None]] = []
    hooks = {"Notification": [lambda d: seen.append((d.notification_kind, d.notification))]}
    model = ScriptedModel(faults=[Fault(kind="status", status=529)])
    result = run(_agent(model, hooks=hooks).run(BOTH, lambda line: None))
    assert result.stop_reason == "awaiting_frontend_tools"
    kinds = [k for k, _ in seen]
    assert kinds == ["retry", "frontend_tools"]
    assert "confirm" in str(seen[1][1])


def test_r12_7_e_subagent_hooks_get_the_child_uuid_and_transcript() -> None:
    """SubagentStart/Stop are told the child's uuid; SubagentStop its transcript [R12.7-e]; a child fires no SessionStart [R12.7-f]."""
    seen: list[HookInput] = []

    def record(data: HookInput) -> None:
        seen.append(data)

    hooks = {e: [record] for e in ("SubagentStart", "SubagentStop", "SessionStart", "SessionEnd")}
    spec = AgentSpec(description="researches one topic")
    lines: list[bytes] = []
    result = run(_agent(hooks=hooks, subagents={"researcher": spec}).run(RESEARCH, lines.append))
    assert result.stop_reason == "end_turn"
    events = [d.event for d in seen]
    assert events == ["SessionStart", "SubagentStart", "SubagentStop", "SessionEnd"]
    start, stop = seen[1], seen[2]
    (child,) = set(reconstruct(lines).to_dict()["agents"]) - {result.agent_uuid}
    assert start.subagent_uuid == stop.subagent_uuid == child
    assert stop.transcript
    assert stop.transcript[0]["role"] == "user"
    assert "tides" in str(stop.transcript[0]["content"])
    assert {d.agent_uuid for d in seen if d.event.startswith("Session")} == {result.agent_uuid}


def test_r12_7_h_hook_timeout_option_fails_a_slow_hook_closed() -> None:
    """``hook_timeout``: a PreToolUse hook that overruns blocks its call, reported [R12.7-h] [R12.8-b]."""
    lines: list[bytes] = []
    result = run(_agent(hook_timeout=0.05, hooks={"PreToolUse": [lambda d: time.sleep(0.5)]}).run(PROMPT, lines.append))
    assert result.stop_reason == "end_turn"
    (failure,) = _hook_failures(lines)
    assert "did not answer within" in failure["message"]
    sent = [b for m in result.conversation_history for b in m["content"] if b.get("type") == "tool_result"]
    assert [b["is_error"] for b in sent] == [True]


def test_r12_8_a_matcher_in_options_fires_for_matching_tools_only() -> None:
    """A ``HookMatcher`` in ``hooks`` fires for its pattern only [R12.8-a]; a bad one is refused naming it."""
    seen: list[str] = []
    hooks = {
        "PreToolUse": [
            HookMatcher("calc*", [lambda d: seen.append(str(d.tool_name))]),
            HookMatcher("confirm", [lambda d: seen.append("no")]),
        ]
    }
    run(_agent(hooks=hooks).run(PROMPT, lambda line: None))
    assert seen == ["calculator"]
    with pytest.raises(ConfigError, match=r"hooks\['Stop'\]\[0\]"):
        _agent(hooks={"Stop": [HookMatcher("calc*", [])]})
    with pytest.raises(ConfigError, match="hook timeout"):
        _agent(hook_timeout=-1)
