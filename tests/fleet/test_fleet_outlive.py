"""A background child that outlives its parent's response, finished by a worker process (spec agent-ref §SA).

The parent's first response ends while its task is still pending on the PostgreSQL queue
(``BackgroundQueue(outlive=True)``, [SA3-a]); only then is an ``agent-ref worker`` process
started, which claims and completes it. A fresh ``Agent.load`` of the parent on a new store
connection (as another process would) is notified of the result in its next response
([SA3-b]). Every parent stream is validated strictly.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from agent_ref import Agent, ScriptedModel
from agent_ref.fleet.task_queue import PostgresTaskQueue
from agent_ref.run.background import BackgroundQueue
from agent_ref.store.postgres import PostgresStore
from agent_ref_support import assert_valid_responses
from fleet_support import SUBAGENTS, WorkerProcess

if TYPE_CHECKING:
    from collections.abc import Callable

WORKER_ARGS = ("--agent", "fleet_support:fleet_agent", "--lease", "2", "--heartbeat", "0.4", "--poll", "0.2")


def _options(queue: PostgresTaskQueue) -> dict[str, Any]:
    return {"subagents": SUBAGENTS, "background_queue": BackgroundQueue(queue=queue, poll_seconds=0.2, outlive=True)}


async def _first(url: str) -> tuple[str, str, list[bytes]]:
    """The parent's first response: it starts the task and ends with the task pending."""
    queue = PostgresTaskQueue(url, poll_seconds=0.2)
    store = PostgresStore(url)
    lines: list[bytes] = []
    try:
        agent = Agent(ScriptedModel(), store=store, **_options(queue))
        result = await asyncio.wait_for(agent.run("Research tides in the background", lines.append), timeout=60)
        assert result.stop_reason == "end_turn"
        (row,) = await queue.tasks(parent=agent.agent_uuid)
        assert row.status == "pending"
    finally:
        await queue.aclose()
        await store.aclose()
    return agent.agent_uuid, row.task_id, lines


async def _wait_done(url: str, task_id: str) -> str:
    queue = PostgresTaskQueue(url, poll_seconds=0.2)
    try:
        row = await queue.wait(task_id, 1.0)
        for _ in range(90):
            if row.done:
                break
            row = await queue.wait(task_id, 1.0)
        return row.status
    finally:
        await queue.aclose()


async def _later(url: str, agent_uuid: str) -> tuple[str, list[bytes], bool]:
    """A later response of the parent, loaded afresh from the store."""
    queue = PostgresTaskQueue(url, poll_seconds=0.2)
    store = PostgresStore(url)
    lines: list[bytes] = []
    try:
        agent = await Agent.load(agent_uuid, store, ScriptedModel(), **_options(queue))
        result = await asyncio.wait_for(agent.run("Join the background task", lines.append), timeout=60)
        (record,) = agent.state.tasks
        seen = record.notified and record.status == "completed"
    finally:
        await queue.aclose()
        await store.aclose()
    return result.final_text, lines, seen


def test_sa3_b_a_child_finished_by_a_worker_process_is_joined_by_a_later_response(
    pg_schema_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    """The response ends with the task pending; a worker process finishes it; the reloaded parent is told [SA3-a] [SA3-b]."""
    agent_uuid, task_id, first_lines = asyncio.run(_first(pg_schema_url))
    assert_valid_responses(first_lines)
    worker = workers(pg_schema_url, "w1", *WORKER_ARGS)
    assert asyncio.run(_wait_done(pg_schema_url, task_id)) == "completed"
    assert worker.logged_completions() == [(task_id, 1)]  # the worker process ran it, not this one
    text, later_lines, seen = asyncio.run(_later(pg_schema_url, agent_uuid))
    assert_valid_responses(later_lines)
    assert text.startswith("The background task reported back: Findings on tides")
    assert seen
