"""The agent loop: ``Agent.run``, the frontend-tool pause, ``continue_with_tool_results``, retries.

Owns: the order of a run (spec ``spec/agent-ref.md`` §1): ``meta_init``, steps of
model call then tools, the pause for frontend tools with its state saved *before*
``awaiting_frontend_tools`` is sent, the termination conditions (§5), the
discarded-attempt signal for retries after partial output (§6.4), the end of
every response (``meta_final`` or ``awaiting_frontend_tools``, then ``[DONE]``, §7),
what faults leave behind (an abort or a gone client answers unanswered calls and
closes the run in the store, §5.5; the owner lease, recovery of a dead run and
``abandon``, §10), the request sent per call (``request_options``, §11), and the
seams where paused subagents resume (§13.5, ``subagent_run.py``) and background tasks are
notified, awaited and killed (§14, ``background.py``).
Does not own: translating API events (``envelope.anthropic.AnthropicTranslator``),
the models (``models.py``, ``scripted.py``), tools (``tools.py``), storage
(``store.py``).

The run is split into stages, one module each, in the order of seed 003/004's flow;
``Agent`` keeps the public API, the state, and the loop that decides (``_steps``), and
binds each stage's functions as its methods (they take the agent as ``self``):

1. ``prepare.py``: the request of a call and the ``meta_init`` payload;
2. ``call_model.py``: one model call with retries, streamed;
3. and 4. ``tool_step.py``: route the calls (PreToolUse hooks, ``can_use_tool``,
   frontend/backend/subagent) and run them (``hooks.py``, ``permissions.py``,
   ``subagents.py``);
5. ``record.py``: the turn into history;
6. ``finish.py``: the end of a response (pause or ``meta_final``).

Hooks fire at the seams between them (spec §12.1-a).

Every line the agent sends goes through one ``_Response``: it feeds an
``envelope.Reconstructor`` (so a line that would break the stream fails here, in
tests, not in a browser), appends to the response's log, and calls the sink. The
lines that end a response are *staged* first: they are logged and saved with the
state in one transaction, and only then sent (§4.4).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from envelope import Emitter, ImageRef

from . import (
    background,
    call_model,
    compaction,
    finish,
    loop_guard,
    prepare,
    record,
    response,
    scrub,
    structured,
    subagent_run,
    tool_step,
)
from .call_model import _RunFailed
from .errors import ConfigError, StateError, ToolResultsError
from .finish import (
    STOP_ABANDONED,
    STOP_AWAITING,
    STOP_ERROR,
    STOP_INTERRUPTED,
    STOP_LOST,
    STOP_MAX_BUDGET,
    AgentResult,
)
from .hooks import HOOK_EVENTS, Hook, HookFailure, HookInput, run_hooks
from .pricing import PRICES, Price, price_for
from .record import _tool_uses
from .response import DONE_LINE, Sink, _ClientGone, _NestedResponse
from .retry import RetryPolicy
from .state import AgentState, PendingCall, PendingChild, RunState, roll_back_dead_run
from .store import MemoryStore, Store
from .subagents import DEFAULT_MAX_SUBAGENTS_PER_STEP, AgentSpec, check_specs
from .tools import Tool, ToolCallRequest, error_outcome, result_block

if TYPE_CHECKING:
    from envelope import Profile

    from .compaction import Compactor
    from .models import Model
    from .permissions import CanUseTool
    from .structured import OutputSchema

__all__ = ["DONE_LINE", "Agent", "AgentResult", "Sink"]

#: The response classes live in ``response.py``; named here too, because the tests'
#: validating tee patches ``agent._Response`` and recognises ``agent._nowhere``.
_Response = response._Response
_nowhere = response._nowhere

log = logging.getLogger("agent_ref")


#: Request keys the agent sets on every call; ``request_options`` may not (spec §11.1-a).
AGENT_OWNED_PARAMS: Final = frozenset(
    {"model", "messages", "max_tokens", "system", "tools", "tool_choice", "thinking", "stream"}
)
#: Seconds a backend tool call may run unless the tool says otherwise (spec §2.5-a).
DEFAULT_TOOL_TIMEOUT: Final = 60.0
#: Seconds a ``running`` agent stays held by its process without a renewal (spec §10.2-a).
DEFAULT_LEASE_SECONDS: Final = 30.0


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
            they stream into this agent's response (spec §13), in the foreground or as
            background tasks the ``task_status`` tool reports on (spec §14).
        max_subagents_per_step: children one step may have running at once (background tasks
            of earlier steps still running count); the spawning calls past it are answered
            ``is_error`` and start nothing (spec §13.9-a).
        compactor: compacts the API context before a model call once it reaches the
            compactor's threshold (``SummarizingCompactor``, ``ToolResultTrimmer``; spec §15).
        loop_limit: the same tool with the same input this many times in a row goes to
            ``can_use_tool`` with a reason, or stops the run (``loop_detected``); ``None``:
            off (spec §16).
        output_schema: the final answer must be JSON matching this (a msgspec type or a
            JSON Schema dict, checked by ``jsonschema``); spec §17.
        max_structured_output_retries: corrections the model gets before the run ends
            ``error_max_structured_output_retries``.

    Raises:
        ConfigError: duplicate tool names, or a budget with an unpriced model, an unknown
            hook event, or a tool named ``spawn_subagent`` or ``task_status`` beside subagents.
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
        profile: Profile = "default",
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
        max_subagents_per_step: int = DEFAULT_MAX_SUBAGENTS_PER_STEP,
        compactor: Compactor | None = None,
        loop_limit: int | None = loop_guard.DEFAULT_LOOP_LIMIT,
        output_schema: OutputSchema | None = None,
        max_structured_output_retries: int = structured.DEFAULT_STRUCTURED_RETRIES,
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
        cap = max_subagents_per_step
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:  # spec §13.9-a
            raise ConfigError(f"max_subagents_per_step must be an integer of at least 1, got {cap!r}")
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
        #: spec envelope-v1 §10: "seed" sends control envelopes whole, for clients written to the seed.
        self.profile: Profile = profile
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
        self._emitter = Emitter(self.state.agent_uuid, max_bytes, profile=profile)
        self._abort = asyncio.Event()
        #: Results of the current step's calls already decided, by tool_use id (spec §5.5-b).
        self._answered: dict[str, dict[str, Any]] = {}
        self.hooks: dict[str, list[Hook]] = {k: list(v) for k, v in (hooks or {}).items()}
        self.can_use_tool = can_use_tool
        self.subagents: dict[str, AgentSpec] = dict(subagents or {})
        self.max_subagents_per_step = max_subagents_per_step
        #: Live background tasks of the run in progress, by task id (spec §14).
        self._tasks: dict[str, asyncio.Future[None]] = {}
        if self.subagents:
            self.tools[background.TASK_STATUS_TOOL] = background.status_tool(self)  # spec §14.3-a
        #: (parent agent, spawning tool_use id) when this agent runs as a subagent (spec §13.3).
        self._parent: tuple[str, str] | None = None
        self._parent_response: _Response | None = None
        self._hook_failures: list[HookFailure] = []
        self._prompt: str | None = None
        self._interrupted: str | None = None
        # Guards (compaction.py, loop_guard.py, structured.py; spec §15-§17).
        if loop_limit is not None and loop_limit < 2:
            raise ConfigError("loop_limit must be at least 2 (or None to turn loop detection off)")
        if max_structured_output_retries < 0:
            raise ConfigError("max_structured_output_retries must be 0 or more")
        self.compactor = compactor
        self.loop_limit = loop_limit
        self.max_structured_output_retries = max_structured_output_retries
        self._output = structured.StructuredOutput(output_schema) if output_schema is not None else None
        self._manual_compaction: Compactor | None = None
        self._context_tokens: int | None = None
        self._compactions: list[dict[str, Any]] = []
        self._loop_detected = False
        self._structured: tuple[Any] | None = None
        #: Paused children to continue at the start of a resumed response (spec §13.5-c).
        self._resuming: tuple[list[tuple[PendingChild, Agent]], list[Mapping[str, Any]], dict[str, Any]] | None = None

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

        A resume that died is put back to its pause (the same results can be sent again):
        the dead response's index gets a closing response in the log (``meta_init``, an
        ``error`` of type ``lost``, the same ``awaiting_frontend_tools``, ``[DONE]``). A run
        that died otherwise is closed: its prompt is taken back out of the context, it is
        recorded with stop reason ``lost``, and its log gets a closing response. Both go
        through ``state.roll_back_dead_run``, the one recovery path (the server's uses it too).

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
        dead_index = run.responses if run is not None else 0
        outcome = roll_back_dead_run(state)
        if outcome == "released" or run is None:
            await self.store.save(state)
            return None
        response = _Response(_nowhere, state.agent_uuid, run.run_id, dead_index, self.max_bytes, self.profile)
        response.gone = True  # nobody reads it: it only closes the run's log (spec §9.2-a)
        if outcome == "paused":
            response.stage(self._emitter.buffered("meta_init", self._resume_meta(run, [])))
            payload = {
                "type": STOP_LOST,
                "message": "the process running this resume stopped before it ended; "
                "the run is paused again and waits for the same tool results",
            }
            pending = [p.element() for p in state.pending_frontend]
            response.stage(self._emitter.buffered("error", json.dumps(payload, ensure_ascii=False)))
            response.stage(self._emitter.buffered("awaiting_frontend_tools", json.dumps(pending, ensure_ascii=False)))
            response.stage([DONE_LINE])
            await self.store.save(state, log=response.batch())
            log.warning("agent %s: a resume whose process died was put back to its pause", state.agent_uuid)
            return None
        run.responses = dead_index + 1
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
        response = _Response(
            sink or _nowhere, state.agent_uuid, run.run_id, run.responses, self.max_bytes, self.profile
        )
        run.responses += 1
        text = "abandoned: " + scrub.public(reason)
        # Every line of this response is a closing line: staged, stored, then sent (spec §4.4).
        answers = [p.tool_use_id for p in state.pending_frontend if p.agent is None]
        answers += [c.tool_use_id for c in state.pending_children]
        response.stage(self._emitter.buffered("meta_init", self._resume_meta(run, answers)))
        by_id: dict[str, dict[str, Any]] = {b["tool_use_id"]: b for b in state.pending_backend_results}
        for pending in state.pending_frontend:
            if pending.agent is not None:
                continue  # a paused child's call: the child is abandoned below (spec §13.5-d)
            call = ToolCallRequest(id=pending.tool_use_id, name=pending.name, input=pending.input)
            done = error_outcome(self._emitter, call, text)
            response.stage(done.lines)
            by_id[call.id] = done.block
        for tool_use_id, child_text in (await subagent_run.abandon_children(self, scrub.public(reason))).items():
            done = error_outcome(
                self._emitter, ToolCallRequest(id=tool_use_id, name="spawn_subagent", input={}), child_text
            )
            response.stage(done.lines)
            by_id[tool_use_id] = done.block
        self._append_user([by_id[i] for i in state.pending_order if i in by_id])
        state.pending_children = []
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
        state.tasks = []  # spec §14.2: tasks belong to one run
        self._tasks = {}
        self._claim()
        self._append_user(blocks)
        await self.store.save(state)  # claim the agent (spec §4.3, §10.2-a)
        response: _Response
        if self._parent_response is not None:
            response = _NestedResponse(
                self._parent_response, state.agent_uuid, run.run_id, run.responses, self.max_bytes, self.profile
            )
        else:
            response = _Response(sink, state.agent_uuid, run.run_id, run.responses, self.max_bytes, self.profile)
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
            StateError: the agent is not paused (or runs under another process's live lease).
            ToolResultsError: the ids are not exactly the pending set, or a result is malformed.
                Nothing is changed.
            ConflictError: another process resumed it first. Nothing is changed.
        """
        state = self.state
        if state.status == "running":
            # spec §10.2-b: a resume whose process died (expired lease) is put back to its
            # pause first, so the same answer succeeds; a live one is refused (StateError).
            await self.recover()
        if state.status != "awaiting_frontend_tools" or state.run is None:
            raise StateError(
                f"agent {state.agent_uuid} is not waiting for frontend tool results (status {state.status})"
            )
        parsed = _parse_results(results, state.pending_frontend)
        children = await subagent_run.load_paused_children(self)  # spec §13.5-c: checked before the claim
        self._claim()
        try:
            await self.store.save(state)  # claim: exactly one resume wins (spec §4.3)
        except BaseException:
            state.status = "awaiting_frontend_tools"
            state.lease_owner = None
            state.lease_expires_at = 0.0
            raise
        run = state.run
        response: _Response
        if self._parent_response is not None:  # a paused child, resumed by its parent (spec §13.5-c)
            response = _NestedResponse(
                self._parent_response, state.agent_uuid, run.run_id, run.responses, self.max_bytes, self.profile
            )
        else:
            response = _Response(sink, state.agent_uuid, run.run_id, run.responses, self.max_bytes, self.profile)
        run.responses += 1
        own = [p for p in state.pending_frontend if p.agent is None]
        # spec §13.5-c: this response answers the agent's own calls and the paused children's spawning calls.
        answers = [p.tool_use_id for p in own] + [c.tool_use_id for c in state.pending_children]
        opening = self._emitter.buffered("meta_init", self._resume_meta(run, answers))
        by_id: dict[str, dict[str, Any]] = {b["tool_use_id"]: b for b in state.pending_backend_results}
        for pending in own:
            text, images, is_error = parsed[pending.tool_use_id]
            opening += self._emitter.tool_result(pending.tool_use_id, pending.name, text, images)
            by_id[pending.tool_use_id] = result_block(pending.tool_use_id, text, images, is_error=is_error)
        step = state.current_step + 1
        if children:
            # The user turn is recorded when the children have ended (``_resume_children``).
            self._resuming = (children, list(results), by_id)
            self._answered = dict(by_id)
            return await self._drive(response, step, opening)
        self._append_user([by_id[i] for i in state.pending_order if i in by_id])
        state.pending_frontend = []
        state.pending_backend_results = []
        state.pending_order = []
        return await self._drive(response, step, opening)

    def _resume_meta(self, run: RunState, answers: list[str]) -> str:
        """The ``meta_init`` of a resumed response, announcing the calls it answers (envelope spec §8.4-a)."""
        meta = json.loads(self._meta_init(run, resume=True))
        meta["resume"]["tool_use_ids"] = answers
        return json.dumps(meta, ensure_ascii=False)

    async def _resume_children(self, response: _Response) -> bool:
        """Continue the paused children, then record the step's results; ``True`` if one paused again (§13.5-c)."""
        assert self._resuming is not None
        children, results, by_id = self._resuming
        self._resuming = None
        state = self.state
        owners = {p.tool_use_id: p.agent for p in state.pending_frontend}
        order = state.pending_order
        # In memory the pause is consumed (an abort now answers the calls, §5.5-b); the store
        # keeps it until the response ends, so a resume that dies is put back (§10.2-b).
        state.pending_frontend, state.pending_children, state.pending_backend_results = [], [], []
        state.pending_order = []
        outcomes, paused = await subagent_run.resume_children(self, response, children, results, owners)
        await self._report_hook_failures(response)
        for tool_use_id, done in outcomes.items():
            by_id[tool_use_id] = done.block
        if paused:
            state.pending_frontend = [p for child in paused for p in child.calls]
            state.pending_children = [child.child for child in paused]
            state.pending_backend_results = list(by_id.values())
            state.pending_order = order
            return True
        self._append_user([by_id[i] for i in order if i in by_id])
        return False

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
            await background.kill_all(self, response)  # spec §14.6
            # spec §5.5-c: the caller is gone. Close the run in the store (log included); send nothing.
            response.gone = True
            await asyncio.shield(self._close_quietly(response, "the run was cancelled: the client went away"))
            raise
        abort_task.cancel()
        if loop_task not in done:
            loop_task.cancel()
            await asyncio.gather(loop_task, return_exceptions=True)
            await background.kill_all(self, response)  # spec §14.6: killing the run kills its tasks
            return await self._end_aborted(response, "the run was aborted by the caller")
        await background.kill_all(self, response)  # spec §14.6: tasks left when the run ends otherwise
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
            await self._close_open(response, every_agent=True)
            await self._answer_unanswered(response, "not run: the agent failed before this tool call finished")
            payload = {
                "type": "internal_error",
                "message": "internal error in the agent (details are in the server log)",
                "retryable": False,
                "attempts": 1,
            }
            return await self._finish(response, STOP_ERROR, error_payload=payload)
        if stop == STOP_AWAITING:
            if response.nested:
                return await subagent_run.pause_nested(self, response)  # spec §13.5-a: the root announces it
            return await self._pause(response)
        return await self._finish(response, stop)

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
        if self._resuming is not None and await self._resume_children(response):
            return STOP_AWAITING  # spec §13.5-c: a child paused again; so does the run
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
            background.deliver(self)  # spec §14.4: ended tasks are notified before the next call
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
                if await background.wait_unseen(self):
                    step += 1  # spec §14.4: one more step to see the tasks' results
                    continue
                end = await self._structured_end(response, outcome.stop_reason)  # spec §17 (structured.py)
                if end is None:
                    step += 1
                    continue
                return end
            frontend = await self._run_step_tools(response, calls, outcome.bad_inputs)
            if self._interrupted is not None and self._loop_detected:
                return loop_guard.stopped(self)  # spec §16: a repeat with no can_use_tool (loop_guard.py)
            if self._interrupted is not None:
                return STOP_INTERRUPTED
            if frontend:
                await background.wait_running(self)  # spec §14.5: a pause leaves no task running
                self.state.current_step = step
                return STOP_AWAITING
            step += 1

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

    # ----------------------------------------------------------------- stream ends

    # ----------------------------------------------------------------- history

    # ----------------------------------------------------------------- the stages, bound as methods
    # Each lives in the module named after its stage (seed 003/004's flow); they take the
    # agent as ``self``.
    _params = prepare.params
    _meta_init = prepare.meta_init
    _model_call = call_model.model_call
    _track_usage_and_container = call_model.track_usage_and_container
    _discard = call_model.discard
    _close_open = call_model.close_open
    _run_step_tools = tool_step.run_step_tools
    _permit = tool_step.permit
    _run_subagent = tool_step.run_subagent
    _last_call = tool_step.last_call
    _answer_unanswered = tool_step.answer_unanswered
    _append_user = record.append_user
    _append_assistant = record.append_assistant
    _collect_files = record.collect_files
    _pause = finish.pause
    _finish = finish.finish
    _cost = finish.cost
    _end_aborted = finish.end_aborted
    _close_quietly = finish.close_quietly
    # Guards (spec §15-§17).
    compact = compaction.compact
    _structured_end = structured.structured_end


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
