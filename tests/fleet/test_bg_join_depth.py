"""A worker-built background child stands at its parent's depth, under its root's limit (spec agent-ref [SA4-a]).

The root runs here with a ``PostgresStore`` and a ``BackgroundQueue``; its background child
is claimed by an ``agent-ref worker`` process whose agent (``fleet_support:fleet_agent``) has
the default depth limit (3). The child is asked to spawn a grandchild: with the root's
``max_subagent_depth=1`` it is not offered the spawning tool (it says so), with 2 it is and
the grandchild's findings come back. Every parent stream is validated strictly.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from agent_ref import Agent, ScriptedModel
from agent_ref.fleet.task_queue import MemoryTaskQueue, PostgresTaskQueue, Task
from agent_ref.fleet.worker import SUBAGENT_KIND, SubagentTask, Worker, child_runner, subagent_handler
from agent_ref.run.background import BackgroundQueue
from agent_ref.run.subagents import SUBAGENT_TOOL
from agent_ref.store.core import MemoryStore
from agent_ref.store.postgres import PostgresStore
from agent_ref_support import assert_valid_responses
from fleet_support import SUBAGENTS, WorkerProcess, fleet_agent

if TYPE_CHECKING:
    from collections.abc import Callable

WORKER_ARGS = ("--agent", "fleet_support:fleet_agent", "--lease", "2", "--heartbeat", "0.4", "--poll", "0.2")


def _call(prompt: str, *, background: bool = False) -> str:
    sdk: dict[str, Any] = {"subagent_type": "researcher", "description": "one level", "prompt": prompt}
    if background:
        sdk["run_in_background"] = True
    return f"call {SUBAGENT_TOOL} with {json.dumps(sdk)}"


#: The root spawns a background child whose own task is to spawn a grandchild on tides.
PROMPT = _call(_call("Research tides"), background=True)


async def _root(url: str, max_depth: int) -> tuple[Task, list[bytes]]:
    queue = PostgresTaskQueue(url, poll_seconds=0.2)
    store = PostgresStore(url)
    lines: list[bytes] = []
    try:
        remote = BackgroundQueue(queue=queue, poll_seconds=0.2)
        agent = Agent(
            ScriptedModel(), store=store, subagents=SUBAGENTS, background_queue=remote, max_subagent_depth=max_depth
        )
        await asyncio.wait_for(agent.run(PROMPT, lines.append), timeout=90)
        (row,) = await queue.tasks(parent=agent.agent_uuid)
    finally:
        await queue.aclose()
        await store.aclose()
    return row, lines


@pytest.mark.parametrize(("max_depth", "offered"), [(1, False), (2, True)])
def test_sa4_a_a_worker_built_child_has_its_roots_depth_limit(
    pg_schema_url: str, workers: Callable[..., WorkerProcess], max_depth: int, *, offered: bool
) -> None:
    """At the root's limit the worker's child has no spawning tool; one level above it, it has [SA4-a]."""
    worker = workers(pg_schema_url, "w1", *WORKER_ARGS)
    row, lines = asyncio.run(_root(pg_schema_url, max_depth))
    assert_valid_responses(lines)
    assert row.status == "completed", row.error
    assert worker.logged_completions() == [(row.task_id, 1)]  # the worker process built and ran the child
    assert row.payload["depth"] == 1
    assert row.payload["max_depth"] == max_depth
    final = row.result["final_text"]
    if offered:
        assert "Findings on tides" in final
    else:
        assert f"no tool named {SUBAGENT_TOOL!r} is offered" in final
        assert "Findings on tides" not in final


def _payload(**changes: Any) -> dict[str, Any]:
    task = SubagentTask(subagent="researcher", task="Research tides", agent_uuid="c", parent_agent="p", **changes)
    return msgspec.to_builtins(task)  # type: ignore[no-any-return]


async def _ran(payload: dict[str, Any]) -> Task:
    queue = MemoryTaskQueue()
    worker = Worker(queue, {SUBAGENT_KIND: subagent_handler(child_runner(fleet_agent, MemoryStore))})
    task = await queue.enqueue(SUBAGENT_KIND, payload)
    await worker.run(max_tasks=1)
    row = await queue.get(task.task_id)
    assert row is not None
    return row


def test_sa4_a_a_child_past_its_roots_limit_fails_saying_so() -> None:
    """A payload deeper than its limit fails naming both; a depth below 1 is refused as a bad payload [SA4-a]."""
    past = asyncio.run(_ran(_payload(depth=3, max_depth=2)))
    assert past.status == "failed"
    assert past.error == "the child's depth 3 is past its root's max_subagent_depth 2"
    low = asyncio.run(_ran({**_payload(), "depth": 0}))
    assert low.status == "failed"
    assert low.error.startswith("the payload of a 'subagent' task is not a SubagentTask: Expected `int` >= 1")
    assert "$.depth" in low.error


def test_sa4_a_an_older_payload_keeps_the_workers_own_limit() -> None:
    """A payload without depth fields (enqueued before them) runs as a root's child under the worker's limit [SA4-a]."""
    old = _payload()
    del old["depth"], old["max_depth"]
    row = asyncio.run(_ran(old))
    assert row.status == "completed", row.error
    assert "Findings on tides" in row.result["final_text"]
