"""The worker: claims tasks of the queue, runs each with the handler of its kind, records the end (spec scaleout §6.4).

Owns: the loop (claim → run the handler while heartbeats renew the lease → complete or
fail), what a lost lease does to a running handler (cancelled, its result discarded), a
graceful stop (SIGTERM: no new claim; the current task finishes within ``grace_seconds``,
else it is cancelled and released, or failed if not idempotent), riding out a database
outage (retries with backoff and one log line each way, never a crash), the handler
interface (``Handler``, ``TaskContext``), and ``agent-ref worker --db URL``: its options
(``add_worker_command`` for ``cli/commands.py``), ``worker_main(args)``, and ``main(argv)``
(``python -m agent_ref.fleet.worker``).
Does not own: the queue and its rules (``fleet/task_queue.py``), what a kind does (handlers are
registered by whoever starts the worker; ``BUILTIN_HANDLERS`` has ``echo``).

Wiring the background subagents (issue 30 §5): ``subagent_handler(run_child)`` is the
handler of kind ``subagent``; ``run_child`` (the agent's part) builds the child a
``SubagentTask`` names and runs it. The parent enqueues instead of starting an
``asyncio`` task and waits with ``TaskQueue.wait``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Final, Protocol

import msgspec

from ..errors import StoreError
from ..policy import scrub
from ..policy.permissions import PermissionState
from .task_queue import RESULT_UNKNOWN, Claim, LeaseLostError, Task, TaskQueue

__all__ = [
    "BUILTIN_HANDLERS",
    "SUBAGENT_KIND",
    "ChildOptions",
    "ChildOutcome",
    "ChildResult",
    "ChildSpec",
    "Handler",
    "RunChild",
    "SubagentTask",
    "TaskContext",
    "TaskFailed",
    "TemplateAgent",
    "Worker",
    "add_worker_arguments",
    "add_worker_command",
    "agent_runner",
    "child_runner",
    "load_handlers",
    "main",
    "subagent_handler",
    "worker_main",
    "worker_name",
]

log = logging.getLogger("agent_ref.worker")

#: Longest pause between two tries while the database cannot be reached (seconds).
MAX_BACKOFF: Final = 5.0


class TaskContext(msgspec.Struct, frozen=True, kw_only=True):
    """What a handler gets: the claimed task and who runs it.

    Attributes:
        task: the task as claimed (``running``; ``payload`` is the handler's input).
        attempt: the claim's number (1 for the first run; more after a lost worker).
        worker: the worker's name.
    """

    task: Task
    attempt: int
    worker: str

    @property
    def payload(self) -> Any:
        """The task's payload."""
        return self.task.payload


#: A handler: runs one task and returns its result (any JSON value). An exception fails the
#: task with its type and message; cancellation means the lease was lost or the worker stops.
Handler = Callable[[TaskContext], Awaitable[Any]]


async def echo(context: TaskContext) -> Any:
    """The ``echo`` kind: its result is its payload (a smoke test of a fleet)."""
    return context.payload


#: The handlers every worker has unless told otherwise.
BUILTIN_HANDLERS: Final[Mapping[str, Handler]] = {"echo": echo}


class TaskFailed(Exception):
    """Raised by a handler: the task fails with exactly this message (no exception type in front)."""


#: The kind of a background subagent's task (issue 30 §5; spec scaleout §6, "Wiring").
SUBAGENT_KIND: Final = "subagent"
#: The stop reasons of a child run that fail its task (spec agent-ref §14.2-a).
FAILED_STOP_REASONS: Final = frozenset({"error", "aborted", "interrupted"})


class SubagentTask(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The payload of a ``subagent`` task: which child to run, on what, for whom.

    Attributes:
        subagent: the child's name in the parent's ``subagents`` (its ``AgentSpec``).
        task: what the child is asked.
        agent_uuid: the child's agent id (already given to the parent's model in the spawn's result).
        parent_agent: the parent's agent id.
        tool_use_id: the spawning call.
        permissions: the child's permissions as the parent narrowed them at the spawn (a
            ``PermissionState``'s JSON object); ``None``: the worker's agent's own (a task
            enqueued before this field) ([AP3-b]).
        principal: the parent's owner, whom the child's stored state records (spec server [OW1-a]).
        depth: the child's level below its root (1: a root's child), as ``for_child`` would make it ([SA4-a]).
        max_depth: the root's ``max_subagent_depth``; ``None``: the worker's agent's own (a task
            enqueued before this field) ([SA4-a]).
    """

    subagent: str
    task: str
    agent_uuid: str
    parent_agent: str
    tool_use_id: str = ""
    permissions: dict[str, Any] | None = None
    principal: str | None = None
    depth: Annotated[int, msgspec.Meta(ge=1)] = 1
    max_depth: Annotated[int, msgspec.Meta(ge=1)] | None = None


class ChildOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What running a child gave: its final text and why it stopped (``error`` says why it failed, if it did)."""

    final_text: str
    stop_reason: str
    error: str = ""


