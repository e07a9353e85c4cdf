"""The persisted state of an agent: msgspec Structs under msgspec's schema-evolution rules.

Owns: what survives the process between a pause and a resume (the relay state of the
seed's frontend-tool flow), and the record of a completed run (spec
``spec/agent-ref.md`` §4.1).
Does not own: where it is stored (``store/core.py``) or how it changes (``agent.py``).

Evolution rule: new fields get defaults, no field is renamed or retyped; ``schema``
is bumped only for a change old readers cannot ignore.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec

from ..policy.permissions import PendingApproval, PermissionState

__all__ = [
    "NOTIFICATION_TAG",
    "AgentState",
    "BackgroundTask",
    "Checkpoint",
    "PendingCall",
    "PendingChild",
    "RunMark",
    "RunRecord",
    "RunState",
    "Status",
    "TaskStatus",
    "Usage",
    "flat_usage",
    "lost_run_record",
    "roll_back_dead_run",
    "run_record",
]

#: ``idle``: no run in progress. ``running``: a process holds the agent (claimed).
#: ``awaiting_frontend_tools``: paused, relay state filled in.
Status = Literal["idle", "running", "awaiting_frontend_tools"]


class Usage(msgspec.Struct, kw_only=True):
    """Token counts summed over API calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    #: The 1-hour part of ``cache_creation_input_tokens`` (``usage.cache_creation.ephemeral_1h_input_tokens``).
    cache_creation_1h_input_tokens: int = 0
    #: Server tool calls billed per use (``usage.server_tool_use``).
    web_search_requests: int = 0
    web_fetch_requests: int = 0

    def add(self, usage: Mapping[str, int]) -> None:
        """Add one call's usage (the flat keys above; others ignored; see ``flat_usage``)."""
        for name in _USAGE_FIELDS:
            value = usage.get(name, 0) or 0
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                setattr(self, name, getattr(self, name) + value)

    def to_dict(self) -> dict[str, int]:
        """The counts as a plain dict."""
        return msgspec.structs.asdict(self)


_USAGE_FIELDS: tuple[str, ...] = tuple(Usage.__struct_fields__)


def flat_usage(usage: object) -> dict[str, int]:
    """One API call's usage object (SDK model or dict) flattened to ``Usage``'s keys.

    Nested counters are lifted: ``cache_creation.ephemeral_1h_input_tokens`` becomes
    ``cache_creation_1h_input_tokens``, ``server_tool_use.web_search_requests`` and
    ``web_fetch_requests`` keep their names. Missing or non-integer values are left out.
    """
    out: dict[str, int] = {}

    def get(obj: object, name: str) -> object:
        return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)

    def put(name: str, value: object) -> None:
        if isinstance(value, int) and not isinstance(value, bool):
            out[name] = value

    for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        put(name, get(usage, name))
    put("cache_creation_1h_input_tokens", get(get(usage, "cache_creation"), "ephemeral_1h_input_tokens"))
    server = get(usage, "server_tool_use")
    put("web_search_requests", get(server, "web_search_requests"))
    put("web_fetch_requests", get(server, "web_fetch_requests"))
    return out


class PendingCall(msgspec.Struct, kw_only=True):
    """One frontend tool call waiting for the browser: the ``awaiting_frontend_tools`` item."""

    tool_use_id: str
    name: str
    input: dict[str, Any]
    #: The agent whose call it is, when not the paused agent's own: a paused subagent's
    #: (spec ``spec/agent-ref.md`` §13.5-b). ``None``: the agent's own call.
    agent: str | None = None
    #: Why the call waits for a person's approval (a durable ask, spec §12.6), ``None``: a
    #: frontend call. An approval call is answered with a decision, not a result ([R12.6-b]).
    approval: str | None = None

    def element(self) -> dict[str, Any]:
        """The call as an ``awaiting_frontend_tools`` element (envelope spec §4.11; a child's names it, §13.5-b).

        A call awaiting approval carries the marker ``"approval": {"reason": ...}`` ([R12.6-a]).
        """
        if self.approval is not None:
            return self.as_approval().element()
        item: dict[str, Any] = {"tool_use_id": self.tool_use_id, "name": self.name, "input": self.input}
        if self.agent is not None:
            item["agent"] = self.agent
        return item

    def as_approval(self) -> PendingApproval:
        """The call as a ``PendingApproval`` (only for an approval call)."""
        assert self.approval is not None
        return PendingApproval(
            tool_use_id=self.tool_use_id, name=self.name, input=self.input, reason=self.approval, agent=self.agent
        )


