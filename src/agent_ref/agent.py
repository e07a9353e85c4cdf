"""The agent loop: ``Agent.run``, the frontend-tool pause, ``continue_with_tool_results``, retries.

Owns: the order of a run (spec ``spec/agent-ref.md`` §1): ``meta_init``, steps of
model call then tools, the pause for frontend tools with its state saved *before*
``awaiting_frontend_tools`` is sent, the termination conditions (§5), the
discarded-attempt signal for retries after partial output (§6.4), the end of
every response (``meta_final`` or ``awaiting_frontend_tools``, then ``[DONE]``, §7),
what faults leave behind (an abort or a gone client answers unanswered calls and
closes the run in the store, §5.5; the owner lease, recovery of a dead run and
``abandon``, §10), and the request sent per call (``request_options``, §11).
Does not own: translating API events (``envelope.anthropic.AnthropicTranslator``),
the models (``models.py``, ``scripted.py``), tools (``tools.py``), storage
(``store.py``).

Every line the agent sends goes through one ``_Response``: it feeds an
``envelope.Reconstructor`` (so a line that would break the stream fails here, in
tests, not in a browser), appends to the response's log, and calls the sink. The
lines that end a response are *staged* first: they are logged and saved with the
state in one transaction, and only then sent (§4.4).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from envelope import DecodeError, Emitter, ImageRef, Reconstructor
from envelope.anthropic import AnthropicTranslator

from . import scrub
from .errors import ConfigError, StateError, ToolResultsError
from .hooks import HOOK_EVENTS, Hook, HookFailure, HookInput, run_hooks
from .permissions import CanUseTool, PermissionDeny, ToolPermissionContext, ask
from .pricing import PRICES, Price, cost_usd, price_for
from .retry import ApiFailure, IncompleteStreamError, RetryPolicy, classify
from .state import AgentState, PendingCall, RunRecord, RunState, flat_usage
from .store import LogBatch, MemoryStore, Store
from .subagents import SUBAGENT_TOOL, AgentSpec, check_specs, parse_spawn, spawn_tool_definition
from .tools import Tool, ToolCallRequest, ToolOutcome, error_outcome, outcome, result_block, run_tools

if TYPE_CHECKING:
    from .models import Model

__all__ = ["DONE_LINE", "Agent", "AgentResult", "Sink"]

log = logging.getLogger("agent_ref")

#: What the sink receives last in every response: the SSE terminator's data (spec §7.1).
DONE_LINE: Final = b"[DONE]"

#: Receives each encoded envelope line (unframed JSON), then ``b"[DONE]"``. May be async.
Sink = Callable[[bytes], Awaitable[None] | None]

#: Stop reasons of a finished run (spec §5.1). The API's own reasons pass through.
STOP_AWAITING: Final = "awaiting_frontend_tools"
STOP_MAX_STEPS: Final = "max_steps"
STOP_MAX_BUDGET: Final = "max_budget"
STOP_ERROR: Final = "error"
STOP_ABORTED: Final = "aborted"
STOP_ABANDONED: Final = "abandoned"
STOP_LOST: Final = "lost"
STOP_INTERRUPTED: Final = "interrupted"

#: Request keys the agent sets on every call; ``request_options`` may not (spec §11.1-a).
AGENT_OWNED_PARAMS: Final = frozenset(
    {"model", "messages", "max_tokens", "system", "tools", "tool_choice", "thinking", "stream"}
)
#: Seconds a backend tool call may run unless the tool says otherwise (spec §2.5-a).
DEFAULT_TOOL_TIMEOUT: Final = 60.0
#: Seconds a ``running`` agent stays held by its process without a renewal (spec §10.2-a).
DEFAULT_LEASE_SECONDS: Final = 30.0


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


class _ClientGone(Exception):
    """The sink raised: the client is gone. The run is closed in the store, then ``error`` re-raised."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _nowhere(line: bytes) -> None:
    """The sink of a response nobody reads (``abandon`` without a sink, a recovery)."""


class _RunFailed(Exception):
    def __init__(self, failure: ApiFailure, attempts: int) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.attempts = attempts


@dataclass(slots=True)
class _Outcome:
    content: list[dict[str, Any]]
    stop_reason: str
    bad_inputs: dict[str, str]  # tool_use id -> why its input cannot be used


class _Response:
    """One streamed response: checks, logs, and sends lines; stages the closing ones."""

    def __init__(self, sink: Sink, agent: str, run_id: str, index: int, max_bytes: int) -> None:
        self._setup(sink, agent, run_id, index, max_bytes)

    def _setup(self, sink: Sink, agent: str, run_id: str, index: int, max_bytes: int) -> None:
        self.nested = False
        self.sink = sink
        self.max_bytes = max_bytes
        self.agent = agent
        self.run_id = run_id
        self.index = index
        self.checker = Reconstructor()
        self.lines: list[bytes] = []
        self.staged: list[bytes] = []
        #: The client is gone: lines are still checked and logged, no longer sent (spec §5.5-c).
        self.gone = False

    async def _deliver(self, line: bytes) -> None:
        if self.gone:
            return
        try:
            result = self.sink(line)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            self.gone = True
            raise _ClientGone(exc) from exc

    async def send(self, lines: Sequence[bytes]) -> None:
        for line in lines:
            self.checker.feed(line)
            self.lines.append(line)
            await self._deliver(line)

    async def send_one(self, line: bytes) -> None:
        """``send`` for one line: the sink of a nested (subagent) response."""
        await self.send([line])

    def stage(self, lines: Sequence[bytes]) -> None:
        for line in lines:
            self.checker.feed(line)
            self.lines.append(line)
            self.staged.append(line)

    async def flush(self) -> None:
        staged, self.staged = self.staged, []
        for line in staged:
            try:
                await self._deliver(line)
            except _ClientGone as exc:
                raise exc.error from None  # already stored: only the caller needs to know

    def batch(self) -> LogBatch:
        return LogBatch(run_id=self.run_id, response=self.index, start=0, lines=list(self.lines))

    def block_count(self) -> int:
        return len(self.checker.transcript().agents.get(self.agent, ()))