#: Runs the child a ``SubagentTask`` names (builds it from its spec, with a store on the queue's database).
RunChild = Callable[[SubagentTask, TaskContext], Awaitable[ChildOutcome]]


def subagent_handler(run_child: RunChild) -> Handler:
    """The handler of ``subagent`` tasks around ``run_child`` (the agent's part, wired by the caller).

    The payload is checked as a ``SubagentTask`` (a bad one fails the task naming the
    field); a child that stopped ``error``, ``aborted`` or ``interrupted`` fails it with its
    error (or the stop reason), as an in-process background task does (spec agent-ref
    §14.2-a); otherwise the result is ``{"final_text", "stop_reason", "agent"}``.
    """

    async def handle(context: TaskContext) -> Any:
        try:
            spec = msgspec.convert(context.payload, SubagentTask)
        except msgspec.ValidationError as exc:
            raise TaskFailed(f"the payload of a {SUBAGENT_KIND!r} task is not a SubagentTask: {exc}") from None
        outcome = await run_child(spec, context)
        if outcome.stop_reason in FAILED_STOP_REASONS:
            raise TaskFailed(outcome.error or outcome.stop_reason)
        return {"final_text": outcome.final_text, "stop_reason": outcome.stop_reason, "agent": spec.agent_uuid}

    return handle


def _discard(_line: bytes) -> None:
    """A remote child's envelopes go to no response (spec scaleout §6.8-c)."""


class ChildSpec(Protocol):
    """A subagent's spec as the worker sees it: the model it names, if any (``AgentSpec`` is one)."""

    @property
    def model(self) -> object:
        """The child's own model, or ``None`` for the parent's."""
        ...


class ChildOptions(Protocol):
    """What the worker does with an agent's options: find a subagent, derive its child's (``AgentOptions`` is one)."""

    @property
    def subagents(self) -> Mapping[str, ChildSpec]:
        """The subagents by name."""
        ...

    @property
    def subagent_depth(self) -> int:
        """How deep these options' agent is (0: a root)."""
        ...

    @property
    def max_subagent_depth(self) -> int:
        """Levels of subagents below the root."""
        ...

    def for_child(
        self, spec: Any, store: Any, *, agent_uuid: str | None = None, background: bool = False
    ) -> ChildOptions:
        """A child's options: ``spec``'s settings, the rest inherited."""
        ...

    def replace(self, **changes: Any) -> ChildOptions:
        """These options with ``changes``."""
        ...


class ChildResult(Protocol):
    """How a child's run ended, as the worker reports it (``AgentResult`` is one)."""

    @property
    def final_text(self) -> str:
        """The last assistant text."""
        ...

    @property
    def stop_reason(self) -> str:
        """Why the run stopped."""
        ...

    @property
    def error(self) -> str | None:
        """The public error message, if any."""
        ...


class TemplateAgent(Protocol):
    """The agent a worker builds children from (``Agent`` is one): a Protocol of the fleet wing (STYLE §17).

    The worker uses its model and options and builds the child with its class:
    ``type(parent)(model, options=options)``.
    """

    def __init__(self, model: Any, *, options: Any) -> None:
        """Build an agent of this class (``Agent(model, options=...)``)."""

    @property
    def model(self) -> object:
        """The agent's model."""
        ...

    @property
    def options(self) -> ChildOptions:
        """The agent's options."""
        ...

    @property
    def state(self) -> Any:
        """The agent's state (a child's ``principal`` is set there: spec server [OW1-a])."""
        ...

    async def run(self, prompt: str, sink: Callable[[bytes], None]) -> ChildResult:
        """Run ``prompt`` to its end, each envelope line to ``sink``."""
        ...


