"""Faults leave the run usable (issue 12 §4; spec/agent-ref.md §5.5, §6.2-b, §10)."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agent_ref import (
    Agent,
    Fault,
    MemoryStore,
    ReplayModel,
    RetryPolicy,
    ScriptedModel,
    SQLiteStore,
    StateError,
    default_tools,
    tool,
)
from agent_ref_support import assert_valid_responses, blocks, drop, envelopes, fast_retry, meta, run
from cli_support import module_cli as _cli

SRC = Path(__file__).resolve().parents[2] / "src"
TESTS = Path(__file__).resolve().parents[1]
CONFIRM = "Please confirm, then tell me what is 6 * 7"


def assert_history_valid(messages: list[dict[str, Any]]) -> None:
    """The Messages API's rule: every tool_use is answered in the next (user) turn, roles alternate."""
    roles = [m["role"] for m in messages]
    assert all(a != b for a, b in itertools.pairwise(roles)), roles
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        uses = [b["id"] for b in message["content"] if b.get("type") == "tool_use"]
        if not uses:
            continue
        assert i + 1 < len(messages), f"tool_use {uses} left unanswered at the end of the history"
        answered = [b["tool_use_id"] for b in messages[i + 1]["content"] if b.get("type") == "tool_result"]
        assert answered[: len(uses)] == uses, (uses, answered)


def _blocking_tool(started: asyncio.Event) -> Any:
    @tool(name="calculator")
    async def slow(expression: str) -> str:
        """Never finishes on its own."""
        started.set()
        await asyncio.sleep(3600)
        return expression

    return slow


def test_spec_5_5_b_abort_while_a_tool_runs_answers_the_call_and_the_next_run_works() -> None:
    """Abort during a tool: a cancelled is_error result in stream and history; the next run's request is valid [R5.5-b]."""
    store = MemoryStore()
    model = ScriptedModel()
    started = asyncio.Event()
    lines: list[bytes] = []

    async def scenario() -> tuple[Any, Any]:
        agent = Agent(model, tools=[_blocking_tool(started)], store=store, retry=fast_retry())
        task = asyncio.ensure_future(agent.run("What is 1 + 2?", lines.append))
        await started.wait()
        agent.abort()
        aborted = await task
        again = await Agent.load(agent.agent_uuid, store, model, tools=default_tools())
        return aborted, await again.run("And what is 2 + 3?", drop)

    aborted, after = asyncio.run(scenario())
    assert aborted.stop_reason == "aborted"
    result = next(b for b in blocks(lines) if b["type"] == "tool_result")
    assert result["content"].startswith("cancelled: the run was aborted")
    assert meta(lines, "meta_final")["stop_reason"] == "aborted"
    # the next run's first request carries a history the API accepts
    assert_history_valid(model.requests[-2]["messages"])
    assert after.stop_reason == "end_turn"
    assert "2 + 3 = 5" in after.final_text


@pytest.mark.agent_stream_codes("W161")
def test_spec_5_5_c_cancelled_task_closes_the_run_in_the_store() -> None:
    """Client gone (task cancelled) while a tool runs: the stored log ends with [DONE], the agent is idle [R5.5-c] [R9.2-a]."""
    store = MemoryStore()
    started = asyncio.Event()
    lines: list[bytes] = []

    async def scenario() -> Any:
        agent = Agent(ScriptedModel(), tools=[_blocking_tool(started)], store=store, retry=fast_retry())
        task = asyncio.ensure_future(agent.run("What is 1 + 2?", lines.append))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return agent

    agent = asyncio.run(scenario())
    assert lines[-1] != b"[DONE]"  # the client saw a cut stream (the code the marker declares)
    stored = asyncio.run(store.load(agent.agent_uuid))
    assert stored is not None
    assert stored.status == "idle"
    assert_history_valid(stored.messages)
    (run_record,) = asyncio.run(store.runs(agent.agent_uuid))
    assert run_record.stop_reason == "aborted"
    (response,) = assert_valid_responses(asyncio.run(store.run_log(run_record.run_id)))
    assert response[: len(lines)] == lines  # what was sent, then the closing lines
    assert meta(response, "error")["message"] == "the run was cancelled: the client went away"


