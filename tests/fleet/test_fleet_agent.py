"""Background subagents across processes: the child runs on an ``agent-ref worker`` (spec scaleout §6.8, issue 30 §5).

The parent runs here with a ``PostgresStore`` and a ``BackgroundQueue`` on one database;
its background child is a ``subagent`` task a worker process (``--agent
fleet_support:fleet_agent``) claims, runs with a store on the same URL and completes. Every
parent stream is validated strictly (``assert_valid_responses``).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel
from agent_ref.cli.commands import main as agent_ref_main
from agent_ref.fleet.task_queue import RESULT_UNKNOWN, PostgresTaskQueue, Task
from agent_ref.run.background import BackgroundQueue
from agent_ref.store.postgres import PostgresStore
from agent_ref.store.state import NOTIFICATION_TAG
from agent_ref_support import assert_valid_responses, envelopes
from fleet_support import CHILD_SECONDS_ENV, SUBAGENTS, WorkerProcess

if TYPE_CHECKING:
    from collections.abc import Callable

    from agent_ref.run.finish import AgentResult

PROMPT = "Research tides in the background"
WORKER_ARGS = ("--agent", "fleet_support:fleet_agent", "--lease", "2", "--heartbeat", "0.4", "--poll", "0.2")


def _parent(url: str, queue: PostgresTaskQueue, model: ScriptedModel, idempotent: frozenset[str]) -> Agent:
    remote = BackgroundQueue(queue=queue, idempotent=idempotent, poll_seconds=0.2)
    return Agent(model, subagents=SUBAGENTS, store=PostgresStore(url), background_queue=remote)


def _notices(model: ScriptedModel) -> list[str]:
    return [
        b["text"]
        for r in model.requests
        for m in r["messages"]
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "text" and b["text"].startswith(NOTIFICATION_TAG)
    ]


def _spawned(lines: list[bytes], parent: str) -> dict[str, Any]:
    (result,) = [e for e in envelopes(lines) if e["agent"] == parent and e["type"] == "tool_result"]
    started: dict[str, Any] = json.loads(result["delta"])
    return started


async def _run_parent(
    url: str, idempotent: frozenset[str], during: Callable[[PostgresTaskQueue], Any] | None = None
) -> tuple[AgentResult, list[bytes], ScriptedModel, Task, Agent]:
    queue = PostgresTaskQueue(url, poll_seconds=0.2)
    model = ScriptedModel()
    agent = _parent(url, queue, model, idempotent)
    lines: list[bytes] = []
    try:
        run = asyncio.ensure_future(agent.run(PROMPT, lines.append))
        if during is not None:
            await during(queue)
        result = await asyncio.wait_for(run, timeout=90)
        (task,) = await queue.tasks(parent=agent.agent_uuid)
    finally:
        await queue.aclose()
        await agent.store.aclose()  # type: ignore[attr-defined]
    return result, lines, model, task, agent


def test_scaleout_6_8_a_a_background_child_runs_on_a_worker_process(
    pg_schema_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    """The child is claimed by another process; the parent is notified and answers with its result [P6.8-a] [P6.8-b]."""
    worker = workers(pg_schema_url, "w1", *WORKER_ARGS)
    result, lines, model, task, agent = asyncio.run(_run_parent(pg_schema_url, frozenset()))
    assert_valid_responses(lines)
    assert result.stop_reason == "end_turn"
    assert task.status == "completed"
    assert task.kind == "subagent"
    assert worker.logged_completions() == [(task.task_id, 1)]  # the worker process ran it, not this one
    assert task.result["agent"] == _spawned(lines, agent.agent_uuid)["agent"]
    (notice,) = _notices(model)
    assert 'status="completed"' in notice
    assert "Findings on tides" in notice
    assert result.final_text.startswith("The background task reported back: Findings on tides")
    # the remote child's envelopes are not in the parent's stream (spec §6.8-b): one agent only
    assert {e["agent"] for e in envelopes(lines)} == {agent.agent_uuid}
    assert (agent.state.tasks[0].status, agent.state.tasks[0].notified) == ("completed", True)
    assert worker.proc.poll() is None


def _killer(
    workers: Callable[..., WorkerProcess], url: str, started: list[WorkerProcess]
) -> Callable[[PostgresTaskQueue], Any]:
    async def kill_mid_task(queue: PostgresTaskQueue) -> None:
        first = workers(url, "slow", *WORKER_ARGS, env={CHILD_SECONDS_ENV: "30"})
        started.append(first)
        deadline = time.monotonic() + 60
        while True:
            running = [t for t in await queue.tasks() if t.status == "running" and t.lease_owner == "slow"]
            if running:
                break
            assert time.monotonic() < deadline, "the slow worker never claimed the task"
            await asyncio.sleep(0.1)
        first.kill()  # SIGKILL mid-task: no release, no failure recorded; the lease runs out
        started.append(workers(url, "fast", *WORKER_ARGS))

    return kill_mid_task


def test_scaleout_6_8_c_a_killed_worker_s_idempotent_child_is_run_by_another(
    pg_schema_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    """A worker killed -9 mid-child: after the lease another worker runs it again; the parent gets it [P6.8-c]."""
    started: list[WorkerProcess] = []
    result, lines, model, task, _ = asyncio.run(
        _run_parent(pg_schema_url, frozenset({"researcher"}), _killer(workers, pg_schema_url, started))
    )
    assert_valid_responses(lines)
    assert task.status == "completed"
    assert task.attempts == 2
    (fast,) = [w for w in started if w.name == "fast"]
    assert fast.logged_completions() == [(task.task_id, 2)]  # the second worker ran it again
    (notice,) = _notices(model)
    assert 'status="completed"' in notice
    assert result.final_text.startswith("The background task reported back: Findings on tides")


def test_scaleout_6_8_c_a_killed_worker_s_other_child_fails_result_unknown(
    pg_schema_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    """Not declared idempotent: the task fails "result unknown" after the lease; the parent is told so [P6.8-c]."""
    started: list[WorkerProcess] = []
    result, lines, model, task, agent = asyncio.run(
        _run_parent(pg_schema_url, frozenset(), _killer(workers, pg_schema_url, started))
    )
    assert_valid_responses(lines)
    assert task.status == "failed"
    assert task.error.startswith(RESULT_UNKNOWN)
    assert task.attempts == 1
    (notice,) = _notices(model)
    assert 'status="failed"' in notice
    assert RESULT_UNKNOWN in notice
    assert result.stop_reason == "end_turn"
    assert agent.state.tasks[0].status == "failed"


def test_rc10_a_agent_ref_worker_is_a_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    """``agent-ref worker`` exists; a non-PostgreSQL --db is refused in one line, status 2 [RC10-a]."""
    assert agent_ref_main(["worker", "--db", "sqlite:///x.db"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agent-ref worker: error: --db 'sqlite:///x.db'")
    assert "Traceback" not in err
    with pytest.raises(SystemExit):
        agent_ref_main(["worker", "--help"])
    assert "--agent MODULE:NAME" in capsys.readouterr().out