def child_runner(template: Callable[[], TemplateAgent], store_of: Callable[[], Any]) -> RunChild:
    """The worker's side: build the child a ``SubagentTask`` names from ``template()``'s specs and run it.

    ``template()`` gives an agent configured as the parent (its model and ``subagents``):
    tools and models are code, so a worker is started with the same agent definition as
    the parent (``agent-ref worker --agent MODULE:NAME``) and the payload names the spec
    (spec scaleout §6.8-b). ``store_of()`` gives the store the child saves its state in
    (a ``PostgresStore`` on the queue's database). The child's envelopes are not streamed
    to the parent: they go nowhere but its stored state (spec scaleout §6.8-c).
    """

    async def run_child(payload: SubagentTask, context: TaskContext) -> ChildOutcome:
        parent = template()
        spec = parent.options.subagents.get(payload.subagent)
        if spec is None:
            known = ", ".join(sorted(parent.options.subagents)) or "none"
            raise TaskFailed(f"this worker's agent has no subagent {payload.subagent!r} (it has: {known})")
        # The first attempt is the child the parent announced; a re-run after a lost worker is a fresh
        # child (the dead attempt's state, and its lease, stay under the announced id): spec scaleout §6.8-b.
        agent_uuid = payload.agent_uuid if context.attempt == 1 else None
        # [AP3-a]: a background child: a call that needs approval is denied, never paused.
        options = _at_depth(parent.options, payload).for_child(spec, store_of(), agent_uuid=agent_uuid, background=True)
        if payload.permissions is not None:  # [AP3-b]: the parent's narrowed mode and rules, not the worker's
            try:
                narrowed = msgspec.convert(payload.permissions, PermissionState)
            except msgspec.ValidationError as exc:
                raise TaskFailed(f"the payload's permissions are not a permission state: {exc}") from None
            options = options.replace(permission_mode=narrowed.mode, permission_rules=narrowed.rules())
        child = type(parent)(spec.model or parent.model, options=options)
        child.state.principal = payload.principal  # spec server [OW1-a]: the parent's owner's child
        result = await child.run(payload.task, _discard)
        log.info("worker %s: child %s ended %s", context.worker, payload.subagent, result.stop_reason)
        return ChildOutcome(final_text=result.final_text, stop_reason=result.stop_reason, error=result.error or "")

    return run_child


def _at_depth(options: ChildOptions, payload: SubagentTask) -> ChildOptions:
    """The worker's agent's options placed where the child's parent stands: its depth and its root's limit ([SA4-a]).

    ``for_child`` then builds the child one level deeper, with no ``subagents`` at the limit.

    Raises:
        TaskFailed: a child deeper than the limit (no parent could have spawned it).
    """
    limit = options.max_subagent_depth if payload.max_depth is None else payload.max_depth
    if payload.depth > limit:
        raise TaskFailed(f"the child's depth {payload.depth} is past its root's max_subagent_depth {limit}")
    if payload.depth - 1 == options.subagent_depth and limit == options.max_subagent_depth:
        return options
    return options.replace(subagent_depth=payload.depth - 1, max_subagent_depth=limit)


