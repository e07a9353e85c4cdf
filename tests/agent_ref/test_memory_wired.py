"""The long-term memory store wired into REAL agent runs (spec ``spec/agent-ref.md`` §21.5), with ``FileMemory``.

Every response is validated strictly by the autouse tee (``tests/agent_ref_validating.py``).
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, AgentResult, ScriptedModel, SQLiteStore, default_tools
from agent_ref.errors import ConfigError
from agent_ref.run.subagents import AgentSpec
from agent_ref.tools.demo import confirm
from agent_ref.tools.memory_store import BLOCK_HEADER, FileMemory
from agent_ref_support import envelopes, run

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from pathlib import Path


class Recording(ScriptedModel):
    """The embedded model, keeping the ``system`` of every call it is given."""

    systems: list[str | None]

    def __init__(self) -> None:
        super().__init__()
        self.systems = []

    async def stream(self, params: dict[str, Any]) -> Any:
        """Record the system prompt, then answer as the embedded model does."""
        self.systems.append(params.get("system"))
        async for event in super().stream(params):
            yield event


class Counting:
    """A memory store counting its calls; its retrieve returns ``notes``."""

    def __init__(self, notes: Sequence[str]) -> None:
        self.notes = list(notes)
        self.retrieved: list[tuple[str, str]] = []
        self.updated: list[tuple[str, int]] = []

    def retrieve(self, agent_id: str, prompt: str) -> list[str]:
        self.retrieved.append((agent_id, prompt))
        return self.notes

    async def update(self, agent_id: str, transcript: Sequence[Mapping[str, Any]]) -> None:
        self.updated.append((agent_id, len(transcript)))


def errors(lines: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(e["delta"]) for e in envelopes(lines) if e["type"] == "error"]


def test_a_fact_remembered_in_one_run_is_in_the_next_runs_system_prompt_only_R21_5_a(tmp_path: Path) -> None:
    """Run 1 keeps "remember that ..."; run 2's system prompt has it; the history never does [R21.5-a]."""
    memory = FileMemory(tmp_path / "memory")
    model = Recording()
    agent = Agent(model, system="You are terse.", memory=memory)
    first = run(agent.run("Please remember that the deploy key rotates on Fridays.", lambda _line: None))
    assert first.stop_reason == "end_turn"
    assert memory.entries(agent.agent_uuid) == ["the deploy key rotates on Fridays"]
    assert model.systems == ["You are terse."]  # nothing was known before run 1
    lines: list[bytes] = []
    second = run(agent.run("When does the deploy key rotate?", lines.append))
    assert second.stop_reason == "end_turn"
    system = model.systems[-1]
    assert system is not None
    assert system.startswith("You are terse.\n\n" + BLOCK_HEADER)
    assert "- the deploy key rotates on Fridays" in system
    for message in agent.state.messages:  # memory never enters the conversation
        assert BLOCK_HEADER not in json.dumps(message)
    assert BLOCK_HEADER not in json.dumps(second.conversation_history)
    assert errors(lines) == []


def test_memory_is_retrieved_once_and_kept_through_a_pause_resumed_elsewhere_R21_5_a(tmp_path: Path) -> None:
    """One retrieve per run, none for its children; the resumed response (a fresh Agent) sends the same system."""
    store = SQLiteStore(tmp_path / "agents.db")
    memory = Counting(["the user likes tides"])
    spec = AgentSpec(description="researches one topic", tools=[confirm])
    config: dict[str, Any] = {"tools": default_tools(), "subagents": {"researcher": spec}, "memory": memory}
    model = Recording()
    agent = Agent(model, store=store, **config)
    prompt = "Research tides and volcanoes (confirm first) in parallel"
    paused = run(agent.run(prompt, lambda _line: None))
    assert paused.stop_reason == "awaiting_frontend_tools"
    assert memory.retrieved == [(agent.agent_uuid, prompt)]
    assert memory.updated == []  # a pause is not an end
    root_system = model.systems[0]
    assert root_system is not None
    assert "- the user likes tides" in root_system
    children = [s for s in model.systems if s != root_system]
    assert children  # the children's calls: no memory block (memory is the root's)
    assert all(s is None or BLOCK_HEADER not in s for s in children)

    fresh_model = Recording()
    fresh = asyncio.run(Agent.load(agent.agent_uuid, store, fresh_model, **config))
    (pending,) = paused.pending_frontend_tools
    done = run(
        fresh.continue_with_tool_results([{"tool_use_id": pending.tool_use_id, "content": "yes"}], lambda _l: None)
    )
    assert done.stop_reason == "end_turn"
    assert memory.retrieved == [(agent.agent_uuid, prompt)]  # not again on the resume
    assert root_system in fresh_model.systems  # the stored block, sent again
    assert memory.updated == [(agent.agent_uuid, len(done.conversation_history))]  # once, by the root


