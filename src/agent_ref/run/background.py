"""Background tasks: subagents that run while their parent goes on (seed 004 Background Task Flow).

Owns: starting a child in the background (``start``: the spawning call is answered at once
with a task id, spec ``spec/agent-ref.md`` §14.1), the task's lifecycle (pending → running →
completed | failed | killed, §14.2), the ``task_status`` tool (``status_tool``, §14.3),
telling the parent (``deliver``: a notification before its next model call; ``wait_unseen``:
one more step when it would end with results it has not seen, §14.4), waiting before a
pause (``wait_running``, §14.5) and killing the tasks when the run ends otherwise
(``kill_all``, §14.6). Does not own: running a child (``run/subagent_run.py``) or the loop
(``run/loop.py``). Functions take the parent's ``RunContext`` (or the stored state they read).

Across processes (spec scaleout §6.8): with ``AgentOptions.background_queue`` (a
``BackgroundQueue``) a task is a ``subagent`` row of the task queue that any
``agent-ref worker`` claims; the parent's side waits on the queue (``_run_remote``) and
updates the same ``BackgroundTask`` record, so polling, notifying, waiting and killing
are unchanged for the loop. The worker's side is ``worker.child_runner``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..policy import scrub
from ..store.record import append_user
from ..store.state import NOTIFICATION_TAG, BackgroundTask
from ..tools.core import Tool, ToolCallRequest, ToolOutcome, outcome, tool
from .call_model import close_open
from .finish import STOP_ABORTED, STOP_ERROR, STOP_INTERRUPTED
from .subagent_run import make_child, nest

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..fleet.task_queue import Task, TaskQueue
    from ..store.state import AgentState
    from .context import ChildAgent, RunContext
    from .subagents import AgentSpec

log = logging.getLogger("agent_ref")

#: The polling tool an agent with subagents gets (spec §14.3).
TASK_STATUS_TOOL: Final = "task_status"
#: The end states of a task (spec §14.2).
TERMINAL: Final = frozenset({"completed", "failed", "killed"})
#: Followers of detached queue tasks let go when their response ended ([SA3-a]): not a kill.
_RELEASED: Final[weakref.WeakSet[asyncio.Task[None]]] = weakref.WeakSet()


@dataclass(frozen=True, slots=True, kw_only=True)
class BackgroundQueue:
    """Run background subagents as tasks of a queue that worker processes claim (spec scaleout §6.8-a).

    Attributes:
        queue: the task queue (``PostgresTaskQueue`` on the store's database, across processes).
        idempotent: names of subagents whose task may run again after a worker died mid-task;
            any other one fails ``result unknown`` instead (spec scaleout §6.4-a).
        max_attempts: claims a task may have before it fails.
        poll_seconds: how often the parent re-reads a task it waits on (it is woken by NOTIFY too).
        outlive: a task does not hold its response: the response ends while it runs, and a later
            response of the agent (in any process) is notified of it or joins it with
            ``task_status(wait=true)`` (spec [SA3-a]).
    """

    queue: TaskQueue
    idempotent: frozenset[str] = field(default_factory=frozenset)
    max_attempts: int = 3
    poll_seconds: float = 0.5
    outlive: bool = False


async def start(ctx: RunContext, call: ToolCallRequest, name: str, spec: AgentSpec, task: str) -> ToolOutcome:
    """Start ``name`` on ``task`` in the background; the call's result is the task id, at once (spec §14.1)."""
    child = make_child(ctx, spec, background=True)
    remote: BackgroundQueue | None = getattr(ctx.options, "background_queue", None)
    if remote is not None:
        permissions = msgspec.to_builtins(child.state.permissions)  # [AP3-b]: narrowed here, applied by the worker
        return await _start_remote(ctx, call, name, child.agent_uuid, task, remote, permissions)
    nest(ctx, child, call.id, name)
    record = BackgroundTask(
        task_id="task_" + uuid.uuid4().hex[:16],
        tool_use_id=call.id,
        name=name,
        agent_uuid=child.agent_uuid,
        task=task,
    )
    ctx.state.tasks.append(record)
    ctx.live_tasks[record.task_id] = asyncio.ensure_future(_run(ctx, child, record))
    started = {"task_id": record.task_id, "status": record.status, "subagent": name, "agent": child.agent_uuid}
    return outcome(ctx.emitter, call, json.dumps(started))


async def _run(ctx: RunContext, child: ChildAgent, record: BackgroundTask) -> None:
    record.status = "running"
    await ctx.fire(
        "SubagentStart", tool_name=record.name, tool_use_id=record.tool_use_id, subagent_uuid=child.agent_uuid
    )
    try:
        result = await child.run(record.task, ctx.response.send_one)
    except asyncio.CancelledError:
        record.status = "killed"
        raise
    except Exception as exc:  # spec §14.2: a task that cannot run fails; the parent goes on
        log.exception("background task %s (%s) failed", record.task_id, record.name)
        record.status = "failed"
        record.result = scrub.public(f"{type(exc).__name__}: {exc}")[:500]
        return
    if result.stop_reason in (STOP_ERROR, STOP_ABORTED, STOP_INTERRUPTED):
        record.status = "failed"
        record.result = result.error or result.stop_reason
    else:
        record.status = "completed"
        record.result = result.final_text
    await ctx.fire(
        "SubagentStop",
        tool_name=record.name,
        tool_use_id=record.tool_use_id,
        result=result.final_text,
        stop_reason=result.stop_reason,
        subagent_uuid=child.agent_uuid,  # [R12.7-e]
        transcript=[dict(m) for m in result.conversation_history],
    )


async def _start_remote(
    ctx: RunContext,
    call: ToolCallRequest,
    name: str,
    child_uuid: str,
    task: str,
    remote: BackgroundQueue,
    permissions: dict[str, Any],
) -> ToolOutcome:
    """Enqueue the child as a ``subagent`` task; the record follows the queue's row (spec scaleout §6.8-a)."""
    from ..fleet.worker import SUBAGENT_KIND, SubagentTask

    record = BackgroundTask(
        task_id="task_" + uuid.uuid4().hex[:16],
        tool_use_id=call.id,
        name=name,
        agent_uuid=child_uuid,
        task=task,
        detached=remote.outlive,
    )
    payload = SubagentTask(
        subagent=name,
        task=task,
        agent_uuid=child_uuid,
        parent_agent=ctx.agent_uuid,
        tool_use_id=call.id,
        permissions=permissions,
        principal=ctx.state.principal,  # spec server [OW1-a]: the child is the parent's owner's
        depth=ctx.options.subagent_depth + 1,  # [SA4-a]: the worker builds it where for_child would
        max_depth=ctx.options.max_subagent_depth,
    )
    await remote.queue.enqueue(
        SUBAGENT_KIND,
        {f: getattr(payload, f) for f in payload.__struct_fields__},
        task_id=record.task_id,
        parent=ctx.agent_uuid,
        idempotent=name in remote.idempotent,
        max_attempts=remote.max_attempts,
    )
    ctx.state.tasks.append(record)
    ctx.live_tasks[record.task_id] = asyncio.ensure_future(_run_remote(ctx, record, remote))
    started = {"task_id": record.task_id, "status": record.status, "subagent": name, "agent": child_uuid}
    return outcome(ctx.emitter, call, json.dumps(started))


def _settle_remote(record: BackgroundTask, row: Task) -> None:
    """Copy an ended queue row onto the parent's record (spec agent-ref §14.2-a)."""
    record.status = "completed" if row.status == "completed" else "failed" if row.status == "failed" else "killed"
    if row.status == "completed" and isinstance(row.result, dict):
        record.result = str(row.result.get("final_text", ""))
    else:
        record.result = scrub.public(row.error or row.status)[:500]


async def _run_remote(ctx: RunContext, record: BackgroundTask, remote: BackgroundQueue) -> None:
    """Follow the task on the queue until it ends; cancelled (the run ends otherwise): kill it there (§14.6).

    A follower released at the end of its response ([SA3-a]) stops following and leaves the task as it is.
    """
    started = record.status == "running"
    try:
        while True:
            row = await remote.queue.wait(record.task_id, remote.poll_seconds)
            if row.status in ("running", "completed", "failed") and not started:
                started = True
                record.status = "running"
                await ctx.fire(  # [AP4-a]: told the child's id, as an in-process task's hooks are
                    "SubagentStart",
                    tool_name=record.name,
                    tool_use_id=record.tool_use_id,
                    subagent_uuid=record.agent_uuid,
                )
            if row.done:
                break
    except asyncio.CancelledError:
        if asyncio.current_task() in _RELEASED:
            raise  # [SA3-a]: the response ended; the task goes on, a later response follows it
        record.status = "killed"
        with_kill = asyncio.ensure_future(remote.queue.kill(record.task_id, "the parent run ended"))
        await asyncio.gather(with_kill, return_exceptions=True)
        raise
    except Exception as exc:  # the queue cannot be read: the task fails for the parent, which goes on
        log.exception("background task %s (%s): the queue failed", record.task_id, record.name)
        record.status = "failed"
        record.result = scrub.public(f"{type(exc).__name__}: {exc}")[:500]
        return
    await _ended_remote(ctx, record, row)


async def _ended_remote(ctx: RunContext, record: BackgroundTask, row: Task) -> None:
    """A queue task has ended: its record settled, ``SubagentStop`` told ([AP4-a])."""
    _settle_remote(record, row)
    stop = str(row.result.get("stop_reason", "")) if isinstance(row.result, dict) else row.status
    await ctx.fire(
        "SubagentStop",
        tool_name=record.name,
        tool_use_id=record.tool_use_id,
        result=record.result,
        stop_reason=stop,
        subagent_uuid=record.agent_uuid,  # [AP4-a]
        transcript=await _stored_transcript(ctx, record.agent_uuid),
    )


async def _stored_transcript(ctx: RunContext, agent_uuid: str) -> list[dict[str, Any]]:
    """A remote child's messages, read from the store its worker saved it in; ``[]`` if it is not there ([AP4-a])."""
    try:
        state = await ctx.store.load(agent_uuid)
    except Exception:
        log.warning("background task: the transcript of %s could not be read", agent_uuid)
        return []
    return [] if state is None else [dict(m) for m in state.messages]


def _report(record: BackgroundTask) -> dict[str, str]:
    item = {"task_id": record.task_id, "subagent": record.name, "agent": record.agent_uuid, "status": record.status}
    if record.status in TERMINAL:
        item["result"] = record.result
    return item


def status_tool(state_of: Callable[[], AgentState], queue: TaskQueue | None = None) -> Tool:
    """The ``task_status`` tool of the agent whose state ``state_of`` gives: one background task, or all (spec §14.3).

    ``state_of`` is called at each use: an agent's state object is replaced when it is loaded.
    With the agent's background ``queue``, ``wait`` joins detached tasks ([SA3-b]).
    """

    @tool(name=TASK_STATUS_TOOL)
    async def task_status(task_id: str = "", wait: bool = False) -> str:
        """Check on background tasks started with spawn_subagent(run_in_background=true).

        Args:
            task_id: the task to report on; empty for every task of this run.
            wait: wait until the task (or every task) has ended, then report; for tasks that
                outlive their response (a queue's), including ones started in an earlier response.
        """
        tasks = state_of().tasks
        records = [t for t in tasks if not task_id or t.task_id == task_id]
        if task_id and not records:
            known = ", ".join(t.task_id for t in tasks) or "none"
            raise ValueError(f"unknown task {task_id!r}; tasks of this run: {known}")
        if wait and queue is not None:
            await _join(queue, [r for r in records if r.detached and r.status not in TERMINAL])
        for record in records:
            if record.status in TERMINAL:
                record.notified = True  # the model has seen the result: no notification too
        reports = [_report(r) for r in records]
        return json.dumps(reports[0] if task_id else {"tasks": reports})

    return task_status


async def _join(queue: TaskQueue, records: list[BackgroundTask], poll: float = 0.5) -> None:
    """Wait on the queue until each detached task has ended, and settle its record ([SA3-b])."""
    for record in records:
        row = await queue.wait(record.task_id, poll)
        while not row.done:
            record.status = "running" if row.status == "running" else record.status
            row = await queue.wait(record.task_id, poll)
        _settle_remote(record, row)


async def refresh(ctx: RunContext) -> None:
    """Before a model call: detached tasks nobody follows are read from the queue ([SA3-b]).

    One that ended meanwhile is settled (and notified by ``deliver``); one still running is
    followed again in this response. Without a queue, or if the queue cannot be read, the
    task is left as it is (``task_status`` reports it so).
    """
    remote: BackgroundQueue | None = getattr(ctx.options, "background_queue", None)
    for record in ctx.state.tasks:
        follower = ctx.live_tasks.get(record.task_id)
        if not record.detached or record.status in TERMINAL or remote is None:
            continue
        if follower is not None and not follower.done():
            continue
        try:
            row = await remote.queue.get(record.task_id)
        except Exception:
            log.exception("background task %s: the queue could not be read", record.task_id)
            continue
        if row is None:
            record.status = "failed"
            record.result = "the task is no longer on the queue"
        elif row.done:
            await _ended_remote(ctx, record, row)
        else:
            ctx.live_tasks[record.task_id] = asyncio.ensure_future(_run_remote(ctx, record, remote))


def notification(record: BackgroundTask) -> str:
    """The text the parent's model reads when a task has ended (spec §14.4)."""
    return (
        f'{NOTIFICATION_TAG} task_id="{record.task_id}" subagent="{record.name}" '
        f'status="{record.status}">\n{record.result}\n</task-notification>'
    )


def deliver(state: AgentState) -> None:
    """Put a notification of each ended, unseen task into the history, before the next call (spec §14.4)."""
    blocks = []
    for record in state.tasks:
        if record.status in TERMINAL and not record.notified:
            record.notified = True
            blocks.append({"type": "text", "text": notification(record)})
    if blocks:
        append_user(state, blocks)


def _live(ctx: RunContext, *, detached: bool | None = None) -> list[asyncio.Future[None]]:
    """The running followers (``detached``: only those of detached tasks, or only the others)."""
    kept = {r.task_id for r in ctx.state.tasks if detached is None or r.detached == detached}
    return [t for task_id, t in ctx.live_tasks.items() if not t.done() and task_id in kept]


async def wait_running(ctx: RunContext) -> None:
    """Wait for every running task of the run (their output streams meanwhile) (spec §14.4, §14.5).

    Detached tasks ([SA3-a]) do not hold the response: their followers are let go (the
    tasks run on; a later response follows them), so a pause or an end leaves none behind.
    """
    while live := _live(ctx, detached=False):
        await asyncio.wait(live)
    released = _live(ctx, detached=True)
    for follower in released:
        if isinstance(follower, asyncio.Task):
            _RELEASED.add(follower)
        follower.cancel()
    await asyncio.gather(*released, return_exceptions=True)


async def wait_unseen(ctx: RunContext) -> bool:
    """Before the run ends by the model's choice: wait for the tasks; ``True`` if it has results to see (§14.4)."""
    await wait_running(ctx)
    return any(r.status in TERMINAL and not r.notified for r in ctx.state.tasks)


async def kill_all(ctx: RunContext) -> None:
    """Cancel the tasks still running: status ``killed``, their open blocks closed (spec §14.6)."""
    live = _live(ctx)
    if not live:
        return
    cancelled = {task_id for task_id, task in ctx.live_tasks.items() if task in live}
    for task in live:
        task.cancel()
    await asyncio.gather(*live, return_exceptions=True)
    for record in ctx.state.tasks:
        # a detached task let go earlier in the response is not followed here: it runs on ([SA3-a])
        if record.status not in TERMINAL and (record.task_id in cancelled or not record.detached):
            record.status = "killed"
    await close_open(ctx, every_agent=True)