class PendingChild(msgspec.Struct, kw_only=True):
    """A subagent paused for frontend tools inside its parent's paused step (spec §13.5-a).

    Attributes:
        tool_use_id: the parent's ``spawn_subagent`` call that started the child; its result
            is the child's final answer, given when the child ends after a resume.
        name: the child's name in the parent's ``subagents``.
        agent_uuid: the child's agent id (its state is in the store under it).
    """

    tool_use_id: str
    name: str
    agent_uuid: str


class Checkpoint(msgspec.Struct, kw_only=True):
    """Where a run in checkpoint mode stood at its last save (spec ``spec/agent-ref.md`` [CK1.2-a]).

    Attributes:
        step: the run's step: the model call to make next (``phase`` ``model``), or the step
            whose tool calls were being run (``phase`` ``tools``; the history ends with the
            step's assistant turn).
        phase: ``model`` or ``tools``.
        started: the step's ``tool_use`` ids marked started before any of them ran ([CK1.3-a]).
        results: the ``tool_result`` blocks of the step's calls that finished, in finishing order.
    """

    step: int
    phase: Literal["model", "tools"] = "model"
    started: list[str] = msgspec.field(default_factory=list)
    results: list[dict[str, Any]] = msgspec.field(default_factory=list)


class RunState(msgspec.Struct, kw_only=True):
    """The run in progress (kept across a pause so the resumed response continues it).

    Attributes:
        run_id: the run's id (one run may span several responses).
        user_query: the prompt text, as ``meta_init`` reports it.
        started_at: seconds since the epoch.
        steps: API calls made so far in this run.
        usage: tokens of this run.
        cost_usd: cost of this run, or ``None`` when the model has no price.
        history: the messages of this run (no injection), for ``AgentResult``.
        responses: how many responses (HTTP streams) this run has had.
    """

    run_id: str
    user_query: str
    started_at: float
    steps: int = 0
    usage: Usage = msgspec.field(default_factory=Usage)
    cost_usd: float | None = 0.0
    history: list[dict[str, Any]] = msgspec.field(default_factory=list)
    responses: int = 0
    #: ``len(messages)`` before the run added its prompt, and the content length of the
    #: trailing user turn the prompt was merged into (-1: not merged): how to roll the
    #: prompt of a run lost with its process back out of the context (spec §10.2-b).
    base_messages: int = -1
    base_tail: int = -1
    #: Files server tools produced in this run (``meta_files`` items, spec §5.6-c): kept across
    #: a pause, reported once when the run ends.
    files: list[dict[str, str]] = msgspec.field(default_factory=list)
    #: Corrections the agent has sent for a structured answer that did not match (spec §17.2-c).
    structured_corrections: int = 0
    #: The paused response's run span as a W3C ``traceparent``; the resumed one links to it (spec §20.3-a).
    traceparent: str | None = None
    #: The long-term memory block retrieved when the run started, for its system prompt (spec §21.5-a).
    memory_context: str | None = None
    #: Times ``Stop`` hooks kept this run going ([R12.7-d]): stored, so a pause does not reset the bound.
    stop_continuations: int = 0
    #: The last checkpoint of a run in checkpoint mode ([CK1.2-a]); ``None``: none saved.
    checkpoint: Checkpoint | None = None


#: What recovering a run that died with its process does (spec ``spec/agent-ref.md`` §10.2-b):
#: ``paused``, a resume died and the run is put back to its pause; ``lost``, a run died
#: mid-step and is to be closed; ``released``, a claim with no run is simply let go.
Recovery = Literal["paused", "lost", "released"]


#: A background task's life (seed 004 Background Task Flow; spec §14.2).
TaskStatus = Literal["pending", "running", "completed", "failed", "killed"]