class Failing:
    """A memory store whose calls raise (or hang past the timeout)."""

    def __init__(self, *, hang: bool = False) -> None:
        self.hang = hang
        #: A hanging call waits for this (the test sets it once the run has ended) ...
        self.release = threading.Event()
        #: ... and records here that it came back, so the test can order the run's end before it.
        self.finished: list[str] = []

    async def retrieve(self, agent_id: str, prompt: str) -> list[str]:  # noqa: ARG002  # the protocol's
        if self.hang:
            await asyncio.sleep(30)  # cancelled by the timeout; never awaited to its end
            self.finished.append("retrieve")
        raise OSError("the memory disk is gone")

    def update(self, agent_id: str, transcript: Sequence[Mapping[str, Any]]) -> None:  # noqa: ARG002  # the protocol's
        if self.hang:
            self.release.wait(30)  # a blocking store: its thread is left behind, not waited for
            self.finished.append("update")
            return
        raise ValueError("cannot write notes")


def test_memory_failures_are_error_envelopes_and_the_run_goes_on_R21_5_b() -> None:
    """A retrieve and an update that raise: two ``memory_error`` envelopes, the run ends normally [R21.5-b]."""
    lines: list[bytes] = []
    agent = Agent(ScriptedModel(), tools=default_tools(), memory=Failing())
    result = run(agent.run("What is 5 + (10 * 2)?", lines.append))
    assert result.stop_reason == "end_turn"
    assert "25" in result.final_text
    found = errors(lines)
    assert [(e["type"], e["operation"]) for e in found] == [("memory_error", "retrieve"), ("memory_error", "update")]
    assert "OSError: the memory disk is gone" in found[0]["message"]
    assert "ValueError: cannot write notes" in found[1]["message"]
    kinds = [e["type"] for e in envelopes(lines) if e["agent"] == agent.agent_uuid]
    assert kinds[0] == "meta_init"
    assert kinds[1] == "error"
    assert kinds[-2:] == ["error", "meta_final"]  # the update's closes it, before meta_final


def test_memory_timeouts_are_reported_not_waited_for_R21_5_b() -> None:
    """A store slower than ``memory_timeout``: ``timed out after`` errors, the run ends in time."""
    lines: list[bytes] = []
    store = Failing(hang=True)
    agent = Agent(ScriptedModel(), memory=store, memory_timeout=0.2)

    async def go() -> tuple[AgentResult, list[str]]:
        try:
            result = await agent.run("hello", lines.append)
            return result, list(store.finished)  # what had come back when the run ended
        finally:
            store.release.set()  # before asyncio.run's shutdown joins the store's thread

    result, finished = asyncio.run(go())
    # the order, not a duration: the run ended while both store calls still hung
    assert finished == []
    assert result.stop_reason == "end_turn"
    messages = [e["message"] for e in errors(lines)]
    assert messages == [
        "the memory store's retrieve failed: timed out after 0.2 s",
        "the memory store's update failed: timed out after 0.2 s",
    ]


@pytest.mark.parametrize("bad", [0, -1.0])
def test_a_memory_timeout_that_is_not_positive_is_a_config_error_R21_5_a(bad: float) -> None:
    with pytest.raises(ConfigError, match="memory_timeout must be positive"):
        Agent(ScriptedModel(), memory_timeout=bad)
