"""Stages 3 and 4, route the tool calls and run them: hooks, permissions, backend tools, subagents.

Owns: ``run_step_tools`` (PreToolUse hooks and ``can_use_tool`` per call, spec
``spec/agent-ref.md`` §12; frontend calls set aside for the pause, §3; backend tools and
subagents run concurrently, §2.3, §13), ``run_subagent`` (§13), ``last_call`` (§5.2) and
``answer_unanswered`` (§5.5-b). Does not own: the tools themselves (``tools.py``), running
a child (``subagent_run.py``), the hook machinery (``hooks.py``), or the stream end. Functions take the ``Agent`` as
``self``: ``Agent`` binds them as its methods.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from . import loop_guard, subagent_run
from .background import TERMINAL
from .finish import STOP_MAX_STEPS
from .hooks import HookFailure, HookInput, run_hooks
from .permissions import PermissionDeny, ToolPermissionContext, ask
from .record import _tool_uses
from .state import PendingCall
from .subagent_run import ChildPaused
from .subagents import SUBAGENT_TOOL, over_cap, parse_spawn
from .tools import ToolCallRequest, ToolOutcome, error_outcome, run_tools

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .agent import Agent
    from .response import _Response

log = logging.getLogger("agent_ref")


async def run_step_tools(
    self: Agent, response: _Response, calls: list[ToolCallRequest], bad_inputs: Mapping[str, str]
) -> list[ToolCallRequest]:
    """Route the step's calls, run the backend ones and the subagents, record; return the frontend ones."""
    outcomes: dict[str, ToolOutcome] = {}
    backend: list[ToolCallRequest] = []
    spawns: list[ToolCallRequest] = []
    frontend: list[ToolCallRequest] = []
    self._answered = {}
    self._interrupted = None
    for call in calls:
        if call.id in bad_inputs:
            # spec §1.3-a: a cut or unparseable call is answered, never run.
            done = error_outcome(self._emitter, call, bad_inputs[call.id])
            outcomes[call.id] = done
            self._answered[call.id] = done.block
            await response.send(done.lines)
            continue
        routed = await self._permit(call)
        if isinstance(routed, str):
            # spec §12.2-b, §12.4-a: a blocked or denied call is an is_error result the model sees.
            done = error_outcome(self._emitter, call, routed)
            outcomes[call.id] = done
            self._answered[call.id] = done.block
            await response.send(done.lines)
            continue
        tool_def = self.tools.get(routed.name)
        if tool_def is not None and tool_def.executor == "frontend":
            frontend.append(routed)
        elif routed.name == SUBAGENT_TOOL and self.subagents:
            spawns.append(routed)
        else:
            backend.append(routed)
    await self._report_hook_failures(response)
    if self._interrupted is not None:
        # spec §12.4-c: an interrupt answers the calls not yet answered and ends the run.
        for call in [*backend, *spawns, *frontend]:
            done = error_outcome(self._emitter, call, "not run: the run was interrupted")
            outcomes[call.id] = done
            self._answered[call.id] = done.block
            await response.send(done.lines)
        self._append_user([outcomes[c.id].block for c in calls])
        return []
    spawns = await _cap_spawns(self, response, spawns, outcomes)

    def answered(call: ToolCallRequest, done: ToolOutcome) -> None:
        self._answered[call.id] = done.block

    ran, spawned = await asyncio.gather(
        run_tools(
            backend,
            self.tools,
            self._emitter,
            response.send,
            max_concurrency=self.max_tool_concurrency,
            on_result=answered,
            timeout=self.tool_timeout,
        ),
        asyncio.gather(*(self._run_subagent(response, call) for call in spawns)),
    )
    paused: list[ChildPaused] = []
    finished: list[ToolOutcome | ChildPaused] = [*ran, *spawned]
    for call, ended in zip([*backend, *spawns], finished, strict=True):
        if isinstance(ended, ChildPaused):
            paused.append(ended)  # spec §13.5-a: answered when the child ends, after the resume
            continue
        outcomes[call.id] = ended
        event = "PostToolUseFailure" if ended.is_error else "PostToolUse"
        await self._fire(event, tool_name=call.name, tool_use_id=call.id, tool_input=call.input, result=ended.text)
    await self._report_hook_failures(response)
    if frontend or paused:
        state = self.state
        state.pending_frontend = [PendingCall(tool_use_id=c.id, name=c.name, input=c.input) for c in frontend]
        state.pending_frontend += [p for child in paused for p in child.calls]
        state.pending_children = [child.child for child in paused]
        state.pending_backend_results = [o.block for o in outcomes.values()]
        state.pending_order = [c.id for c in calls]
        return [*frontend, *(c for c in spawns if c.id in {p.child.tool_use_id for p in paused})]
    self._append_user([outcomes[c.id].block for c in calls])
    return []


