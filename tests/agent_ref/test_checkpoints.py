"""Checkpoints (spec/agent-ref.md §CK1): a run that died in-process is continued from its last step.

The process's death is simulated by a ``BaseException`` no layer of the agent catches,
raised by the model or by a tool; the store then holds what the dead process last saved,
and another ``Agent`` (another process's, in the fault tests) continues it.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_ref import Agent, MemoryStore, ScriptedModel, SQLiteStore, StateError, default_tools
from agent_ref.agent import _nowhere
from agent_ref.run.checkpoints import UNKNOWN_RESULT
from agent_ref.store.state import AgentState, decode_state, encode_state
from agent_ref.tools.core import Tool, tool
from agent_ref_support import sse_lines
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable
    from pathlib import Path

    from agent_ref.store.core import Store


class Died(BaseException):
    """The process stops here (nothing of the agent catches a ``BaseException`` of its own)."""


class Calls:
    """What the tools were called with, and which call dies."""

    def __init__(self, die_on: str | None = None, *, wait: float = 0.0) -> None:
        self.seen: list[str] = []
        self.die_on = die_on
        self.wait = wait

    def tools(self, *, idempotent: bool = False) -> list[Tool]:
        async def note(text: str) -> str:
            """Write a note.

            Args:
                text: the note.
            """
            self.seen.append(text)
            if text == self.die_on:
                self.die_on = None
                await asyncio.sleep(self.wait)
                raise Died
            return f"noted {text}"

        return [tool(idempotent=idempotent)(note)]


class DyingModel(ScriptedModel):
    """The scripted model, dying at its ``die_at``-th call (1-based; 0: never)."""

    def __init__(self, die_at: int = 0) -> None:
        super().__init__()
        self.die_at = die_at
        self.count = 0

    async def stream(self, params: dict[str, Any]) -> AsyncIterator[Any]:
        self.count += 1
        if self.count == self.die_at:
            raise Died
        async for event in super().stream(params):
            yield event


class SavingStore(MemoryStore):
    """A memory store that keeps a copy of every state saved."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[AgentState] = []

    async def save(self, state: AgentState, **kwargs: Any) -> None:
        await super().save(state, **kwargs)
        self.saved.append(decode_state(encode_state(state)))


def _sink() -> Callable[[bytes], None]:
    lines: list[bytes] = []
    return lines.append


def _prompt(texts: list[str]) -> str:
    return " and ".join(f'call note with {{"text": "{t}"}}' for t in texts)


async def _die(store: Store, model: ScriptedModel, tools: list[Tool], prompt: str) -> AgentState:
    """Run until the process 'dies'; the stored state, its lease expired."""
    agent = Agent(model, tools=tools, store=store, checkpoints=True)
    with pytest.raises(Died):
        await agent.run(prompt, _nowhere)  # its stream is cut: what a follower reads is the log
    state = await store.load(agent.agent_uuid)
    assert state is not None
    assert state.status == "running"
    assert state.lease_owner is not None
    await store.renew_lease(state.agent_uuid, state.lease_owner, 0.0)  # its lease runs out
    return state


async def _continue(store: MemoryStore, state: AgentState, tools: list[Tool]) -> tuple[Any, list[bytes]]:
    """Another agent continues the dead run; its stream and the run's whole log are strictly valid."""
    other = await Agent.load(state.agent_uuid, store, ScriptedModel(), tools=tools, checkpoints=True)
    lines: list[bytes] = []
    result = await other.recover(lines.append)
    assert result is not None
    assert_valid(lines)
    assert state.run is not None
    responses = await store.run_responses(state.run.run_id)
    assert_valid([line for response in responses for line in response])  # what a follower reads back
    _answered_once(other.state.messages)
    return result, lines


def _answered_once(messages: list[dict[str, Any]]) -> None:
    """Every ``tool_use`` of the history has exactly one ``tool_result``, in the next user turn."""
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        uses = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if not uses:
            continue
        results = [b["tool_use_id"] for b in messages[i + 1]["content"] if b.get("type") == "tool_result"]
        assert sorted(results) == sorted(uses)