#: How a background task's notification text starts, in the user turn before the parent's next
#: call (spec §14.4). Here, below the run and the models, since both read it (run.background
#: writes it, the scripted model skips it).
NOTIFICATION_TAG: Final = "<task-notification"


class BackgroundTask(msgspec.Struct, kw_only=True):
    """A subagent started in the background by the run in progress (spec §14).

    Attributes:
        task_id: the id the spawning call's result gave the model.
        tool_use_id: that spawning call.
        name: the child's name in the parent's ``subagents``.
        agent_uuid: the child's agent id.
        task: what it was asked.
        status: see ``TaskStatus``.
        result: the final text (completed) or why it failed.
        notified: the parent's model has been given the result (a notification or a poll).
        detached: a queue task that may outlive the response that started it (spec [SA3-a]);
            kept by the agent's later runs until its result is seen.
    """

    task_id: str
    tool_use_id: str
    name: str
    agent_uuid: str
    task: str
    status: TaskStatus = "pending"
    result: str = ""
    notified: bool = False
    detached: bool = False


class RunMark(msgspec.Struct, kw_only=True):
    """Where a run started in the context, so a rewind can return there (spec ``spec/agent-ref.md`` §S1.2-b).

    Attributes:
        run_id: the run.
        messages: ``len(messages)`` before its prompt was added.
        tail: the content length of the trailing user turn its prompt joined (-1: none).
        digest: sha256 of that prefix (a compaction since then makes the mark stale).
        compaction_step: ``0`` for a run's start; ``s`` for where a compaction before the
            run's step ``s`` ended the context it wrote (the mark then ends that context,
            spec [HY3-a]).
    """

    run_id: str
    messages: int
    tail: int = -1
    digest: str = ""
    compaction_step: int = 0


class AgentState(msgspec.Struct, kw_only=True):
    """Everything needed to continue an agent in another process (spec §4.1).

    Attributes:
        agent_uuid: the agent's id, also the ``agent`` of every envelope.
        model: the model name the agent was run with.
        messages: the live API context.
        status: see ``Status``.
        current_step: the step at which the run paused (the next call is step + 1).
        pending_frontend: calls the browser must answer (the exact set, spec §3.3-a).
        pending_backend_results: ``tool_result`` blocks of the paused step's backend calls.
        pending_order: the ``tool_use`` ids of the paused step, in the model's order.
        pending_children: subagents paused in that step (spec §13.5-a).
        run: the run in progress, or ``None`` when idle.
        usage: tokens over the agent's life.
        lease_owner: the process holding a ``running`` agent (spec §10.2-a), else ``None``.
        lease_expires_at: when that hold ends unless renewed (seconds since the epoch).
        container_id: the code-execution container the API gave, sent back on later calls.
        principal: who created the agent (a server's verified ``sub``, spec server [OW1-a]);
            ``None`` for an agent made outside a server, or before principals were recorded.
        schema: state layout version.
        version: optimistic-concurrency counter, bumped by every save (spec §4.3).
    """

    agent_uuid: str
    model: str
    messages: list[dict[str, Any]] = msgspec.field(default_factory=list)
    status: Status = "idle"
    current_step: int = 0
    pending_frontend: list[PendingCall] = msgspec.field(default_factory=list)
    pending_backend_results: list[dict[str, Any]] = msgspec.field(default_factory=list)
    pending_order: list[str] = msgspec.field(default_factory=list)
    #: Subagents paused inside the paused step, each with its calls in ``pending_frontend`` (spec §13.5-a).
    pending_children: list[PendingChild] = msgspec.field(default_factory=list)
    #: The permission mode and the session's rules (spec §12.5); kept across a pause and a resume.
    permissions: PermissionState = msgspec.field(default_factory=PermissionState)
    #: The background tasks of the run in progress, or of the last run (spec §14).
    tasks: list[BackgroundTask] = msgspec.field(default_factory=list)
    run: RunState | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    lease_owner: str | None = None
    lease_expires_at: float = 0.0
    container_id: str | None = None
    #: Where each run of the context started (spec §S1.2-b); runs a rewind cut off (§S1.2-d).
    run_marks: list[RunMark] = msgspec.field(default_factory=list)
    rewound_runs: list[str] = msgspec.field(default_factory=list)
    #: The agent this one was forked from (spec §S1.1-a), else ``None``.
    forked_from: str | None = None
    #: The last streaming-input message (its per-agent ``seq`` in the store's inbox) given to
    #: the model; saved with the context that holds it, so each is delivered once (spec [IN1-c]).
    inbox_seq: int = 0
    #: Who created the agent (spec server [OW1-a]); its runs are that principal's too.
    principal: str | None = None
    schema: int = 1
    version: int = 0

    @property
    def pending_approvals(self) -> list[PendingApproval]:
        """The pending calls that wait for a person's approval (spec §12.6), a paused child's included."""
        return [p.as_approval() for p in self.pending_frontend if p.approval is not None]


