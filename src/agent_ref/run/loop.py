"""The run's flow: prepare → call the model → tool step → finish, with hooks and the pause (seed 003/004).

Owns: ``turn`` (one response's flow: the prompt's hooks, then ``steps``, then the Stop
hooks), ``steps`` (the loop that decides, top to bottom, each step one call into a named
stage: delivery, checkpoint, limits, compaction, the model call, tools and approvals,
pause: spec ``spec/agent-ref.md`` §1.2, §5), ``drive`` (one response: the opening lines,
``turn`` as a task ``abort`` can cancel, the lease renewed meanwhile, and how every way
of ending leaves it: ``finish`` or ``pause``, §5.5, §6.3, §10.2-a, §14.6), and the start
of a resumed response whose paused children go on first (``resume_children``, §13.5-c).
Does not own: the stages themselves (``prepare``, ``compaction``, ``call_model``,
``tool_step``, ``record``, ``finish``) or the public API (``agent.py``).
Functions take the response's ``RunContext``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from ..policy.hooks import keep_going
from ..store import sessions
from ..store.record import add_prompt_context, append_assistant, append_user, take_back_prompt, tool_uses
from . import background, checkpoints, loop_guard, subagent_run
from .call_model import Outcome, RunFailed, close_open, model_call, step_finish, step_start
from .compaction import compact_before_call
from .finish import (
    STOP_AWAITING,
    STOP_ERROR,
    STOP_INTERRUPTED,
    STOP_MAX_BUDGET,
    STOP_PROMPT_BLOCKED,
    AgentResult,
    answer_unanswered,
    close_quietly,
    end_aborted,
    finish,
    pause,
    save_paused,
)
from .response import _ClientGone, _NothingSent
from .structured import structured_end
from .tool_step import last_call, refuse, run_backend, run_step_tools, workspace_step

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from ..tools.core import ToolCallRequest
    from .context import RunContext

__all__ = ["drive", "steps", "traced_steps", "turn"]

log = logging.getLogger("agent_ref")


async def steps(ctx: RunContext, step: int) -> str:
    """Steps of compaction, model call, tools and approvals, until the run ends or pauses; the stop reason (§1.2).

    Each step, top to bottom: what joins the turn (ended tasks, sent messages), the
    checkpoint, the limits, compaction, the model call, then either the end of the turn
    (inbox, tasks, structured answer) or the step's tools (``run_step_tools``: hooks,
    permissions and approvals, frontend calls set aside), and the pause they may leave.
    """
    options = ctx.options
    while True:
        ctx.step = step
        ctx.enter_step(step)  # spec §20.2-a: a step span from its model call to its tools' end
        await background.refresh(ctx)  # [SA3-b]: detached tasks of earlier responses, read from the queue
        background.deliver(ctx.state)  # spec §14.4: ended tasks are notified before the next call
        await sessions.deliver(ctx)  # spec §S2.1: messages sent meanwhile join the user turn
        await checkpoints.at_step(ctx, step)  # [CK1.2-a]: saved before the model call (checkpoint mode)
        if step > options.max_steps:
            return await last_call(ctx, step)  # spec §5.2: one last call with tool_choice none
        if options.max_budget_usd is not None and (ctx.run.cost_usd or 0.0) >= options.max_budget_usd:
            return STOP_MAX_BUDGET  # spec §5.3-a: checked before each call
        await compact_before_call(ctx)  # spec §15: before each call, never inside a block
        await ctx.send(step_start(ctx, step))  # envelope-v1 §4.16
        outcome = await model_call(ctx, step)  # prepare (params), the API call with retries (§6)
        append_assistant(ctx.state, outcome.content)
        # spec §1.2-c: a pause_turn sends the turn back as is
        stop = None if outcome.stop_reason == "pause_turn" else await _after_call(ctx, step, outcome)
        await ctx.send(step_finish(ctx, step, outcome, stop))  # envelope-v1 [4.16-d]: after the step's tools
        if stop is not None:
            return stop
        step += 1


async def _after_call(ctx: RunContext, step: int, outcome: Outcome) -> str | None:
    """The rest of a step after its model call: the end of the turn, or its tools; ``None``: go on to the next step."""
    calls = tool_uses(outcome.content)
    if not calls or outcome.stop_reason not in ("tool_use", "max_tokens"):
        if ctx.inbox is not None and not await ctx.inbox.close_if_empty(ctx.state):
            await sessions.deliver(ctx, after_end=True)  # spec §S2.2-a: the user spoke; one more step
            return None
        if await background.wait_unseen(ctx):
            return None  # spec §14.4: one more step to see the tasks' results
        return await structured_end(ctx, outcome.stop_reason)  # spec §17: None asks again
    paused_on = await run_step_tools(ctx, calls, outcome.bad_inputs)  # tools and approvals (§2, §12)
    if ctx.loop_stop is not None:
        return loop_guard.STOP_LOOP_DETECTED  # spec §16: a repeat with no can_use_tool
    if ctx.interrupt is not None:
        return STOP_INTERRUPTED  # spec §12.4-c
    if paused_on:
        await background.wait_running(ctx)  # spec §14.5: a pause leaves no task running
        ctx.state.current_step = step
        return STOP_AWAITING
    return None


async def traced_steps(ctx: RunContext, step: int) -> str:
    """``steps``, with the last step span ended however they end (spec §20.2-a)."""
    try:
        stop = await steps(ctx, step)
    except BaseException as exc:
        ctx.end_step(exc)
        raise
    ctx.end_step(None)
    return stop


async def turn(ctx: RunContext, step: int, opening: list[bytes]) -> str:
    """One response's flow: opening lines, the prompt's hooks, ``steps``, the Stop hooks; the stop reason.

    Spec §1.2, §12.1-a. How it ends (``finish``, or ``pause`` on ``STOP_AWAITING``) is
    ``drive``'s, which runs this as a task an abort can cancel.
    """
    await ctx.send(opening)
    await frontend_answer_hooks(ctx)
    if ctx.resuming is not None and await resume_children(ctx):
        return STOP_AWAITING  # spec §13.5-c: a child paused again; so does the run
    if ctx.interrupt is not None:
        return STOP_INTERRUPTED  # spec §12.6-c: a denial with interrupt ends the resumed run
    if ctx.prompt is not None:
        prompt, ctx.prompt = ctx.prompt, None
        if not await prompt_hooks(ctx, prompt):
            return STOP_PROMPT_BLOCKED  # [R12.7-g]: no model call, the prompt not kept
    stop = await traced_steps(ctx, step)
    while stop != STOP_AWAITING:
        run = ctx.run
        decision = await ctx.fire("Stop", stop_reason=stop, stop_continuations=run.stop_continuations)
        await ctx.report_hook_failures()
        reason = keep_going(decision, stop, run.stop_continuations)
        if reason is None:
            break
        run.stop_continuations += 1  # [R12.7-d]: bounded, and stored with the run
        append_user(ctx.state, [{"type": "text", "text": reason}])
        stop = await traced_steps(ctx, ctx.step + 1)
    return stop


async def frontend_answer_hooks(ctx: RunContext) -> None:
    """PostToolUse (or PostToolUseFailure) for each frontend result the resume brought ([AP1-a])."""
    answers, ctx.frontend_answers = ctx.frontend_answers, []
    for call, done in answers:
        await ctx.fire_post_tool(call, done)
    if answers:
        await ctx.report_hook_failures()


async def prompt_hooks(ctx: RunContext, prompt: str) -> bool:
    """SessionStart and UserPromptSubmit: their context added around the prompt; ``False`` if it is blocked."""
    started = await ctx.fire("SessionStart", prompt=prompt)
    submitted = await ctx.fire("UserPromptSubmit", prompt=prompt)
    await ctx.report_hook_failures()
    if submitted.action == "block":
        take_back_prompt(ctx.state)
        why = submitted.message or "the prompt was blocked by a UserPromptSubmit hook"
        await ctx.send(ctx.error_envelope({"type": "prompt_blocked", "message": why}))
        return False
    add_prompt_context(ctx.state, started.additional_context, submitted.additional_context)
    return True


async def drive(ctx: RunContext, abort: asyncio.Event, step: int, opening: list[bytes]) -> AgentResult:
    """One response: send ``opening``, run the loop as a task ``abort`` can cancel, renew the lease, end it."""
    heartbeat = asyncio.ensure_future(_heartbeat(ctx))
    try:
        async with _mcp_servers(ctx) as notes:  # [R19.7-a]: closed however the response ends
            return await _drive_loop(ctx, abort, step, [*opening, *await _sandbox_note(ctx), *notes])
    finally:
        heartbeat.cancel()


async def _sandbox_note(ctx: RunContext) -> list[bytes]:
    """With a workspace, a ``meta_status`` of kind ``sandbox`` when Bash is unsandboxed or refused (spec [WS5-b])."""
    if ctx.options.workspace is None:
        return []
    from ..tools.sandbox import sandbox_status

    payload = await sandbox_status(unsandboxed=ctx.options.unsandboxed_bash)
    return [] if payload is None else ctx.status_envelope(payload)


@contextlib.asynccontextmanager
async def _mcp_servers(ctx: RunContext) -> AsyncIterator[list[bytes]]:
    """Open the options' MCP servers for one response and add their tools; ``meta_status`` lines for those that failed.

    A server that fails leaves the run without its tools and the run goes on: a status
    of kind ``mcp_server`` (envelope-v1 [4.16-c]), not an ``error``.
    """
    servers = ctx.options.mcp_servers
    if not servers:
        yield []
        return
    from envelope._extras import MissingExtraError

    from ..tools.mcp import McpToolset

    toolset = McpToolset(servers)
    try:
        await toolset.__aenter__()
    except MissingExtraError as exc:
        yield ctx.status_envelope({"kind": "mcp_server", "state": "failed", "message": str(exc)})
        return
    try:
        own = dict(ctx.tools)
        ctx.tools = {**{t.name: t for t in toolset.tools if t.name not in own}, **own}
        notes: list[bytes] = []
        for name, why in toolset.failed.items():
            message = f"MCP server {name!r} {why}; its tools are left out"
            notes += ctx.status_envelope({"kind": "mcp_server", "server": name, "state": "failed", "message": message})
        yield notes
    finally:
        ctx.tools = own
        await toolset.__aexit__(None, None, None)


async def _drive_loop(ctx: RunContext, abort: asyncio.Event, step: int, opening: list[bytes]) -> AgentResult:
    loop_task = asyncio.ensure_future(turn(ctx, step, opening))
    abort_task = asyncio.ensure_future(abort.wait())
    try:
        done, _ = await asyncio.wait({loop_task, abort_task}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        loop_task.cancel()
        abort_task.cancel()
        await asyncio.gather(loop_task, return_exceptions=True)
        await background.kill_all(ctx)  # spec §14.6
        # spec §5.5-c: the caller is gone. Close the run in the store (log included); send nothing.
        ctx.response.gone = True
        await asyncio.shield(close_quietly(ctx, "the run was cancelled: the client went away"))
        raise
    abort_task.cancel()
    if loop_task not in done:
        loop_task.cancel()
        await asyncio.gather(loop_task, return_exceptions=True)
        await background.kill_all(ctx)  # spec §14.6: killing the run kills its tasks
        return await end_aborted(ctx, "the run was aborted by the caller")
    await background.kill_all(ctx)  # spec §14.6: tasks left when the run ends otherwise
    try:
        stop = loop_task.result()
    except RunFailed as exc:
        payload: dict[str, Any] = {  # spec §6.3: a public message, never a traceback
            "type": exc.failure.type,
            "message": exc.failure.message,
            "retryable": exc.failure.transient,
            "attempts": exc.attempts,
        }
        return await finish(ctx, STOP_ERROR, error_payload=payload)
    except _NothingSent:
        raise  # [R5.5-e]: nothing was sent; the agent takes the response back (``Agent._drive``)
    except _ClientGone as exc:
        # spec §5.5-c: the sink failed (a closed pipe, a dropped connection).
        await close_quietly(ctx, "the client went away")
        raise exc.error from None
    except Exception:
        return await _failed(ctx)
    if stop == STOP_AWAITING:
        # spec §13.5-a: a child saves its pause and sends nothing; the root announces it.
        return await (save_paused(ctx) if ctx.response.nested else pause(ctx))
    return await finish(ctx, stop)


async def _failed(ctx: RunContext) -> AgentResult:
    """A bug in the agent's own code: a public message in the stream, details in the log (spec §6.3)."""
    log.exception("the agent loop failed")
    await close_open(ctx, every_agent=True)
    await answer_unanswered(ctx, "not run: the agent failed before this tool call finished")
    payload = {
        "type": "internal_error",
        "message": "internal error in the agent (details are in the server log)",
        "retryable": False,
        "attempts": 1,
    }
    return await finish(ctx, STOP_ERROR, error_payload=payload)