def test_off_by_default_saves_only_the_claim_and_the_end() -> None:
    """Not in checkpoint mode a run saves as before: its claim and its end, no checkpoint [CK1.1-a]."""

    async def scenario() -> None:
        store = SavingStore()
        calls = Calls()
        agent = Agent(ScriptedModel(), tools=calls.tools(), store=store)
        await agent.run(_prompt(["a"]), _sink())
        assert len(store.saved) == 2
        assert all(s.run is None or s.run.checkpoint is None for s in store.saved)

    asyncio.run(scenario())


def test_checkpoint_saved_before_each_model_call_with_the_history() -> None:
    """Each step's checkpoint is saved before its model call, holding the history so far [CK1.2-a]."""

    async def scenario() -> None:
        store = SavingStore()
        calls = Calls()
        agent = Agent(ScriptedModel(), tools=calls.tools(), store=store, checkpoints=True)
        await agent.run(_prompt(["a"]), _sink())
        marks = [(s.run.checkpoint.step, s.run.checkpoint.phase) for s in store.saved if s.run and s.run.checkpoint]
        assert marks[0] == (1, "model")
        assert (1, "tools") in marks
        assert marks[-1] == (2, "model")
        last = next(s for s in reversed(store.saved) if s.run and s.run.checkpoint)
        assert last.messages[-1]["content"][0]["type"] == "tool_result"  # step 1's results are in
        assert last.run is not None
        assert last.run.steps == 1
        assert last.run.usage.output_tokens > 0  # usage of step 1 is saved with it

    asyncio.run(scenario())


def test_died_between_steps_continues_without_calling_the_tool_again() -> None:
    """A run that died in step 2's model call continues from step 2; the tool ran once [CK1.4-a] [CK1.4-b]."""

    async def scenario() -> None:
        store = MemoryStore()
        calls = Calls()
        state = await _die(store, DyingModel(die_at=2), calls.tools(), _prompt(["a"]))
        result, lines = await _continue(store, state, calls.tools())
        assert result.stop_reason == "end_turn"
        assert "note gave: noted a" in result.final_text
        assert calls.seen == ["a"]
        assert b'\\"continued\\": true' in lines[0]
        assert state.run is not None
        responses = await store.run_responses(state.run.run_id)
        assert len(responses) == 2
        assert b'\\"type\\": \\"lost\\"' in responses[0][1]
        assert (await store.runs(state.agent_uuid))[0].stop_reason == "end_turn"

    asyncio.run(scenario())


def test_died_during_a_tool_gives_the_model_an_unknown_result() -> None:
    """A call that started and did not finish is not run again: its result is unknown [CK1.3-b]."""

    async def scenario() -> None:
        store = MemoryStore()
        calls = Calls(die_on="b", wait=0.05)
        state = await _die(store, ScriptedModel(), calls.tools(), _prompt(["a", "b"]))
        result, lines = await _continue(store, state, calls.tools())
        assert sorted(calls.seen) == ["a", "b"]  # each once: a's result reused, b not run again
        assert "note gave: noted a" in result.final_text
        assert "note failed: " + UNKNOWN_RESULT in result.final_text
        assert any(b"result unknown" in line for line in lines)

    asyncio.run(scenario())


def test_died_during_an_idempotent_tool_runs_it_again() -> None:
    """When every unfinished call is idempotent they are run again; finished ones are reused [CK1.3-a]."""

    async def scenario() -> None:
        store = MemoryStore()
        calls = Calls(die_on="b", wait=0.05)
        state = await _die(store, ScriptedModel(), calls.tools(idempotent=True), _prompt(["a", "b"]))
        result, _ = await _continue(store, state, calls.tools(idempotent=True))
        assert sorted(calls.seen) == ["a", "b", "b"]
        assert "note gave: noted a" in result.final_text
        assert "note gave: noted b" in result.final_text

    asyncio.run(scenario())


