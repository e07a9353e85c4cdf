"""A durable task queue across a fleet of processes: ``PostgresTaskQueue``, ``MemoryTaskQueue`` (spec scaleout §6).

Owns: the task (``Task``: kind, JSON payload, status pending → running → completed |
failed | killed, attempts, result or error, lease, heartbeat, parent), the pure rules of
its transitions (``rules_*`` functions: claim, heartbeat, finish, release, kill, expiry;
no I/O, no clock of their own), and two queues that apply them: ``MemoryTaskQueue`` (one
process: tests, the SQLite/embedded default) and ``PostgresTaskQueue`` (any number of
processes on one database: ``SELECT … FOR UPDATE SKIP LOCKED`` claims, leases in the
database's clock, LISTEN/NOTIFY wake-ups with a polling fallback).
Does not own: running a task (``fleet/worker.py``), what a kind means (the worker's handlers),
the agent's store (``store/postgres.py``).

Fencing (spec scaleout §6.2-a): every claim increments ``attempts``; the ``Lease`` a
claim returns carries that number, and every later write by the holder (heartbeat,
complete, fail, release) is applied only while the task is ``running`` at that same
attempt. A worker whose lease was taken over, or whose task was killed, gets
``LeaseLostError`` and has written nothing.

psycopg is imported only by ``PostgresTaskQueue`` (the ``postgres`` extra), so the
memory queue and the rules need msgspec alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import msgspec

from ..errors import StateError, StoreError, UnavailableError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Collection, Iterable

    import psycopg
    from psycopg.rows import TupleRow

__all__ = [
    "CHANNEL_DONE",
    "CHANNEL_NEW",
    "TERMINAL",
    "Claim",
    "LeaseLostError",
    "MemoryTaskQueue",
    "PostgresTaskQueue",
    "Task",
    "TaskQueue",
    "TaskStatus",
    "UnknownTaskError",
    "rules_claim",
    "rules_claimable",
    "rules_expire",
    "rules_finish",
    "rules_heartbeat",
    "rules_kill",
    "rules_release",
]

log = logging.getLogger("agent_ref.task_queue")

TaskStatus = Literal["pending", "running", "completed", "failed", "killed"]
#: The end states: a task in one of them never changes again (spec scaleout §6.1-a).
TERMINAL: Final = frozenset({"completed", "failed", "killed"})
#: NOTIFY channel naming a task that reached an end state (payload: its id).
CHANNEL_DONE: Final = "agent_ref_task_done"
#: NOTIFY channel announcing a task that may be claimed (payload: its kind).
CHANNEL_NEW: Final = "agent_ref_task_new"
#: The error of a task whose lease ran out while it was not declared idempotent (spec §6.3-a).
RESULT_UNKNOWN: Final = "result unknown"


class Task(msgspec.Struct, kw_only=True):
    """One unit of background work (spec scaleout §6.1-a).

    Attributes:
        task_id: its id (``task_`` and 16 hex digits unless the enqueuer chose one).
        kind: which handler runs it (``fleet/worker.py``).
        payload: the handler's input, any JSON value.
        status: pending → running → completed | failed | killed.
        attempts: claims so far; the fencing number of the current lease.
        released: claims given back by a worker that stopped gracefully (not counted against ``max_attempts``).
        max_attempts: how many claims it may have (releases aside) before an expired lease fails it.
        idempotent: whether running it again after a lost worker is harmless (spec §6.3-a).
        result: the handler's result once completed (JSON), else ``None``.
        error: why it failed or was killed, else ``""``.
        lease_owner: the worker holding it while running, else ``""``.
        lease_expires_at: when the lease runs out (seconds since the epoch, the queue's clock).
        heartbeat_at: the holder's last heartbeat (or the claim).
        created_at: when it was enqueued.
        updated_at: its last change.
        parent: who asked for it (an agent uuid, a task id...), or ``""``.
    """

    task_id: str
    kind: str
    payload: Any = None
    status: TaskStatus = "pending"
    attempts: int = 0
    released: int = 0
    max_attempts: int = 3
    idempotent: bool = False
    result: Any = None
    error: str = ""
    lease_owner: str = ""
    lease_expires_at: float = 0.0
    heartbeat_at: float = 0.0
    created_at: float = 0.0
    updated_at: float = 0.0
    parent: str = ""

    @property
    def done(self) -> bool:
        """Whether it reached an end state."""
        return self.status in TERMINAL


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """What a worker holds after a claim: the task as claimed, and the fencing number of its lease.

    Attributes:
        task: the task, ``running``, owned by ``owner``.
        owner: the worker's name.
        attempt: ``task.attempts`` at the claim; every write of the holder names it.
        lease_seconds: the length of the lease (each heartbeat renews it by as much).
    """

    task: Task
    owner: str
    attempt: int
    lease_seconds: float

    @property
    def task_id(self) -> str:
        """The claimed task's id."""
        return self.task.task_id


class LeaseLostError(StateError):
    """The holder's lease no longer holds: the task was killed, taken over, expired or ended (spec §6.2-a).

    Nothing was written. Attributes: ``task`` (the task as stored now, or ``None``).
    """

    def __init__(self, message: str, task: Task | None = None) -> None:
        """Keep the stored task for the caller."""
        super().__init__(message)
        self.task = task


class UnknownTaskError(StateError):
    """No task has that id."""


# --------------------------------------------------------------------------------- the rules


def _check_status(task: Task) -> None:
    if task.status not in ("pending", "running", *TERMINAL):
        raise StateError(f"task {task.task_id} has an unknown status {task.status!r}")


def rules_claimable(task: Task, now: float) -> bool:
    """Whether a claim at ``now`` may take ``task``: pending, or running with its lease run out (spec §6.2-b)."""
    return task.status == "pending" or (task.status == "running" and task.lease_expires_at <= now)


def rules_expire(task: Task, now: float) -> Task:
    """``task`` as it stands at ``now`` once an expired lease is accounted for (spec §6.3-a).

    A running task whose lease ran out goes back to ``pending`` if it is idempotent and
    has claims left; otherwise it fails with ``result unknown`` (not idempotent) or with
    the attempts spent. Any other task is returned unchanged.
    """
    _check_status(task)
    if task.status != "running" or task.lease_expires_at > now:
        return task
    cleared = {"lease_owner": "", "lease_expires_at": 0.0, "updated_at": now}
    who = task.lease_owner or "its worker"
    if not task.idempotent:
        error = (
            f"{RESULT_UNKNOWN}: the lease of {who} ran out during attempt {task.attempts}; the task may have"
            " done part or all of its work, and it is not declared idempotent, so it is not run again"
        )
        return msgspec.structs.replace(task, status="failed", error=error, **cleared)
    if task.attempts - task.released >= task.max_attempts:
        error = (
            f"attempts exhausted: the lease of {who} ran out during attempt {task.attempts}, and the task"
            f" may be claimed {task.max_attempts} times"
        )
        return msgspec.structs.replace(task, status="failed", error=error, **cleared)
    return msgspec.structs.replace(task, status="pending", **cleared)


def rules_claim(task: Task, owner: str, now: float, lease_seconds: float) -> tuple[Task, Claim | None]:
    """Claim ``task`` for ``owner`` at ``now``: the task as it becomes, and the claim (``None`` if it is not claimable).

    An expired lease is accounted for first (``rules_expire``): the task may fail rather
    than be claimed, and the caller writes it back as returned either way.
    """
    if not owner:
        raise ValueError("a worker needs a non-empty name to claim a task")
    if not lease_seconds > 0:
        raise ValueError(f"lease_seconds must be positive, not {lease_seconds!r}")
    task = rules_expire(task, now)
    if task.status != "pending":
        return task, None
    claimed = msgspec.structs.replace(
        task,
        status="running",
        attempts=task.attempts + 1,
        lease_owner=owner,
        lease_expires_at=now + lease_seconds,
        heartbeat_at=now,
        updated_at=now,
    )
    return claimed, Claim(task=claimed, owner=owner, attempt=claimed.attempts, lease_seconds=lease_seconds)


def _fence(task: Task, claim: Claim, doing: str) -> None:
    """Raise ``LeaseLostError`` unless ``claim`` still holds ``task`` (spec §6.2-a)."""
    if task.status == "running" and task.attempts == claim.attempt:
        return
    if task.status == "running" or task.attempts != claim.attempt:
        why = f"attempt {task.attempts} by {task.lease_owner or 'another worker'} took it over"
    elif task.status == "killed":
        why = "it was killed" + (f" ({task.error})" if task.error else "")
    elif task.status == "failed":
        why = f"it failed meanwhile: {task.error}"
    else:
        why = f"it is {task.status}"
    raise LeaseLostError(f"cannot {doing} task {task.task_id} (attempt {claim.attempt} of {claim.owner}): {why}", task)


def rules_heartbeat(task: Task, claim: Claim, now: float) -> Task:
    """Renew the lease of ``claim`` at ``now`` by its length; ``LeaseLostError`` if it no longer holds.

    A lease that ran out is still renewed while nobody else claimed the task: the
    holder is alive after all, and nothing was lost (spec §6.2-b).
    """
    _fence(task, claim, "renew the lease of")
    return msgspec.structs.replace(task, lease_expires_at=now + claim.lease_seconds, heartbeat_at=now, updated_at=now)


def rules_finish(task: Task, claim: Claim, now: float, *, result: Any = None, error: str | None = None) -> Task:
    """End the task held by ``claim``: ``completed`` with ``result``, or ``failed`` with ``error`` (spec §6.2-a).

    Raises:
        LeaseLostError: the claim no longer holds the task (killed, taken over, ended).
    """
    _fence(task, claim, "complete" if error is None else "fail")
    cleared = {"lease_owner": "", "lease_expires_at": 0.0, "updated_at": now}
    if error is None:
        return msgspec.structs.replace(task, status="completed", result=result, **cleared)
    return msgspec.structs.replace(task, status="failed", error=error or "failed", **cleared)


def rules_release(task: Task, claim: Claim, now: float) -> Task:
    """Give the task of ``claim`` back (a worker stopping): ``pending``, the claim not counted (spec §6.4-a)."""
    _fence(task, claim, "release")
    return msgspec.structs.replace(
        task, status="pending", released=task.released + 1, lease_owner="", lease_expires_at=0.0, updated_at=now
    )


def rules_kill(task: Task, now: float, reason: str = "") -> Task:
    """Kill ``task`` (spec §6.5-a): a pending or running task becomes ``killed``; an ended one is unchanged."""
    _check_status(task)
    if task.done:
        return task
    return msgspec.structs.replace(
        task, status="killed", error=reason or "killed", lease_owner="", lease_expires_at=0.0, updated_at=now
    )


def _check_result(claim: Claim, result: Any) -> None:
    try:
        msgspec.json.encode(result)
    except (TypeError, msgspec.EncodeError) as exc:
        raise ValueError(f"the result of task {claim.task_id} must be JSON: {exc}") from None


def _new_task(
    kind: str,
    payload: Any,
    now: float,
    *,
    task_id: str | None,
    parent: str,
    idempotent: bool,
    max_attempts: int,
) -> Task:
    if not kind or not isinstance(kind, str):
        raise ValueError(f"a task needs a non-empty kind (a string), not {kind!r}")
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"max_attempts must be a positive integer, not {max_attempts!r}")
    try:
        msgspec.json.encode(payload)
    except (TypeError, msgspec.EncodeError) as exc:
        raise ValueError(f"the payload of a {kind!r} task must be JSON: {exc}") from None
    return Task(
        task_id=task_id or "task_" + uuid.uuid4().hex[:16],
        kind=kind,
        payload=payload,
        idempotent=idempotent,
        max_attempts=max_attempts,
        created_at=now,
        updated_at=now,
        parent=parent,
    )