@pytest.mark.agent_stream_codes("E120", "W161")  # what the client got: three lines, then nothing
def test_spec_5_5_c_a_sink_that_fails_closes_the_run_and_reraises() -> None:
    """The sink raises (broken pipe): the run is stored closed, the error reaches the caller [R5.5-c]."""
    store = MemoryStore()
    seen: list[bytes] = []

    def sink(line: bytes) -> None:
        if len(seen) == 3:
            raise BrokenPipeError("client gone")
        seen.append(line)

    agent = Agent(ScriptedModel(), tools=default_tools(), store=store, retry=fast_retry())
    with pytest.raises(BrokenPipeError):
        run(agent.run("What is 5 + (10 * 2)?", sink))
    stored = asyncio.run(store.load(agent.agent_uuid))
    assert stored is not None
    assert stored.status == "idle"
    (record,) = asyncio.run(store.runs(agent.agent_uuid))
    assert record.stop_reason == "aborted"
    assert_valid_responses(asyncio.run(store.run_log(record.run_id)))


def test_spec_1_3_a_invalid_tool_json_reaches_the_model_as_an_error_result() -> None:
    """Input JSON that is invalid (not cut) is answered is_error; the run goes on [R1.3-a]."""

    def call(partials: list[str]) -> list[dict[str, Any]]:
        start: dict[str, Any] = {"id": "m1", "type": "message", "role": "assistant", "model": "replay-x"}
        start["content"] = []
        start |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}
        events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        block = {"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": {}}
        events.append({"type": "content_block_start", "index": 0, "content_block": block})
        for part in partials:
            delta = {"type": "input_json_delta", "partial_json": part}
            events.append({"type": "content_block_delta", "index": 0, "delta": delta})
        events += [
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
            {"type": "message_stop"},
        ]
        return events

    answer = [
        *call([])[:1],
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "retrying then"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    model = ReplayModel([call(['{"expression": "1+1"', ', "x": tru}']), answer])
    lines: list[bytes] = []
    result = run(Agent(model, tools=default_tools(), retry=fast_retry()).run("hi", lines.append))
    assert result.stop_reason == "end_turn"
    sent = model.server.requests[1]["messages"][-1]["content"][0]
    assert sent["is_error"] is True
    assert "not valid JSON" in sent["content"][0]["text"]
    assert next(b for b in blocks(lines) if b["type"] == "tool_call")["input"] == {}


def test_spec_6_2_b_retry_after_is_honoured_bounded_and_said_in_the_stream() -> None:
    """A 429 with retry-after: the wait is the header's (capped), and a notice says so [R6.2-b]."""
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    policy = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.002, max_retry_after=20.0, sleep=sleep)
    model = ScriptedModel(faults=[Fault("status", status=429, retry_after="7"), Fault("status", retry_after="300")])
    lines: list[bytes] = []
    result = run(Agent(model, tools=default_tools(), retry=policy).run("What is 2 + 2?", lines.append))
    assert result.stop_reason == "end_turn"
    assert waited == [7.0, 20.0]
    notices = [json.loads(e["delta"]) for e in envelopes(lines) if e["type"] == "error"]
    assert [(n["wait_seconds"], n["retry_after_seconds"], n["discard_blocks"]) for n in notices] == [
        (7.0, 7.0, 0),
        (20.0, 300.0, 0),
    ]


def test_spec_6_2_b_retry_after_header_forms() -> None:
    """retry-after-ms wins; seconds; HTTP dates; junk is absent [R6.2-b]."""
    from agent_ref.run.retry import retry_after

    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({"retry-after": "-1"}) is None
    assert retry_after({}) is None
    past = retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert past is None  # a date in the past is no wait


def test_spec_10_3_abandon_closes_a_pause_and_the_agent_runs_again(tmp_path: Path) -> None:
    """abandon(): is_error results for the pending calls, stop reason abandoned, a valid log [R10.3-a]."""
    store = SQLiteStore(tmp_path / "a.db")
    model = ScriptedModel()
    paused = run(Agent(model, tools=default_tools(), store=store, retry=fast_retry()).run(CONFIRM, drop))
    assert paused.stop_reason == "awaiting_frontend_tools"
    closing: list[bytes] = []

    async def scenario() -> tuple[Any, Any]:
        agent = await Agent.load(paused.agent_uuid, store, model, tools=default_tools())
        done = await agent.abandon(closing.append, reason="the user closed the tab")
        return done, await agent.run("What is 2 + 3?", drop)

    done, after = asyncio.run(scenario())
    assert done.stop_reason == "abandoned"
    results = [b for b in blocks(closing) if b["type"] == "tool_result"]
    assert [r["content"] for r in results] == ["abandoned: the user closed the tab"]
    assert meta(closing, "meta_init")["resume"]["tool_use_ids"] == [paused.pending_frontend_tools[0].tool_use_id]
    assert meta(closing, "meta_final")["stop_reason"] == "abandoned"
    assert_history_valid(model.requests[-2]["messages"])
    assert after.stop_reason == "end_turn"
    responses = assert_valid_responses(asyncio.run(store.run_log(paused.run_id)))
    assert len(responses) == 2
    assert responses[1] == closing
    with pytest.raises(StateError, match="no paused run"):
        asyncio.run(Agent(model, store=MemoryStore()).abandon())