def worker_name() -> str:
    """A name unique to this process: host, pid and a random suffix (``lease_owner`` of its claims)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Worker:
    """Runs tasks of ``queue`` with ``handlers`` (by kind), one at a time, until stopped (spec scaleout §6.4).

    Args:
        queue: any ``TaskQueue`` (``PostgresTaskQueue`` across processes).
        handlers: the handler of each kind this worker claims; other kinds are left to other workers.
        name: the worker's name in leases (default ``worker_name()``).
        lease_seconds: the length of a lease; a worker that dies gives its task up after it.
        heartbeat_seconds: how often a running task's lease is renewed (default a third of the lease).
        poll_seconds: how long an idle worker waits for a notification before claiming again.
        grace_seconds: after ``stop()``, how long the current task may run on before it is cancelled.
    """

    def __init__(
        self,
        queue: TaskQueue,
        handlers: Mapping[str, Handler],
        *,
        name: str | None = None,
        lease_seconds: float = 30.0,
        heartbeat_seconds: float | None = None,
        poll_seconds: float = 1.0,
        grace_seconds: float = 30.0,
    ) -> None:
        """See the class docstring."""
        if not handlers:
            raise ValueError("a worker needs at least one handler")
        if not lease_seconds > 0:
            raise ValueError(f"lease_seconds must be positive, not {lease_seconds!r}")
        self.queue = queue
        self.handlers = dict(handlers)
        self.name = name or worker_name()
        self.lease_seconds = lease_seconds
        self.heartbeat_seconds = heartbeat_seconds if heartbeat_seconds is not None else lease_seconds / 3
        if not 0 < self.heartbeat_seconds < lease_seconds:
            raise ValueError(
                f"heartbeat_seconds must be above 0 and below the lease ({lease_seconds}), not {heartbeat_seconds!r}"
            )
        self.poll_seconds = poll_seconds
        self.grace_seconds = grace_seconds
        #: Tasks this worker ended (completed or failed), by how they ended.
        self.finished: dict[str, int] = {"completed": 0, "failed": 0, "lost": 0, "released": 0}
        self._stop: asyncio.Event | None = None
        self._hard = False
        self._failing_since: float | None = None

    # -- stopping

    def _stop_event(self) -> asyncio.Event:
        if self._stop is None:
            self._stop = asyncio.Event()
        return self._stop

    def stop(self, *, now: bool = False) -> None:
        """Stop claiming; the current task finishes within ``grace_seconds`` (``now``: none at all)."""
        if self._stop_event().is_set() or now:
            self._hard = True
        self._stop_event().set()

    @property
    def stopping(self) -> bool:
        """Whether ``stop()`` was called."""
        return self._stop is not None and self._stop.is_set()

    # -- the database

    async def _retrying(self, doing: str, call: Callable[[], Awaitable[Any]]) -> Any:
        """``call()`` again and again while the database fails (backoff to ``MAX_BACKOFF``); one log line each way.

        A hard stop (a second signal) gives up: the ``StoreError`` is raised, the lease runs out.
        """
        delay = 0.2
        while True:
            try:
                value = await call()
            except StoreError as exc:
                if self._failing_since is None:
                    self._failing_since = time.monotonic()
                    log.warning("worker %s: cannot %s: %s; retrying until the database answers", self.name, doing, exc)
                if self._hard:
                    raise
                await self._sleep(delay)
                delay = min(delay * 2, MAX_BACKOFF)
                continue
            if self._failing_since is not None:
                log.warning(
                    "worker %s: the database answers again after %.1f s",
                    self.name,
                    time.monotonic() - self._failing_since,
                )
                self._failing_since = None
            return value

    async def _sleep(self, seconds: float) -> None:
        """Sleep, woken early by ``stop()`` (a whole sleep once stopping: retries during a stop back off too)."""
        if self.stopping:
            await asyncio.sleep(seconds)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event().wait(), timeout=seconds)

    # -- the loop

    async def run(self, *, max_tasks: int | None = None) -> int:
        """Claim and run tasks until ``stop()`` (or ``max_tasks`` ran); returns how many ran."""
        ran = 0
        stop = self._stop_event()
        while not stop.is_set() and (max_tasks is None or ran < max_tasks):
            try:
                claim = await self.queue.claim(self.name, kinds=list(self.handlers), lease_seconds=self.lease_seconds)
            except StoreError as exc:
                if self._failing_since is None:
                    self._failing_since = time.monotonic()
                    log.warning(
                        "worker %s: cannot claim a task: %s; retrying until the database answers", self.name, exc
                    )
                await self._sleep(min(MAX_BACKOFF, 0.5 * 2 ** min(5, int(time.monotonic() - self._failing_since))))
                continue
            if self._failing_since is not None:
                log.warning(
                    "worker %s: the database answers again after %.1f s",
                    self.name,
                    time.monotonic() - self._failing_since,
                )
                self._failing_since = None
            if claim is None:
                wait = asyncio.ensure_future(self.queue.wait_for_work(self.poll_seconds))
                stopped = asyncio.ensure_future(stop.wait())
                await asyncio.wait({wait, stopped}, return_when=asyncio.FIRST_COMPLETED)
                for pending in (wait, stopped):
                    pending.cancel()
                await asyncio.gather(wait, stopped, return_exceptions=True)
                continue
            await self.execute(claim)
            ran += 1
        return ran

    async def execute(self, claim: Claim) -> None:
        """Run one claimed task to its end: handler, heartbeats, then complete, fail or release (spec §6.4-a)."""
        task = claim.task
        log.info("worker %s: running task %s (%s), attempt %d", self.name, task.task_id, task.kind, claim.attempt)
        handler = self.handlers.get(task.kind)
        if handler is None:  # claimed only kinds it has; a queue that ignores ``kinds`` lands here
            await self._end(claim, error=f"no handler for kind {task.kind!r} on worker {self.name}")
            return
        job = asyncio.ensure_future(handler(TaskContext(task=task, attempt=claim.attempt, worker=self.name)))
        stop = self._stop_event()
        grace_until: float | None = None
        next_beat = time.monotonic() + self.heartbeat_seconds
        beat_failed = False
        while not job.done():
            if stop.is_set() and grace_until is None:
                grace_until = time.monotonic() + (0 if self._hard else self.grace_seconds)
            wake = next_beat if grace_until is None else min(next_beat, grace_until)
            # Until the stop, a stop wakes this wait too; after it, only the job, a heartbeat or the grace's end.
            watched: set[asyncio.Future[Any]] = {job}
            stopped = None if stop.is_set() else asyncio.ensure_future(stop.wait())
            if stopped is not None:
                watched.add(stopped)
            await asyncio.wait(watched, timeout=max(0.0, wake - time.monotonic()), return_when=asyncio.FIRST_COMPLETED)
            if stopped is not None:
                stopped.cancel()
                await asyncio.gather(stopped, return_exceptions=True)
            if job.done():
                break
            if grace_until is not None and (self._hard or time.monotonic() >= grace_until):
                await self._cancel(job)
                await self._interrupted(claim)
                return
            if time.monotonic() >= next_beat:
                next_beat = time.monotonic() + self.heartbeat_seconds
                try:
                    await self.queue.heartbeat(claim)
                except LeaseLostError as exc:
                    log.warning("worker %s: %s; the handler is cancelled, its result discarded", self.name, exc)
                    await self._cancel(job)
                    self.finished["lost"] += 1
                    return
                except StoreError as exc:  # the lease may run out meanwhile; the fence decides at the end
                    if not beat_failed:
                        log.warning("worker %s: cannot renew the lease of task %s: %s", self.name, task.task_id, exc)
                    beat_failed = True
                else:
                    beat_failed = False
        await self._settle(claim, job)

    async def _settle(self, claim: Claim, job: asyncio.Future[Any]) -> None:
        """Record the end of a finished handler: its JSON result, or its failure in public words."""
        task = claim.task
        failure = job.exception() if not job.cancelled() else asyncio.CancelledError()
        if failure is None:
            result = job.result()
            try:
                msgspec.json.encode(result)
            except (TypeError, msgspec.EncodeError) as bad:
                await self._end(claim, error=f"the handler of {task.kind!r} returned a result that is not JSON: {bad}")
                return
            await self._end(claim, result=result)
        else:
            if isinstance(failure, TaskFailed):
                reason = str(failure)
            else:
                if not isinstance(failure, asyncio.CancelledError):
                    log.warning("worker %s: task %s failed", self.name, task.task_id, exc_info=failure)
                reason = f"{type(failure).__name__}: {failure}"
            await self._end(claim, error=scrub.public(reason)[:2000])

    @staticmethod
    async def _cancel(job: asyncio.Future[Any]) -> None:
        job.cancel()
        with contextlib.suppress(BaseException):
            await job

    async def _end(self, claim: Claim, *, result: Any = None, error: str | None = None) -> None:
        """Record the end, retried while the database fails; a lost lease discards it (logged)."""

        async def write() -> Task:
            if error is None:
                return await self.queue.complete(claim, result)
            return await self.queue.fail(claim, error)

        try:
            task = await self._retrying(f"record the end of task {claim.task_id}", write)
        except LeaseLostError as exc:
            log.warning("worker %s: %s; its result is discarded", self.name, exc)
            self.finished["lost"] += 1
            return
        except StoreError as exc:  # stopped hard while the database was away: the lease will run out
            log.warning("worker %s: gave up recording the end of task %s: %s", self.name, claim.task_id, exc)
            return
        self.finished[task.status] = self.finished.get(task.status, 0) + 1
        log.info("worker %s: task %s %s (attempt %d)", self.name, task.task_id, task.status, claim.attempt)

    async def _interrupted(self, claim: Claim) -> None:
        """The worker stops during a task: released if idempotent, else failed ``result unknown`` (spec §6.4-a)."""
        try:
            if claim.task.idempotent:
                await self._retrying(f"release task {claim.task_id}", lambda: self.queue.release(claim))
                self.finished["released"] += 1
                log.warning("worker %s: stopping; task %s released for another worker", self.name, claim.task_id)
            else:
                error = (
                    f"{RESULT_UNKNOWN}: worker {self.name} stopped during attempt {claim.attempt}; the task is not"
                    " declared idempotent, so it is not run again"
                )
                await self._retrying(f"fail task {claim.task_id}", lambda: self.queue.fail(claim, error))
                self.finished["failed"] += 1
                log.warning("worker %s: stopping; task %s failed (%s)", self.name, claim.task_id, RESULT_UNKNOWN)
        except LeaseLostError as exc:
            log.warning("worker %s: %s", self.name, exc)
        except StoreError as exc:  # stopped again while the database was away: the lease runs out instead
            log.warning("worker %s: gave up on task %s: %s; its lease will run out", self.name, claim.task_id, exc)


# ------------------------------------------------------------------------------ command line

_DESCRIPTION: Final = (
    "Run background tasks of a PostgreSQL database's task queue (spec scaleout §6): claim one, run it "
    "with the handler of its kind while heartbeats keep its lease, record its result, repeat. Any number "
    "of workers may share one database; a worker that dies gives its tasks to the others when their "
    "leases run out. SIGTERM or Ctrl-C stops claiming and lets the current task finish (--grace)."
)


def add_worker_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``agent-ref worker``'s options to ``p``."""
    p.add_argument("--db", required=True, metavar="URL", help="the queue's database: postgresql://user@host:port/db")
    p.add_argument("--name", default=None, help="the worker's name in leases (default: host:pid:random)")
    p.add_argument("--lease", type=float, default=30.0, metavar="SECONDS", help="lease length (default: 30)")
    p.add_argument(
        "--heartbeat",
        type=float,
        default=None,
        metavar="SECONDS",
        help="lease renewal period (default: a third of --lease)",
    )
    p.add_argument("--poll", type=float, default=1.0, metavar="SECONDS", help="idle re-check period (default: 1)")
    p.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="time the current task gets at a stop (default: 30)",
    )
    p.add_argument(
        "--handlers",
        action="append",
        default=None,
        metavar="MODULE:NAME",
        help="a mapping of kind to handler to add, repeatable (default: the built-in ones)",
    )
    p.add_argument(
        "--agent",
        default=None,
        metavar="MODULE:NAME",
        help="a callable giving the parent agent (its model and subagents): this worker runs its background"
        " subagents (kind 'subagent'), saving their state in --db (spec scaleout §6.8)",
    )
    p.add_argument("--max-tasks", type=int, default=None, metavar="N", help="stop after N tasks")
    p.add_argument("-v", "--verbose", action="store_true", help="log each task")


