"""Where a run meets tracing and long-term memory: the run span, recall and remember (spec §20.6, §21.5).

Owns: the run span of a response (``run_span``: its agent name, its parent call, the
pause's ``traceparent`` it continues), how a response's end is recorded on it
(``end_run``, ``end_paused``), the frontend calls' spans, and the wiring of the memory
store (``recall`` before a fresh run of a root agent, ``remember`` after its end, their
failures as ``error`` envelopes). Does not own: the spans and their attributes
(``tracing.py``), the memory store (``tools/memory_store.py``), or when a response starts and
ends (``agent.py``, ``run/loop.py``, ``run/finish.py``, which call these). Functions take the
response's ``RunContext``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..tools import memory_store

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..tools.core import ToolCallRequest
    from .context import RunContext

__all__ = ["end_paused", "end_run", "recall", "remember", "run_span", "trace_frontend"]

#: The stop reason of a run closed after its process died: it is not remembered (spec §21.5-a).
_LOST = "lost"
_ERROR = "error"


def run_span(ctx: RunContext) -> Any:
    """The ``invoke_agent`` span of this response (spec §20.2-a); a resumed one continues the pause's trace (§20.3-a).

    A subagent's is named after its name in the parent's ``subagents`` and, opened while
    the spawning call's span is current, is that span's child.
    """
    run = ctx.run
    parent = ctx.parent
    return ctx.tracing.run(
        agent_id=ctx.agent_uuid,
        agent_name=parent.name if parent is not None else None,
        run_id=run.run_id,
        model=ctx.model.name,
        response=run.responses - 1,
        parent_tool_use_id=parent.tool_use_id if parent is not None else None,
        resumed_from=run.traceparent,
    )


def end_run(ctx: RunContext, stop_reason: str, *, error_payload: Mapping[str, Any] | None = None) -> None:
    """Record the response's end on its run span: stop reason, the run's tokens, cost and steps (spec §20.2-a).

    A run ending ``error`` has the error envelope's ``type`` as its ``error.type`` (§20.2-b).
    """
    run = ctx.run
    kind = error_payload.get("type") if error_payload is not None and stop_reason == _ERROR else None
    error_type = kind if isinstance(kind, str) else None
    usage = run.usage.to_dict()
    ctx.span.end_run(stop_reason, usage=usage, cost_usd=run.cost_usd, steps=run.steps, error_type=error_type)


def end_paused(ctx: RunContext, stop_reason: str) -> None:
    """A pause: the run span's ``traceparent`` is kept in the run's state for the resume (spec §20.3-a)."""
    ctx.run.traceparent = ctx.span.traceparent()
    end_run(ctx, stop_reason)


def trace_frontend(ctx: RunContext, calls: list[ToolCallRequest]) -> None:
    """One ``execute_tool`` span per frontend call, ended at once: the browser runs it (spec §20.2-a)."""
    tracing = ctx.tracing
    for call in calls:
        with tracing.tool_call(name=call.name, call_id=call.id, executor="frontend", arguments=call.input) as span:
            span.record_paused()


async def recall(ctx: RunContext, prompt: str) -> list[bytes]:
    """Before a fresh run of a root agent: the memory block into the run's state; a failure's ``error`` lines.

    The block is kept in ``RunState.memory_context``, so every call of the run (a resume in
    another process included) sends the same system prompt (spec §21.5-a).
    """
    memory = ctx.options.memory
    if memory is None or ctx.parent is not None:
        return []
    block, failure = await memory_store.recall(memory, ctx.agent_uuid, prompt, timeout=ctx.options.memory_timeout)
    ctx.run.memory_context = block
    return [] if failure is None else ctx.error_envelope(failure.payload())


async def remember(ctx: RunContext, stop_reason: str) -> list[bytes]:
    """After the end of a root agent's run (not one closed ``lost``): update the store; a failure's ``error`` lines."""
    memory = ctx.options.memory
    if memory is None or ctx.parent is not None or stop_reason == _LOST:
        return []
    failure = await memory_store.remember(memory, ctx.agent_uuid, ctx.run.history, timeout=ctx.options.memory_timeout)
    return [] if failure is None else ctx.error_envelope(failure.payload())
