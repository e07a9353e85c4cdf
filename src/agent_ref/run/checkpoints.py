"""Checkpoints: a run whose process died continues from its last completed step (issue 30 §2).

Owns: saving a run's checkpoint in checkpoint mode (``AgentOptions.checkpoints``; spec
``spec/agent-ref.md`` §CK1): at the start of each step, before its model call
(``at_step``), when the step's tool calls are about to run (``starting``) and as each
one finishes (``finished``, ``settled``); and continuing a dead run from its checkpoint
(``can_continue``, ``close_dead``, ``continuation``): the dead response's log closed, a new response of
the same run that answers the step's calls (reused results, calls run again when every
unfinished one is idempotent, else "result unknown" errors) and goes on with the loop.
Does not own: the loop (``run/loop.py``), the tool step (``run/tool_step.py``), the claim and the
lease (``agent.py``), or what a checkpoint holds (``state.Checkpoint``).

A checkpoint is the agent's state save (``Store.save``): the run's history, usage and
cost, the context, the step and the tool calls' progress in one transaction, under the
version check the lease protects ([CK1.2-a]).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any, Final

from ..store.record import tool_uses
from ..store.state import AgentState, Checkpoint, decode_state, encode_state
from ..tools.core import ToolCallRequest, error_outcome
from .background import TERMINAL
from .context import Resuming
from .response import DONE_LINE
from .subagents import SUBAGENT_TOOL

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .context import RunContext

__all__ = [
    "DEAD_TASK",
    "UNKNOWN_RESULT",
    "at_step",
    "can_continue",
    "close_dead",
    "continuation",
    "finished",
    "lost_error",
    "saved",
    "settled",
    "starting",
]

log = logging.getLogger("agent_ref")

#: The ``is_error`` result a call gets when its process died while it ran and it may not
#: be run again ([CK1.3-b]).
UNKNOWN_RESULT: Final = (
    "result unknown: the process running this tool call stopped before the call finished; "
    "it may or may not have taken effect, and it was not run again"
)

#: The result of a background task of the run that was running in the dead process ([CK1.4-c]).
DEAD_TASK: Final = "failed: the process running this task stopped before the task ended"

#: The pending saves of a context's step (``finished``), chained so they are written in order;
#: keyed by ``id(ctx)`` with the context itself kept (so the id is not reused while the entry lives).
_CHAINS: dict[int, tuple[RunContext, asyncio.Future[None]]] = {}


def _on(ctx: RunContext) -> bool:
    """Whether this response saves checkpoints: checkpoint mode, a root agent's run ([CK1.1-a])."""
    return ctx.options.checkpoints and ctx.parent is None and not ctx.response.nested


async def _save(ctx: RunContext) -> None:
    """Save a copy of the state taken now (the loop goes on changing it while the store writes)."""
    state = ctx.state
    copy = decode_state(encode_state(state))
    await ctx.store.save(copy)
    state.version = copy.version


async def at_step(ctx: RunContext, step: int) -> None:
    """Save the checkpoint of a step about to call the model: the history so far ([CK1.2-a])."""
    if not _on(ctx):
        return
    ctx.run.checkpoint = Checkpoint(step=step)
    await _save(ctx)


async def starting(ctx: RunContext, calls: list[ToolCallRequest]) -> None:
    """Mark every call of the step started, in one save, before any of them runs ([CK1.3-a])."""
    if not _on(ctx):
        return
    _CHAINS.pop(id(ctx), None)  # a step starts with no save of an earlier one pending
    ctx.run.checkpoint = Checkpoint(step=ctx.step, phase="tools", started=[c.id for c in calls])
    await _save(ctx)


def finished(ctx: RunContext, block: dict[str, Any]) -> None:
    """Record a call's result and save it, after the saves before it (awaited by ``settled``)."""
    checkpoint = ctx.run.checkpoint
    if not _on(ctx) or checkpoint is None or checkpoint.phase != "tools":
        return
    checkpoint.results.append(block)
    for key, (_, chain) in list(_CHAINS.items()):
        if chain.done() and key != id(ctx):
            del _CHAINS[key]  # left by a step that ended without ``settled`` (its run raised)
    entry = _CHAINS.get(id(ctx))
    before = entry[1] if entry is not None else None

    async def chained() -> None:
        if before is not None:  # in order; a failed one fails the next too (same version: a conflict again)
            await asyncio.gather(before, return_exceptions=True)
        await _save(ctx)

    future = asyncio.ensure_future(chained())
    future.add_done_callback(_retrieved)  # a run that failed before ``settled`` never reads it
    _CHAINS[id(ctx)] = (ctx, future)


def _retrieved(future: asyncio.Future[None]) -> None:
    """Mark a save's outcome as read (asyncio logs a failure nobody read; ``settled`` raises it when awaited)."""
    if not future.cancelled():
        future.exception()