# ------------------------------------------------------------------------------- the protocol


class TaskQueue(Protocol):
    """What a worker and a waiting parent need of a queue (spec scaleout §6)."""

    async def enqueue(
        self,
        kind: str,
        payload: Any,
        *,
        task_id: str | None = None,
        parent: str = "",
        idempotent: bool = False,
        max_attempts: int = 3,
    ) -> Task:
        """Add a pending task; announce it to idle workers."""
        ...

    async def claim(
        self, owner: str, *, kinds: Collection[str] | None = None, lease_seconds: float = 30.0
    ) -> Claim | None:
        """Take the oldest claimable task of ``kinds`` (any kind if ``None``) for ``owner``, or ``None``."""
        ...

    async def heartbeat(self, claim: Claim) -> Task:
        """Renew ``claim``'s lease; ``LeaseLostError`` if it no longer holds."""
        ...

    async def complete(self, claim: Claim, result: Any) -> Task:
        """End the task ``completed`` with ``result``; ``LeaseLostError`` if the claim no longer holds."""
        ...

    async def fail(self, claim: Claim, error: str) -> Task:
        """End the task ``failed`` with ``error``; ``LeaseLostError`` if the claim no longer holds."""
        ...

    async def release(self, claim: Claim) -> Task:
        """Give the task back, pending; ``LeaseLostError`` if the claim no longer holds."""
        ...

    async def kill(self, task_id: str, reason: str = "") -> Task:
        """Kill the task (no effect on an ended one); ``UnknownTaskError`` if there is none."""
        ...

    async def get(self, task_id: str) -> Task | None:
        """The task as stored now (an expired lease accounted for), or ``None``."""
        ...

    async def wait(self, task_id: str, timeout: float) -> Task:
        """The task once it has ended, or as it stands after ``timeout`` seconds."""
        ...

    async def tasks(self, *, parent: str | None = None) -> list[Task]:
        """Every task (of ``parent`` if given), oldest first, as stored (a parent's ``task_status`` of all)."""
        ...

    async def wait_for_work(self, timeout: float) -> None:
        """Return when a task was enqueued or released, or after ``timeout`` seconds."""
        ...

    async def aclose(self) -> None:
        """Release what the queue holds."""
        ...


