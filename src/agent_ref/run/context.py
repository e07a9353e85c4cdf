"""What one response of a run works with and changes: ``RunContext`` (issue 28 §2).

Owns: the per-run state that is not stored (what ``AgentState`` and ``RunState`` in
``store/state.py`` do not keep between processes): the response in use and its emitter, the
step, the results already decided for the step's calls, the two ways a step stops a run
(a permission ``interrupt`` and the loop guard's stop), hook failures not yet reported,
the validated structured answer, the compaction boundaries, the live background tasks,
the paused children being resumed; and the seams every stage uses: hooks (``fire``),
their failures' ``error`` envelopes, and answering a call with an error
(``answer_error``). Does not own: the configuration (``run/options.py``, read-only here) or
what the stages decide (each stage module).

One ``RunContext`` is made per response (``run``, ``continue_with_tool_results``,
``abandon``, a recovery) by ``Agent``; the stages take it and change only it and the
stored state it holds (``state``). Nothing in it outlives the response except what the
agent copies back (``context_tokens``, the size the next call's compaction check reads).

The conversation has one name, ``history``, in three places: ``AgentState.messages`` is
the API context (compacted, sent to the model), ``RunState.history`` the run's own turns
(never compacted; ``AgentResult.conversation_history`` and ``RunRecord.messages`` are
copies of it under their stored names).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..models.pricing import cost_usd
from ..policy.hooks import HookDecision, HookFailure, HookInput, run_hooks
from ..tools.context import status_lines
from ..tools.core import ToolCallRequest, ToolOutcome, error_outcome
from ..tracing import NOOP, default_tracing

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Mapping, Sequence

    from envelope import Emitter

    from ..models.core import Model
    from ..store.core import Store
    from ..store.sessions import Inbox
    from ..store.state import AgentState, PendingChild, RunState
    from ..tools.core import Tool
    from ..tracing import Tracing
    from .compaction import Compactor
    from .finish import AgentResult
    from .options import AgentOptions
    from .response import Sink, _Response

__all__ = ["ChildAgent", "ParentLink", "Resuming", "RunContext"]


@dataclass(frozen=True, slots=True, eq=False)
class ParentLink:
    """Where a subagent's lines go: its parent, the spawning call, the parent's response (spec §13.3).

    Attributes:
        agent_uuid: the parent agent.
        tool_use_id: the parent's ``spawn_subagent`` call.
        response: the parent's response, which carries the child's lines.
        name: the child's name in the parent's ``subagents`` (its run span's, spec §20.2-a).
    """

    agent_uuid: str
    tool_use_id: str
    response: _Response
    name: str | None = None


class ChildAgent(Protocol):
    """A subagent as the run drives it (spec §13-§14): ``Agent`` is one; a Protocol of the run wing (STYLE §17).

    The run builds a child with ``RunContext.new_agent``, links it to its parent's response
    (``parent``), runs or resumes it, and reads back its id, store and state.
    """

    state: AgentState
    parent: ParentLink | None

    @property
    def agent_uuid(self) -> str:
        """The child's id."""
        ...

    @property
    def store(self) -> Store:
        """Where the child's state is saved."""
        ...

    async def run(self, prompt: str, sink: Sink) -> AgentResult:
        """Run ``prompt`` to its end or a pause."""
        ...

    async def continue_with_tool_results(self, results: Sequence[Mapping[str, Any]], sink: Sink) -> AgentResult:
        """Resume a pause with the frontend's results."""
        ...

    async def recover(self) -> AgentResult | None:
        """Put a run whose process died back to its last saved point (spec §10.2-b)."""
        ...

    async def abandon(self, *, reason: str = ...) -> AgentResult:
        """Close a paused run as abandoned (spec §13.5-d)."""
        ...


@dataclass(slots=True, eq=False)
class Resuming:
    """Paused children to continue at the start of a resumed response (spec §13.5-c).

    Attributes:
        children: each paused child's record and its loaded agent.
        results: the browser's results, all of them (each child takes its own).
        by_id: the step's results so far, by ``tool_use_id``.
        approved: the agent's own calls a person approved, to run first (spec §12.6-c).
    """

    children: list[tuple[PendingChild, ChildAgent]]
    results: list[Mapping[str, Any]]
    by_id: dict[str, dict[str, Any]]
    approved: list[ToolCallRequest] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class RunContext:
    """The state of one response of a run, and what it reads (see the module docstring).

    Attributes:
        options: the agent's configuration (read-only).
        model: where completions come from.
        store: where the state is saved.
        tools: the agent's tools by name (``task_status`` included when it has subagents).
        state: the agent's stored state; ``state.run`` is the run in progress.
        emitter: makes this agent's envelope lines.
        response: the response being sent.
        new_agent: builds a child agent (``Agent``'s class: a ``ChildAgent``), for subagents.
        parent: set when this agent runs as a subagent (spec §13.3).
        step: the step in progress (a model call and its tools).
        answered: the results of the step's calls already decided, by ``tool_use_id``: an
            abort or a failure answers the others (spec §5.5-b).
        interrupt: a ``can_use_tool`` deny with ``interrupt`` set: its message; the run ends
            ``interrupted`` after the step's calls are answered (spec §12.4-c).
        loop_stop: the loop guard stopped a repeat with no ``can_use_tool``: why; the run
            ends ``loop_detected`` (spec §16).
        hook_failures: hooks that raised, not yet reported on the stream (spec §12.3-a).
        structured: the validated structured answer, in a 1-tuple (its value may be
            ``None``), once the run gave one (spec §17).
        compactions: the compaction boundaries of this run, in order (spec §15).
        live_tasks: the background tasks' futures, by task id (spec §14).
        prompt: the prompt whose SessionStart and UserPromptSubmit hooks are still to run.
        resuming: paused children to continue first (spec §13.5-c).
        frontend_answers: the frontend results a resume brought, whose PostToolUse hooks
            are still to fire before the next model call ([AP1-a]).
        context_tokens: the last call's context size (seed 001's formula), ``None`` until
            a call measured it or after a compaction.
        manual_compaction: a compaction ``Agent.compact`` asked for, run before the next call.
        inbox: messages ``Agent.send`` queued for the next step boundary (spec §S2).
        span: this response's run span (``tracing.NOOP`` outside one, spec §20).
        step_span: the step span open now, if any.
        workspace_steps: what each step of this response changed in the workspace, for
            ``meta_final.workspace_steps`` (spec [WU1-f]).
    """

    options: AgentOptions
    model: Model
    store: Store
    tools: Mapping[str, Tool]
    state: AgentState
    emitter: Emitter
    response: _Response
    new_agent: Callable[..., ChildAgent]
    parent: ParentLink | None = None
    step: int = 1
    answered: dict[str, dict[str, Any]] = field(default_factory=dict)
    interrupt: str | None = None
    loop_stop: str | None = None
    hook_failures: list[HookFailure] = field(default_factory=list)
    structured: tuple[Any] | None = None
    compactions: list[dict[str, Any]] = field(default_factory=list)
    live_tasks: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    prompt: str | None = None
    resuming: Resuming | None = None
    frontend_answers: list[tuple[ToolCallRequest, ToolOutcome]] = field(default_factory=list)
    context_tokens: int | None = None
    manual_compaction: Compactor | None = None
    inbox: Inbox | None = None
    span: Any = NOOP
    step_span: Any = None
    workspace_steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tracing(self) -> Tracing:
        """The agent's ``Tracing`` (the global provider's when the options give none, spec §20.6-a)."""
        return self.options.tracing if self.options.tracing is not None else default_tracing()

    def enter_step(self, step: int) -> None:
        """End the step span open (if any) and open step ``step``'s, current until the next (spec §20.2-a)."""
        self.end_step(None)
        span = self.tracing.step(step)
        span.__enter__()
        self.step_span = span

    def end_step(self, exc: BaseException | None) -> None:
        """End the step span open (if any); ``exc`` is the exception that ends it."""
        span, self.step_span = self.step_span, None
        if span is not None:
            span.__exit__(type(exc) if exc is not None else None, exc, None)

    @property
    def agent_uuid(self) -> str:
        """The agent's id."""
        return self.state.agent_uuid

    @property
    def run(self) -> RunState:
        """The run in progress (the context of a response always has one)."""
        run = self.state.run
        assert run is not None, "a RunContext is made for a run in progress"
        return run

    def add_usage(self, usage: Mapping[str, int]) -> None:
        """Count one call's usage in the run's and the agent's, and the run's cost (spec §11.2)."""
        run = self.run
        run.usage.add(usage)
        self.state.usage.add(usage)
        run.cost_usd = cost_usd(self.model.name, run.usage, self.options.prices)

    async def send(self, lines: list[bytes]) -> None:
        """Send lines on the response."""
        await self.response.send(lines)

    async def fire(self, event: str, **fields: Any) -> HookDecision:
        """Run the hooks of an event other than PreToolUse; the standing decision (spec §12.7-a).

        ``fields`` are ``HookInput``'s (``prompt``, ``tool_name``, ``subagent_uuid``,
        ``transcript``, ``notification_kind``...). Failures are kept for reporting; each hook
        runs within ``hook_timeout`` unless its matcher sets one ([R12.8-b]).
        """
        hooks = self.options.hooks.get(event, [])
        run = self.state.run
        if not hooks or run is None:
            return HookDecision()
        fields["tool_input"] = dict(fields.get("tool_input") or {})
        data = HookInput(
            event=event,  # type: ignore[arg-type]  # one of HOOK_EVENTS, checked by the callers' literals
            agent_uuid=self.agent_uuid,
            run_id=run.run_id,
            **fields,
        )
        decision, _ = await run_hooks(hooks, data, self.hook_failures, timeout=self.options.hook_timeout)
        return decision

    async def fire_post_tool(self, call: ToolCallRequest, done: ToolOutcome) -> None:
        """PostToolUse, or PostToolUseFailure for an ``is_error`` result (spec §12.1-a)."""
        event = "PostToolUseFailure" if done.is_error else "PostToolUse"
        await self.fire(event, tool_name=call.name, tool_use_id=call.id, tool_input=call.input, result=done.text)

    def hook_failure_lines(self) -> list[bytes]:
        """One ``meta_status`` of kind ``hook`` per failed hook (spec §12.3-a, envelope-v1 §4.16), and forget them.

        The run goes on past a failed hook, so its failure is the hook's outcome, not the
        run's: a status, never an ``error`` (envelope-v1 [4.16-c]).
        """
        failures, self.hook_failures = self.hook_failures, []
        lines: list[bytes] = []
        for failure in failures:
            payload = {
                "kind": "hook",
                "event": failure.event,
                "outcome": "failed",
                "hook": failure.index,
                "message": f"a {failure.event} hook failed: {failure.message}",
            }
            lines += status_lines(self.emitter, payload)
        return lines

    async def report_hook_failures(self) -> None:
        """Send the ``meta_status`` lines of the hooks that failed since the last report."""
        lines = self.hook_failure_lines()
        if lines:
            await self.response.send(lines)

    def status_envelope(self, payload: Mapping[str, Any]) -> list[bytes]:
        """A ``meta_status`` envelope of this agent with ``payload`` (none under the seed profile; §4.16)."""
        return status_lines(self.emitter, payload)

    def error_envelope(self, payload: Mapping[str, Any]) -> list[bytes]:
        """An ``error`` envelope of this agent with ``payload``."""
        return self.emitter.buffered("error", json.dumps(payload, ensure_ascii=False))

    async def answer_error(self, call: ToolCallRequest, text: str, *, stage: bool = False) -> ToolOutcome:
        """Answer ``call`` with an ``is_error`` result: sent (or staged), and kept as decided (spec §5.5-b)."""
        done = error_outcome(self.emitter, call, text)
        self.answered[call.id] = done.block
        if stage:
            self.response.stage(done.lines)
        else:
            await self.response.send(done.lines)
        return done