async def saved(ctx: RunContext) -> None:
    """Wait for the result saves of the step so far, keeping them pending for ``settled`` ([CK1.3-c]).

    The step's sends wait here first, so a result the client reads is one its checkpoint
    holds: a process killed between the two leaves them agreeing. A failed save raises
    (another process took the agent), as ``settled`` would; waiting never cancels the save.
    """
    entry = _CHAINS.get(id(ctx))
    if entry is None:
        return
    await asyncio.wait([entry[1]])
    entry[1].result()


async def settled(ctx: RunContext) -> None:
    """Wait for the step's result saves; a failed one (another process took the agent) raises."""
    entry = _CHAINS.pop(id(ctx), None)
    if entry is not None:
        await entry[1]


def can_continue(state: AgentState) -> bool:
    """Whether a dead ``running`` state is continued from its checkpoint ([CK1.4-a]), not rolled back."""
    run = state.run
    return state.status == "running" and run is not None and run.checkpoint is not None and not state.pending_frontend


def lost_error(step: int) -> dict[str, str]:
    """The ``error`` payload closing a dead response whose run continues from ``step`` ([CK1.4-b])."""
    why = (
        "the process running this run stopped before the run ended; "
        f"another process continues it from step {step} in the next response"
    )
    return {"type": "lost", "message": why}


async def close_dead(ctx: RunContext, dead_log: Sequence[bytes] | None = None) -> None:
    """Close the dead response's log and save the claim of this process, in one save ([CK1.4-b]).

    ``ctx.response`` is the dead response's index, read by nobody; the caller has claimed
    the agent in memory. The closing lines are ``meta_init``, an ``error`` of type ``lost``
    saying the run continues, and ``[DONE]``; or ``dead_log``, the dead response's whole
    log as a server's journal holds it, closed by the server with that same ``error``
    (spec server [CN1-b]), so the store's log and the journal agree.

    Raises:
        ConflictError: another process continued (or changed) the agent first.
    """
    from .prepare import meta_init

    run = ctx.run
    checkpoint = run.checkpoint
    assert checkpoint is not None
    closing = ctx.response
    if dead_log is not None:
        closing.stage(list(dead_log))
    else:
        closing.stage(ctx.emitter.buffered("meta_init", meta_init(ctx, run)))
        closing.stage(ctx.error_envelope(lost_error(checkpoint.step)))
        closing.stage([DONE_LINE])
    await ctx.store.save(ctx.state, log=closing.batch())
    log.warning(
        "agent %s: run %s continues from its checkpoint at step %d", ctx.agent_uuid, run.run_id, checkpoint.step
    )


def continuation(ctx: RunContext) -> tuple[int, list[bytes]]:
    """The continuation response's start: the step the loop goes on from, and the opening lines.

    ``meta_init`` with ``resume.continued: true``; for a step whose tools were running, its
    calls' results (reused, "result unknown", or run again when every unfinished call is
    idempotent: ``ctx.resuming`` runs them first) ([CK1.3-a], [CK1.3-b]).
    """
    from .prepare import meta_init

    state, run, emitter = ctx.state, ctx.run, ctx.emitter
    checkpoint = run.checkpoint
    assert checkpoint is not None
    if ctx.options.background_queue is None:  # [CK1.4-c]: in-process tasks died with their process
        for task in state.tasks:
            if task.status not in TERMINAL:
                task.status, task.result = "failed", DEAD_TASK
    calls = tool_uses(state.messages[-1].get("content") or []) if checkpoint.phase == "tools" else []
    by_id: dict[str, dict[str, Any]] = {b["tool_use_id"]: b for b in checkpoint.results}
    unfinished = [c for c in calls if c.id not in by_id]
    again = unfinished if unfinished and all(_idempotent(ctx, c) for c in unfinished) else []
    lines: list[bytes] = []
    for call in calls:
        if call.id in by_id:
            lines += emitter.tool_result(call.id, call.name, _text(by_id[call.id]))
        elif not again:
            done = error_outcome(emitter, call, UNKNOWN_RESULT)
            by_id[call.id] = done.block
            lines += done.lines
    state.current_step = checkpoint.step if calls else checkpoint.step - 1
    # reused, unknown, or run again in this response: every call of the step is announced
    meta = json.loads(meta_init(ctx, run, resume=True, answers=[c.id for c in calls]))
    meta["resume"]["continued"] = True
    opening = emitter.buffered("meta_init", json.dumps(meta, ensure_ascii=False)) + lines
    if not calls:
        return checkpoint.step, opening
    state.pending_order = [c.id for c in calls]
    ctx.resuming = Resuming(children=[], results=[], by_id=by_id, approved=again)
    ctx.answered = dict(by_id)
    return checkpoint.step + 1, opening


def _idempotent(ctx: RunContext, call: ToolCallRequest) -> bool:
    """Whether ``call``'s tool is declared idempotent (a subagent's spawning call never is, [CK1.3-a])."""
    found = ctx.tools.get(call.name)
    return call.name != SUBAGENT_TOOL and found is not None and found.executor == "backend" and found.idempotent


def _text(block: dict[str, Any]) -> str:
    """The text of a stored ``tool_result`` block (its string content, or its text blocks joined)."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