# ----------------------------------------------------------------------------------- memory


class _ByRules:
    """What both queues do alike: build a task to insert, and apply a rule to one stored task.

    A queue supplies ``_insert`` (store a new task, made at its clock's time) and
    ``_apply`` (read a task, apply a rule at its clock's time, keep the result); the
    protocol's writes below are the same over both.
    """

    async def _insert(self, kind: str, make: Callable[[float], Task]) -> Task:
        raise NotImplementedError

    async def _apply(self, task_id: str, doing: str, change: Callable[[Task, float], Task]) -> Task:
        raise NotImplementedError

    async def enqueue(
        self,
        kind: str,
        payload: Any,
        *,
        task_id: str | None = None,
        parent: str = "",
        idempotent: bool = False,
        max_attempts: int = 3,
    ) -> Task:
        """See ``TaskQueue.enqueue``; an id already used is a ``StateError``."""
        return await self._insert(
            kind,
            lambda now: _new_task(
                kind, payload, now, task_id=task_id, parent=parent, idempotent=idempotent, max_attempts=max_attempts
            ),
        )

    async def heartbeat(self, claim: Claim) -> Task:
        """See ``TaskQueue.heartbeat``."""
        return await self._apply(claim.task_id, "renew the lease of", lambda t, now: rules_heartbeat(t, claim, now))

    async def complete(self, claim: Claim, result: Any) -> Task:
        """See ``TaskQueue.complete``."""
        _check_result(claim, result)
        return await self._apply(claim.task_id, "complete", lambda t, now: rules_finish(t, claim, now, result=result))

    async def fail(self, claim: Claim, error: str) -> Task:
        """See ``TaskQueue.fail``."""
        return await self._apply(claim.task_id, "fail", lambda t, now: rules_finish(t, claim, now, error=error))

    async def release(self, claim: Claim) -> Task:
        """See ``TaskQueue.release``."""
        return await self._apply(claim.task_id, "release", lambda t, now: rules_release(t, claim, now))

    async def kill(self, task_id: str, reason: str = "") -> Task:
        """See ``TaskQueue.kill``."""
        return await self._apply(task_id, "kill", lambda t, now: rules_kill(t, now, reason))