async def _cap_spawns(
    self: Agent, response: _Response, spawns: list[ToolCallRequest], outcomes: dict[str, ToolOutcome]
) -> list[ToolCallRequest]:
    """The spawning calls within the per-step cap; each one past it is answered ``is_error`` (spec §13.9-a).

    Slots go in call order. Background tasks of earlier steps still running hold one each.
    A call that would start nothing (no such child, an empty task, a ``background`` that is
    not a boolean) holds none: ``spawn`` answers it with its own error.
    """
    cap = self.max_subagents_per_step
    background = sum(1 for task in self.state.tasks if task.status not in TERMINAL)
    used = background
    kept: list[ToolCallRequest] = []
    for call in spawns:
        starts = not isinstance(parse_spawn(call.input, self.subagents), str) and isinstance(
            call.input.get("background", False), bool
        )
        if not starts or used < cap:
            used += starts
            kept.append(call)
            continue
        done = error_outcome(self._emitter, call, over_cap(cap, background))
        outcomes[call.id] = done
        self._answered[call.id] = done.block
        await response.send(done.lines)
    return kept


async def permit(self: Agent, call: ToolCallRequest) -> ToolCallRequest | str:
    """PreToolUse hooks, then ``can_use_tool``: the call to run, or why it is not run (spec §12)."""
    run = self.state.run
    assert run is not None
    # spec §16: the same call N times in a row goes to can_use_tool with a reason, or stops the run.
    repeat = loop_guard.check(self, call)
    if repeat is not None and self.can_use_tool is None:
        return repeat
    tool_input: Mapping[str, Any] = call.input
    hooks = self.hooks.get("PreToolUse", [])
    if hooks:
        data = HookInput(
            event="PreToolUse",
            agent_uuid=self.agent_uuid,
            run_id=run.run_id,
            tool_name=call.name,
            tool_use_id=call.id,
            tool_input=call.input,
        )
        decision, tool_input = await run_hooks(hooks, data, self._hook_failures)
        if decision.action == "block":
            return decision.message or "blocked by a PreToolUse hook"
    if self.can_use_tool is not None:
        context = ToolPermissionContext(
            agent_uuid=self.agent_uuid, run_id=run.run_id, tool_use_id=call.id, reason=repeat
        )
        answer, failed = await ask(self.can_use_tool, call.name, tool_input, context)
        if failed is not None:
            self._hook_failures.append(HookFailure(event="can_use_tool", index=0, message=failed))
        if isinstance(answer, PermissionDeny):
            if answer.interrupt:
                self._interrupted = answer.message
            return answer.message
        if answer.updated_input is not None:
            tool_input = answer.updated_input
    if tool_input is call.input:
        return call
    return ToolCallRequest(id=call.id, name=call.name, input=dict(tool_input))


async def run_subagent(self: Agent, response: _Response, call: ToolCallRequest) -> ToolOutcome | ChildPaused:
    """Spawn one child into this response; its final answer is the call's result, sent when it ends (spec §13.3-a).

    A child that pauses for frontend tools is returned as ``ChildPaused``: the step pauses with it (§13.5-a).
    """
    done = await subagent_run.spawn(self, response, call)
    if isinstance(done, ToolOutcome):
        self._answered[call.id] = done.block
        await response.send(done.lines)
    return done


async def last_call(self: Agent, response: _Response, step: int) -> str:
    """``max_steps`` reached: one call with ``tool_choice: none`` so the model can answer (spec §5.2)."""
    outcome = await self._model_call(response, step, tool_choice_none=True)
    self._append_assistant(outcome.content)
    calls = _tool_uses(outcome.content)
    if calls:
        # The model called tools anyway: answer them as not run, so history stays valid.
        self._answered = {}
        blocks = []
        for call in calls:
            done = error_outcome(self._emitter, call, "not run: the run reached max_steps")
            self._answered[call.id] = done.block
            await response.send(done.lines)
            blocks.append(done.block)
        self._append_user(blocks)
    return STOP_MAX_STEPS


async def answer_unanswered(self: Agent, response: _Response, text: str) -> None:
    """Give every call of the last assistant turn a result, so the history stays valid (spec §5.5-b)."""
    messages = self.state.messages
    if not messages or messages[-1].get("role") != "assistant":
        return
    calls = _tool_uses(list(messages[-1].get("content") or []))
    if not calls:
        return
    blocks = []
    for call in calls:
        block = self._answered.get(call.id)
        if block is None:
            done = error_outcome(self._emitter, call, text)
            await response.send(done.lines)
            block = done.block
        blocks.append(block)
    self._append_user(blocks)
