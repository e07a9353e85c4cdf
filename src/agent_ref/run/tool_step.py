"""Stages 3 and 4, route the tool calls and run them: hooks, permissions, backend tools, subagents.

Owns: ``run_step_tools`` (PreToolUse hooks and ``can_use_tool`` per call, spec
``spec/agent-ref.md`` §12; frontend calls set aside for the pause, §3; backend tools and
subagents run concurrently, §2.3, §13), ``run_backend`` (the one runner of backend calls,
a step's and the approved ones', spec [MA1-c]), ``run_subagent`` (foreground or background,
§13, §14) and ``last_call`` (§5.2). Does not own: the tools themselves (``tools/core.py``),
running a child (``run/subagent_run.py``, ``run/background.py``), the hook machinery
(``policy/hooks.py``), or the stream end (``run/finish.py``). Functions take the run's context
(``RunContext``) and return what they decide.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from ..policy.hooks import HookFailure, HookInput, run_hooks
from ..policy.permissions import (
    CallKind,
    PermissionAsk,
    PermissionDeny,
    ToolPermissionContext,
    background_denial,
    resolve,
)
from ..store.record import append_assistant, append_user, tool_uses
from ..store.state import PendingCall
from ..tools import workspace_history
from ..tools.context import ToolContextBase
from ..tools.core import ToolCallRequest, ToolOutcome, error_outcome, run_tools
from ..tools.workspace import with_change
from ..tools.workspace.files import MAX_PREVIEW_CHARS
from . import background as background_tasks
from . import checkpoints, loop_guard, subagent_run
from . import extras as run_extras
from .background import TERMINAL
from .call_model import model_call, step_finish, step_start
from .compaction import compact_before_call
from .finish import STOP_MAX_STEPS
from .subagent_run import ChildPaused
from .subagents import SUBAGENT_TOOL, background_flag, over_cap, parse_spawn

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping

    from ..tracing import RefusalReason
    from .context import RunContext

log = logging.getLogger("agent_ref")


@dataclass(slots=True)
class _Routed:
    """A step's calls, routed: the answered ones' outcomes, and the ones to run, by kind."""

    outcomes: dict[str, ToolOutcome] = field(default_factory=dict)
    backend: list[ToolCallRequest] = field(default_factory=list)
    spawns: list[ToolCallRequest] = field(default_factory=list)
    frontend: list[ToolCallRequest] = field(default_factory=list)
    approvals: dict[str, str] = field(default_factory=dict)


async def run_backend(
    ctx: RunContext, calls: list[ToolCallRequest], *, shown: Mapping[str, Any], step: int
) -> list[ToolOutcome]:
    """Backend calls through ``run_tools``, as a step runs them: context, spans, checkpointed results.

    The one way the agent runs its backend calls: a step's (``run_step_tools``) and the ones
    a person approved at a resume (``loop.run_approved``, spec [MA1-c]). Each call gets its
    ``ToolContext`` (R2.6, RU1-b; ``step``: the run step it belongs to), an ``execute_tool``
    span (§20.2-a), and its result recorded, then checkpointed before it is streamed
    ([CK1.3-a], [CK1.3-c]). ``shown``: the inputs the calls' ``tool_call`` lines showed
    (envelope-v1 §4.6-a).
    """

    def answered(call: ToolCallRequest, done: ToolOutcome) -> None:
        ctx.answered[call.id] = done.block
        checkpoints.finished(ctx, done.block)  # [CK1.3-a]: its result saved as it ends

    async def send(lines: list[bytes]) -> None:
        await checkpoints.saved(ctx)  # [CK1.3-c]: a result is checkpointed before it is streamed
        await ctx.response.send(lines)

    options = ctx.options
    return await run_tools(
        calls,
        ctx.tools,
        ctx.emitter,
        send,
        max_concurrency=options.max_tool_concurrency,
        on_result=answered,
        timeout=options.tool_timeout,
        max_result_bytes=options.max_tool_result_bytes,  # spec §2.4-e
        tracing=ctx.tracing,
        shown=shown,
        context=ToolContextBase(agent_uuid=ctx.agent_uuid, run_id=ctx.run.run_id, store=ctx.store, step=step),
    )


async def run_step_tools(
    ctx: RunContext, calls: list[ToolCallRequest], bad_inputs: Mapping[str, str]
) -> list[ToolCallRequest]:
    """Route the step's calls, run the backend ones and the subagents, record; return the ones it pauses on.

    After it, ``ctx.interrupt`` or ``ctx.loop_stop`` says whether the step stopped the run.
    With a workspace, what the step changed there is recorded for undo (spec [WU1-a]).
    """
    async with workspace_step(ctx, ctx.step):
        return await _step_tools(ctx, calls, bad_inputs)


@contextlib.asynccontextmanager
async def workspace_step(ctx: RunContext, run_step: int) -> AsyncIterator[None]:
    """Bracket what runs inside with two workspace snapshots, recorded as run step ``run_step``.

    Used by a step's tools and by the calls a person approved at a resume (spec [WU1-a],
    [WM1-a]); without a workspace or a snapshot store it records nothing. The record is
    kept also when the body raised.
    """
    baseline = await workspace_history.begin_step(ctx.options.workspace, ctx.store, ctx.agent_uuid)
    try:
        yield
    finally:
        if baseline is not None:
            summary = await baseline.finish(ctx.store, ctx.agent_uuid, ctx.run.run_id, run_step)
            if summary is not None:
                ctx.workspace_steps.append(msgspec.to_builtins(summary))


async def _step_tools(
    ctx: RunContext, calls: list[ToolCallRequest], bad_inputs: Mapping[str, str]
) -> list[ToolCallRequest]:
    ctx.answered = {}
    ctx.interrupt = None
    ctx.loop_stop = None
    await checkpoints.starting(ctx, calls)  # [CK1.3-a]: every call marked started before any runs
    routed = await _route(ctx, calls, bad_inputs)
    await ctx.report_hook_failures()
    if ctx.interrupt is not None or ctx.loop_stop is not None:
        # spec §12.4-c, §16: a stopped step answers the calls not yet answered and ends the run.
        for call in [*routed.backend, *routed.spawns, *routed.frontend]:
            routed.outcomes[call.id] = await refuse(ctx, call, "not run: the run was interrupted")
        append_user(ctx.state, [routed.outcomes[c.id].block for c in calls])
        return []
    spawns = await _cap_spawns(ctx, routed.spawns, routed.outcomes)
    ran, spawned = await asyncio.gather(
        # envelope-v1 §4.6-a: a result shows the model's input, and the edit a hook made
        run_backend(ctx, routed.backend, shown={call.id: call.input for call in calls}, step=ctx.step),
        asyncio.gather(*(traced_subagent(ctx, call) for call in spawns)),
    )
    paused: list[ChildPaused] = []
    for call, ended in zip([*routed.backend, *spawns], [*ran, *spawned], strict=True):
        if isinstance(ended, ChildPaused):
            paused.append(ended)  # spec §13.5-a: answered when the child ends, after the resume
            continue
        routed.outcomes[call.id] = ended
        await ctx.fire_post_tool(call, ended)
    await checkpoints.settled(ctx)
    await ctx.report_hook_failures()
    if routed.frontend or paused:
        run_extras.trace_frontend(ctx, routed.frontend)  # spec §20.2-a
        _set_pause(ctx, calls, routed, paused)
        return [*routed.frontend, *(c for c in spawns if c.id in {p.child.tool_use_id for p in paused})]
    append_user(ctx.state, [routed.outcomes[c.id].block for c in calls])
    return []


def _approval_reason(ctx: RunContext, call: ToolCallRequest, reason: str) -> str:
    """The approval's reason with what it approves: a Write's or Edit's diff, a Bash's command ([WS3-c]).

    A ``Bash`` shows its command also when the agent has no ``workspace=`` (its tools
    given as ``bash_tools(root)``; spec [WM1-e]).
    """
    command = call.input.get("command")
    if ctx.options.workspace is None and call.name == "Bash" and isinstance(command, str):
        return f"{reason}\ncommand: {command[:MAX_PREVIEW_CHARS]}"
    return with_change(ctx.options.workspace, call, reason)


async def refuse(ctx: RunContext, call: ToolCallRequest, text: str) -> ToolOutcome:
    """Answer a call that is not run with an ``is_error`` result: checkpointed, then sent ([CK1.3-c])."""
    done = error_outcome(ctx.emitter, call, text)
    ctx.answered[call.id] = done.block
    checkpoints.finished(ctx, done.block)
    await checkpoints.saved(ctx)
    await ctx.response.send(done.lines)
    return done


async def _route(ctx: RunContext, calls: list[ToolCallRequest], bad_inputs: Mapping[str, str]) -> _Routed:
    """Answer the calls that are not run (cut input, blocked, denied); sort the others by kind."""
    routed = _Routed()
    for call in calls:
        if call.id in bad_inputs:
            # spec §1.3-a: a cut or unparseable call is answered, never run.
            routed.outcomes[call.id] = await refuse(ctx, call, bad_inputs[call.id])
            continue
        if ctx.interrupt is not None or ctx.loop_stop is not None:
            # [R12.7-c]: after an abort, the step's later calls are answered, never asked about.
            ctx.tracing.refused_call(name=call.name, call_id=call.id, reason="interrupted", arguments=call.input)
            routed.outcomes[call.id] = await refuse(ctx, call, "not run: the run was interrupted")
            continue
        permitted = await permit(ctx, call)
        if isinstance(permitted, str):
            # spec §12.2-b, §12.4-a: a blocked or denied call is an is_error result the model sees.
            reason: RefusalReason = permitted.reason if isinstance(permitted, Refused) else "permission_denied"
            ctx.tracing.refused_call(
                name=call.name, call_id=call.id, reason=reason, message=str(permitted), arguments=call.input
            )  # spec [IN3-a]
            routed.outcomes[call.id] = await refuse(ctx, call, str(permitted))  # a plain str to encode
            continue
        if isinstance(permitted, Approval):
            # spec §12.6: a durable ask pauses the run on the call, as a frontend call does.
            routed.approvals[call.id] = _approval_reason(ctx, permitted.call, permitted.reason)  # [WS3-c]
            routed.frontend.append(permitted.call)
            continue
        tool_def = ctx.tools.get(permitted.name)
        if tool_def is not None and tool_def.executor == "frontend":
            routed.frontend.append(permitted)
        elif permitted.name == SUBAGENT_TOOL and ctx.options.subagents:
            routed.spawns.append(permitted)
        else:
            routed.backend.append(permitted)
    return routed


def _set_pause(ctx: RunContext, calls: list[ToolCallRequest], routed: _Routed, paused: list[ChildPaused]) -> None:
    """The relay state of a step that pauses on frontend calls and paused children (spec §3.1, §13.5-a)."""
    state = ctx.state
    state.pending_frontend = [
        PendingCall(tool_use_id=c.id, name=c.name, input=c.input, approval=routed.approvals.get(c.id))
        for c in routed.frontend
    ]
    state.pending_frontend += [p for child in paused for p in child.calls]
    state.pending_children = [child.child for child in paused]
    state.pending_backend_results = [o.block for o in routed.outcomes.values()]
    state.pending_order = [c.id for c in calls]


async def _cap_spawns(
    ctx: RunContext, spawns: list[ToolCallRequest], outcomes: dict[str, ToolOutcome]
) -> list[ToolCallRequest]:
    """The spawning calls within the per-step cap; each one past it is answered ``is_error`` (spec §13.9-a).

    Slots go in call order. Background tasks of earlier steps still running hold one each.
    A call that would start nothing (no such child, an empty task, a ``background`` that is
    not a boolean) holds none: ``run_subagent`` answers it with its own error.
    """
    cap = ctx.options.max_subagents_per_step
    running = sum(1 for task in ctx.state.tasks if task.status not in TERMINAL)
    used = running
    kept: list[ToolCallRequest] = []
    for call in spawns:
        starts = not isinstance(parse_spawn(call.input, ctx.options.subagents), str) and isinstance(
            background_flag(call.input), bool
        )
        if not starts or used < cap:
            used += starts
            kept.append(call)
            continue
        outcomes[call.id] = await refuse(ctx, call, over_cap(cap, running))
    return kept


class Refused(str):
    """Why ``permit`` refused a call (the text the model gets), with the reason for its span (spec [IN3-a])."""

    __slots__ = ("reason",)

    def __new__(cls, text: str, reason: RefusalReason) -> Refused:
        """``text`` as a string that also carries ``reason``."""
        made = super().__new__(cls, text)
        made.reason = reason
        return made

    reason: RefusalReason


@dataclass(frozen=True, slots=True)
class Approval:
    """A call the permissions ask a person about, with no callback to answer: the run pauses (spec §12.6)."""

    call: ToolCallRequest
    reason: str


async def permit(ctx: RunContext, call: ToolCallRequest) -> ToolCallRequest | Approval | str:
    """PreToolUse hooks, then the permissions: the call to run, an approval to wait for, or why it is not run.

    A repeat with no ``can_use_tool`` sets ``ctx.loop_stop`` (spec §16); a deny with
    ``interrupt`` sets ``ctx.interrupt`` (spec §12.4-c). The mode and rules are decided by
    ``permissions.resolve`` (spec §12.5-i); a durable ask is an ``Approval`` (spec §12.6).
    """
    options = ctx.options
    run = ctx.run
    # spec §16: the same call N times in a row goes to can_use_tool with a reason, or stops the run.
    repeat = loop_guard.check(options, run, call)
    if repeat is not None and options.can_use_tool is None:
        ctx.loop_stop = repeat
        return Refused(loop_guard.refusal(repeat), "loop_detected")
    tool_input: Mapping[str, Any] = call.input
    hooks = options.hooks.get("PreToolUse", [])
    if hooks:
        data = HookInput(
            event="PreToolUse",
            agent_uuid=ctx.agent_uuid,
            run_id=run.run_id,
            tool_name=call.name,
            tool_use_id=call.id,
            tool_input=call.input,
        )
        decision, tool_input = await run_hooks(hooks, data, ctx.hook_failures, timeout=options.hook_timeout)
        if decision.action == "block":
            return Refused(decision.message or "blocked by a PreToolUse hook", "hook_blocked")
        if decision.action == "abort_all":
            # [R12.7-c]: the whole step is not run and the run ends interrupted (as a deny with interrupt).
            ctx.interrupt = decision.message or "aborted by a PreToolUse hook"
            return Refused(ctx.interrupt, "interrupted")
    context = ToolPermissionContext(agent_uuid=ctx.agent_uuid, run_id=run.run_id, tool_use_id=call.id, reason=repeat)
    out = await resolve(
        ctx.state.permissions,
        options.permission_rules,
        call.name,
        tool_input,
        context,
        options.can_use_tool,
        kind=_kind(ctx, call.name),
    )
    ctx.state.permissions = out.state
    if out.failure is not None:
        ctx.hook_failures.append(HookFailure(event="can_use_tool", index=0, message=out.failure))
    answer = out.answer
    if isinstance(answer, PermissionDeny):
        if answer.interrupt:
            ctx.interrupt = answer.message
        return Refused(answer.message, "permission_denied")
    if isinstance(answer, PermissionAsk):
        if options.background:  # [AP3-a]: nobody can approve in a background task; it cannot pause
            return background_denial(call.name, answer.reason)
        return Approval(ToolCallRequest(id=call.id, name=call.name, input=dict(tool_input)), answer.reason)
    if answer.updated_input is not None:
        tool_input = answer.updated_input
    if tool_input is call.input:
        return call
    return ToolCallRequest(id=call.id, name=call.name, input=dict(tool_input))


def _kind(ctx: RunContext, name: str) -> CallKind:
    """What kind of call ``name`` is, for the permissions (a frontend call is never asked durably)."""
    tool_def = ctx.tools.get(name)
    if tool_def is not None and tool_def.executor == "frontend":
        return "frontend"
    if name == SUBAGENT_TOOL and ctx.options.subagents:
        return "subagent"
    return "backend"


async def traced_subagent(ctx: RunContext, call: ToolCallRequest) -> ToolOutcome | ChildPaused:
    """``run_subagent`` in the spawning call's ``execute_tool`` span: the child's run (or task) is its child (§20.3)."""
    tracing = ctx.tracing
    with tracing.tool_call(name=call.name, call_id=call.id, executor="subagent", arguments=call.input) as span:
        done = await run_subagent(ctx, call)
        if isinstance(done, ChildPaused):
            span.record_paused()
        else:
            span.record_result(is_error=done.is_error, result=done.text)
        return done


async def run_subagent(ctx: RunContext, call: ToolCallRequest) -> ToolOutcome | ChildPaused:
    """Spawn one child: in the background (the result is a task id, spec §14.1), or into this response.

    A foreground child's final answer is the call's result, sent when it ends (spec §13.3-a);
    one that pauses for frontend tools is returned as ``ChildPaused``: the step pauses with
    it (§13.5-a).
    """
    parsed = parse_spawn(call.input, ctx.options.subagents)
    in_background = background_flag(call.input)  # [SA1-b]: run_in_background, or background
    done: ToolOutcome | ChildPaused
    if isinstance(parsed, str):
        done = error_outcome(ctx.emitter, call, parsed)
    elif isinstance(in_background, str):
        done = error_outcome(ctx.emitter, call, in_background)
    elif in_background:
        done = await background_tasks.start(ctx, call, *parsed)
    else:
        done = await subagent_run.spawn(ctx, call, *parsed)
    if isinstance(done, ToolOutcome):
        ctx.answered[call.id] = done.block
        await ctx.send(done.lines)
    return done


async def last_call(ctx: RunContext, step: int) -> str:
    """``max_steps`` reached: one call with ``tool_choice: none`` so the model can answer (spec §5.2)."""
    await compact_before_call(ctx)  # spec §15: before each call, never inside a block
    await ctx.send(step_start(ctx, step))  # envelope-v1 [4.16-d]: the last call is a step too
    outcome = await model_call(ctx, step, tool_choice_none=True)
    append_assistant(ctx.state, outcome.content)
    calls = tool_uses(outcome.content)
    if calls:
        # The model called tools anyway: answer them as not run, so history stays valid.
        ctx.answered = {}
        blocks = [(await ctx.answer_error(call, "not run: the run reached max_steps")).block for call in calls]
        append_user(ctx.state, blocks)
    await ctx.send(step_finish(ctx, step, outcome, STOP_MAX_STEPS))
    return STOP_MAX_STEPS
