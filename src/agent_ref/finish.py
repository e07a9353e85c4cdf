"""Stage 6, stop: end a response with a pause or a ``meta_final`` (spec ``spec/agent-ref.md`` §3.1, §4.4, §7).

Owns: ``pause``, ``finish`` (SessionEnd hooks first, §12.1-a; ``[DONE]`` only for a
response of its own, §13.3-b), ``cost``, and the ends of an abort (§5.5). Does not own:
deciding to stop (``Agent._steps``). Functions take the ``Agent`` as ``self``: ``Agent``
binds them as its methods.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .pricing import price_for
from .record import _last_text
from .response import DONE_LINE, _Response
from .state import PendingCall, RunRecord, RunState

if TYPE_CHECKING:
    from .agent import Agent

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


async def pause(self: Agent, response: _Response) -> AgentResult:
    """Save the relay state, then send ``awaiting_frontend_tools`` and ``[DONE]`` (spec §3.1)."""
    state = self.state
    run = state.run
    assert run is not None
    pending = [p.element() for p in state.pending_frontend]  # a paused child's call names its agent (§13.5-b)
    response.stage(self._emitter.buffered("awaiting_frontend_tools", json.dumps(pending, ensure_ascii=False)))
    response.stage([DONE_LINE])
    result = await save_paused(self, response)  # spec §3.1-a: saved before it is sent
    await response.flush()
    return result


async def save_paused(self: Agent, response: _Response) -> AgentResult:
    """Store the agent as paused with the response's lines so far; the result of a pause (spec §3.1-a)."""
    state = self.state
    run = state.run
    assert run is not None
    state.status = "awaiting_frontend_tools"
    state.lease_owner = None
    state.lease_expires_at = 0.0
    await self.store.save(state, log=response.batch())
    return AgentResult(
        agent_uuid=state.agent_uuid,
        run_id=run.run_id,
        stop_reason=STOP_AWAITING,
        final_text=_last_text(run.history),
        steps=run.steps,
        usage=run.usage.to_dict(),
        cost_usd=run.cost_usd,
        pending_frontend_tools=list(state.pending_frontend),
        conversation_history=list(run.history),
    )


async def finish(
    self: Agent, response: _Response, stop_reason: str, *, error_payload: dict[str, Any] | None = None
) -> AgentResult:
    """Stage ``error``?, ``meta_files``?, ``meta_final``, ``[DONE]``; save; then send (spec §4.4, §7)."""
    state = self.state
    run = state.run
    assert run is not None
    await self._fire("SessionEnd", stop_reason=stop_reason)  # spec §12.1-a: every end, not a pause
    response.stage(self._hook_failure_lines())
    if error_payload is not None:
        response.stage(self._emitter.buffered("error", json.dumps(error_payload, ensure_ascii=False)))
    files = run.files  # spec §5.6-c: the run's own files, once, at its end (a pause kept them in the state)
    if files:
        response.stage(self._emitter.buffered("meta_files", json.dumps({"files": files}, ensure_ascii=False)))
    meta: dict[str, Any] = {
        "stop_reason": stop_reason,
        "total_steps": run.steps,
        "cumulative_usage": run.usage.to_dict(),
        "cost": self._cost(run),
        "generated_files": files or None,
        "run_id": run.run_id,
    }
    if self.stream_history:
        meta["conversation_history"] = run.history
    structured, self._structured = self._structured, None
    if structured is not None:
        meta["structured_output"] = msgspec.to_builtins(structured[0])  # spec §17.2-a
    compactions, self._compactions = self._compactions, []
    self._loop_detected = False
    if compactions and self.profile == "seed":
        meta["compactions"] = compactions  # spec §15.2-c, envelope spec §10.2-d: no boundary envelope under seed
    response.stage(self._emitter.buffered("meta_final", json.dumps(meta, ensure_ascii=False)))
    if not response.nested:
        response.stage([DONE_LINE])  # spec §13.3-b: one [DONE] per response, the parent's
    final_text = _last_text(run.history)
    record = RunRecord(
        run_id=run.run_id,
        agent_uuid=state.agent_uuid,
        user_query=run.user_query,
        started_at=run.started_at,
        finished_at=time.time(),
        stop_reason=stop_reason,
        steps=run.steps,
        usage=run.usage,
        cost_usd=run.cost_usd,
        messages=run.history,
        final_text=final_text,
    )
    state.status = "idle"
    state.run = None
    state.current_step = 0
    state.lease_owner = None
    state.lease_expires_at = 0.0
    await self.store.save(state, log=response.batch(), run=record)
    await response.flush()
    return AgentResult(
        agent_uuid=state.agent_uuid,
        run_id=run.run_id,
        stop_reason=stop_reason,
        final_text=final_text,
        steps=run.steps,
        usage=run.usage.to_dict(),
        cost_usd=run.cost_usd,
        conversation_history=list(run.history),
        error=error_payload["message"] if error_payload and stop_reason == STOP_ERROR else None,
        structured_output=structured[0] if structured is not None else None,
        compactions=compactions,
    )


def cost(self: Agent, run: RunState) -> dict[str, Any] | None:
    price = price_for(self.model.name, self.prices)
    if price is None or run.cost_usd is None:
        return None
    return {
        "model": self.model.name,
        "total_usd": run.cost_usd,
        "input_per_mtok": price.input,
        "output_per_mtok": price.output,
    }


async def end_aborted(self: Agent, response: _Response, message: str) -> AgentResult:
    """Close open blocks, answer unanswered calls, then ``error`` (aborted), ``meta_final``, ``[DONE]`` (§5.5)."""
    await self._close_open(response, every_agent=True)
    await self._answer_unanswered(response, "cancelled: the run was aborted before this tool call finished")
    return await self._finish(response, STOP_ABORTED, error_payload={"type": STOP_ABORTED, "message": message})


async def close_quietly(self: Agent, response: _Response, message: str) -> None:
    """``_end_aborted`` for a response nobody reads any more; failures are logged, not raised."""
    response.gone = True
    try:
        await self._end_aborted(response, message)
    except Exception:
        log.exception("could not close run of agent %s after its client went away", self.agent_uuid)
