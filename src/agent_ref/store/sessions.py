"""Sessions: fork an agent, rewind its history, and streaming input (spec ``spec/agent-ref.md`` §S1-§S2).

Owns: what a fork's state is (``fork_state``), where a rewind cuts the context
(``rewind_cut``, ``apply_cut``), the marks that let a rewind find a run's start
(``mark_run``), and the queue of messages sent to a working run (``Inbox``,
``deliver``). Does not own: the public API (``Agent.fork``, ``Agent.rewind``,
``Agent.send`` in ``agent.py``), the step boundary (``loop.steps`` calls ``deliver``),
or files (a rewind's files are the ``undo`` work's snapshots; the seam is
``Rewind``, which names what to revert to).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import msgspec

from ..errors import StateError
from .record import append_user
from .state import AgentState, RunMark, Usage, decode_state, encode_state

if TYPE_CHECKING:
    from ..tools.snapshots import RestoreReport

__all__ = [
    "Inbox",
    "InboxBounds",
    "InboxFullError",
    "InboxReceipt",
    "InboxRun",
    "InboxStore",
    "Rewind",
    "apply_cut",
    "deliver",
    "files_step",
    "fork_state",
    "mark_compaction",
    "mark_run",
    "position",
    "rewind_cut",
]


log = logging.getLogger("agent_ref")


def _digest(messages: list[dict[str, Any]]) -> str:
    """A fingerprint of a context prefix (to tell whether a run's start is still in the context)."""
    return hashlib.sha256(msgspec.json.encode(messages)).hexdigest()


def mark_run(state: AgentState, run_id: str, *, compaction_step: int = 0) -> None:
    """Remember where ``run_id`` starts in the context, before its prompt is added (spec [SE1.2-b]).

    With ``compaction_step=s``: where the context a compaction wrote before the run's step
    ``s`` ends (spec [HY3-a]); the assistant turns after it are the run's steps ``s``, ``s + 1``, ….
    """
    messages = state.messages
    tail = -1
    if messages and messages[-1].get("role") == "user" and isinstance(messages[-1].get("content"), list):
        tail = len(messages[-1]["content"])
    state.run_marks.append(
        RunMark(
            run_id=run_id,
            messages=len(messages),
            tail=tail,
            digest=_digest(messages),
            compaction_step=compaction_step,
        )
    )


def mark_compaction(state: AgentState, run_id: str, step: int, before: list[dict[str, Any]]) -> None:
    """After a compaction before step ``step`` of run ``run_id`` replaced ``before``: mark its end (spec [HY3-a]).

    No mark when every message stays where it was and every assistant turn is unchanged
    (``ToolResultTrimmer``): the marks made before still place every step.
    """
    after = state.messages
    in_place = len(after) == len(before) and all(
        a.get("role") == b.get("role") and (a.get("role") != "assistant" or a == b)
        for a, b in zip(after, before, strict=True)
    )
    if in_place:
        return
    mark_run(state, run_id, compaction_step=step)


def fork_state(state: AgentState) -> AgentState:
    """A deep copy of ``state`` as a new agent (spec [SE1.1-a]..[SE1.1-d]); the original is not touched.

    Raises:
        StateError: the agent is running, or paused with paused subagents or with background tasks.
    """
    if state.status == "running":
        raise StateError(f"agent {state.agent_uuid} is running; fork it when the run has ended or paused")
    if state.pending_children:
        raise StateError(
            f"agent {state.agent_uuid} is paused with paused subagents; a fork would share them "
            "(answer or abandon the pause first)"
        )
    copy = decode_state(encode_state(state))
    copy.agent_uuid = str(uuid.uuid4())
    copy.version = 0
    copy.lease_owner = None
    copy.lease_expires_at = 0.0
    copy.usage = Usage()
    copy.container_id = None
    copy.tasks = []
    copy.forked_from = state.agent_uuid
    copy.inbox_seq = 0  # [IN1-c]: the fork's inbox is its own, numbered from 1
    if copy.run is not None:  # a paused run: the fork's own run from now on (spec [SE1.1-c])
        copy.run.run_id = str(uuid.uuid4())
        copy.run.responses = 0
        copy.run.usage = Usage()
        copy.run.cost_usd = 0.0 if state.run is not None and state.run.cost_usd is not None else None
    return copy


@dataclass
class Rewind:
    """What a rewind did (spec §S1.2): the seam for reverting files (the ``undo`` work's snapshots).

    Attributes:
        kept_messages: messages left in the context.
        step: the assistant turns left in the context (the step rewound to).
        dropped_runs: the runs whose start was cut off (their records and logs stay, [SE1.2-d]).
        abandoned_run: the paused run the rewind abandoned first, if any ([SE1.3-a]).
        files: what ``snapshots.restore_files`` put back ([IN4-a]), or ``None``.
    """

    kept_messages: int
    step: int
    dropped_runs: list[str] = field(default_factory=list)
    abandoned_run: str | None = None
    #: The files put back (spec [IN4-a]); ``None`` when no recorded change came after the point.
    files: RestoreReport | None = None


def rewind_cut(state: AgentState, *, step: int | None = None, run: str | None = None) -> tuple[int, int]:
    """Where a rewind cuts the context: ``(messages kept, content blocks kept of the last one or -1)``.

    ``step=N`` keeps the first ``N`` assistant turns of the context and the tool results
    answering the ``N``-th (spec [SE1.2-a]); ``run=ID`` keeps what was there before run
    ``ID`` started ([SE1.2-b]).

    Raises:
        StateError: neither or both given, ``N`` out of range, an unknown run, or a run whose
            start a compaction has since rewritten.
    """
    if (step is None) == (run is None):
        raise StateError("rewind takes step=N or run=RUN_ID (one of them)")
    messages = state.messages
    if run is not None:
        for mark in state.run_marks:
            if mark.run_id == run and not mark.compaction_step:
                prefix = [dict(m) for m in messages[: mark.messages]]
                if mark.tail >= 0 and prefix and isinstance(prefix[-1].get("content"), list):
                    prefix[-1]["content"] = prefix[-1]["content"][: mark.tail]
                if len(messages) < mark.messages or _digest(prefix) != mark.digest:
                    raise StateError(
                        f"run {run}'s start is no longer in the context (it was compacted since); rewind to a step"
                    )
                return mark.messages, mark.tail
        raise StateError(f"agent {state.agent_uuid} has no run {run} in its context")
    assert step is not None
    turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 0 or step > len(turns):
        raise StateError(f"step must be an integer from 0 to {len(turns)} (the assistant turns in the context)")
    if step == 0:
        first = next((i for i, m in enumerate(messages) if m.get("role") == "assistant"), len(messages))
        return first, -1
    at = turns[step - 1]
    content = messages[at].get("content")
    calls = isinstance(content, list) and any(b.get("type") == "tool_use" for b in content)
    nxt = messages[at + 1] if at + 1 < len(messages) else None
    if calls and nxt is not None and nxt.get("role") == "user" and isinstance(nxt.get("content"), list):
        results = 0
        for block in nxt["content"]:
            if block.get("type") != "tool_result":
                break
            results += 1
        return at + 2, results
    return at + 1, -1


def apply_cut(state: AgentState, kept: int, tail: int) -> Rewind:
    """Cut the context at ``(kept, tail)`` and forget the marks of the runs cut off (spec [SE1.2-c])."""
    messages = state.messages
    cut = position(kept, tail)
    keep: list[RunMark] = []
    dropped: list[str] = []
    for mark in state.run_marks:
        if position(mark.messages, mark.tail) < cut:
            keep.append(mark)
        elif not mark.compaction_step:  # a compaction's end cut off is no run of its own
            dropped.append(mark.run_id)
    del messages[kept:]
    if tail >= 0 and messages and isinstance(messages[-1].get("content"), list):
        messages[-1]["content"] = messages[-1]["content"][:tail]
        if not messages[-1]["content"]:
            messages.pop()
    state.run_marks = keep
    state.rewound_runs.extend(dropped)
    state.current_step = 0
    step = sum(1 for m in messages if m.get("role") == "assistant")
    return Rewind(kept_messages=len(messages), step=step, dropped_runs=dropped)


def files_step(state: AgentState, kept: int, points: list[tuple[int, str, int]]) -> int:
    """The snapshot step (spec RU1-b) the files go back to when the context is cut to ``kept`` messages ([IN4-a]).

    ``points`` are the agent's snapshot records as ``(agent step, run id, step of the run)``
    in the order recorded. A record is *placed* when the context still holds its step's
    assistant turn, and *kept* when that turn is kept: the turns of a run are the
    assistant turns from its mark ([SE1.2-b]) up to the next mark, the ``k``-th of them its
    step ``k`` (after a compaction's mark, step ``s + k - 1``). The answer is the step
    before the first record that is not kept (records are in time order, so every later
    one is after the cut too), or the last step when all are kept.

    After a compaction that moved the context (spec [HY3-a]) only the marks from its end
    on place steps; a record made before it (its turn is in the compacted context) is
    kept when the cut keeps every assistant turn of the compacted context, is not kept
    when the cut keeps nothing, and otherwise the rewind is refused. With no compaction, a record of a run
    with no mark (a run from before the marks) counts as kept.

    Raises:
        StateError: the cut falls inside the context a compaction wrote and a record made
            before that compaction would decide where the files go; nothing is changed.
    """
    messages = state.messages
    marks = state.run_marks
    ends = [i for i, m in enumerate(marks) if m.compaction_step]
    boundary = marks[ends[-1]] if ends else None
    placing = sorted(marks[ends[-1] :] if ends else marks, key=lambda m: position(m.messages, m.tail))
    first_placed, turn_of = _placed_turns(placing, messages)

    def compacted_kept(compaction: RunMark) -> bool:
        if kept == 0:
            return False  # nothing kept: the compacted context goes too
        inside = sum(1 for m in messages[: compaction.messages] if m.get("role") == "assistant")
        if sum(1 for m in messages[:kept] if m.get("role") == "assistant") >= inside:
            return True
        raise StateError(
            f"this rewind cuts into the context a compaction wrote (in run {compaction.run_id}, before its "
            f"step {compaction.compaction_step}), and files were changed before that compaction, where no "
            f"step can be placed any more; rewind to step {inside} or later, or undo the files with "
            "`agent-ref undo`; nothing was changed"
        )

    last = 0
    for step, run_id, run_step in points:
        if run_id in first_placed and run_step >= first_placed[run_id]:
            at = turn_of.get((run_id, run_step))
            keep = at is not None and at < kept
        elif boundary is not None:
            keep = compacted_kept(boundary)
        else:
            keep = True
        if not keep:
            return min(last, step - 1)
        last = step
    return last


def _placed_turns(
    placing: list[RunMark], messages: list[dict[str, Any]]
) -> tuple[dict[str, int], dict[tuple[str, int], int]]:
    """For ``files_step``: each placed run's first step, and the message index of each ``(run, step)`` turn.

    ``placing`` are the marks that place steps, in context order; a run's turns are the
    assistant turns from its mark up to the next one, the ``k``-th its step ``first + k``.
    """
    first_placed: dict[str, int] = {}
    turn_of: dict[tuple[str, int], int] = {}
    for i, mark in enumerate(placing):
        end = placing[i + 1].messages if i + 1 < len(placing) else len(messages)
        first = mark.compaction_step or 1
        first_placed[mark.run_id] = min(first_placed.get(mark.run_id, first), first)
        turns = [j for j in range(mark.messages, min(end, len(messages))) if messages[j].get("role") == "assistant"]
        for k, j in enumerate(turns):
            turn_of.setdefault((mark.run_id, first + k), j)
    return first_placed, turn_of


def position(messages: int, tail: int) -> tuple[int, int]:
    """A cut point as (index of its last message, blocks of it kept), comparable in context order."""
    return messages - 1, tail if tail >= 0 else 1 << 62


@dataclass(frozen=True)
class InboxReceipt:
    """A message a store's inbox accepted (spec [IN1-a]).

    Attributes:
        agent_uuid: the agent whose run it is for.
        seq: its number in the agent's inbox (accepted order, from 1, never reused).
        waiting: how many of the agent's messages are accepted and not yet taken by the run.
    """

    agent_uuid: str
    seq: int
    waiting: int


@dataclass(frozen=True)
class InboxBounds:
    """How much a run's inbox may hold waiting (spec server [IB1-a]); ``agent-ref serve``'s ``--inbox-*`` flags.

    A message is accepted only if, with it, the run's messages accepted and not yet taken
    are at most ``max_messages`` and their text (UTF-8) at most ``max_bytes``; one
    message's text is at most ``max_message_bytes`` (the server checks that one before
    the store, [IB1-c]). The check and the insert are one transaction ([IB1-d]).

    Attributes:
        max_messages: messages waiting per run.
        max_bytes: bytes of text waiting per run, in all.
        max_message_bytes: bytes of one message's text.
    """

    max_messages: int = 32
    max_bytes: int = 256 * 1024
    max_message_bytes: int = 64 * 1024

    def check(self, waiting: int, waiting_bytes: int, text: str, run_id: str) -> None:
        """Refuse ``text`` if, added to what waits, it passes a bound (called inside the store's transaction).

        Raises:
            InboxFullError: naming the bound passed.
        """
        size = len(text.encode())
        if size > self.max_message_bytes:
            raise InboxFullError(run_id, "inbox_message_bytes", self.max_message_bytes, size, size)
        if waiting + 1 > self.max_messages:
            raise InboxFullError(run_id, "inbox_messages", self.max_messages, waiting, waiting_bytes)
        if waiting_bytes + size > self.max_bytes:
            raise InboxFullError(run_id, "inbox_bytes", self.max_bytes, waiting, waiting_bytes)


class InboxFullError(StateError):
    """A message past a bound of its run's inbox (spec server [IB1-b]): refused, nothing queued.

    Attributes:
        run_id: the run.
        bound: which bound: ``inbox_messages``, ``inbox_bytes`` or ``inbox_message_bytes``.
        limit: that bound's value.
        waiting: messages waiting (for ``inbox_message_bytes``: the message's bytes).
        waiting_bytes: bytes waiting (for ``inbox_message_bytes``: the message's bytes).
    """

    def __init__(self, run_id: str, bound: str, limit: int, waiting: int, waiting_bytes: int) -> None:
        """See the class docstring; the message says which bound, and what to do."""
        self.run_id, self.bound, self.limit = run_id, bound, limit
        self.waiting, self.waiting_bytes = waiting, waiting_bytes
        if bound == "inbox_message_bytes":
            text = (
                f"the message has {waiting} bytes of text; a message may have at most {limit} (--inbox-message-bytes)"
            )
        elif bound == "inbox_messages":
            text = (
                f"run {run_id} has {waiting} messages waiting for its next step, its bound (--inbox-messages {limit}); "
                "send again once the run has taken them"
            )
        else:
            text = (
                f"run {run_id} has {waiting_bytes} bytes of messages waiting for its next step; with this one they "
                f"would pass its bound (--inbox-bytes {limit}); send again once the run has taken them"
            )
        super().__init__(text)


@runtime_checkable
class InboxStore(Protocol):
    """A store that keeps the streaming-input inbox (spec §S2, [IN1-a]..[IN1-e]).

    ``inbox_put`` is synchronous (``Agent.send`` is, and a server calls it in a thread);
    the run's side is asynchronous like the rest of ``Store``.
    """

    def inbox_put(self, run_id: str, text: str, *, bounds: InboxBounds | None = None) -> InboxReceipt:
        """Accept ``text`` for run ``run_id`` if it works, its inbox is open and within ``bounds``, in one transaction.

        Raises:
            InboxFullError: ``bounds`` given and the message passes one (nothing queued, spec server [IB1-d]).
            StateError: no working run ``run_id`` with an open inbox ([SE2.3-a]).
        """
        ...

    async def inbox_open(self, agent_uuid: str, run_id: str, delivered: int) -> None:
        """Open the agent's inbox for ``run_id``; forget messages at or before ``delivered`` (already saved)."""
        ...

    async def inbox_take(self, agent_uuid: str, after: int) -> list[tuple[int, str]]:
        """The agent's messages after ``delivered`` seq ``after``, in accepted order, as ``(seq, text)``."""
        ...

    async def inbox_close(self, agent_uuid: str, run_id: str, after: int, *, if_empty: bool) -> bool:
        """Close the inbox of ``run_id``; with ``if_empty``, only if no message after ``after`` waits."""
        ...


class Inbox:
    """Messages sent to a working run, given to the model at the next step boundary (spec §S2).

    With a store that keeps an inbox (``InboxStore``: the memory, SQLite and PostgreSQL
    stores), every operation goes through the store, so a message accepted by any process
    reaches the run wherever it works and outlives the process (spec [IN1-a]). Without
    one (a user's store), the queue is in this object, as before ([SE2.3-b]).
    Thread-safe: a server may call ``put`` from another thread than the run's.
    """

    def __init__(self, store: object = None) -> None:
        """An empty, closed inbox (it opens when a response starts), kept in ``store`` if it can."""
        self._store: InboxStore | None = store if isinstance(store, InboxStore) else None
        self._lock = threading.Lock()
        self._items: list[str] = []
        self._open = False
        self._run_id: str | None = None

    async def open(self, state: AgentState) -> None:
        """A response of the agent has started: messages are accepted."""
        run_id = state.run.run_id if state.run is not None else ""
        with self._lock:
            self._run_id = run_id
        if self._store is not None:
            try:
                await self._store.inbox_open(state.agent_uuid, run_id, state.inbox_seq)
            except StateError as exc:  # [IN1-f]: the run goes on; messages are refused until an inbox opens
                log.warning("could not open the inbox of agent %s: %s", state.agent_uuid, exc)
            return
        with self._lock:
            self._open = True

    def put(self, text: str) -> int:
        """Queue ``text``; how many wait now.

        Raises:
            StateError: no run is working, or the run is past its last step ([SE2.3-a]).
        """
        if self._store is not None:
            with self._lock:
                run_id = self._run_id
            if run_id is None:
                raise StateError("no run is working to take the message (it has ended or not started)")
            return self._store.inbox_put(run_id, text).waiting
        with self._lock:
            if not self._open:
                raise StateError("no run is working to take the message (it has ended or not started)")
            self._items.append(text)
            return len(self._items)

    async def take(self, state: AgentState) -> list[str]:
        """The queued messages, removed from the queue (``state.inbox_seq`` advanced past them)."""
        if self._store is not None:
            try:
                rows = await self._store.inbox_take(state.agent_uuid, state.inbox_seq)
            except StateError as exc:  # [IN1-f]: they stay in the store for a later boundary
                log.warning("could not read the inbox of agent %s: %s", state.agent_uuid, exc)
                return []
            if rows:
                state.inbox_seq = rows[-1][0]
            return [text for _, text in rows]
        with self._lock:
            items, self._items = self._items, []
            return items

    async def close_if_empty(self, state: AgentState) -> bool:
        """Stop accepting if nothing is queued (the run's last step is over); ``False`` if something is."""
        if self._store is not None:
            try:
                return await self._store.inbox_close(
                    state.agent_uuid, self._run_id or "", state.inbox_seq, if_empty=True
                )
            except StateError as exc:  # [IN1-f]: the run ends; what waits goes to the next response
                log.warning("could not close the inbox of agent %s: %s", state.agent_uuid, exc)
                return True
        with self._lock:
            if self._items:
                return False
            self._open = False
            return True

    async def close(self, state: AgentState) -> None:
        """Stop accepting (the response ended); what is queued stays for the next response ([SE2.3-b])."""
        with self._lock:
            run_id, self._run_id = self._run_id, None
            self._open = False
        if self._store is not None and run_id is not None:
            try:
                await self._store.inbox_close(state.agent_uuid, run_id, state.inbox_seq, if_empty=False)
            except StateError as exc:  # [IN1-f]: a store failing now must not replace how the response ended
                # Left open, the inbox still refuses: a message needs its agent stored running ([IN1-b]).
                log.warning("could not close the inbox of agent %s: %s", state.agent_uuid, exc)

    def check(self, bounds: InboxBounds, run_id: str, text: str) -> None:
        """Refuse ``text`` if this object's queue, with it, would pass ``bounds`` (spec server [IB1-a]).

        For an inbox kept in this object (a user's store that keeps none); a store's inbox
        checks in its own transaction (``InboxStore.inbox_put``).

        Raises:
            InboxFullError: naming the bound passed.
        """
        with self._lock:
            bounds.check(len(self._items), sum(len(t.encode()) for t in self._items), text, run_id)

    @property
    def pending(self) -> int:
        """How many messages wait in this object (a store's inbox is counted by ``InboxReceipt.waiting``)."""
        with self._lock:
            return len(self._items)


class InboxRun(Protocol):
    """What ``deliver`` needs of a run: its inbox and its state (the run wing's ``RunContext`` is one).

    A Protocol of this wing, so the store names no run type (STYLE §17: the run sits above the store).
    """

    @property
    def inbox(self) -> Inbox | None:
        """The messages queued for the run, or ``None`` when nothing can be sent to it."""
        ...

    @property
    def state(self) -> AgentState:
        """The agent's state; its context gets the messages."""
        ...


async def deliver(ctx: InboxRun, *, after_end: bool = False) -> int:
    """Give the queued messages to the model as a user turn (spec [SE2.1-a], [SE2.2-a]); how many.

    At a step boundary the context ends with a user turn (the prompt or tool results), and
    the messages join it; ``after_end`` (the model ended its turn), they are a new user turn.
    After a ``pause_turn`` (the context ends with the assistant's turn, to be sent back as
    is) nothing is delivered until the next boundary.
    """
    inbox = ctx.inbox
    if inbox is None:
        return 0
    messages = ctx.state.messages
    if not after_end and (not messages or messages[-1].get("role") != "user"):
        return 0
    items = await inbox.take(ctx.state)
    if items:
        append_user(ctx.state, [{"type": "text", "text": text} for text in items])
    return len(items)
