"""PostToolUse for frontend tool results a resume brings (spec/agent-ref.md [AP1-a]).

Real runs on the scripted model: the run pauses on ``confirm`` (a frontend tool), a fresh
agent (another process's) resumes it with the browser's result, and the hooks see that
result before the next model call. Every response is validated strictly by the autouse tee
(tests/agent_ref_validating.py); the recordings are validated here too.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from agent_ref import Agent, ScriptedModel, SQLiteStore, default_tools
from agent_ref.policy.hooks import HookInput, HookMatcher
from agent_ref.run.subagents import AgentSpec
from agent_ref.tools.demo import confirm
from agent_ref_support import envelopes, fast_retry, run
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from agent_ref.store.core import Store

#: One step with a backend call (calculator) and a frontend call (confirm).
BOTH = "Please confirm, then tell me what is 6 * 7"
#: A child whose task says "confirm" pauses the whole run on its own frontend call.
CHILD_PAUSES = "Research tides and volcanoes (confirm first) in parallel"


class _Seen:
    """What the hooks saw, with how many model requests had been made when they fired."""

    def __init__(self) -> None:
        self.model: ScriptedModel | None = None
        self.events: list[tuple[str, HookInput, int]] = []

    def hook(self, event: str) -> Callable[[HookInput], None]:
        def record(data: HookInput) -> None:
            made = len(self.model.requests) if self.model is not None else -1
            self.events.append((event, data, made))

        return record

    def hooks(self) -> dict[str, list[Any]]:
        return {
            "PostToolUse": [self.hook("PostToolUse")],
            "PostToolUseFailure": [self.hook("PostToolUseFailure")],
        }

    def of(self, name: str) -> list[tuple[str, HookInput, int]]:
        return [e for e in self.events if e[1].tool_name == name]


def _config(seen: _Seen, **more: Any) -> dict[str, Any]:
    return {"tools": default_tools(), "retry": fast_retry(), "hooks": seen.hooks(), **more}


def _pause(store: Store, seen: _Seen, prompt: str = BOTH, **more: Any) -> tuple[Agent, list[bytes], list[Any]]:
    seen.model = ScriptedModel()
    agent = Agent(seen.model, store=store, **_config(seen, **more))
    lines: list[bytes] = []
    result = run(agent.run(prompt, lines.append))
    assert result.stop_reason == "awaiting_frontend_tools"
    (pause,) = [e for e in envelopes(lines) if e["type"] == "awaiting_frontend_tools"]
    return agent, lines, json.loads(pause["delta"])


def _resume(agent_uuid: str, store: Store, seen: _Seen, answers: list[dict[str, Any]], **more: Any) -> Any:
    """Resume as another process would: a new model and agent loaded from the store."""
    seen.model = ScriptedModel()
    fresh = run(Agent.load(agent_uuid, store, seen.model, **_config(seen, **more)))
    lines: list[bytes] = []
    result = run(fresh.continue_with_tool_results(answers, lines.append))
    return result, lines


def test_ap1_a_a_frontend_result_fires_post_tool_use_once_before_the_next_model_call(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    seen = _Seen()
    agent, first, pending = _pause(store, seen)
    (element,) = pending
    assert element["name"] == "confirm"
    assert [e[0] for e in seen.of("confirm")] == []  # nothing yet: the browser has not answered
    assert [e[0] for e in seen.of("calculator")] == ["PostToolUse"]  # the backend call's, in the first response

    result, second = _resume(agent.agent_uuid, store, seen, [{"tool_use_id": element["tool_use_id"], "content": "yes"}])
    assert result.stop_reason == "end_turn"
    fired = seen.of("confirm")
    assert [e[0] for e in fired] == ["PostToolUse"]  # once
    _, data, made = fired[0]
    assert data.tool_use_id == element["tool_use_id"]
    assert data.tool_input == element["input"]
    assert data.result == "yes"  # the result the frontend gave
    assert data.agent_uuid == agent.agent_uuid
    assert made == 0  # before the resumed response's first model call
    assert len(seen.model.requests if seen.model else []) >= 1
    log = run(store.run_log(result.run_id))
    assert log == first + second
    assert_valid(log)


def test_ap1_a_an_error_result_from_the_frontend_fires_post_tool_use_failure(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    seen = _Seen()
    agent, _, (element,) = _pause(store, seen)
    answer = {"tool_use_id": element["tool_use_id"], "content": "the user closed the dialog", "is_error": True}
    result, _ = _resume(agent.agent_uuid, store, seen, [answer])
    assert result.stop_reason == "end_turn"
    fired = seen.of("confirm")
    assert [e[0] for e in fired] == ["PostToolUseFailure"]
    assert fired[0][1].result == "the user closed the dialog"


def test_ap1_a_a_matcher_selects_the_frontend_tool_and_a_failing_hook_is_reported(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    matched: list[str] = []

    def broken(_data: HookInput) -> None:
        raise RuntimeError("the audit log is full")

    hooks = {"PostToolUse": [HookMatcher("conf*", [lambda d: matched.append(str(d.result))]), broken]}
    seen = _Seen()
    agent, _, (element,) = _pause(store, seen, hooks=hooks)
    assert matched == []  # calculator's PostToolUse did not match the pattern
    answer = {"tool_use_id": element["tool_use_id"], "content": "ok"}
    result, second = _resume(agent.agent_uuid, store, seen, [answer], hooks=hooks)
    assert matched == ["ok"]
    assert not [e for e in envelopes(second) if e["type"] == "error"]
    statuses = [json.loads(e["delta"]) for e in envelopes(second) if e["type"] == "meta_status"]
    errors = [s for s in statuses if s["kind"] == "hook"]
    assert [(e["outcome"], e["event"]) for e in errors] == [("failed", "PostToolUse")]
    assert "the audit log is full" in errors[0]["message"]
    assert result.stop_reason == "end_turn"


def test_ap1_a_a_childs_frontend_result_fires_the_childs_post_tool_use(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "a.db")
    seen = _Seen()
    spec = AgentSpec(description="researches one topic", tools=[confirm])
    agent, _, pending = _pause(store, seen, CHILD_PAUSES, subagents={"researcher": spec})
    (element,) = pending
    child_uuid = element["agent"]
    assert child_uuid != agent.agent_uuid
    answer = {"tool_use_id": element["tool_use_id"], "content": "yes"}
    result, _ = _resume(agent.agent_uuid, store, seen, [answer], subagents={"researcher": spec})
    assert result.stop_reason == "end_turn"
    fired = seen.of("confirm")
    assert [e[0] for e in fired] == ["PostToolUse"]
    _, data, made = fired[0]
    assert data.agent_uuid == child_uuid  # the child's hook (children run the parent's hooks, [R12.7-f])
    assert data.result == "yes"
    assert made == 0  # before the child's (and the parent's) next model call
    spawns = [e for e in seen.events if e[1].tool_name == "spawn_subagent"]
    assert spawns  # the spawning calls' own PostToolUse still fire
    assert_valid(run(store.run_log(result.run_id)))