class MemoryTaskQueue(_ByRules):
    """The queue in one process's memory (tests, the embedded default): the same rules, no database.

    Args:
        clock: seconds since the epoch (default ``time.time``); tests pass a fake one to
            expire leases without waiting.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        """An empty queue."""
        self.clock = clock
        self._tasks: dict[str, Task] = {}
        self._changed: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _condition(self) -> asyncio.Condition:
        """The condition waiters wait on, made in the running loop (a queue may outlive a loop, as in tests)."""
        loop = asyncio.get_running_loop()
        if self._changed is None or self._loop is not loop:
            self._changed, self._loop = asyncio.Condition(), loop
        return self._changed

    async def _notify(self) -> None:
        condition = self._condition()
        async with condition:
            condition.notify_all()

    def _stored(self, task_id: str) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise UnknownTaskError(f"no task {task_id!r} in this queue")
        return task

    async def _put(self, task: Task, before: Task) -> Task:
        self._tasks[task.task_id] = task
        if task.status != before.status:
            await self._notify()
        return task

    async def _insert(self, _kind: str, make: Callable[[float], Task]) -> Task:
        task = make(self.clock())
        if task.task_id in self._tasks:
            raise StateError(f"a task {task.task_id!r} exists already")
        self._tasks[task.task_id] = task
        await self._notify()
        return task

    async def claim(
        self, owner: str, *, kinds: Collection[str] | None = None, lease_seconds: float = 30.0
    ) -> Claim | None:
        """See ``TaskQueue.claim`` (oldest first)."""
        now = self.clock()
        for task in sorted(self._tasks.values(), key=lambda t: t.created_at):
            if (kinds is not None and task.kind not in kinds) or not rules_claimable(task, now):
                continue
            after, claim = rules_claim(task, owner, now, lease_seconds)
            await self._put(after, task)
            if claim is not None:
                return claim
        return None

    async def _apply(self, task_id: str, _doing: str, change: Callable[[Task, float], Task]) -> Task:
        task = self._stored(task_id)
        return await self._put(change(task, self.clock()), task)

    async def get(self, task_id: str) -> Task | None:
        """See ``TaskQueue.get``."""
        task = self._tasks.get(task_id)
        if task is None:
            return None
        return await self._put(rules_expire(task, self.clock()), task)

    async def wait(self, task_id: str, timeout: float) -> Task:
        """See ``TaskQueue.wait``; ``UnknownTaskError`` if there is no such task."""
        deadline = time.monotonic() + timeout
        condition = self._condition()
        while True:
            task = await self.get(task_id)
            if task is None:
                raise UnknownTaskError(f"no task {task_id!r} in this queue")
            left = deadline - time.monotonic()
            if task.done or left <= 0:
                return task
            async with condition:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(condition.wait(), timeout=min(left, 0.5))

    async def wait_for_work(self, timeout: float) -> None:
        """See ``TaskQueue.wait_for_work``."""
        condition = self._condition()
        async with condition:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(condition.wait(), timeout=timeout)

    async def tasks(self, *, parent: str | None = None) -> list[Task]:
        """See ``TaskQueue.tasks``."""
        found = [t for t in self._tasks.values() if parent is None or t.parent == parent]
        return sorted(found, key=lambda t: t.created_at)

    async def aclose(self) -> None:
        """Nothing to release."""


# --------------------------------------------------------------------------------- PostgreSQL

#: Key of the advisory lock that serialises creating the table across processes starting together.
_SCHEMA_LOCK: Final = 0x656E7633

#: The queue's table (spec scaleout §6.6-a). Times are seconds since the epoch in the database's clock.
SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS agent_tasks (
    task_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'completed', 'failed', 'killed')),
    attempts INTEGER NOT NULL DEFAULT 0,
    released INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    idempotent BOOLEAN NOT NULL,
    result TEXT,
    error TEXT NOT NULL DEFAULT '',
    lease_owner TEXT NOT NULL DEFAULT '',
    lease_expires_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    heartbeat_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    created_at DOUBLE PRECISION NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    parent TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS agent_tasks_open ON agent_tasks (created_at) WHERE status IN ('pending', 'running');
CREATE INDEX IF NOT EXISTS agent_tasks_by_parent ON agent_tasks (parent);
"""