def add_worker_command(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``worker`` to ``agent-ref``'s subcommands; the caller dispatches it to ``worker_main``.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers`` returned.

    Returns:
        The new subparser.
    """
    p: argparse.ArgumentParser = subparsers.add_parser(
        "worker", help="run background tasks of a PostgreSQL task queue", description=_DESCRIPTION
    )
    add_worker_arguments(p)
    return p


def load_handlers(specs: list[str] | None) -> dict[str, Handler]:
    """The built-in handlers plus each ``MODULE:NAME`` mapping of kind to handler.

    Raises:
        ValueError: a spec that cannot be imported or is not a mapping of names to callables (the text says which).
    """
    handlers: dict[str, Handler] = dict(BUILTIN_HANDLERS)
    for spec in specs or []:
        found = _imported("--handlers", spec)
        if not isinstance(found, Mapping) or not all(isinstance(k, str) and callable(v) for k, v in found.items()):
            raise ValueError(f"--handlers {spec!r}: not a mapping of kind names to handlers")
        handlers.update(found)
    return handlers


def _imported(flag: str, spec: str) -> Any:
    """The object ``MODULE:NAME`` names, for ``flag``'s value.

    Raises:
        ValueError: not of that form, or nothing to import there (the text names the flag and value).
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{flag} {spec!r}: expected MODULE:NAME")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{flag} {spec!r}: {exc}") from None