class _NestedResponse(_Response):
    """A subagent's part of its parent's response (spec §13.3): its lines go to the parent's ``send``.

    It is not a response of its own (no ``[DONE]``), so it does not pass through
    ``_Response.__init__``: the parent's response, which carries these lines, is the one
    checked, logged and validated as a whole.
    """

    def __init__(self, parent: _Response, agent: str, run_id: str, index: int, max_bytes: int) -> None:
        self._setup(parent.send_one, agent, run_id, index, max_bytes)
        self.nested = True


class Agent:
    """A minimal, complete agent that streams envelopes (spec ``spec/agent-ref.md``).

    Example::

        agent = Agent(ScriptedModel(), tools=default_tools(), store=SQLiteStore("agents.db"))
        lines: list[bytes] = []
        result = await agent.run("What is 5 + (10 * 2)?", lines.append)

    Args:
        model: where completions come from (``AnthropicModel``, ``ScriptedModel``, ``ReplayModel``).
        tools: backend and frontend tools.
        server_tools: Anthropic-executed tools, as API tool dicts, passed through.
        store: where state is saved; a private ``MemoryStore`` when omitted.
        agent_uuid: the agent's id; a new UUID4 when omitted.
        system: the system prompt.
        max_steps: model calls with tools allowed in one run; then one last call with
            ``tool_choice: none`` (spec §5.2).
        max_tokens: per call.
        thinking_budget: enables extended thinking with this budget.
        max_budget_usd: stop the run once its cost reaches this (spec §5.3).
        retry: the retry policy (spec §6.2).
        max_bytes: the bound on each envelope line (spec §6.1 of the envelope spec).
        max_tool_concurrency: backend tools of one step running at once.
        prices: the price table.
        stream_history: put the conversation history into ``meta_init``/``meta_final``.
        lease_seconds: how long a claim on the agent lasts without renewal; renewed every
            third of it while a run is in progress (spec §10.2-a).
        tool_timeout: seconds a backend tool call may run before it is answered "timed out"
            (a tool's own ``timeout`` wins; ``None``: unbounded) (spec §2.5-a).
        secrets: more values to keep out of every stream, store and log (a server's token);
            the model client's API key and auth token are held anyway (spec §6.3-b).
        request_options: more keyword arguments for every ``messages.create`` call, passed
            through as the SDK takes them: ``betas`` (then the beta client is used),
            ``extra_headers``, ``extra_body``, ``extra_query``, ``timeout``, ``container``,
            ``metadata``, ``temperature``, ``stop_sequences``, ``service_tier``,
            ``mcp_servers``, ``context_management``... (spec §11.1-a). The keys the agent
            sets itself (``AGENT_OWNED_PARAMS``) are refused.
        hooks: hooks by event (``hooks.HOOK_EVENTS``), each list run in order (spec §12).
        can_use_tool: asked before every tool call, after the PreToolUse hooks (spec §12.4).
        subagents: children the model may spawn by name with the ``spawn_subagent`` tool;
            they stream into this agent's response (spec §13).

    Raises:
        ConfigError: duplicate tool names, or a budget with an unpriced model, an unknown
            hook event, or a subagent with a frontend tool.
    """

    def __init__(
        self,
        model: Model,
        *,
        tools: Sequence[Tool] = (),
        server_tools: Sequence[Mapping[str, Any]] = (),
        store: Store | None = None,
        agent_uuid: str | None = None,
        system: str | None = None,
        max_steps: int = 8,
        max_tokens: int = 2048,
        thinking_budget: int | None = None,
        max_budget_usd: float | None = None,
        retry: RetryPolicy | None = None,
        max_bytes: int = 2048,
        max_tool_concurrency: int = 4,
        prices: Mapping[str, Price] = PRICES,
        stream_history: bool = False,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        tool_timeout: float | None = DEFAULT_TOOL_TIMEOUT,
        secrets: Sequence[str] = (),
        request_options: Mapping[str, Any] | None = None,
        hooks: Mapping[str, Sequence[Hook]] | None = None,
        can_use_tool: CanUseTool | None = None,
        subagents: Mapping[str, AgentSpec] | None = None,
    ) -> None:
        """See the class docstring."""
        names = [t.name for t in tools] + [str(t.get("name")) for t in server_tools]
        unknown = sorted(set(hooks or {}) - set(HOOK_EVENTS))
        if unknown:
            raise ConfigError(f"unknown hook events: {', '.join(unknown)}; known: {', '.join(HOOK_EVENTS)}")
        check_specs(subagents or {}, names)
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"duplicate tool names: {', '.join(dupes)}")
        if max_steps < 1:
            raise ConfigError("max_steps must be at least 1")
        if lease_seconds <= 0:
            raise ConfigError("lease_seconds must be positive")
        owned = sorted(set(request_options or {}) & AGENT_OWNED_PARAMS)
        if owned:
            raise ConfigError(
                f"request_options cannot set {', '.join(owned)}: the agent sets them "
                "(use Agent's model, max_tokens, system, tools, server_tools, thinking_budget)"
            )
        if max_budget_usd is not None and price_for(model.name, prices) is None:
            raise ConfigError(f"max_budget_usd needs a price for model {model.name!r}; add it to prices")
        self.model = model
        self.tools: dict[str, Tool] = {t.name: t for t in tools}
        self.server_tools = [dict(t) for t in server_tools]
        self.store: Store = store if store is not None else MemoryStore()
        self.system = system
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self.max_budget_usd = max_budget_usd
        self.retry = retry if retry is not None else RetryPolicy()
        self.max_bytes = max_bytes
        self.max_tool_concurrency = max_tool_concurrency
        self.prices = prices
        self.stream_history = stream_history
        self.lease_seconds = lease_seconds
        self.tool_timeout = tool_timeout
        self.request_options: dict[str, Any] = dict(request_options or {})
        check = getattr(model, "check_request_options", None)
        if self.request_options and callable(check):
            check(self.request_options)
        client = getattr(model, "client", None)
        # spec §6.3-b: what this process holds never reaches a stream, a store or a log.
        scrub.hold([getattr(client, "api_key", None), getattr(client, "auth_token", None), *secrets])
        scrub.install_log_filter()
        self.state = AgentState(agent_uuid=agent_uuid or str(uuid.uuid4()), model=model.name)
        self._emitter = Emitter(self.state.agent_uuid, max_bytes)
        self._abort = asyncio.Event()
        self._files: list[dict[str, Any]] = []
        #: Results of the current step's calls already decided, by tool_use id (spec §5.5-b).
        self._answered: dict[str, dict[str, Any]] = {}
        self.hooks: dict[str, list[Hook]] = {k: list(v) for k, v in (hooks or {}).items()}
        self.can_use_tool = can_use_tool
        self.subagents: dict[str, AgentSpec] = dict(subagents or {})
        #: (parent agent, spawning tool_use id) when this agent runs as a subagent (spec §13.3).
        self._parent: tuple[str, str] | None = None
        self._parent_response: _Response | None = None
        self._hook_failures: list[HookFailure] = []
        self._prompt: str | None = None
        self._interrupted: str | None = None

    @property
    def agent_uuid(self) -> str:
        """The agent's id."""
        return self.state.agent_uuid

    # ----------------------------------------------------------------- public API

    @classmethod
    async def load(cls, agent_uuid: str, store: Store, model: Model, **config: Any) -> Agent:
        """Rehydrate a stored agent, for example in a new process (spec §3.2).

        Args:
            agent_uuid: the agent.
            store: where it was saved.
            model: the model to continue with.
            **config: the other ``Agent`` arguments (tools must include the ones of the paused step).

        Returns:
            The agent, in the stored state.

        Raises:
            StateError: no such agent.
        """
        state = await store.load(agent_uuid)
        if state is None:
            raise StateError(f"no agent {agent_uuid} in the store")
        agent = cls(model, store=store, agent_uuid=agent_uuid, **config)
        agent.state = state
        return agent

    def abort(self) -> None:
        """Ask the running run to stop: the stream ends with an ``aborted`` error and ``meta_final`` (spec §5.5)."""
        self._abort.set()

    def lease_alive(self, now: float | None = None) -> bool:
        """Whether the agent is ``running`` under a lease that has not expired (spec §10.2-a)."""
        state = self.state
        return state.status == "running" and state.lease_expires_at > (time.time() if now is None else now)

    async def recover(self) -> AgentResult | None:
        """Deal with a run whose process died (its lease expired) so the agent can be used again (spec §10.2-b).

        A resume that died is put back to its pause (the same results can be sent again).
        A run that died otherwise is closed: its prompt is taken back out of the context,
        it is recorded with stop reason ``lost``, and its log gets a closing response.

        Returns:
            The closed run's result, or ``None`` when there was nothing to close (not
            ``running``, or a pause restored).

        Raises:
            StateError: the agent is running under a live lease (another process holds it).
            ConflictError: another process changed the agent meanwhile.
        """
        state = self.state
        if state.status != "running":
            return None
        if self.lease_alive():
            left = state.lease_expires_at - time.time()
            raise StateError(
                f"agent {state.agent_uuid} is running in another process ({state.lease_owner}; "
                f"its lease is renewed while it lives and runs out in {left:.0f} s if it died)"
            )
        run = state.run
        state.lease_owner = None
        state.lease_expires_at = 0.0
        if state.pending_frontend and run is not None:
            state.status = "awaiting_frontend_tools"
            await self.store.save(state)
            log.warning("agent %s: a resume whose process died was put back to its pause", state.agent_uuid)
            return None
        if run is None:
            state.status = "idle"
            await self.store.save(state)
            return None
        if run.base_messages >= 0:
            del state.messages[run.base_messages :]
            if run.base_tail >= 0 and state.messages:
                state.messages[-1]["content"] = state.messages[-1]["content"][: run.base_tail]
        response = _Response(_nowhere, state.agent_uuid, run.run_id, run.responses, self.max_bytes)
        run.responses += 1
        response.gone = True  # nobody reads it: it only closes the run's log (spec §9.2-a)
        await response.send(self._emitter.buffered("meta_init", self._meta_init(run)))
        payload = {
            "type": STOP_LOST,
            "message": "the process running this run stopped before the run ended; a later process closed it",
        }
        log.warning("agent %s: run %s was lost with its process; closed", state.agent_uuid, run.run_id)
        return await self._finish(response, STOP_LOST, error_payload=payload)

    async def abandon(self, sink: Sink | None = None, *, reason: str = "abandoned by the user") -> AgentResult:
        """Close a run paused for frontend tools without their results (spec §10.3).

        Every pending frontend call gets an ``is_error`` result ``"abandoned: <reason>"``
        (merged with the step's backend results, so the history stays valid), and the run
        ends with stop reason ``abandoned``. The closing response (``meta_init``, those
        results, an ``error`` of type ``abandoned``, ``meta_final``, ``[DONE]``) is stored
        in the run's log and sent to ``sink`` if one is given. A run whose process died
        (expired lease) is recovered first (``recover``).

        Args:
            sink: receives the closing response; nothing is sent when ``None``.
            reason: why, as the model and the log will see it.

        Returns:
            The closed run's result.

        Raises:
            StateError: no paused run to abandon, or the agent is running under a live lease.
            ConflictError: another process changed the agent meanwhile.
        """
        state = self.state
        if state.status == "running":
            closed = await self.recover()
            if closed is not None:
                return closed
        if state.status != "awaiting_frontend_tools" or state.run is None:
            raise StateError(f"agent {state.agent_uuid} has no paused run to abandon (status {state.status})")
        self._claim()
        try:
            await self.store.save(state)  # claim, as a resume does (spec §4.3)
        except BaseException:
            state.status = "awaiting_frontend_tools"
            state.lease_owner = None
            raise
        run = state.run
        response = _Response(sink or _nowhere, state.agent_uuid, run.run_id, run.responses, self.max_bytes)
        run.responses += 1
        text = "abandoned: " + scrub.public(reason)
        # Every line of this response is a closing line: staged, stored, then sent (spec §4.4).
        response.stage(self._emitter.buffered("meta_init", self._meta_init(run, resume=True)))
        by_id: dict[str, dict[str, Any]] = {b["tool_use_id"]: b for b in state.pending_backend_results}
        for pending in state.pending_frontend:
            call = ToolCallRequest(id=pending.tool_use_id, name=pending.name, input=pending.input)
            done = error_outcome(self._emitter, call, text)
            response.stage(done.lines)
            by_id[call.id] = done.block
        self._append_user([by_id[i] for i in state.pending_order if i in by_id])
        state.pending_frontend = []
        state.pending_backend_results = []
        state.pending_order = []
        return await self._finish(response, STOP_ABANDONED, error_payload={"type": STOP_ABANDONED, "message": text})

    async def run(self, prompt: str | Sequence[Mapping[str, Any]], sink: Sink) -> AgentResult:
        """Run one user turn to its end or to a pause, streaming envelope lines to ``sink``.

        Args:
            prompt: the user's text, or content blocks.
            sink: receives every line, then ``b"[DONE]"``.

        Returns:
            The result; ``stop_reason`` says how the run ended.

        Raises:
            StateError: the agent is paused for frontend tools, or running elsewhere.
            ConflictError: another process changed the agent meanwhile.
        """
        state = self.state
        if state.status == "running":
            await self.recover()  # spec §10.2-b: a dead owner's run is closed first; a live one refuses
        if state.status == "awaiting_frontend_tools":
            raise StateError(
                f"agent {state.agent_uuid} is waiting for frontend tool results; "
                "call continue_with_tool_results (agent-ref resume) first"
            )
        if isinstance(prompt, str):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
            query = prompt
        else:
            blocks = [dict(b) for b in prompt]
            query = " ".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
        run = RunState(run_id=str(uuid.uuid4()), user_query=query, started_at=time.time())
        messages = state.messages
        run.base_messages = len(messages)
        if messages and messages[-1].get("role") == "user" and isinstance(messages[-1].get("content"), list):
            run.base_tail = len(messages[-1]["content"])
        state.run = run
        self._claim()
        self._append_user(blocks)
        await self.store.save(state)  # claim the agent (spec §4.3, §10.2-a)
        response: _Response
        if self._parent_response is not None:
            response = _NestedResponse(
                self._parent_response, state.agent_uuid, run.run_id, run.responses, self.max_bytes
            )
        else:
            response = _Response(sink, state.agent_uuid, run.run_id, run.responses, self.max_bytes)
        run.responses += 1
        self._prompt = query
        return await self._drive(response, 1, self._emitter.buffered("meta_init", self._meta_init(run)))

    async def continue_with_tool_results(self, results: Sequence[Mapping[str, Any]], sink: Sink) -> AgentResult:
        """Resume a paused run with the browser's results (spec §3.3).

        Args:
            results: one ``{"tool_use_id", "content", "is_error"?}`` per pending call;
                ``content`` is a string or a list of text/image content blocks.
            sink: receives the continuation's lines, then ``b"[DONE]"``.

        Returns:
            The result of the continued run.

        Raises:
            StateError: the agent is not paused.
            ToolResultsError: the ids are not exactly the pending set, or a result is malformed.
                Nothing is changed.
            ConflictError: another process resumed it first. Nothing is changed.
        """
        state = self.state
        if state.status != "awaiting_frontend_tools" or state.run is None:
            raise StateError(
                f"agent {state.agent_uuid} is not waiting for frontend tool results (status {state.status})"
            )
        parsed = _parse_results(results, state.pending_frontend)
        self._claim()
        try:
            await self.store.save(state)  # claim: exactly one resume wins (spec §4.3)
        except BaseException:
            state.status = "awaiting_frontend_tools"
            state.lease_owner = None
            state.lease_expires_at = 0.0
            raise
        run = state.run
        response = _Response(sink, state.agent_uuid, run.run_id, run.responses, self.max_bytes)
        run.responses += 1
        opening = self._emitter.buffered("meta_init", self._meta_init(run, resume=True))
        by_id: dict[str, dict[str, Any]] = {b["tool_use_id"]: b for b in state.pending_backend_results}
        names = {p.tool_use_id: p.name for p in state.pending_frontend}
        for tool_use_id, (text, images, is_error) in parsed.items():
            call = ToolCallRequest(id=tool_use_id, name=names[tool_use_id], input={})
            opening += self._emitter.tool_result(call.id, call.name, text, images)
            by_id[tool_use_id] = result_block(tool_use_id, text, images, is_error=is_error)
        self._append_user([by_id[i] for i in state.pending_order if i in by_id])
        step = state.current_step + 1
        state.pending_frontend = []
        state.pending_backend_results = []
        state.pending_order = []
        return await self._drive(response, step, opening)

    # ----------------------------------------------------------------- the loop

    async def _drive(self, response: _Response, step: int, opening: list[bytes]) -> AgentResult:
        """Send ``opening``, run the loop as a task ``abort()`` can cancel, renew the lease, end the response."""
        # A fresh event per response: an Event binds to the loop that first waits on it, and an
        # agent may serve runs from several loops (asyncio.run per request); a stale one made
        # the next run end as "aborted".
        self._abort = asyncio.Event()
        heartbeat = asyncio.ensure_future(self._heartbeat())
        try:
            return await self._drive_loop(response, step, opening)
        finally:
            heartbeat.cancel()

    async def _drive_loop(self, response: _Response, step: int, opening: list[bytes]) -> AgentResult:
        loop_task = asyncio.ensure_future(self._loop(response, step, opening))
        abort_task = asyncio.ensure_future(self._abort.wait())
        try:
            done, _ = await asyncio.wait({loop_task, abort_task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            loop_task.cancel()
            abort_task.cancel()
            await asyncio.gather(loop_task, return_exceptions=True)
            # spec §5.5-c: the caller is gone. Close the run in the store (log included); send nothing.
            response.gone = True
            await asyncio.shield(self._close_quietly(response, "the run was cancelled: the client went away"))
            raise
        abort_task.cancel()
        if loop_task not in done:
            loop_task.cancel()
            await asyncio.gather(loop_task, return_exceptions=True)
            return await self._end_aborted(response, "the run was aborted by the caller")
        try:
            stop = loop_task.result()
        except _RunFailed as exc:
            payload: dict[str, Any] = {  # spec §6.3: a public message, never a traceback
                "type": exc.failure.type,
                "message": exc.failure.message,
                "retryable": exc.failure.transient,
                "attempts": exc.attempts,
            }
            return await self._finish(response, STOP_ERROR, error_payload=payload)
        except _ClientGone as exc:
            # spec §5.5-c: the sink failed (a closed pipe, a dropped connection).
            await self._close_quietly(response, "the client went away")
            raise exc.error from None
        except Exception:
            # A bug in the agent's own code: a public message in the stream, details in the log (spec §6.3).
            log.exception("the agent loop failed")
            await self._close_open(response)
            await self._answer_unanswered(response, "not run: the agent failed before this tool call finished")
            payload = {
                "type": "internal_error",
                "message": "internal error in the agent (details are in the server log)",
                "retryable": False,
                "attempts": 1,
            }
            return await self._finish(response, STOP_ERROR, error_payload=payload)
        if stop == STOP_AWAITING:
            return await self._pause(response)
        return await self._finish(response, stop)

    async def _end_aborted(self, response: _Response, message: str) -> AgentResult:
        """Close open blocks, answer unanswered calls, then ``error`` (aborted), ``meta_final``, ``[DONE]`` (§5.5)."""
        await self._close_open(response)
        await self._answer_unanswered(response, "cancelled: the run was aborted before this tool call finished")
        return await self._finish(response, STOP_ABORTED, error_payload={"type": STOP_ABORTED, "message": message})

    async def _close_quietly(self, response: _Response, message: str) -> None:
        """``_end_aborted`` for a response nobody reads any more; failures are logged, not raised."""
        response.gone = True
        try:
            await self._end_aborted(response, message)
        except Exception:
            log.exception("could not close run of agent %s after its client went away", self.agent_uuid)

    async def _answer_unanswered(self, response: _Response, text: str) -> None:
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

    def _claim(self) -> None:
        """Mark the agent ``running`` under a fresh lease of this process (spec §10.2-a)."""
        state = self.state
        state.status = "running"
        state.lease_owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        state.lease_expires_at = time.time() + self.lease_seconds

    async def _heartbeat(self) -> None:
        """Renew the lease every third of its length while the run goes on (spec §10.2-a)."""
        state = self.state
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            owner = state.lease_owner
            if owner is None or state.status != "running":
                return
            expires = time.time() + self.lease_seconds
            try:
                renewed = await self.store.renew_lease(state.agent_uuid, owner, expires)
            except Exception:
                log.warning("agent %s: could not renew the lease; will try again", state.agent_uuid)
                continue
            if not renewed:
                log.warning("agent %s: lost its lease to another process", state.agent_uuid)
                return
            state.lease_expires_at = expires

    async def _loop(self, response: _Response, step: int, opening: list[bytes]) -> str:
        """Send the response's opening lines, then steps until the run ends; returns the stop reason (spec §1.2)."""
        run = self.state.run
        assert run is not None
        await response.send(opening)
        if self._prompt is not None:
            prompt, self._prompt = self._prompt, None
            await self._fire("SessionStart", prompt=prompt)
            await self._fire("UserPromptSubmit", prompt=prompt)
            await self._report_hook_failures(response)
        stop = await self._steps(response, step)
        if stop != STOP_AWAITING:
            await self._fire("Stop", stop_reason=stop)
            await self._report_hook_failures(response)
        return stop

    async def _steps(self, response: _Response, step: int) -> str:
        """Decide to continue or stop: steps of model call, route, run tools, record (spec §1.2)."""
        run = self.state.run
        assert run is not None
        while True:
            if step > self.max_steps:
                return await self._last_call(response, step)
            if self.max_budget_usd is not None and (run.cost_usd or 0.0) >= self.max_budget_usd:
                return STOP_MAX_BUDGET  # spec §5.3-a: checked before each call
            outcome = await self._model_call(response, step)
            self._append_assistant(outcome.content)
            if outcome.stop_reason == "pause_turn":
                step += 1  # spec §1.2-c: send the turn back as is
                continue
            calls = _tool_uses(outcome.content)
            if not calls or outcome.stop_reason not in ("tool_use", "max_tokens"):
                return outcome.stop_reason
            frontend = await self._run_step_tools(response, calls, outcome.bad_inputs)
            if self._interrupted is not None:
                return STOP_INTERRUPTED
            if frontend:
                self.state.current_step = step
                return STOP_AWAITING
            step += 1

    async def _run_step_tools(
        self, response: _Response, calls: list[ToolCallRequest], bad_inputs: Mapping[str, str]
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
        for call, done in zip([*backend, *spawns], [*ran, *spawned], strict=True):
            outcomes[call.id] = done
            event = "PostToolUseFailure" if done.is_error else "PostToolUse"
            await self._fire(event, tool_name=call.name, tool_use_id=call.id, tool_input=call.input, result=done.text)
        await self._report_hook_failures(response)
        if frontend:
            state = self.state
            state.pending_frontend = [PendingCall(tool_use_id=c.id, name=c.name, input=c.input) for c in frontend]
            state.pending_backend_results = [o.block for o in outcomes.values()]
            state.pending_order = [c.id for c in calls]
            return frontend
        self._append_user([outcomes[c.id].block for c in calls])
        return []

    async def _permit(self, call: ToolCallRequest) -> ToolCallRequest | str:
        """PreToolUse hooks, then ``can_use_tool``: the call to run, or why it is not run (spec §12)."""
        run = self.state.run
        assert run is not None
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
            context = ToolPermissionContext(agent_uuid=self.agent_uuid, run_id=run.run_id, tool_use_id=call.id)
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

    async def _run_subagent(self, response: _Response, call: ToolCallRequest) -> ToolOutcome:
        """Spawn one child into this response; its final answer is the call's result (spec §13)."""
        parsed = parse_spawn(call.input, self.subagents)
        if isinstance(parsed, str):
            return error_outcome(self._emitter, call, parsed)
        name, spec, task = parsed
        child = Agent(
            spec.model or self.model,
            tools=spec.tools,
            server_tools=self.server_tools if spec.server_tools is None else spec.server_tools,
            store=spec.store or self.store,
            system=spec.system,
            max_steps=spec.max_steps or self.max_steps,
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
            retry=spec.retry or self.retry,
            max_bytes=self.max_bytes,
            max_tool_concurrency=self.max_tool_concurrency,
            prices=self.prices,
            tool_timeout=self.tool_timeout,
            request_options=self.request_options,
            hooks=self.hooks,
            can_use_tool=self.can_use_tool,
        )
        child._parent = (self.agent_uuid, call.id)
        child._parent_response = response
        await self._fire("SubagentStart", tool_name=name, tool_use_id=call.id, tool_input=call.input)
        try:
            result = await child.run(task, response.send_one)
        except (asyncio.CancelledError, _ClientGone):
            raise
        except Exception as exc:  # spec §13.4-a: a child that cannot run is an is_error result
            log.exception("subagent %s could not run", name)
            return error_outcome(self._emitter, call, scrub.public(f"subagent {name} failed: {exc}")[:500])
        await self._fire(
            "SubagentStop",
            tool_name=name,
            tool_use_id=call.id,
            result=result.final_text,
            stop_reason=result.stop_reason,
        )
        if result.stop_reason in (STOP_ERROR, STOP_ABORTED, STOP_INTERRUPTED):
            why = result.error or result.stop_reason
            return error_outcome(self._emitter, call, f"subagent {name} ({child.agent_uuid}) failed: {why}")
        return outcome(self._emitter, call, result.final_text)

    async def _fire(
        self,
        event: str,
        *,
        prompt: str | None = None,
        tool_name: str | None = None,
        tool_use_id: str | None = None,
        tool_input: Mapping[str, Any] | None = None,
        result: str | None = None,
        stop_reason: str | None = None,
    ) -> None:
        """Run the hooks of an observing event (not PreToolUse); failures are kept for reporting."""
        hooks = self.hooks.get(event, [])
        run = self.state.run
        if not hooks or run is None:
            return
        data = HookInput(
            event=event,  # type: ignore[arg-type]  # one of HOOK_EVENTS, checked by the callers' literals
            agent_uuid=self.agent_uuid,
            run_id=run.run_id,
            prompt=prompt,
            tool_name=tool_name,
            tool_use_id=tool_use_id,
            tool_input=dict(tool_input or {}),
            result=result,
            stop_reason=stop_reason,
        )
        await run_hooks(hooks, data, self._hook_failures)

    def _hook_failure_lines(self) -> list[bytes]:
        """One ``error`` envelope per failed hook (spec §12.3-a), and forget them."""
        failures, self._hook_failures = self._hook_failures, []
        lines: list[bytes] = []
        for failure in failures:
            payload = {
                "type": "hook_error",
                "event": failure.event,
                "hook": failure.index,
                "message": f"a {failure.event} hook failed: {failure.message}",
            }
            lines += self._emitter.buffered("error", json.dumps(payload, ensure_ascii=False))
        return lines

    async def _report_hook_failures(self, response: _Response) -> None:
        lines = self._hook_failure_lines()
        if lines:
            await response.send(lines)

    async def _last_call(self, response: _Response, step: int) -> str:
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

    async def _model_call(self, response: _Response, step: int, *, tool_choice_none: bool = False) -> _Outcome:
        """One API call with retries; streams its envelopes (spec §6)."""
        run = self.state.run
        assert run is not None
        params = self._params(tool_choice_none)
        attempt = 0
        while True:
            attempt += 1
            translator = AnthropicTranslator(self.agent_uuid, self.max_bytes)
            blocks_before = response.block_count()
            sent = 0
            tool_starts: dict[int, tuple[str, str]] = {}
            tool_json: dict[int, list[str]] = {}
            bad: dict[int, str] = {}
            call_usage: dict[str, int] = {}
            try:
                async for event in self.model.stream(params):
                    _track_tool_input(event, tool_starts, tool_json)
                    self._track_usage_and_container(event, call_usage)
                    try:
                        lines = translator.feed(event)
                    except DecodeError:
                        index = _field(event, "index")
                        if _field(event, "type") != "content_block_stop" or not isinstance(index, int):
                            raise
                        bad[index] = "".join(tool_json.get(index, []))
                        start = tool_starts.get(index, ("", ""))
                        # The call was cut: show it with the input history records for it,
                        # an empty object, so the stream stays valid (spec §1.3-b).
                        lines = self._emitter.buffered("tool_call", "{}", id=start[0], name=start[1])
                    if lines:
                        sent += len(lines)
                        await response.send(lines)
                translator.close()
                if translator.stop_reason is None:
                    raise IncompleteStreamError("no message_delta with a stop_reason")
            except (asyncio.CancelledError, _RunFailed, _ClientGone):
                raise
            except Exception as exc:
                failure = classify(exc)
                if failure.type == "internal_error":
                    log.exception("model call failed with an unexpected error")
                else:
                    log.warning("model call attempt %d failed: %s (%s)", attempt, failure.type, failure.message)
                retrying = failure.transient and attempt < self.retry.max_attempts
                wait, source = self.retry.wait(attempt, failure)
                if sent:
                    await self._close_open(response)
                    await self._discard(
                        response,
                        response.block_count() - blocks_before,
                        step,
                        attempt,
                        failure,
                        retrying,
                        wait if retrying else None,
                    )
                elif retrying and source == "retry-after":
                    # spec §6.2-b: a wait the API asked for is said in the stream, even before output.
                    await self._discard(response, 0, step, attempt, failure, retrying, wait)
                if not retrying:
                    raise _RunFailed(failure, attempt) from None
                await self.retry.sleep(wait)
                continue
            # spec §11.2-a: the nested counters too; running totals, the later value wins.
            usage = {**call_usage, **translator.usage}
            run.usage.add(usage)
            self.state.usage.add(usage)
            run.cost_usd = cost_usd(self.model.name, run.usage, self.prices)
            run.steps += 1
            content = translator.finalize()
            bad_inputs: dict[str, str] = {}
            reason = translator.stop_reason or "end_turn"
            for index, block in enumerate(content):
                if block.get("type") != "tool_use":
                    continue
                if block.get("input") is None or not isinstance(block.get("input"), dict):
                    block["input"] = {}
                    bad_inputs[str(block.get("id"))] = _bad_input_message(reason)
                elif reason == "max_tokens" and index == len(content) - 1:
                    # spec §1.3-a: the last block of a max_tokens turn may be cut even if it parsed.
                    bad_inputs[str(block.get("id"))] = _bad_input_message(reason)
            self._collect_files(content)
            return _Outcome(content=content, stop_reason=reason, bad_inputs=bad_inputs)

    def _track_usage_and_container(self, event: Any, usage: dict[str, int]) -> None:
        """Keep a call's usage (nested counters included) and the container the API reports."""
        kind = _field(event, "type")
        if kind == "message_start":
            message = _field(event, "message")
            usage.update(flat_usage(_field(message, "usage")))
            container = _field(message, "container")
        elif kind == "message_delta":
            usage.update(flat_usage(_field(event, "usage")))
            container = _field(_field(event, "delta"), "container")
        else:
            return
        container_id = _field(container, "id")
        if isinstance(container_id, str) and container_id:
            self.state.container_id = container_id

    def _params(self, tool_choice_none: bool) -> dict[str, Any]:
        # spec §11.1-a: the caller's request options first; the keys the agent owns are set after.
        params: dict[str, Any] = dict(self.request_options)
        if self.state.container_id and "container" not in params:
            params["container"] = self.state.container_id  # spec §11.1-c
        params |= {
            "model": self.model.name,
            "max_tokens": self.max_tokens,
            "messages": self.state.messages,
        }
        if self.system:
            params["system"] = self.system
        tools = [t.definition() for t in self.tools.values()] + self.server_tools
        if self.subagents:
            tools.append(spawn_tool_definition(self.subagents))
        if tools:
            params["tools"] = tools
            if tool_choice_none:
                params["tool_choice"] = {"type": "none"}
        if self.thinking_budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        return params

    # ----------------------------------------------------------------- stream ends

    async def _close_open(self, response: _Response) -> None:
        """Close every block left open on the wire, so a discard or an abort leaves no dangling block."""
        transcript = response.checker.transcript()
        blocks = {(b.type, b.id): b for b in transcript.agents.get(self.agent_uuid, ()) if not b.complete}
        for kind, block_id in list(blocks):
            if kind in ("text", "thinking"):
                await response.send([self._emitter.end(kind)])  # type: ignore[arg-type]  # narrowed above
            elif kind in ("tool_call", "server_tool_call", "tool_result", "server_tool_result"):
                block = blocks[(kind, block_id)]
                await response.send(
                    self._emitter.buffered(kind, "", id=block.id or "", name=block.name or "")  # type: ignore[arg-type]  # narrowed above
                )

    async def _discard(
        self,
        response: _Response,
        blocks: int,
        step: int,
        attempt: int,
        failure: ApiFailure,
        retrying: bool,
        wait: float | None,
    ) -> None:
        """The discarded-attempt signal (spec §6.4): one ``error`` envelope naming how many blocks to drop."""
        payload: dict[str, Any] = {
            "type": "attempt_discarded",
            "message": "the model call failed after partial output; the blocks above from this attempt are void",
            "discard_blocks": blocks,
            "step": step,
            "attempt": attempt,
            "retrying": retrying,
            "error": {"type": failure.type, "message": failure.message},
        }
        if wait is not None:
            payload["wait_seconds"] = round(wait, 3)  # spec §6.2-b
        if failure.retry_after is not None:
            payload["retry_after_seconds"] = round(failure.retry_after, 3)
        await response.send(self._emitter.buffered("error", json.dumps(payload, ensure_ascii=False)))

    async def _pause(self, response: _Response) -> AgentResult:
        """Save the relay state, then send ``awaiting_frontend_tools`` and ``[DONE]`` (spec §3.1)."""
        state = self.state
        run = state.run
        assert run is not None
        pending = [{"tool_use_id": p.tool_use_id, "name": p.name, "input": p.input} for p in state.pending_frontend]
        response.stage(self._emitter.buffered("awaiting_frontend_tools", json.dumps(pending, ensure_ascii=False)))
        response.stage([DONE_LINE])
        state.status = "awaiting_frontend_tools"
        state.lease_owner = None
        state.lease_expires_at = 0.0
        await self.store.save(state, log=response.batch())  # spec §3.1-a: saved before it is sent
        await response.flush()
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

    async def _finish(
        self, response: _Response, stop_reason: str, *, error_payload: dict[str, Any] | None = None
    ) -> AgentResult:
        """Stage ``error``?, ``meta_files``?, ``meta_final``, ``[DONE]``; save; then send (spec §4.4, §7)."""
        state = self.state
        run = state.run
        assert run is not None
        await self._fire("SessionEnd", stop_reason=stop_reason)  # spec §12.1-a: every end, not a pause
        response.stage(self._hook_failure_lines())
        if error_payload is not None:
            response.stage(self._emitter.buffered("error", json.dumps(error_payload, ensure_ascii=False)))
        if self._files:
            response.stage(self._emitter.buffered("meta_files", json.dumps({"files": self._files}, ensure_ascii=False)))
        meta: dict[str, Any] = {
            "stop_reason": stop_reason,
            "total_steps": run.steps,
            "cumulative_usage": run.usage.to_dict(),
            "cost": self._cost(run),
            "generated_files": self._files or None,
            "run_id": run.run_id,
        }
        if self.stream_history:
            meta["conversation_history"] = run.history
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
        )

    def _cost(self, run: RunState) -> dict[str, Any] | None:
        price = price_for(self.model.name, self.prices)
        if price is None or run.cost_usd is None:
            return None
        return {
            "model": self.model.name,
            "total_usd": run.cost_usd,
            "input_per_mtok": price.input,
            "output_per_mtok": price.output,
        }

    def _meta_init(self, run: RunState, *, resume: bool = False) -> str:
        meta: dict[str, Any] = {
            "format": "json",
            "user_query": run.user_query,
            "agent_uuid": self.agent_uuid,
            "model": self.model.name,
            "run_id": run.run_id,
        }
        if self._parent is not None:
            # envelope spec §8.3.1: how a decoder nests this agent under the call that spawned it.
            meta["parent_agent"], meta["parent_tool_use_id"] = self._parent
        if resume:
            meta["resume"] = {
                "step": self.state.current_step + 1,
                "response": run.responses - 1,
                "tool_use_ids": [p.tool_use_id for p in self.state.pending_frontend],
            }
        if self.stream_history:
            meta["message_history"] = self.state.messages
        return json.dumps(meta, ensure_ascii=False)

    # ----------------------------------------------------------------- history

    def _append_user(self, blocks: list[dict[str, Any]]) -> None:
        """Append a user turn; merge into a trailing user turn so roles keep alternating."""
        messages = self.state.messages
        run = self.state.run
        assert run is not None
        if messages and messages[-1].get("role") == "user" and isinstance(messages[-1].get("content"), list):
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": "user", "content": list(blocks)})
        run.history.append({"role": "user", "content": list(blocks)})

    def _append_assistant(self, content: list[dict[str, Any]]) -> None:
        run = self.state.run
        assert run is not None
        message = {"role": "assistant", "content": content}
        self.state.messages.append(message)
        run.history.append(message)

    def _collect_files(self, content: list[dict[str, Any]]) -> None:
        """Files produced by server tools (code execution): every ``file_id`` in their results (spec §5.6)."""
        for block in content:
            if str(block.get("type", "")).endswith("_tool_result"):
                for file_id in _file_ids(block.get("content")):
                    if all(f["file_id"] != file_id for f in self._files):
                        # spec §5.6-b: the agent does not download files, so the Files API id is
                        # the only name it knows, and the file stays where the API keeps it.
                        self._files.append(
                            {"file_id": file_id, "filename": file_id, "storage_location": files_api_path(file_id)}
                        )


def files_api_path(file_id: str) -> str:
    """Where a file produced by a server tool lives: its download path in the Files API (spec §5.6-b)."""
    return f"/v1/files/{file_id}/content"


def _file_ids(value: object) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        file_id = value.get("file_id")
        if isinstance(file_id, str):
            found.append(file_id)
        for item in value.values():
            found.extend(_file_ids(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_file_ids(item))
    return found


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _track_tool_input(event: Any, starts: dict[int, tuple[str, str]], parts: dict[int, list[str]]) -> None:
    """Remember each tool_use block's id, name and raw input text (for a call cut by max_tokens)."""
    kind = _field(event, "type")
    index = _field(event, "index")
    if not isinstance(index, int):
        return
    if kind == "content_block_start":
        block = _field(event, "content_block")
        if _field(block, "type") == "tool_use":
            starts[index] = (str(_field(block, "id") or ""), str(_field(block, "name") or ""))
    elif kind == "content_block_delta" and index in starts:
        partial = _field(_field(event, "delta"), "partial_json")
        if isinstance(partial, str):
            parts.setdefault(index, []).append(partial)


def _bad_input_message(stop_reason: str) -> str:
    if stop_reason == "max_tokens":
        return "not run: the response reached max_tokens before this tool call was complete; call it again"
    # spec §1.3-a: the model sees why, and can call again (the API's own advice for this case).
    return "not run: the tool input was not valid JSON; call the tool again with a JSON object as its input"


def _tool_uses(content: list[dict[str, Any]]) -> list[ToolCallRequest]:
    return [
        ToolCallRequest(id=str(b.get("id")), name=str(b.get("name")), input=dict(b.get("input") or {}))
        for b in content
        if b.get("type") == "tool_use"
    ]


def _last_text(history: list[dict[str, Any]]) -> str:
    for message in reversed(history):
        if message.get("role") == "assistant":
            return "".join(
                str(b.get("text", ""))
                for b in message.get("content", [])
                if isinstance(b, dict) and b.get("type") == "text"
            )
    return ""


def _parse_results(
    results: Sequence[Mapping[str, Any]], pending: Sequence[PendingCall]
) -> dict[str, tuple[str, list[ImageRef], bool]]:
    """Check frontend results against the pending calls (spec §3.3-a); raise before changing anything."""
    if isinstance(results, Mapping) or not isinstance(results, Sequence):
        raise ToolResultsError("tool results must be a JSON array", missing=[], unexpected=[], duplicated=[])
    pending_ids = [p.tool_use_id for p in pending]
    seen: list[str] = []
    parsed: dict[str, tuple[str, list[ImageRef], bool]] = {}
    problems: list[str] = []
    for i, item in enumerate(results):
        if not isinstance(item, Mapping) or not isinstance(item.get("tool_use_id"), str):
            raise ToolResultsError(
                f"tool result {i} must be an object with a string tool_use_id", missing=[], unexpected=[], duplicated=[]
            )
        tool_use_id = item["tool_use_id"]
        seen.append(tool_use_id)
        is_error = item.get("is_error", False)
        if not isinstance(is_error, bool):
            problems.append(f"{tool_use_id}: is_error must be true or false")
        text, images, problem = _result_content(item.get("content", ""))
        if problem:
            problems.append(f"{tool_use_id}: {problem}")
        parsed[tool_use_id] = (text, images, bool(is_error))
    missing = [i for i in pending_ids if i not in seen]
    unexpected = [i for i in dict.fromkeys(seen) if i not in pending_ids]
    duplicated = [i for i in dict.fromkeys(seen) if seen.count(i) > 1]
    if missing or unexpected or duplicated or problems:
        parts = []
        if missing:
            parts.append(f"missing results for {', '.join(missing)}")
        if unexpected:
            parts.append(f"not pending: {', '.join(unexpected)}")
        if duplicated:
            parts.append(f"given more than once: {', '.join(duplicated)}")
        parts.extend(problems)
        raise ToolResultsError(
            "tool results do not match the pending calls ("
            + "; ".join(parts)
            + f"); pending: {', '.join(pending_ids)}",
            missing=missing,
            unexpected=unexpected,
            duplicated=duplicated,
        )
    return {i: parsed[i] for i in pending_ids}


def _result_content(content: object) -> tuple[str, list[ImageRef], str | None]:
    """Text and images of a frontend result's ``content`` (a string or content blocks)."""
    if isinstance(content, str):
        return content, [], None
    if not isinstance(content, list):
        return "", [], "content must be a string or a list of content blocks"
    texts: list[str] = []
    images: list[ImageRef] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif isinstance(block, dict) and block.get("type") == "image" and isinstance(block.get("source"), dict):
            source = block["source"]
            if source.get("type") == "base64":
                media = str(source.get("media_type", "image/png"))
                images.append(ImageRef(src=f"data:{media};base64,{source.get('data', '')}", media_type=media))
            elif source.get("type") == "url":
                url = str(source.get("url", ""))
                images.append(ImageRef(src=url, media_type=str(source.get("media_type", "image/*"))))
            else:
                return "", [], "image source must be base64 or url"
        else:
            return "", [], "content blocks must be text or image"
    return "\n".join(texts), images, None