_COLUMNS: Final = (
    "task_id, kind, payload, status, attempts, released, max_attempts, idempotent, result, error,"
    " lease_owner, lease_expires_at, heartbeat_at, created_at, updated_at, parent"
)
_NOW: Final = "extract(epoch FROM clock_timestamp())::float8"


def _decode(row: tuple[Any, ...]) -> Task:
    (task_id, kind, payload, status, attempts, released, max_attempts, idempotent, result, error) = row[:10]
    lease_owner, lease_expires_at, heartbeat_at, created_at, updated_at, parent = row[10:16]
    return Task(
        task_id=task_id,
        kind=kind,
        payload=msgspec.json.decode(payload),
        status=status,
        attempts=attempts,
        released=released,
        max_attempts=max_attempts,
        idempotent=idempotent,
        result=None if result is None else msgspec.json.decode(result),
        error=error,
        lease_owner=lease_owner,
        lease_expires_at=lease_expires_at,
        heartbeat_at=heartbeat_at,
        created_at=created_at,
        updated_at=updated_at,
        parent=parent,
    )


def _encode(task: Task) -> tuple[object, ...]:
    result = None if task.result is None else msgspec.json.encode(task.result).decode()
    return (
        task.task_id,
        task.kind,
        msgspec.json.encode(task.payload).decode(),
        task.status,
        task.attempts,
        task.released,
        task.max_attempts,
        task.idempotent,
        result,
        task.error,
        task.lease_owner,
        task.lease_expires_at,
        task.heartbeat_at,
        task.created_at,
        task.updated_at,
        task.parent,
    )


