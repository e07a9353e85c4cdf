"""An agent's background tasks read and joined from outside the agent (spec agent-ref [BJ1-a], [BJ1-b]).

Owns: the list of one agent's background tasks as plain JSON objects (``agent_tasks``: its
stored state's records, each queue task brought up to date from its row, and the queue's
earlier tasks of that agent), and waiting, bounded, until every queue task has ended
(``join_tasks``). Read-only: neither the agent's state nor a queue row is written, so a
later run of the agent settles and notifies them as [SA3-b] says. Used by ``agent-ref
tasks`` (``cli/tasks_cmd.py``) and ``GET /agents/{agent_id}/tasks`` (``server/tasks.py``).
Does not own: who may read an agent (the server's owner check), the queue (``task_queue.py``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Final

from .task_queue import UnknownTaskError

if TYPE_CHECKING:
    from ..store.core import Store
    from ..store.state import BackgroundTask
    from .task_queue import Task, TaskQueue

__all__ = ["ENDED", "agent_tasks", "join_tasks", "queue_for"]

#: A task's end states (spec agent-ref §14.2-a).
ENDED: Final = frozenset({"completed", "failed", "killed"})


def queue_for(store: Store) -> TaskQueue | None:
    """The task queue on ``store``'s database: a ``PostgresTaskQueue`` for a PostgreSQL store, else ``None``.

    Only PostgreSQL has a queue that other processes share (spec scaleout §6); with SQLite
    background tasks run in the process that started them and live in its state alone.
    """
    url = getattr(store, "url", None)
    if not isinstance(url, str) or not url.startswith(("postgresql://", "postgres://")):
        return None
    from .task_queue import PostgresTaskQueue

    return PostgresTaskQueue(url)


def _from_row(row: Task, record: BackgroundTask | None) -> dict[str, Any]:
    payload = row.payload if isinstance(row.payload, dict) else {}
    item: dict[str, Any] = {
        "task_id": row.task_id,
        "subagent": record.name if record is not None else str(payload.get("subagent", "")),
        "agent": record.agent_uuid if record is not None else str(payload.get("agent_uuid", "")),
        "status": row.status,
        "queue": True,
    }
    if row.status == "completed":
        item["result"] = str(row.result.get("final_text", "")) if isinstance(row.result, dict) else ""
    elif row.done:
        item["result"] = row.error or row.status
    return item


def _from_record(record: BackgroundTask, *, gone: bool = False) -> dict[str, Any]:
    item: dict[str, Any] = {
        "task_id": record.task_id,
        "subagent": record.name,
        "agent": record.agent_uuid,
        "status": "failed" if gone else record.status,
        "queue": record.detached,
    }
    if gone:
        item["result"] = "the task is no longer on the queue"
    elif record.status in ENDED:
        item["result"] = record.result
    return item


async def agent_tasks(store: Store, agent_uuid: str, queue: TaskQueue | None) -> list[dict[str, Any]] | None:
    """Every background task of ``agent_uuid`` as JSON objects; ``None`` when the store has no such agent.

    Each is ``{"task_id", "subagent", "agent", "status", "queue", "result"?}`` (``result``
    once it has ended; ``queue``: it runs on the task queue and can be waited for from
    outside). The queue's tasks come first, oldest first, as their rows stand; then the
    tasks of the stored state that the queue does not hold (in-process ones), as recorded.
    """
    state = await store.load(agent_uuid)
    if state is None:
        return None
    records = {r.task_id: r for r in state.tasks}
    rows = [] if queue is None else [r for r in await queue.tasks(parent=agent_uuid) if r.kind == "subagent"]
    on_queue = {r.task_id for r in rows}
    items = [_from_row(row, records.get(row.task_id)) for row in rows]
    for record in state.tasks:
        if record.task_id not in on_queue:
            gone = record.detached and queue is not None and record.status not in ENDED
            items.append(_from_record(record, gone=gone))
    return items


async def join_tasks(
    store: Store, agent_uuid: str, queue: TaskQueue | None, timeout: float
) -> list[dict[str, Any]] | None:
    """``agent_tasks`` once every queue task of the agent has ended, or ``timeout`` seconds have passed.

    The caller tells the two apart by the statuses (a queue task not in ``ENDED`` is still
    going). An in-process task still going is not waited for: it lives in the process that
    runs the agent, which no one outside can wait on. ``None`` when the store has no such agent.
    """
    deadline = time.monotonic() + timeout
    items = await agent_tasks(store, agent_uuid, queue)
    if items is None or queue is None:
        return items
    for item in items:
        left = deadline - time.monotonic()
        if item["queue"] and item["status"] not in ENDED and left > 0:
            try:
                await queue.wait(item["task_id"], left)
            except UnknownTaskError:
                continue  # gone meanwhile: the list read below says so
    return await agent_tasks(store, agent_uuid, queue)