async def _heartbeat(ctx: RunContext) -> None:
    """Renew the lease every third of its length while the run goes on (spec §10.2-a)."""
    state = ctx.state
    seconds = ctx.options.lease_seconds
    while True:
        await asyncio.sleep(seconds / 3)
        owner = state.lease_owner
        if owner is None or state.status != "running":
            return
        expires = time.time() + seconds
        try:
            renewed = await ctx.store.renew_lease(state.agent_uuid, owner, expires)
        except Exception:
            log.warning("agent %s: could not renew the lease; will try again", state.agent_uuid)
            continue
        if not renewed:
            log.warning("agent %s: lost its lease to another process", state.agent_uuid)
            return
        state.lease_expires_at = expires


async def resume_children(ctx: RunContext) -> bool:
    """Continue the paused children, then record the step's results; ``True`` if one paused again (§13.5-c)."""
    assert ctx.resuming is not None
    resuming, ctx.resuming = ctx.resuming, None
    state = ctx.state
    owners = {p.tool_use_id: p.agent for p in state.pending_frontend}
    order = state.pending_order
    # In memory the pause is consumed (an abort now answers the calls, §5.5-b); the store
    # keeps it until the response ends, so a resume that dies is put back (§10.2-b).
    state.pending_frontend, state.pending_children, state.pending_backend_results = [], [], []
    state.pending_order = []
    by_id = resuming.by_id
    # [WM1-a]: the approved calls and the resumed children end the paused step; what they
    # change in the workspace is recorded as that step's, for undo, rewind and diff.
    async with workspace_step(ctx, state.current_step):
        await run_approved(ctx, resuming.approved, by_id)
        outcomes, paused = await subagent_run.resume_children(ctx, resuming.children, resuming.results, owners)
    await ctx.report_hook_failures()
    for tool_use_id, done in outcomes.items():
        by_id[tool_use_id] = done.block
    if paused:
        state.pending_frontend = [p for child in paused for p in child.calls]
        state.pending_children = [child.child for child in paused]
        state.pending_backend_results = list(by_id.values())
        state.pending_order = order
        return True
    append_user(state, [by_id[i] for i in order if i in by_id])
    return False


