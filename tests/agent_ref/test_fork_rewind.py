"""Fork and rewind of an agent's session (spec/agent-ref.md §S1), through real runs of the scripted model."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_ref import Agent, MemoryStore, ScriptedModel, SQLiteStore, StateError, default_tools
from agent_ref.cli.commands import main as cli_main
from agent_ref.store.state import encode_state
from agent_ref_support import assert_valid_responses, fast_retry, sse_lines

if TYPE_CHECKING:
    from pathlib import Path

CONFIRM = "Please confirm, then tell me what is 6 * 7"


def _agent(store: MemoryStore) -> Agent:
    return Agent(ScriptedModel(), tools=default_tools(), store=store, retry=fast_retry())


async def _run(agent: Agent, prompt: str) -> tuple[Any, list[bytes]]:
    lines: list[bytes] = []
    result = await agent.run(prompt, lines.append)
    assert_valid_responses(lines)
    return result, lines


async def _stored(store: MemoryStore, agent_uuid: str) -> bytes:
    state = await store.load(agent_uuid)
    assert state is not None
    return encode_state(state)


def test_fork_copies_history_new_id_original_untouched() -> None:
    """A fork is a new agent with a deep copy; running it leaves the original as stored [SE1.1-a] [SE1.1-d]."""

    async def scenario() -> None:
        store = MemoryStore()
        agent = _agent(store)
        await _run(agent, "What is 5 + (10 * 2)?")
        before = await _stored(store, agent.agent_uuid)
        fork = await agent.fork()
        assert fork.agent_uuid != agent.agent_uuid
        assert fork.state.messages == agent.state.messages
        assert fork.state.messages is not agent.state.messages
        assert fork.state.forked_from == agent.agent_uuid
        assert fork.state.usage.input_tokens == 0 < agent.state.usage.input_tokens  # [SE1.1-d]
        assert (await store.load(fork.agent_uuid)) is not None
        result, _ = await _run(fork, "What is 2 + 2?")
        assert "4" in result.final_text
        assert await _stored(store, agent.agent_uuid) == before
        assert len(fork.state.messages) == len(agent.state.messages) + 4
        assert [r.run_id for r in await store.runs(fork.agent_uuid)] == [result.run_id]

    asyncio.run(scenario())


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prompts=st.lists(st.sampled_from(["What is 3 * 4?", "hello there", "What is 7 - 2?"]), min_size=1, max_size=3))
def test_fork_then_run_leaves_original_byte_identical(prompts: list[str]) -> None:
    """Property: whatever the fork runs, the original's stored state does not change by a byte [SE1.1-a]."""

    async def scenario() -> None:
        store = MemoryStore()
        agent = _agent(store)
        await _run(agent, "What is 1 + 1?")
        before = await _stored(store, agent.agent_uuid)
        fork = await agent.fork()
        for prompt in prompts:
            await _run(fork, prompt)
        await fork.rewind(step=1)
        assert await _stored(store, agent.agent_uuid) == before

    asyncio.run(scenario())


def test_fork_of_a_paused_agent_resumes_independently() -> None:
    """The fork copies the pause under a run of its own; each is resumed on its own [SE1.1-c]."""

    async def scenario() -> None:
        store = MemoryStore()
        agent = _agent(store)
        paused, _ = await _run(agent, CONFIRM)
        (call,) = paused.pending_frontend_tools
        fork = await agent.fork()
        assert fork.state.status == "awaiting_frontend_tools"
        assert fork.state.run is not None
        assert fork.state.run.run_id != paused.run_id
        lines: list[bytes] = []
        forked = await fork.continue_with_tool_results(
            [{"tool_use_id": call.tool_use_id, "content": "no"}], lines.append
        )
        assert_valid_responses(lines)
        assert forked.stop_reason == "end_turn"
        assert (await store.load(agent.agent_uuid)).status == "awaiting_frontend_tools"  # type: ignore[union-attr]
        lines2: list[bytes] = []
        done = await agent.continue_with_tool_results(
            [{"tool_use_id": call.tool_use_id, "content": "yes"}], lines2.append
        )
        assert_valid_responses(lines2)
        assert "You confirmed" in done.final_text
        assert "You confirmed" not in forked.final_text
        assert await store.run_log(forked.run_id) == lines  # the fork's run log starts at its own response

    asyncio.run(scenario())


def test_fork_of_a_running_agent_is_refused() -> None:
    """A run in progress under a live lease cannot be forked [SE1.1-b]."""

    async def scenario() -> None:
        store = MemoryStore()
        agent = _agent(store)
        agent.state.status = "running"
        agent.state.lease_expires_at = 1e12
        with pytest.raises(StateError, match="running"):
            await agent.fork()

    asyncio.run(scenario())


def test_rewind_to_step_drops_later_history_and_runs() -> None:
    """rewind(step=N) keeps N assistant turns, the N-th's results; names the point [SE1.2-a] [SE1.2-c] [SE1.2-d] [SE1.2-e]."""

    async def scenario() -> None:
        store = MemoryStore()
        agent = _agent(store)
        first, _ = await _run(agent, "What is 5 + (10 * 2)?")
        second, _ = await _run(agent, "hello there")
        usage = agent.state.usage.input_tokens
        assert sum(1 for m in agent.state.messages if m["role"] == "assistant") == 3
        done = await agent.rewind(step=1)
        messages = agent.state.messages
        assert done.step == 1
        assert done.kept_messages == 3 == len(messages)
        assert messages[-1]["role"] == "user"
        assert [b["type"] for b in messages[-1]["content"]] == ["tool_result"]
        assert done.dropped_runs == [second.run_id]
        assert agent.state.rewound_runs == [second.run_id]
        assert agent.state.usage.input_tokens == usage  # [SE1.2-d]: accounts are kept
        assert [r.run_id for r in await store.runs(agent.agent_uuid)] == [first.run_id, second.run_id]
        stored = await store.load(agent.agent_uuid)
        assert stored is not None
        assert stored.messages == messages
        result, _ = await _run(agent, "What is 9 - 4?")  # the API context stays valid after the cut
        assert "5" in result.final_text

    asyncio.run(scenario())


