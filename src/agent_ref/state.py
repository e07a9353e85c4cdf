"""The persisted state of an agent: msgspec Structs under msgspec's schema-evolution rules.

Owns: what survives the process between a pause and a resume (the relay state of the
seed's frontend-tool flow), and the record of a completed run (spec
``spec/agent-ref.md`` §4.1).
Does not own: where it is stored (``store.py``) or how it changes (``agent.py``).

Evolution rule: new fields get defaults, no field is renamed or retyped; ``schema``
is bumped only for a change old readers cannot ignore.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "AgentState",
    "PendingCall",
    "RunRecord",
    "RunState",
    "Status",
    "Usage",
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

    def add(self, usage: dict[str, int]) -> None:
        """Add one call's usage (keys the API reports; others ignored)."""
        self.input_tokens += int(usage.get("input_tokens", 0) or 0)
        self.output_tokens += int(usage.get("output_tokens", 0) or 0)
        self.cache_creation_input_tokens += int(usage.get("cache_creation_input_tokens", 0) or 0)
        self.cache_read_input_tokens += int(usage.get("cache_read_input_tokens", 0) or 0)

    def to_dict(self) -> dict[str, int]:
        """The counts as a plain dict."""
        return msgspec.structs.asdict(self)


class PendingCall(msgspec.Struct, kw_only=True):
    """One frontend tool call waiting for the browser: the ``awaiting_frontend_tools`` item."""

    tool_use_id: str
    name: str
    input: dict[str, Any]


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
        run: the run in progress, or ``None`` when idle.
        usage: tokens over the agent's life.
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
    run: RunState | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    schema: int = 1
    version: int = 0


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


def encode_state(state: AgentState) -> bytes:
    """JSON bytes of a state."""
    return msgspec.json.encode(state)


def decode_state(data: bytes | str) -> AgentState:
    """A state from its JSON bytes."""
    return msgspec.json.decode(data, type=AgentState)