class _CountingStore(MemoryStore):
    def __init__(self) -> None:
        super().__init__()
        self.renewals = 0

    async def renew_lease(self, agent_uuid: str, owner: str, expires_at: float) -> bool:
        ok = await super().renew_lease(agent_uuid, owner, expires_at)
        self.renewals += ok
        return ok


def test_spec_10_2_a_a_live_run_renews_its_lease_and_is_refused_elsewhere() -> None:
    """While a run goes on its lease is renewed; another process is refused [R10.2-a]."""
    store = _CountingStore()
    started = asyncio.Event()

    async def scenario() -> None:
        agent = Agent(
            ScriptedModel(), tools=[_blocking_tool(started)], store=store, retry=fast_retry(), lease_seconds=0.3
        )
        task = asyncio.ensure_future(agent.run("What is 1 + 2?", drop))
        await started.wait()
        for _ in range(400):  # bounded: until two renewals happened
            if store.renewals >= 2:
                break
            await asyncio.sleep(0.05)
        other = await Agent.load(agent.agent_uuid, store, ScriptedModel(), tools=default_tools(), lease_seconds=0.3)
        assert store.renewals >= 2
        assert other.state.lease_owner == agent.state.lease_owner
        with pytest.raises(StateError, match="running in another process"):
            await other.run("hello", drop)
        agent.abort()
        assert (await task).stop_reason == "aborted"
        stored = await store.load(agent.agent_uuid)
        assert stored is not None
        assert (stored.status, stored.lease_owner) == ("idle", None)

    asyncio.run(scenario())


_VICTIM = """
import asyncio, sys
sys.path[:0] = [{src!r}, {tests!r}]
from agent_ref import Agent, ScriptedModel, SQLiteStore, tool

@tool(name="calculator")
async def hang(expression: str) -> str:
    \"\"\"Hangs until killed.\"\"\"
    print("tool started", flush=True)
    await asyncio.sleep(3600)
    return expression

async def main():
    agent = Agent(ScriptedModel(), tools=[hang], store=SQLiteStore({db!r}), lease_seconds=0.5,
                  agent_uuid="victim-0000")
    await agent.run("What is 1 + 2?", lambda line: None)

asyncio.run(main())
"""


def test_spec_10_2_b_a_run_killed_with_sigkill_is_seen_dead_and_closed(tmp_path: Path) -> None:
    """kill -9 mid-run: the lease runs out, `runs` shows it dead, the next run closes it as lost [R10.2-a] [R10.2-b]."""
    db = tmp_path / "k.db"
    script = textwrap.dedent(_VICTIM).format(src=str(SRC), tests=str(TESTS), db=str(db))
    victim = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline() == "tool started\n"
    finally:
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait()
        if victim.stdout is not None:
            victim.stdout.close()
    store = SQLiteStore(db)
    (summary,) = asyncio.run(store.agents())
    assert summary.status == "running"
    for _ in range(200):  # bounded wait for the 0.5 s lease to run out
        if not summary.lease_alive():
            break
        time.sleep(0.05)
    assert not summary.lease_alive()
    listing = _cli("runs", "--db", str(db), "--format", "json", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    (row,) = json.loads(listing.stdout)["agents"]
    assert (row["agent_uuid"], row["status"], row["owner_alive"]) == ("victim-0000", "running", False)

    model = ScriptedModel()
    agent = asyncio.run(Agent.load("victim-0000", store, model, tools=default_tools()))
    after = run(agent.run("What is 2 + 3?", drop))
    assert after.stop_reason == "end_turn"
    lost, done = asyncio.run(store.runs("victim-0000"))
    assert (lost.stop_reason, done.stop_reason) == ("lost", "end_turn")
    # the lost prompt was taken back out: the model saw only the new one
    assert [m["content"][0]["text"] for m in model.requests[0]["messages"]] == ["What is 2 + 3?"]
    (closing,) = assert_valid_responses(asyncio.run(store.run_log(lost.run_id)))
    assert meta(closing, "error")["type"] == "lost"