class PostgresTaskQueue(_ByRules):
    """The queue in PostgreSQL, shared by every worker and parent process on the database (spec scaleout §6).

    Claims select the oldest claimable rows ``FOR UPDATE SKIP LOCKED`` (a row another
    claimer holds is skipped, never waited for, never taken twice) and apply the pure
    rules in that transaction; every holder's write locks the row and is fenced by the
    attempt number. An end state sends ``NOTIFY agent_ref_task_done`` with the task's
    id in the same transaction, and a new or released task ``NOTIFY agent_ref_task_new``;
    ``wait`` and ``wait_for_work`` listen on their own connection and read the table
    again at least every ``poll_seconds`` (a notification is a wake-up, the table is the
    truth; a lost listener falls back to polling). Lease times are the database's clock,
    so workers on hosts whose clocks differ agree.

    Connections are kept idle between operations, each checked (an empty query) before
    use, and dropped when they fail; the next operation opens a new one. While the
    database cannot be reached every operation fails at once with ``UnavailableError``
    (naming the database, never a password); the worker retries (spec §6.4-b).

    Args:
        url: ``postgresql://…`` (``?options=-csearch_path%3Ds`` puts the table in schema ``s``).
        poll_seconds: the longest ``wait``/``wait_for_work`` go without reading the table.
        listen: wake waiters by LISTEN/NOTIFY; ``False`` polls only.
        connect_timeout: seconds a new connection may take (at least 2, libpq's floor).
    """

    def __init__(
        self, url: str, *, poll_seconds: float = 1.0, listen: bool = True, connect_timeout: float = 3.0
    ) -> None:
        """Nothing is opened yet: the first operation connects and creates the table."""
        from envelope.delivery.postgres import describe_database

        self.url = url
        self.poll_seconds = poll_seconds
        self.listen = listen
        self.connect_timeout = max(2, int(connect_timeout))
        self._where = describe_database(url)
        self._idle: list[psycopg.AsyncConnection[TupleRow]] = []
        self._ready = False
        self._listener: psycopg.AsyncConnection[TupleRow] | None = None
        self._deaf = False  # the last LISTEN failed (said once, not at every poll)

    # -- connections

    async def _connect(self) -> psycopg.AsyncConnection[TupleRow]:
        import psycopg

        conn = await psycopg.AsyncConnection.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
        if not self._ready:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                await conn.execute(SCHEMA.encode())
            self._ready = True
        return conn

    def _error(self, doing: str, exc: Exception) -> StoreError:
        import psycopg

        if isinstance(exc, psycopg.OperationalError):
            return UnavailableError(f"cannot {doing} in {self._where}: {exc}", retry_after=1)
        return StoreError(f"cannot {doing} in {self._where}: {type(exc).__name__}: {exc}")

    @contextlib.asynccontextmanager
    async def _connection(self, doing: str) -> AsyncIterator[psycopg.AsyncConnection[TupleRow]]:
        """A checked connection, kept for the next operation if still sound; driver errors become ``StoreError``."""
        import psycopg

        conn: psycopg.AsyncConnection[TupleRow] | None = None
        try:
            while self._idle and conn is None:
                candidate = self._idle.pop()
                try:
                    await candidate.execute("")
                    conn = candidate
                except psycopg.Error:
                    await candidate.close()
            if conn is None:
                conn = await self._connect()
        except psycopg.Error as exc:
            raise self._error(doing, exc) from None
        try:
            yield conn
        except psycopg.Error as exc:
            await conn.close()
            conn = None
            raise self._error(doing, exc) from None
        finally:
            if conn is not None:
                # Kept only if sound and between transactions: an operation cancelled midway leaves neither.
                idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
                if conn.closed or conn.broken or not idle or len(self._idle) >= 4:
                    await conn.close()
                else:
                    self._idle.append(conn)

    async def _now(self, conn: psycopg.AsyncConnection[TupleRow]) -> float:
        row = await (await conn.execute(f"SELECT {_NOW}")).fetchone()
        assert row is not None
        return float(row[0])

    async def _write(self, conn: psycopg.AsyncConnection[TupleRow], task: Task, before: Task) -> None:
        """Write ``task`` back over its locked row; NOTIFY when it ended or became claimable."""
        values = _encode(task)
        sets = ", ".join(f"{c} = %s" for c in _COLUMNS.replace(" ", "").split(",")[1:])
        await conn.execute(f"UPDATE agent_tasks SET {sets} WHERE task_id = %s".encode(), (*values[1:], values[0]))
        if task.status != before.status:
            if task.done:
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL_DONE, task.task_id))
            elif task.status == "pending":
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL_NEW, task.kind))

    async def _locked(self, conn: psycopg.AsyncConnection[TupleRow], task_id: str) -> Task:
        cur = await conn.execute(
            f"SELECT {_COLUMNS} FROM agent_tasks WHERE task_id = %s FOR UPDATE".encode(), (task_id,)
        )
        row = await cur.fetchone()
        if row is None:
            raise UnknownTaskError(f"no task {task_id!r} in {self._where}")
        return _decode(row)

    async def _apply(self, task_id: str, doing: str, change: Callable[[Task, float], Task]) -> Task:
        """Lock the row, apply a rule at the database's time, write the result back (one transaction)."""
        async with self._connection(f"{doing} task {task_id}") as conn, conn.transaction():
            before = await self._locked(conn, task_id)
            after = change(before, await self._now(conn))
            if after is not before:
                await self._write(conn, after, before)
            return after

    # -- the protocol

    async def _insert(self, kind: str, make: Callable[[float], Task]) -> Task:
        async with self._connection(f"enqueue a {kind!r} task") as conn, conn.transaction():
            task = make(await self._now(conn))
            placeholders = ", ".join(["%s"] * 16)
            cur = await conn.execute(
                f"INSERT INTO agent_tasks ({_COLUMNS}) VALUES ({placeholders})"
                " ON CONFLICT (task_id) DO NOTHING".encode(),
                _encode(task),
            )
            if cur.rowcount != 1:
                raise StateError(f"a task {task.task_id!r} exists already in {self._where}")
            await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL_NEW, kind))
        return task

    async def claim(
        self, owner: str, *, kinds: Collection[str] | None = None, lease_seconds: float = 30.0
    ) -> Claim | None:
        """See ``TaskQueue.claim``: ``FOR UPDATE SKIP LOCKED`` on the oldest claimable rows (spec §6.2-b)."""
        if not owner:
            raise ValueError("a worker needs a non-empty name to claim a task")
        where = "(status = 'pending' OR (status = 'running' AND lease_expires_at <= %s))"
        async with self._connection(f"claim a task for {owner}") as conn, conn.transaction():
            now = await self._now(conn)
            params: list[object] = [now]
            if kinds is not None:
                where += " AND kind = ANY(%s)"
                params.append(list(kinds))
            while True:
                cur = await conn.execute(
                    f"SELECT {_COLUMNS} FROM agent_tasks WHERE {where} ORDER BY created_at LIMIT 8"
                    " FOR UPDATE SKIP LOCKED".encode(),
                    params,
                )
                rows = await cur.fetchall()
                if not rows:
                    return None
                for row in rows:
                    before = _decode(row)
                    after, claim = rules_claim(before, owner, now, lease_seconds)
                    await self._write(conn, after, before)
                    if claim is not None:
                        return claim
                # every row read had run out of attempts and failed: look again

    async def get(self, task_id: str) -> Task | None:
        """See ``TaskQueue.get`` (an expired lease is accounted for and written back)."""
        async with self._connection(f"read task {task_id}") as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS}, {_NOW} FROM agent_tasks WHERE task_id = %s".encode(), (task_id,)
            )
            row = await cur.fetchone()
        if row is None:
            return None
        task = _decode(row)
        if rules_expire(task, float(row[16])) is task:
            return task
        return await self._apply(task_id, "expire the lease of", rules_expire)

    async def tasks(self, *, parent: str | None = None) -> list[Task]:
        """See ``TaskQueue.tasks``."""
        where, params = ("WHERE parent = %s", (parent,)) if parent is not None else ("", ())
        async with self._connection("read the tasks") as conn:
            cur = await conn.execute(f"SELECT {_COLUMNS} FROM agent_tasks {where} ORDER BY created_at".encode(), params)
            return [_decode(row) for row in await cur.fetchall()]

    async def _listen(self, channel: str) -> psycopg.AsyncConnection[TupleRow] | None:
        """A connection listening on ``channel`` (a new one per call), or ``None`` (then the caller polls)."""
        if not self.listen:
            return None
        import psycopg

        try:
            conn = await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=self.connect_timeout
            )
            await conn.execute(f"LISTEN {channel}")
        except psycopg.Error as exc:
            if not self._deaf:
                log.warning(
                    "task queue: cannot listen on %s (%s); polling every %s s", self._where, exc, self.poll_seconds
                )
            self._deaf = True
            return None
        self._deaf = False
        return conn

    async def _notified(
        self, conn: psycopg.AsyncConnection[TupleRow] | None, wanted: Iterable[str] | None, timeout: float
    ) -> None:
        """Wait up to ``timeout`` for a notification (any, or one whose payload is in ``wanted``) on ``conn``."""
        if conn is None or conn.closed:
            await asyncio.sleep(timeout)
            return
        import psycopg

        want = None if wanted is None else set(wanted)
        try:
            async for notify in conn.notifies(timeout=timeout):
                if want is None or notify.payload in want:
                    return
        except psycopg.Error:
            await conn.close()  # polling from now on
            await asyncio.sleep(min(timeout, self.poll_seconds))

    async def wait(self, task_id: str, timeout: float) -> Task:
        """See ``TaskQueue.wait``: LISTEN for its end, reading the table at least every ``poll_seconds``."""
        deadline = time.monotonic() + timeout
        conn = await self._listen(CHANNEL_DONE)
        try:
            while True:
                task = await self.get(task_id)
                if task is None:
                    raise UnknownTaskError(f"no task {task_id!r} in {self._where}")
                left = deadline - time.monotonic()
                if task.done or left <= 0:
                    return task
                await self._notified(conn, [task_id], min(left, self.poll_seconds))
        finally:
            if conn is not None:
                await conn.close()

    async def wait_for_work(self, timeout: float) -> None:
        """See ``TaskQueue.wait_for_work``: one listening connection kept for the queue's life (reopened if lost)."""
        import psycopg

        if self._listener is None or self._listener.closed or self._listener.broken:
            if self._listener is not None:
                await self._listener.close()
            self._listener = await self._listen(CHANNEL_NEW)
        try:
            await self._notified(self._listener, None, min(timeout, self.poll_seconds))
        except asyncio.CancelledError:  # a stopping worker: the connection may be mid-wait, so it goes
            listener, self._listener = self._listener, None
            if listener is not None:
                await asyncio.shield(listener.close())
            raise
        except psycopg.Error:  # pragma: no cover - _notified swallows driver errors
            self._listener = None

    async def aclose(self) -> None:
        """Close every connection the queue holds."""
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()
        if self._listener is not None:
            await self._listener.close()
            self._listener = None