async def run_approved(ctx: RunContext, approved: list[ToolCallRequest], by_id: dict[str, dict[str, Any]]) -> None:
    """Run the calls a person approved as the step's calls run (``run_backend``; spec §12.6-c, [MA1-c]).

    They get their context (the paused step's), their spans and their checkpoint: the
    resume's other answers (denials, frontend results) are checkpointed first, then each
    result before it is streamed, so a process killed after one never runs it again
    ([CK1.3-c]). After a denial with ``interrupt`` they are answered as not run instead
    (spec §12.4-c).
    """
    if ctx.interrupt is not None:
        for call in approved:
            by_id[call.id] = (await refuse(ctx, call, "not run: the run was interrupted")).block
        await checkpoints.settled(ctx)
        return
    if not approved:
        return
    _checkpoint_answers(ctx, by_id)
    shown = _model_inputs(ctx.state.messages)  # envelope-v1 §4.6-a: an edited approval shows what ran
    ran = await run_backend(ctx, approved, shown=shown, step=ctx.state.current_step)
    await checkpoints.settled(ctx)
    for call, done in zip(approved, ran, strict=True):
        by_id[call.id] = done.block
        await ctx.fire_post_tool(call, done)
    await ctx.report_hook_failures()


def _checkpoint_answers(ctx: RunContext, by_id: dict[str, dict[str, Any]]) -> None:
    """Add the step's results decided so far that its checkpoint lacks (the resume's answers) ([MA1-c])."""
    checkpoint = ctx.run.checkpoint
    if checkpoint is None:
        return
    kept = {block.get("tool_use_id") for block in checkpoint.results}
    for tool_use_id, block in by_id.items():
        if tool_use_id not in kept:
            checkpoints.finished(ctx, block)


def _model_inputs(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The inputs of the last assistant turn's ``tool_use`` blocks, by id: what its ``tool_call`` lines showed."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            return {
                b["id"]: b.get("input")
                for b in content
                if isinstance(b, dict) and b.get("type") == "tool_use" and isinstance(b.get("id"), str)
            }
    return {}
