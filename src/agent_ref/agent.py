"""The agent: ``Agent``, its public API, and the seams between a run and its store (spec ``spec/agent-ref.md``).

Owns: the public API (``run``, ``continue_with_tool_results``, ``abandon``, ``recover``,
``abort``, ``compact``, ``load``, and the read-only views a server uses:
``current_response``, ``lease_owner``, ``recover_dead``), the start of each response
(the claim, the response object, the ``RunContext``), the owner lease (§10.2-a), the
recovery of a dead run (§10.2-b), ``abandon`` (§10.3), checking frontend results
(§3.3-a). Does not own: the configuration (``options.AgentOptions``), the flow of a
run (``run/loop.py``: prepare → call model → tool step → finish, with hooks and the pause),
the stages (``prepare``, ``call_model``, ``tool_step``, ``record``, ``finish``,
``subagent_run``, ``background``, ``compaction``, ``structured``, ``loop_guard``), the
state of one response (``run_context.RunContext``), or what is stored
(``state.AgentState``).

Where state lives: ``self.options`` (configuration, frozen); ``self.state`` (what
survives the process: the API context ``messages``, the run in progress with its
``history``, the pause's relay state, the lease); one ``RunContext`` per response (what
does not survive it). The stages take the ``RunContext`` and never an ``Agent``.

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
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from envelope import Emitter, ImageRef

from .errors import StateError, ToolResultsError
from .policy import scrub
from .policy.permissions import (
    PermissionAllow,
    PermissionDeny,
    PermissionRuleError,
    PermissionState,
    parse_approval_answer,
)
from .run import background, checkpoints, loop, response
from .run import extras as run_extras
from .run.context import ParentLink, Resuming, RunContext
from .run.finish import STOP_ABANDONED, STOP_LOST, AgentResult, finish
from .run.options import AGENT_OWNED_PARAMS, DEFAULT_LEASE_SECONDS, DEFAULT_TOOL_TIMEOUT, AgentOptions
from .run.prepare import meta_init
from .run.response import DONE_LINE, Sink, _NestedResponse
from .run.subagent_run import abandon_children, load_paused_children, new_child
from .store import sessions
from .store.core import LogBatch, MemoryStore, Store, lease_owner_id, owner_gone
from .store.record import append_user
from .store.state import (
    AgentState,
    PendingCall,
    Recovery,
    RunState,
    decode_state,
    encode_state,
    lost_run_record,
    roll_back_dead_run,
)
from .tools.core import Tool, ToolCallRequest, ToolOutcome, error_outcome, result_block
from .tools.snapshots import RestoreReport, restore_files

if TYPE_CHECKING:
    from envelope import Profile

    from .models.core import Model
    from .run.compaction import Compactor
    from .run.context import ChildAgent
    from .run.subagents import AgentSpec

__all__ = [
    "AGENT_OWNED_PARAMS",
    "DEFAULT_LEASE_SECONDS",
    "DEFAULT_TOOL_TIMEOUT",
    "DONE_LINE",
    "Agent",
    "AgentOptions",
    "AgentResult",
    "Sink",
    "save_released",
]

#: The response classes live in ``run/response.py``; named here too, because the tests'
#: validating tee patches ``agent._Response`` and recognises ``agent._nowhere``.
_Response = response._Response
_nowhere = response._nowhere

log = logging.getLogger("agent_ref")


class Agent:
    """A minimal, complete agent that streams envelopes (spec ``spec/agent-ref.md``).

    Example::

        agent = Agent(ScriptedModel(), options=AgentOptions(tools=default_tools(), store=SQLiteStore("agents.db")))
        lines: list[bytes] = []
        result = await agent.run("What is 5 + (10 * 2)?", lines.append)

    ``Agent(model, tools=..., store=..., ...)`` is the same: the keywords are
    ``AgentOptions``'s fields, and build one.

    Args:
        model: where completions come from (``AnthropicModel``, ``ScriptedModel``, ``ReplayModel``).
        options: the configuration (see ``AgentOptions``).
        **config: ``AgentOptions`` fields, when ``options`` is not given.

    Attributes:
        model: the model.
        options: the configuration (frozen).
        store: where state is saved (``options.store``, or a private ``MemoryStore``).
        tools: the tools by name; ``task_status`` added when the agent has subagents (spec §14.3-a).
        state: the stored state (replace it with a loaded one to continue a stored agent).
        parent: set by a parent agent when this one runs as its subagent (spec §13.3).

    Raises:
        ConfigError: an option is invalid (the message names it; see ``AgentOptions``), or a
            budget with an unpriced model.
        TypeError: ``options`` and keywords together, or an unknown keyword.
    """

    def __init__(self, model: Model, *, options: AgentOptions | None = None, **config: Any) -> None:
        """See the class docstring."""
        if options is not None and config:
            raise TypeError(f"Agent takes options= or keywords, not both (got {', '.join(sorted(config))})")
        if options is None:
            unknown = sorted(set(config) - set(AgentOptions.__dataclass_fields__) - {"output"})
            if unknown:
                raise TypeError(f"Agent got unknown options: {', '.join(unknown)}")
            options = AgentOptions(**config)
        options.check_model(model)
        self.model = model
        self.options = options
        self.store: Store = options.store if options.store is not None else MemoryStore()
        self.tools: dict[str, Tool] = {t.name: t for t in options.tools}
        if options.subagents:  # spec §14.3-a
            joins = getattr(options.background_queue, "queue", None)  # [SA3-b]: task_status(wait=true)
            self.tools[background.TASK_STATUS_TOOL] = background.status_tool(lambda: self.state, joins)
        client = getattr(model, "client", None)
        # spec §6.3-b: what this process holds never reaches a stream, a store or a log.
        scrub.hold([getattr(client, "api_key", None), getattr(client, "auth_token", None), *options.secrets])
        scrub.install_log_filter()
        self.state = AgentState(agent_uuid=options.agent_uuid or str(uuid.uuid4()), model=model.name)
        self.parent: ParentLink | None = None
        self._emitter = Emitter(self.state.agent_uuid, options.max_bytes, profile=options.profile)
        self._abort = asyncio.Event()
        #: ``compact()``'s request, for the next response; the last call's context size (spec §15).
        self._manual_compaction: Compactor | None = None
        self._context_tokens: int | None = None
        #: Messages ``send`` queued for the run's next step boundary (spec §S2).
        self._inbox = sessions.Inbox(self.store)

    @property
    def agent_uuid(self) -> str:
        """The agent's id."""
        return self.state.agent_uuid

    # ----------------------------------------------------------------- public API

    @classmethod
    async def load(
        cls, agent_uuid: str, store: Store, model: Model, *, options: AgentOptions | None = None, **config: Any
    ) -> Agent:
        """Rehydrate a stored agent, for example in a new process (spec §3.2).

        Args:
            agent_uuid: the agent.
            store: where it was saved.
            model: the model to continue with.
            options: the configuration (its ``store`` and ``agent_uuid`` are replaced by these).
            **config: or ``AgentOptions`` fields (tools must include the ones of the paused step).

        Returns:
            The agent, in the stored state.

        Raises:
            StateError: no such agent.
        """
        state = await store.load(agent_uuid)
        if state is None:
            raise StateError(f"no agent {agent_uuid} in the store")
        if options is not None:
            agent = cls(model, options=options.replace(store=store, agent_uuid=agent_uuid), **config)
        else:
            agent = cls(model, store=store, agent_uuid=agent_uuid, **config)
        agent.state = state
        return agent

    async def reload(self) -> None:
        """Read the agent's state again from the store (another process, or a recovery, changed it).

        Nothing changes when the store no longer has the agent.
        """
        fresh = await self.store.load(self.agent_uuid)
        if fresh is not None:
            self.state = fresh

    def abort(self) -> None:
        """Ask the running run to stop: the stream ends with an ``aborted`` error and ``meta_final`` (spec §5.5)."""
        self._abort.set()

    def compact(self, compactor: Compactor | None = None) -> None:
        """Compact the context before the next model call, whatever its size (trigger ``manual``).

        It takes effect in the next ``run`` (or resume), before its first model call, with
        the boundary in that response (spec [R15.3-a]).

        Args:
            compactor: the compactor to use; the agent's own, or a ``SummarizingCompactor``
                when the agent has none.
        """
        from .run.compaction import SummarizingCompactor

        self._manual_compaction = compactor or self.options.compactor or SummarizingCompactor()

    def lease_alive(self, now: float | None = None) -> bool:
        """Whether the agent is ``running`` under a lease that has not expired (spec §10.2-a)."""
        state = self.state
        now = time.time() if now is None else now
        # [R10.2-c]: a lease of a process of this machine that no longer runs is void at once
        return state.status == "running" and state.lease_expires_at > now and not owner_gone(state.lease_owner)

    @property
    def lease_owner(self) -> str | None:
        """The process holding the agent while it runs (``host:pid:tag``, spec §10.2-a), else ``None``."""
        return self.state.lease_owner

    @property
    def current_response(self) -> tuple[str, int] | None:
        """``(run_id, index)`` of the run in progress's latest response (the one being sent), else ``None``."""
        run = self.state.run
        if run is None:
            return None
        return run.run_id, run.responses - 1

    async def recover(self, sink: Sink | None = None) -> AgentResult | None:
        """Deal with a run whose process died (its lease expired) so the agent can be used again (spec §10.2-b).

        A resume that died is put back to its pause (the same results can be sent again):
        the dead response's index gets a closing response in the log (``meta_init``, an
        ``error`` of type ``lost``, the same ``awaiting_frontend_tools``, ``[DONE]``). A run
        that died otherwise is closed: its prompt is taken back out of the context, it is
        recorded with stop reason ``lost``, and its log gets a closing response. Both go
        through ``state.roll_back_dead_run``, the one recovery path (the server's uses it too).

        Returns:
            The closed (or, [CK1.4-a], continued) run's result; ``None``: not running, or a pause restored.

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
        if checkpoints.can_continue(state):
            return await self._continue(sink or _nowhere)  # [CK1.4-a]
        run = state.run
        dead_index = run.responses if run is not None else 0
        outcome = roll_back_dead_run(state)
        if outcome == "released" or run is None:
            await self.store.save(state)
            return None
        ctx = self._context(_Response(_nowhere, state.agent_uuid, run.run_id, dead_index, *self._bounds()))
        ctx.response.gone = True  # nobody reads it: it only closes the run's log (spec §9.2-a)
        if outcome == "paused":
            ctx.response.stage(self._emitter.buffered("meta_init", meta_init(ctx, run, resume=True, answers=[])))
            payload = {
                "type": STOP_LOST,
                "message": "the process running this resume stopped before it ended; "
                "the run is paused again and waits for the same tool results",
            }
            pending = [p.element() for p in state.pending_frontend]
            ctx.response.stage(ctx.error_envelope(payload))
            ctx.response.stage(
                self._emitter.buffered("awaiting_frontend_tools", json.dumps(pending, ensure_ascii=False))
            )
            ctx.response.stage([DONE_LINE])
            await self.store.save(state, log=ctx.response.batch())
            log.warning("agent %s: a resume whose process died was put back to its pause", state.agent_uuid)
            return None
        run.responses = dead_index + 1
        await ctx.send(self._emitter.buffered("meta_init", meta_init(ctx, run)))
        payload = {
            "type": STOP_LOST,
            "message": "the process running this run stopped before the run ended; a later process closed it",
        }
        log.warning("agent %s: run %s was lost with its process; closed", state.agent_uuid, run.run_id)
        return await finish(ctx, STOP_LOST, error_payload=payload)

    async def _continue(self, sink: Sink, dead_log: Sequence[bytes] | None = None) -> AgentResult:
        """Continue a dead run from its checkpoint here: claim it, close the dead response, go on ([CK1.4-a]).

        ``dead_log``: the dead response's log, closed by the caller (a server's journal, spec server [CN1-b]).
        """
        run = self.state.run
        assert run is not None
        closing = _Response(_nowhere, self.agent_uuid, run.run_id, run.responses - 1, *self._bounds())
        closing.gone = True  # nobody reads it: it only closes the dead response's log
        self._claim()
        await checkpoints.close_dead(self._context(closing), dead_log)
        ctx = self._context(self._open_response(sink))
        step, opening = checkpoints.continuation(ctx)
        return await self._drive(ctx, step, opening)

    async def recover_dead(
        self, run_id: str, owner: str, sink: Sink | None = None, *, dead_log: Sequence[bytes] | None = None
    ) -> AgentResult | None:
        """``recover`` a run the caller knows is dead, without waiting for its lease.

        Only when the state still shows ``run_id`` running under ``owner``'s lease: the
        lease is the caller's own (a server's failed run, spec server §3.3-d) or its owner
        is known gone (spec server [CN1-a]). Otherwise nothing.

        Args:
            run_id: the dead run.
            owner: the lease owner the caller knows is dead.
            sink: receives a continuation's lines ([CK1.4-a]); nothing is sent when ``None``.
            dead_log: for a run that continues, the dead response's log already closed by
                the caller (spec server [CN1-b]); stored as that response's log.

        Returns:
            As ``recover``.
        """
        state = self.state
        if state.status != "running" or state.run is None or state.run.run_id != run_id:
            return None
        if state.lease_owner != owner:
            return None  # another process took it over meanwhile
        state.lease_expires_at = 0.0
        if dead_log is not None and checkpoints.can_continue(state):
            return await self._continue(sink or _nowhere, dead_log)
        return await self.recover(sink)

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
        await self._claim_paused()
        ctx = self._context(self._open_response(sink or _nowhere))
        run = ctx.run
        text = "abandoned: " + scrub.public(reason)
        # Every line of this response is a closing line: staged, stored, then sent (spec §4.4).
        answers = [p.tool_use_id for p in state.pending_frontend if p.agent is None]
        answers += [c.tool_use_id for c in state.pending_children]
        ctx.response.stage(self._emitter.buffered("meta_init", meta_init(ctx, run, resume=True, answers=answers)))
        by_id: dict[str, dict[str, Any]] = {b["tool_use_id"]: b for b in state.pending_backend_results}
        for pending in state.pending_frontend:
            if pending.agent is not None:
                continue  # a paused child's call: the child is abandoned below (spec §13.5-d)
            call = ToolCallRequest(id=pending.tool_use_id, name=pending.name, input=pending.input)
            by_id[call.id] = (await ctx.answer_error(call, text, stage=True)).block
        children = await abandon_children(state, self.options.subagents, self._child, scrub.public(reason))
        for tool_use_id, child_text in children.items():
            call = ToolCallRequest(id=tool_use_id, name="spawn_subagent", input={})
            by_id[tool_use_id] = (await ctx.answer_error(call, child_text, stage=True)).block
        append_user(state, [by_id[i] for i in state.pending_order if i in by_id])
        _clear_pause(state)
        return await finish(ctx, STOP_ABANDONED, error_payload={"type": STOP_ABANDONED, "message": text})

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
        before = decode_state(encode_state(state))  # [R5.5-e]: what a refused first line puts back
        run = RunState(run_id=str(uuid.uuid4()), user_query=query, started_at=time.time())
        messages = state.messages
        run.base_messages = len(messages)
        if messages and messages[-1].get("role") == "user" and isinstance(messages[-1].get("content"), list):
            run.base_tail = len(messages[-1]["content"])
        state.run = run
        # spec §14.2: tasks belong to one run, but a detached one outlives it until its result is seen ([SA3-b])
        state.tasks = [t for t in state.tasks if t.detached and not t.notified]
        if self.parent is None:  # spec §12.5: a root run starts with the mode; a child's was narrowed at spawn
            mode = self.options.effective_permission_mode
            # [AP3-b]: a worker's background child starts from its parent's narrowing: that mode is its floor.
            state.permissions = PermissionState(mode=mode, floor=mode if self.options.background else "full")
        self._claim()
        sessions.mark_run(state, run.run_id)  # spec §S1.2-b: where a rewind to this run returns
        append_user(state, blocks)
        await self.store.save(state)  # claim the agent (spec §4.3, §10.2-a)
        ctx = self._context(self._open_response(sink))
        ctx.prompt = query
        opening = self._emitter.buffered("meta_init", meta_init(ctx, run))
        return await self._drive(ctx, 1, opening + await run_extras.recall(ctx, query), before)

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
        permissions = _approved_permissions(state, parsed)  # spec §12.6-b: checked before anything is stored
        # spec §13.5-c: the paused children are checked before the claim.
        children = await load_paused_children(state, self.options.subagents, self._child)
        before = decode_state(encode_state(state))  # [R5.5-e]: what a refused first line puts back
        await self._claim_paused()  # exactly one resume wins (spec §4.3)
        state.permissions = permissions
        ctx = self._context(self._open_response(sink))
        own = [p for p in state.pending_frontend if p.agent is None]
        # spec §13.5-c: this response answers the agent's own calls and the paused children's spawning calls.
        answers = [p.tool_use_id for p in own] + [c.tool_use_id for c in state.pending_children]
        opening = self._emitter.buffered("meta_init", meta_init(ctx, ctx.run, resume=True, answers=answers))
        by_id: dict[str, dict[str, Any]] = {b["tool_use_id"]: b for b in state.pending_backend_results}
        answered, approved = _answer_own(ctx, own, parsed, by_id)
        opening += answered
        step = state.current_step + 1
        if children or approved or ctx.interrupt is not None:
            # The user turn is recorded when the children and the approved calls have ended (``loop.resume_children``).
            ctx.resuming = Resuming(children=children, results=list(results), by_id=by_id, approved=approved)
            ctx.answered = dict(by_id)
            return await self._drive(ctx, step, opening, before)
        append_user(state, [by_id[i] for i in state.pending_order if i in by_id])
        _clear_pause(state)
        return await self._drive(ctx, step, opening, before)

    # ----------------------------------------------------------------- sessions (spec §S1, §S2)

    async def fork(self) -> Agent:
        """A new agent (new id) with a deep copy of this one's history and state, saved (spec §S1.1).

        The original is not changed. A paused agent's fork is paused on the same calls and is
        resumed independently ([SE1.1-c]). The fork's accounts start at zero ([SE1.1-d]).

        Returns:
            The fork, with this agent's model and options.

        Raises:
            StateError: the agent is running (live lease), or paused with paused subagents.
        """
        if self.state.status == "running":
            await self.recover()  # a dead owner's run is closed first; a live one refuses
        state = sessions.fork_state(self.state)
        agent = type(self)(self.model, options=self.options.replace(agent_uuid=state.agent_uuid))
        agent.store = self.store
        agent.state = state
        await self.store.save(state)
        return agent

    async def rewind(self, *, step: int | None = None, run: str | None = None) -> sessions.Rewind:
        """Drop the history after step ``step`` or from run ``run`` on, and save (spec §S1.2).

        ``step=N``: the context keeps its first ``N`` assistant turns (and the tool results
        of the ``N``-th). ``run=ID``: the context is what it was before run ``ID``. Lifetime
        usage, run records and logs are kept ([SE1.2-d]). Files that file-changing tools changed
        after the point are put back first, all or nothing (``snapshots.restore_files``, spec
        [IN4-a]; ``Rewind.files`` says what). A paused agent is rewound only to before its
        paused run, which is abandoned first ([SE1.3-a]).

        Raises:
            StateError: bad arguments, a running agent, a paused one rewound into its paused run, or a
                cut inside a compacted context whose files cannot be placed ([HY3-a]); nothing changed.
            UndoConflict: a recorded file changed since; nothing was written and the history is untouched.
        """
        state = self.state
        if state.status == "running":
            await self.recover()
            if state.status == "running":
                raise StateError(f"agent {state.agent_uuid} is running")
        kept, tail = sessions.rewind_cut(state, step=step, run=run)
        abandoned: str | None = None
        if state.status == "awaiting_frontend_tools" and state.run is not None:
            paused = state.run
            start = (paused.base_messages, paused.base_tail)
            if paused.base_messages < 0 or sessions.position(kept, tail) > sessions.position(*start):
                raise StateError(
                    f"agent {state.agent_uuid} is paused in run {paused.run_id}; rewind to before that run "
                    "(which abandons it) or answer the pause first"
                )
        files = await _rewind_files(self.store, state, kept)  # spec [IN4-a]: all or nothing, before any change
        if state.status == "awaiting_frontend_tools" and state.run is not None:
            abandoned = state.run.run_id
            await self.abandon(reason="rewound to before this run")
        done = sessions.apply_cut(state, kept, tail)
        done.abandoned_run = abandoned
        done.files = files
        await self.store.save(state)
        return done

    def send(self, text: str, *, bounds: sessions.InboxBounds | None = None, run_id: str = "") -> int:
        """Queue a user message for the working run; the model gets it at the next step boundary (spec §S2).

        Args:
            text: the message.
            bounds: the inbox's bounds (spec server [IB1-a]), checked with the put, nothing
                queued past one; ``None`` (the library's default) bounds nothing.
            run_id: the run the message is for, named in ``InboxFullError``.

        Returns:
            The number of messages now waiting.

        Raises:
            StateError: no run of this agent is working (or it is past its last step): the
                message is refused, never dropped ([SE2.3-a]).
            InboxFullError: with it the waiting messages would pass ``bounds``.
            TypeError: ``text`` is not a non-empty string.
        """
        if not isinstance(text, str) or not text.strip():
            raise TypeError("send takes a non-empty string")
        if bounds is not None:
            self._inbox.check(bounds, run_id, text)
        return self._inbox.put(text)

    # ----------------------------------------------------------------- the start of a response

    def _bounds(self) -> tuple[int, Profile]:
        return self.options.max_bytes, self.options.profile

    def _open_response(self, sink: Sink) -> _Response:
        """The run's next response: this agent's own, or its part of its parent's (spec §13.3)."""
        run = self.state.run
        assert run is not None
        response: _Response
        if self.parent is not None:
            response = _NestedResponse(
                self.parent.response, self.agent_uuid, run.run_id, run.responses, *self._bounds()
            )
        else:
            response = _Response(sink, self.agent_uuid, run.run_id, run.responses, *self._bounds())
        run.responses += 1
        return response

    def _context(self, response: _Response) -> RunContext:
        """The ``RunContext`` of a response: the options, the state, and this response's working state."""
        ctx = RunContext(
            options=self.options,
            model=self.model,
            store=self.store,
            tools=self.tools,
            state=self.state,
            emitter=self._emitter,
            response=response,
            new_agent=type(self),
            parent=self.parent,
            context_tokens=self._context_tokens,
            manual_compaction=self._manual_compaction,
            inbox=self._inbox,
        )
        return ctx

    async def _drive(
        self, ctx: RunContext, step: int, opening: list[bytes], before: AgentState | None = None
    ) -> AgentResult:
        """Run the response; with ``before`` (the state before the claim), a refused first line takes it all back.

        spec [R5.5-e]: when the sink refuses the response's first line, nobody saw any of
        it, so the request's effect (the prompt, the answer) is not taken: ``before`` is
        saved over the claim and the sink's error raised. If that save fails too, the store
        keeps the claim under this process's lease; the agent's recovery (§10.2-b, run by the
        server once its store answers, or by any process when the lease runs out) puts a
        resume back to its pause and closes a run as ``lost`` without its prompt.
        """
        if before is None:
            return await self._drive_response(ctx, step, opening)
        ctx.response.refusable = True
        try:
            return await self._drive_response(ctx, step, opening)
        except response._NothingSent as refused:
            await self._take_back(before)
            raise refused.error from None

    async def _take_back(self, before: AgentState) -> None:
        """Save ``before`` over this process's claim ([R5.5-e]); a failure is logged (the lease recovers it)."""
        before.version = self.state.version  # the claim's save (and only it) came after ``before``
        try:
            await self.store.save(before)
        except Exception as exc:
            log.warning("agent %s: could not take back a refused response (left to recovery): %s", self.agent_uuid, exc)
            return
        self.state = before

    async def _drive_response(self, ctx: RunContext, step: int, opening: list[bytes]) -> AgentResult:
        """Run the response (``loop.drive``); keep what outlives it (the last call's context size)."""
        # A fresh event per response: an Event binds to the loop that first waits on it, and an
        # agent may serve runs from several loops (asyncio.run per request); a stale one made
        # the next run end as "aborted".
        self._abort = asyncio.Event()
        await self._inbox.open(self.state)  # spec [IN1-a]: in the store's inbox when it keeps one
        try:
            with run_extras.run_span(ctx) as ctx.span:  # spec §20.2-a, §20.3-a
                return await loop.drive(ctx, self._abort, step, opening)
        finally:
            await self._inbox.close(self.state)  # spec §S2.3: what is still queued waits for the next response
            self._context_tokens = ctx.context_tokens
            self._manual_compaction = ctx.manual_compaction  # still asked for when no call used it

    def _child(self, spec: AgentSpec, agent_uuid: str | None) -> ChildAgent:
        """A child of this agent (spec §13.2-a), to load a paused one or abandon it."""
        return new_child(type(self), self.model, self.options, self.store, spec, agent_uuid=agent_uuid)

    def _claim(self) -> None:
        """Mark the agent ``running`` under a fresh lease of this process (spec §10.2-a)."""
        state = self.state
        state.status = "running"
        state.lease_owner = lease_owner_id(uuid.uuid4().hex[:8])  # [R10.2-c]: checkable on this host
        state.lease_expires_at = time.time() + self.options.lease_seconds

    async def _claim_paused(self) -> None:
        """Claim a paused agent in the store, as a resume or an abandon does (spec §4.3); undone if the save fails."""
        self._claim()
        try:
            await self.store.save(self.state)
        except BaseException:
            state = self.state
            state.status = "awaiting_frontend_tools"
            state.lease_owner = None
            state.lease_expires_at = 0.0
            raise


async def save_released(store: Store, state: AgentState, outcome: Recovery, *, log: LogBatch | None = None) -> None:
    """Save a state ``state.roll_back_dead_run`` put in order, without an ``Agent`` (a server's recovery, §10.2-b).

    With ``log`` (the dead response's lines as the caller closed them) and, for a run
    closed ``lost``, its record: what ``Agent.recover`` stores, when the closing lines are
    the caller's.

    Raises:
        ConflictError: another process changed the agent meanwhile.
    """
    record = lost_run_record(state, STOP_LOST, time.time()) if outcome == "lost" else None
    await store.save(state, log=log, run=record)


def _clear_pause(state: AgentState) -> None:
    """The pause is answered: no relay state is left (spec §3.3)."""
    state.pending_frontend = []
    state.pending_children = []
    state.pending_backend_results = []
    state.pending_order = []


def _answer_own(
    ctx: RunContext, own: Sequence[PendingCall], parsed: Mapping[str, _Answer], by_id: dict[str, dict[str, Any]]
) -> tuple[list[bytes], list[ToolCallRequest]]:
    """The agent's own answered calls: their result lines (kept in ``by_id``), and the approved calls to run.

    A denial is an ``is_error`` result (its ``interrupt`` sets ``ctx.interrupt``); an approval
    runs later through the normal runner, after the opening lines (spec §12.6-c).
    """
    lines: list[bytes] = []
    approved: list[ToolCallRequest] = []
    for pending in own:
        got = parsed[pending.tool_use_id]
        call = ToolCallRequest(id=pending.tool_use_id, name=pending.name, input=pending.input)
        if isinstance(got, PermissionAllow):
            updated = got.updated_input
            approved.append(
                call if updated is None else ToolCallRequest(id=call.id, name=call.name, input=dict(updated))
            )
            continue
        if isinstance(got, PermissionDeny):
            ctx.tracing.refused_call(
                name=call.name,
                call_id=call.id,
                reason="approval_denied",
                message=got.message,
                arguments=call.input,
                parent_traceparent=ctx.run.traceparent,
            )  # spec [IN3-a]: in the trace of the response that asked
            done = error_outcome(ctx.emitter, call, got.message)
            if got.interrupt:
                ctx.interrupt = got.message
            lines += done.lines
            by_id[pending.tool_use_id] = done.block
            continue
        text, images, is_error = got
        text = scrub.held_text(text)  # spec [SC1-d]: a frontend result is stored; held secrets stay out
        text, kept = scrub.held_images(text, images)  # spec [HY2-a]: nor in an image's source
        images = list(kept)
        result_lines = ctx.emitter.tool_result(pending.tool_use_id, pending.name, text, images)
        lines += result_lines
        by_id[pending.tool_use_id] = result_block(pending.tool_use_id, text, images, is_error=is_error)
        done = ToolOutcome(block=by_id[pending.tool_use_id], lines=result_lines, text=text, is_error=is_error)
        ctx.frontend_answers.append((call, done))  # [AP1-a]: their PostToolUse fires before the next model call
    return lines, approved


#: One pending call's answer: a frontend result (text, images, is_error) or an approval decision.
_Answer = tuple[str, list[ImageRef], bool] | PermissionAllow | PermissionDeny


def _approved_permissions(state: AgentState, parsed: Mapping[str, _Answer]) -> PermissionState:
    """The permission state after the approvals' ``updated_permissions`` (spec §12.6-b).

    Raises:
        ToolResultsError: an update cannot apply (a mode wider than the agent's floor); nothing is changed.
    """
    permissions = state.permissions
    for pending in state.pending_frontend:
        got = parsed[pending.tool_use_id]
        if pending.agent is not None or not isinstance(got, PermissionAllow):
            continue
        try:
            permissions = permissions.updated(got)
        except PermissionRuleError as exc:
            raise ToolResultsError(
                f"the approval answer for {pending.tool_use_id} ({pending.name}): {exc}",
                missing=[],
                unexpected=[],
                duplicated=[],
            ) from None
    return permissions


def _parse_results(results: Sequence[Mapping[str, Any]], pending: Sequence[PendingCall]) -> dict[str, _Answer]:
    """Check frontend results and approval answers against the pending calls (spec §3.3-a, §12.6-b).

    Raises before changing anything.
    """
    if isinstance(results, Mapping) or not isinstance(results, Sequence):
        raise ToolResultsError("tool results must be a JSON array", missing=[], unexpected=[], duplicated=[])
    pending_ids = [p.tool_use_id for p in pending]
    approvals = {p.tool_use_id: p.as_approval() for p in pending if p.approval is not None}
    seen: list[str] = []
    parsed: dict[str, _Answer] = {}
    problems: list[str] = []
    for i, item in enumerate(results):
        if not isinstance(item, Mapping) or not isinstance(item.get("tool_use_id"), str):
            raise ToolResultsError(
                f"tool result {i} must be an object with a string tool_use_id", missing=[], unexpected=[], duplicated=[]
            )
        tool_use_id = item["tool_use_id"]
        seen.append(tool_use_id)
        if tool_use_id in approvals:
            parsed[tool_use_id] = parse_approval_answer(item, approvals[tool_use_id])
            continue
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


async def _rewind_files(store: object, state: AgentState, kept: int) -> RestoreReport | None:
    """Put the files back to the rewind's point (spec [IN4-a]); ``None`` when nothing recorded came after it.

    Raises:
        UndoConflict: a recorded path changed since; nothing was written (and the rewind stops).
        StateError: the cut falls inside a compacted context that files were changed in ([HY3-a]).
    """
    points_of = getattr(store, "snapshot_points", None)
    if points_of is None:
        return None  # a user's store that keeps no snapshots: history only
    points: list[tuple[int, str, int]] = await points_of(state.agent_uuid)
    to_step = sessions.files_step(state, kept, points)
    if not points or points[-1][0] <= to_step:
        return None
    return await restore_files(store, state.agent_uuid, to_step=to_step)
