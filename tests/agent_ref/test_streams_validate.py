"""Every stream the reference agent produces passes the strict validator (issue 6, spec/validation.md)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools
from agent_ref.models.scripted import Fault
from agent_ref_support import fast_retry, run
from envelope import reconstruct, validate


def _codes(lines: list[bytes], max_bytes: int = 2048) -> list[str]:
    return [f"{v.code}@{v.line}" for v in validate(lines, max_bytes=max_bytes)]


@pytest.mark.parametrize(
    "prompt",
    [
        "What is 5 + (10 * 2)?",
        "Please cite a source for the color of grass",
        "Tell me something long",
        "Hello there",
    ],
)
def test_agent_runs_validate_clean(prompt: str) -> None:
    lines: list[bytes] = []
    run(Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry()).run(prompt, lines.append))
    assert _codes(lines) == []


def test_small_bound_run_validates_clean() -> None:
    lines: list[bytes] = []
    agent = Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry(), max_bytes=200)
    run(agent.run("Tell me something long, and what is 3 * 4?", lines.append))
    assert _codes(lines, max_bytes=200) == []


@pytest.mark.parametrize("fault", [Fault("cut", after=6), Fault("error_event", after=6), Fault("status", status=529)])
def test_retried_runs_validate_clean(fault: Fault) -> None:
    lines: list[bytes] = []
    run(
        Agent(ScriptedModel(faults=[fault]), tools=default_tools(), retry=fast_retry()).run(
            "What is 2 + 2?", lines.append
        )
    )
    assert _codes(lines) == []


def test_paused_and_resumed_responses_validate() -> None:
    """[8.4-a] the paused response is clean, and so is the resumed one: its meta_init announces the ids."""
    store = MemoryStore()
    first: list[bytes] = []
    paused = run(
        Agent(ScriptedModel(), tools=default_tools(), store=store, retry=fast_retry()).run(
            "Please confirm, then tell me what is 6 * 7", first.append
        )
    )
    assert _codes(first) == []
    (call,) = paused.pending_frontend_tools
    second: list[bytes] = []

    async def resume() -> Any:
        agent = await Agent.load(paused.agent_uuid, store, ScriptedModel(), tools=default_tools())
        return await agent.continue_with_tool_results(
            [{"tool_use_id": call.tool_use_id, "content": "yes"}], second.append
        )

    asyncio.run(resume())
    assert _codes(second) == []


def test_call_cut_by_max_tokens_validates_clean() -> None:
    """[R1.3-b] the cut call is shown with the input history records ({}), so the stream stays valid."""
    lines: list[bytes] = []
    agent = Agent(ScriptedModel(), tools=default_tools(), max_tokens=38, retry=fast_retry(), max_steps=1)
    run(agent.run("What is 123456 + (654321 * 2)?", lines.append))
    assert _codes(lines) == []
    calls = [b for b in reconstruct(lines).to_dict()["agents"].popitem()[1]["blocks"] if b["type"] == "tool_call"]
    assert calls[0]["input"] == {}