def test_a_live_lease_is_not_continued() -> None:
    """A run whose owner still holds its lease is refused, not continued (§10.2-b still holds) [CK1.4-a]."""

    async def scenario() -> None:
        store = MemoryStore()
        calls = Calls()
        agent = Agent(DyingModel(die_at=2), tools=calls.tools(), store=store, checkpoints=True)
        with pytest.raises(Died):
            await agent.run(_prompt(["a"]), _nowhere)
        other = await Agent.load(agent.agent_uuid, store, ScriptedModel(), tools=calls.tools())
        with pytest.raises(StateError, match="running in another process"):
            await other.recover()

    asyncio.run(scenario())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3, unique=True),
    where=st.integers(min_value=0, max_value=3),
)
def test_continued_run_restores_the_checkpoint_and_calls_each_tool_at_most_once(texts: list[str], where: int) -> None:
    """For any calls and any point of death: the continued agent starts from the stored history, and
    no non-idempotent call runs twice [CK1.2-a] [CK1.3-b]."""

    async def scenario() -> None:
        store = SavingStore()
        die_on = texts[where] if where < len(texts) else None
        calls = Calls(die_on=die_on, wait=0.01)
        model = DyingModel(die_at=0 if die_on is not None else 2)
        state = await _die(store, model, calls.tools(), _prompt(texts))
        last = store.saved[-1]
        assert state.messages == last.messages  # the restored history is the one at the checkpoint
        result, _ = await _continue(store, state, calls.tools())
        assert sorted(calls.seen) == sorted(texts)
        assert result.stop_reason == "end_turn"

    asyncio.run(scenario())


def test_cli_recover_continues_a_dead_run_and_run_takes_checkpoints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`agent-ref recover AGENT` continues a dead checkpointed run on stdout; `--checkpoints` sets the option [CK1.4-a] [RCCK1-a]."""
    from agent_ref.cli.commands import _parser, main
    from agent_ref.cli.flags import agent_config

    for command in (["run", "hi"], ["serve"], ["recover", "a"]):
        args = _parser().parse_args([*command, "--checkpoints"])
        assert agent_config(args)["checkpoints"] is True
    assert "checkpoints" not in agent_config(_parser().parse_args(["run", "hi"]))

    db = tmp_path / "a.db"

    async def dead() -> str:
        store = SQLiteStore(db)
        state = await _die(store, DyingModel(die_at=2), default_tools(), "What is 5 + (10 * 2)?")
        return state.agent_uuid

    agent_uuid = asyncio.run(dead())
    code = main(["recover", agent_uuid, "--db", str(db), "--checkpoints"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = sse_lines(out)
    assert_valid(lines)
    assert b'\\"continued\\": true' in lines[0]
    assert "continued run" in err
    assert "end_turn" in err
    (record,) = asyncio.run(SQLiteStore(db).runs(agent_uuid))
    assert record.stop_reason == "end_turn"
    assert "25" in record.final_text


def test_background_tasks_of_the_dead_process_are_failed_and_notified() -> None:
    """A task left running by the dead process is marked failed and the model is told at its next step [CK1.4-c]."""
    from agent_ref.run.checkpoints import DEAD_TASK
    from agent_ref.store.state import BackgroundTask

    async def scenario() -> None:
        store = MemoryStore()
        calls = Calls()
        state = await _die(store, DyingModel(die_at=2), calls.tools(), _prompt(["a"]))
        state.tasks = [
            BackgroundTask(task_id="t1", tool_use_id="x", name="researcher", agent_uuid="c", task="tides"),
        ]
        state.lease_expires_at = 0.0  # still the dead owner's, run out
        await store.save(state)
        result, _ = await _continue(store, state, calls.tools())
        assert result.stop_reason == "end_turn"
        stored = await store.load(state.agent_uuid)
        assert stored is not None
        (task,) = stored.tasks
        assert (task.status, task.result, task.notified) == ("failed", DEAD_TASK, True)
        assert DEAD_TASK in json.dumps(stored.messages)

    asyncio.run(scenario())


def test_idempotent_is_declared_and_the_memory_tool_is_not(tmp_path: Path) -> None:
    """`@tool(idempotent=True)` declares it; the default and the memory tool are not idempotent [CK1.3-a]."""
    from agent_ref.tools.memory import memory_tool

    calls = Calls()
    assert calls.tools(idempotent=True)[0].idempotent
    assert not calls.tools()[0].idempotent
    assert not memory_tool(tmp_path / "memories").idempotent