def agent_runner(spec: str, url: str) -> RunChild:
    """The ``RunChild`` of ``--agent MODULE:NAME``: children of that agent, their state in a store on ``url``.

    Raises:
        ValueError: a spec that cannot be imported or is not callable (the text says which).
    """
    found = _imported("--agent", spec)
    if not callable(found):
        raise ValueError(f"--agent {spec!r}: not a callable giving an Agent")
    from ..store.postgres import PostgresStore

    stores: list[Any] = []

    def store_of() -> Any:
        if not stores:
            stores.append(PostgresStore(url))
        return stores[0]

    return child_runner(found, store_of)


def _refuse(message: str) -> int:
    """One line on stderr, exit status 2 (unusable arguments), never a traceback."""
    with contextlib.suppress(OSError, AttributeError, ValueError):
        sys.stderr.write(f"agent-ref worker: error: {message}\n")
    return 2


def worker_main(args: argparse.Namespace) -> int:
    """Run ``agent-ref worker`` with parsed arguments (``add_worker_arguments``'); returns the exit status.

    0 stopped (a signal, or ``--max-tasks`` ran); 2 unusable arguments (one line on
    stderr). A database that cannot be reached is waited for (the worker logs it and
    retries), never an exit.
    """
    from envelope._extras import missing, needs

    if not str(args.db).startswith(("postgresql://", "postgres://")):
        return _refuse(
            f"--db {args.db!r}: a worker needs a PostgreSQL database (postgresql://...); with SQLite, background"
            " tasks run in the process that starts them"
        )
    if missing("postgres"):
        return _refuse(needs("agent-ref worker", "postgres"))
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="agent-ref worker: %(message)s")
    scrub.install_log_filter()
    try:
        handlers = load_handlers(args.handlers)
        if getattr(args, "agent", None):
            handlers[SUBAGENT_KIND] = subagent_handler(agent_runner(args.agent, args.db))
        from .task_queue import PostgresTaskQueue

        queue = PostgresTaskQueue(args.db, poll_seconds=args.poll)
        worker = Worker(
            queue,
            handlers,
            name=args.name,
            lease_seconds=args.lease,
            heartbeat_seconds=args.heartbeat,
            poll_seconds=args.poll,
            grace_seconds=args.grace,
        )
    except ValueError as exc:
        return _refuse(str(exc))
    return asyncio.run(_serve(worker, args.max_tasks))


def main(argv: list[str] | None = None) -> int:
    """``python -m agent_ref.fleet.worker``: the same as ``agent-ref worker`` (see ``worker_main``)."""
    parser = argparse.ArgumentParser(prog="agent-ref worker", description=_DESCRIPTION)
    add_worker_arguments(parser)
    return worker_main(parser.parse_args(argv))


async def _serve(worker: Worker, max_tasks: int | None) -> int:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop)
    log.warning("worker %s: started, kinds %s", worker.name, ", ".join(sorted(worker.handlers)))
    try:
        await worker.run(max_tasks=max_tasks)
    finally:
        await worker.queue.aclose()
    log.warning("worker %s: stopped (%s)", worker.name, ", ".join(f"{k} {v}" for k, v in worker.finished.items()))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