def test_rewind_to_run_restores_the_context_before_it() -> None:
    """rewind(run=ID) returns the context to what it was before run ID [SE1.2-b]."""

    async def scenario() -> None:
        store = MemoryStore()
        agent = _agent(store)
        await _run(agent, "What is 5 + (10 * 2)?")
        snapshot = [dict(m) for m in agent.state.messages]
        second, _ = await _run(agent, "What is 2 + 2?")
        await _run(agent, "hello there")
        done = await agent.rewind(run=second.run_id)
        assert agent.state.messages == snapshot
        assert len(done.dropped_runs) == 2
        with pytest.raises(StateError, match="no run"):
            await agent.rewind(run=second.run_id)

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("kw", "match"), [({}, "one of them"), ({"step": 99}, "from 0 to"), ({"step": -1}, "from 0 to")]
)
def test_rewind_bad_arguments_are_clear(kw: dict[str, Any], match: str) -> None:
    """A bad rewind says what is wrong and changes nothing [SE1.2-a]."""

    async def scenario() -> None:
        store = MemoryStore()
        agent = _agent(store)
        await _run(agent, "hello there")
        before = await _stored(store, agent.agent_uuid)
        with pytest.raises(StateError, match=match):
            await agent.rewind(**kw)
        assert await _stored(store, agent.agent_uuid) == before

    asyncio.run(scenario())


def test_rewind_of_a_paused_agent_abandons_or_refuses() -> None:
    """Paused: a rewind into the paused run is refused; to before it abandons the pause [SE1.3-a]."""

    async def scenario() -> None:
        store = MemoryStore()
        agent = _agent(store)
        first, _ = await _run(agent, "What is 2 + 2?")
        paused, _ = await _run(agent, CONFIRM)
        before = await _stored(store, agent.agent_uuid)
        with pytest.raises(StateError, match="paused"):
            await agent.rewind(step=3)
        assert await _stored(store, agent.agent_uuid) == before
        done = await agent.rewind(run=paused.run_id)
        assert done.abandoned_run == paused.run_id
        assert agent.state.status == "idle"
        assert sum(1 for m in agent.state.messages if m["role"] == "assistant") == 2
        runs = await store.runs(agent.agent_uuid)
        assert [r.stop_reason for r in runs] == ["end_turn", "abandoned"]
        assert_valid_responses(await store.run_log(paused.run_id))
        assert first.run_id not in done.dropped_runs

    asyncio.run(scenario())


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_run_agent_fork_and_rewind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`run --agent` continues, `--fork` forks first, `rewind --to-step` cuts [RCSE1-a] [RCSE1-b]."""
    db = str(tmp_path / "a.db")
    code, out, err = _cli(capsys, "run", "What is 2 + 2?", "--db", db)
    assert code == 0
    assert_valid_responses(sse_lines(out))
    store = SQLiteStore(db)
    (summary,) = asyncio.run(store.agents())
    original = summary.agent_uuid
    before = asyncio.run(_stored_any(store, original))
    code, out, err = _cli(capsys, "run", "--agent", original, "--fork", "hello there", "--db", db)
    assert code == 0, err
    assert_valid_responses(sse_lines(out))
    assert f"from {original}" in err
    assert asyncio.run(_stored_any(store, original)) == before  # [RCSE1-a]: the original untouched
    code, out, err = _cli(capsys, "run", "--agent", original, "What is 3 * 3?", "--db", db)
    assert code == 0, err
    state = asyncio.run(store.load(original))
    assert state is not None
    assert sum(1 for m in state.messages if m["role"] == "assistant") == 4  # continued: 2 runs in one context
    code, out, err = _cli(capsys, "rewind", original, "--to-step", "2", "--db", db)
    assert code == 0, err
    assert "to step 2" in err
    state = asyncio.run(store.load(original))
    assert state is not None
    assert sum(1 for m in state.messages if m["role"] == "assistant") == 2
    code, out, err = _cli(capsys, "rewind", original, "--to-step", "9", "--db", db)
    assert code == 2
    assert "from 0 to 2" in err
    assert len(err.strip().splitlines()) == 1
    code, out, err = _cli(capsys, "run", "--fork", "hi", "--db", db)
    assert code == 2
    assert "--fork needs --agent" in err


async def _stored_any(store: Any, agent_uuid: str) -> bytes:
    state = await store.load(agent_uuid)
    assert state is not None
    return encode_state(state)


def test_rewind_to_a_run_whose_start_was_rewritten_is_refused() -> None:
    """A context rewritten before a run's start (as a compaction does) makes its mark stale: refused [SE1.2-b]."""

    async def scenario() -> None:
        store = MemoryStore()
        agent = _agent(store)
        await _run(agent, "What is 2 + 2?")
        second, _ = await _run(agent, "hello there")
        agent.state.messages[:4] = [{"role": "user", "content": [{"type": "text", "text": "<summary>…</summary>"}]}]
        agent.state.messages.insert(1, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
        with pytest.raises(StateError, match="compacted"):
            await agent.rewind(run=second.run_id)
        done = await agent.rewind(step=1)  # a step still works on what the context holds
        assert done.kept_messages == 2

    asyncio.run(scenario())
