"""Stage 6, stop: end a response with a pause or a ``meta_final`` (spec ``spec/agent-ref.md`` §3.1, §4.4, §7).

Owns: ``pause``, ``finish`` (SessionEnd hooks first, §12.1-a; ``[DONE]`` only for a
response of its own, §13.3-b), ``cost``, the one place an ``AgentResult`` is built
(``result_of``), and the ends of an abort (§5.5: ``answer_unanswered``). Does not own:
deciding to stop (``loop.steps``). Functions take the run's context (``RunContext``) and
return the run's ``AgentResult``.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ..models.pricing import price_for
from ..store.files import files_api_fetch, keep_files
from ..store.record import append_user, last_text, tool_uses
from ..store.state import PendingCall, RunState, run_record
from . import extras as run_extras
from .call_model import close_open
from .response import DONE_LINE

if TYPE_CHECKING:
    from .context import RunContext

log = logging.getLogger("agent_ref")

#: Stop reasons of a finished run (spec §5.1). The API's own reasons pass through.
STOP_AWAITING: Final = "awaiting_frontend_tools"
STOP_MAX_STEPS: Final = "max_steps"
STOP_MAX_BUDGET: Final = "max_budget"
STOP_ERROR: Final = "error"
STOP_ABORTED: Final = "aborted"
STOP_ABANDONED: Final = "abandoned"
STOP_LOST: Final = "lost"
STOP_INTERRUPTED: Final = "interrupted"
#: A UserPromptSubmit hook refused the prompt: no model call was made ([R12.7-g]).
STOP_PROMPT_BLOCKED: Final = "prompt_blocked"


@dataclass(slots=True)
class AgentResult:
    """What ``run`` and ``continue_with_tool_results`` return.

    Attributes:
        agent_uuid: the agent.
        run_id: the run (the same before and after a pause).
        stop_reason: ``end_turn`` (or another API stop reason), ``max_steps``,
            ``max_budget``, ``error``, ``aborted``, or ``awaiting_frontend_tools``.
        final_text: the text of the last assistant message.
        steps: API calls made in the run so far.
        usage: tokens of the run so far.
        cost_usd: cost of the run so far, ``None`` for an unpriced model.
        pending_frontend_tools: the calls to answer, when paused.
        conversation_history: the messages of this run.
        error: the public error message when ``stop_reason`` is ``error``.
        structured_output: the validated final answer when the agent has an
            ``output_schema`` and the run ended with a valid one (a msgspec type's instance,
            or the JSON value), else ``None`` (spec §17).
        compactions: the compaction boundaries of the run, in order (spec §15).
        final_message: the run's last assistant message as the API gave it (``role`` and
            ``content``), ``None`` before any (seed 000's ``final_message``, [SF2-a]).
        container_id: the code-execution container the API gave the agent, ``None`` if none
            ([SF2-a]).
        agent_logs: what the run did, one entry a step, tool result, compaction and end
            (``{"action": ...}``, [SF2-b]).
    """

    agent_uuid: str
    run_id: str
    stop_reason: str
    final_text: str
    steps: int
    usage: dict[str, int]
    cost_usd: float | None
    pending_frontend_tools: list[PendingCall] = field(default_factory=list)
    conversation_history: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    structured_output: Any = None
    compactions: list[dict[str, Any]] = field(default_factory=list)
    final_message: dict[str, Any] | None = None
    container_id: str | None = None
    agent_logs: list[dict[str, Any]] = field(default_factory=list)


def agent_logs(
    history: list[dict[str, Any]], stop_reason: str, compactions: list[dict[str, Any]], error: str | None
) -> list[dict[str, Any]]:
    """The run's action log from what it recorded ([SF2-b]): its turns, tool results, compactions, its end."""
    logs: list[dict[str, Any]] = []
    step = 0
    for message in history:
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if message.get("role") == "assistant":
            step += 1
            calls = [str(b.get("name")) for b in blocks if b.get("type") == "tool_use"]
            logs.append({"action": "model_turn", "step": step, "tool_calls": calls})
            continue
        for block in blocks:
            if block.get("type") == "tool_result":
                item = {"action": "tool_result", "tool_use_id": block.get("tool_use_id")}
                logs.append({**item, "is_error": bool(block.get("is_error", False))})
    logs += [{"action": "compaction", **c} for c in compactions]
    end: dict[str, Any] = {"action": "stop", "stop_reason": stop_reason}
    if error is not None:
        end["error"] = error
    logs.append(end)
    return logs


def _final_message(history: list[dict[str, Any]]) -> dict[str, Any] | None:
    for message in reversed(history):
        if message.get("role") == "assistant":
            return {"role": "assistant", "content": list(message.get("content") or [])}
    return None


async def pause(ctx: RunContext) -> AgentResult:
    """Save the relay state, then send ``awaiting_frontend_tools`` and ``[DONE]`` (spec §3.1)."""
    pending = [p.element() for p in ctx.state.pending_frontend]  # a paused child's call names its agent (§13.5-b)
    # [R12.7-e]: the root's pause is notified before it is saved (a child's is announced by its root);
    # [AP2-a]: one notification per kind, approval first.
    for kind, text in pause_notifications(ctx.state.pending_frontend):
        await ctx.fire("Notification", notification=text, notification_kind=kind)
    ctx.response.stage(ctx.hook_failure_lines())
    ctx.response.stage(ctx.emitter.buffered("awaiting_frontend_tools", json.dumps(pending, ensure_ascii=False)))
    ctx.response.stage([DONE_LINE])
    result = await save_paused(ctx)  # spec §3.1-a: saved before it is sent
    await ctx.response.flush()
    return result


def pause_notifications(pending: list[PendingCall]) -> list[tuple[str, str]]:
    """The ``(kind, text)`` of each Notification a pause on ``pending`` gives ([AP2-a]).

    ``approval`` (calls awaiting a person's approval) comes before ``frontend_tools``; a
    kind with no call is left out. Each text names the tools, sorted, once each.
    """
    approvals = sorted({p.name for p in pending if p.approval is not None})
    frontend = sorted({p.name for p in pending if p.approval is None})
    out: list[tuple[str, str]] = []
    if approvals:
        out.append(("approval", f"approval needed for: {', '.join(approvals)}"))
    if frontend:
        out.append(("frontend_tools", f"waiting for frontend tools: {', '.join(frontend)}"))
    return out


async def save_paused(ctx: RunContext) -> AgentResult:
    """Store the agent as paused with the response's lines so far; the result of a pause (spec §3.1-a).

    A child's pause (spec §13.5-a) is this alone: the root agent's ``awaiting_frontend_tools``
    announces it, listing the child's calls with its ``agent`` (§13.5-b).
    """
    state = ctx.state
    state.status = "awaiting_frontend_tools"
    state.lease_owner = None
    state.lease_expires_at = 0.0
    run_extras.end_paused(ctx, STOP_AWAITING)  # spec §20.3-a: the traceparent is saved with the pause
    await ctx.store.save(state, log=ctx.response.batch())
    pending = list(state.pending_frontend)
    return result_of(ctx.run, state.agent_uuid, STOP_AWAITING, pending=pending, container_id=state.container_id)


def result_of(
    run: RunState,
    agent_uuid: str,
    stop_reason: str,
    *,
    pending: list[PendingCall] | None = None,
    error: str | None = None,
    structured: tuple[Any] | None = None,
    compactions: list[dict[str, Any]] | None = None,
    container_id: str | None = None,
) -> AgentResult:
    """The ``AgentResult`` of ``run`` as it stands (a pause or an end)."""
    history = list(run.history)
    return AgentResult(
        agent_uuid=agent_uuid,
        run_id=run.run_id,
        stop_reason=stop_reason,
        final_text=last_text(run.history),
        steps=run.steps,
        usage=run.usage.to_dict(),
        cost_usd=run.cost_usd,
        pending_frontend_tools=pending or [],
        conversation_history=history,
        error=error,
        structured_output=structured[0] if structured is not None else None,
        compactions=compactions or [],
        final_message=_final_message(history),
        container_id=container_id,
        agent_logs=agent_logs(history, stop_reason, compactions or [], error),
    )


async def finish(ctx: RunContext, stop_reason: str, *, error_payload: dict[str, Any] | None = None) -> AgentResult:
    """Stage ``error``?, ``meta_files``?, ``meta_final``, ``[DONE]``; save; then send (spec §4.4, §7)."""
    state = ctx.state
    run = ctx.run
    response = ctx.response
    await ctx.fire("SessionEnd", stop_reason=stop_reason)  # spec §12.1-a: every end, not a pause
    response.stage(ctx.hook_failure_lines())
    response.stage(await run_extras.remember(ctx, stop_reason))  # spec §21.5-a
    run_extras.end_run(ctx, stop_reason, error_payload=error_payload)
    if error_payload is not None:
        response.stage(ctx.error_envelope(error_payload))
    files = run.files  # spec §5.6-c: the run's own files, once, at its end (a pause kept them in the state)
    backend = ctx.options.file_backend
    if files and backend is not None:  # [SF1-a]: kept beside the store, named as they are
        fetch = files_api_fetch(getattr(ctx.model, "client", None))
        await keep_files(backend, files, fetch, principal=state.principal, run_id=run.run_id)  # server [FS2-a]
    if files:
        response.stage(ctx.emitter.buffered("meta_files", json.dumps({"files": files}, ensure_ascii=False)))
    structured, ctx.structured = ctx.structured, None
    compactions, ctx.compactions = ctx.compactions, []
    meta = _meta_final(ctx, stop_reason, structured, compactions)
    response.stage(ctx.emitter.buffered("meta_final", json.dumps(meta, ensure_ascii=False)))
    if not response.nested:
        response.stage([DONE_LINE])  # spec §13.3-b: one [DONE] per response, the parent's
    record = run_record(state, stop_reason, time.time(), last_text(run.history))
    state.status = "idle"
    state.run = None
    state.current_step = 0
    state.lease_owner = None
    state.lease_expires_at = 0.0
    await ctx.store.save(state, log=response.batch(), run=record)
    await response.flush()
    error = error_payload["message"] if error_payload and stop_reason == STOP_ERROR else None
    return result_of(
        run,
        state.agent_uuid,
        stop_reason,
        error=error,
        structured=structured,
        compactions=compactions,
        container_id=state.container_id,
    )


def _meta_final(
    ctx: RunContext, stop_reason: str, structured: tuple[Any] | None, compactions: list[dict[str, Any]]
) -> dict[str, Any]:
    """The ``meta_final`` payload of the run's end (spec §7)."""
    run = ctx.run
    meta: dict[str, Any] = {
        "stop_reason": stop_reason,
        "total_steps": run.steps,
        "cumulative_usage": run.usage.to_dict(),
        "cost": cost(ctx, run),
        "generated_files": run.files or None,
        "run_id": run.run_id,
    }
    if ctx.options.stream_history:
        meta["conversation_history"] = run.history
    if structured is not None:
        meta["structured_output"] = msgspec.to_builtins(structured[0])  # spec §17.2-a
    if ctx.workspace_steps:
        meta["workspace_steps"] = ctx.workspace_steps  # spec [WU1-f]: each step's change, summarised
    if compactions and ctx.options.profile == "seed":
        meta["compactions"] = compactions  # spec §15.2-c, envelope spec §10.2-d: no boundary envelope under seed
    return meta


def cost(ctx: RunContext, run: RunState) -> dict[str, Any] | None:
    """The ``cost`` of ``meta_final``: the run's total and the price it used; ``None`` unpriced."""
    price = price_for(ctx.model.name, ctx.options.prices)
    if price is None or run.cost_usd is None:
        return None
    return {
        "model": ctx.model.name,
        "total_usd": run.cost_usd,
        "input_per_mtok": price.input,
        "output_per_mtok": price.output,
    }


async def end_aborted(ctx: RunContext, message: str) -> AgentResult:
    """Close open blocks, answer unanswered calls, then ``error`` (aborted), ``meta_final``, ``[DONE]`` (§5.5)."""
    await close_open(ctx, every_agent=True)
    await answer_unanswered(ctx, "cancelled: the run was aborted before this tool call finished")
    return await finish(ctx, STOP_ABORTED, error_payload={"type": STOP_ABORTED, "message": message})


async def close_quietly(ctx: RunContext, message: str) -> None:
    """``end_aborted`` for a response nobody reads any more; failures are logged, not raised."""
    ctx.response.gone = True
    try:
        await end_aborted(ctx, message)
    except Exception:
        log.exception("could not close run of agent %s after its client went away", ctx.agent_uuid)


async def answer_unanswered(ctx: RunContext, text: str) -> None:
    """Give every call of the last assistant turn a result, so the history stays valid (spec §5.5-b)."""
    messages = ctx.state.messages
    if not messages or messages[-1].get("role") != "assistant":
        return
    calls = tool_uses(list(messages[-1].get("content") or []))
    if not calls:
        return
    blocks = []
    for call in calls:
        block = ctx.answered.get(call.id)
        if block is None:
            block = (await ctx.answer_error(call, text)).block
        blocks.append(block)
    append_user(ctx.state, blocks)