class RunRecord(msgspec.Struct, kw_only=True):
    """A completed run, kept as the agent's conversation history (one row per run)."""

    run_id: str
    agent_uuid: str
    user_query: str
    started_at: float
    finished_at: float
    stop_reason: str
    steps: int
    usage: Usage
    cost_usd: float | None
    messages: list[dict[str, Any]]
    final_text: str = ""


def roll_back_dead_run(state: AgentState) -> Recovery:
    """Put a ``running`` state whose process died back in order, in place (spec §10.2-b); the caller saves it.

    The store holds what the dead process saved when it claimed the agent (a run saves
    only at its claim and at its end, §4.4), so:

    * a resume that died (its pending calls are still stored): the agent is paused again
      on the same calls, and ``run.responses`` moves past the dead response, whose index
      now belongs to that response's closing lines (the same answers, sent again, start
      the next response);
    * a run that died otherwise: its prompt is taken back out of the context (where
      ``run.base_messages`` / ``base_tail`` say) and the pending lists are emptied; the
      caller closes the run (``lost``: a closing response, a run record, status ``idle``);
    * no run: the agent is ``idle``.

    Either way the lease is cleared, and the history keeps no ``tool_use`` without its
    ``tool_result`` other than the calls of a restored pause.

    Returns:
        Which of the three it was.
    """
    run = state.run
    state.lease_owner = None
    state.lease_expires_at = 0.0
    if run is None:
        state.status = "idle"
        state.current_step = 0
        return "released"
    if state.pending_frontend:
        state.status = "awaiting_frontend_tools"
        run.responses += 1
        return "paused"
    if run.base_messages >= 0:
        del state.messages[run.base_messages :]
        if run.base_tail >= 0 and state.messages and isinstance(state.messages[-1].get("content"), list):
            state.messages[-1]["content"] = state.messages[-1]["content"][: run.base_tail]
    state.pending_backend_results = []
    state.pending_order = []
    state.pending_children = []
    return "lost"


def run_record(state: AgentState, stop_reason: str, finished_at: float, final_text: str = "") -> RunRecord:
    """The record of ``state``'s run as it ends now (the one place a ``RunRecord`` is built)."""
    run = state.run
    assert run is not None
    return RunRecord(
        run_id=run.run_id,
        agent_uuid=state.agent_uuid,
        user_query=run.user_query,
        started_at=run.started_at,
        finished_at=finished_at,
        stop_reason=stop_reason,
        steps=run.steps,
        usage=run.usage,
        cost_usd=run.cost_usd,
        messages=run.history,
        final_text=final_text,
    )


def lost_run_record(state: AgentState, stop_reason: str, finished_at: float) -> RunRecord:
    """Close a run ``roll_back_dead_run`` found lost: status ``idle``, and the run's record to store with it."""
    record = run_record(state, stop_reason, finished_at)
    state.status = "idle"
    state.run = None
    state.current_step = 0
    return record


def encode_state(state: AgentState) -> bytes:
    """JSON bytes of a state."""
    return msgspec.json.encode(state)


def decode_state(data: bytes | str) -> AgentState:
    """A state from its JSON bytes."""
    return msgspec.json.decode(data, type=AgentState)
