"""Storage of agents: the ``Store`` protocol, ``MemoryStore`` and ``SQLiteStore``.

Owns: durable agent state, the history of completed runs, and each run's envelope log,
with transactional saves and optimistic concurrency (spec ``spec/agent-ref.md`` §4).
Does not own: what the state means (``store/state.py``, ``agent.py``).

Concurrency rule (spec §4.3): every ``AgentState`` carries ``version``. ``save`` writes
only if the stored version still equals the one the caller loaded (``0`` means "must
not exist yet"), and then bumps it, all in one transaction with the log lines and the
run record. Two processes that resume the same paused agent both load version *v*;
the first save wins, the second gets ``ConflictError`` and has written nothing.

Leases (spec §10.2-a): a ``running`` agent names its owner and when that hold expires;
``renew_lease`` extends it without a version bump (a heartbeat is not a change of state,
so it never makes the owner's own next save conflict). ``SQLiteStore`` keeps the lease
in columns of its own (added to an older database on open) so a renewal does not
rewrite the state blob. ``agents()`` lists every agent with its lease for ``agent-ref runs``.

``SQLiteStore`` uses the standard ``sqlite3`` module off the event loop
(``asyncio.to_thread``), a fresh connection per operation (connections are not shared
across threads), WAL journaling, and ``BEGIN IMMEDIATE`` so a writer takes the lock
before it reads the version it compares.
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, ParamSpec, Protocol, TypeVar

import msgspec

from ..errors import ConflictError, StateError, StoreError, UnavailableError
from .sessions import InboxBounds, InboxReceipt
from .state import AgentState, RunRecord, decode_state, encode_state

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["AgentSummary", "LogBatch", "MemoryStore", "SQLiteStore", "Store", "lease_owner_id", "owner_gone"]


@dataclass(frozen=True, slots=True)
class LogBatch:
    """Envelope lines sent in one response of a run, from line ``start`` on.

    Attributes:
        run_id: the run.
        response: the response's index within the run (0 for the first, 1 after a resume...).
        start: index of the first line within that response.
        lines: the lines exactly as sent (``b"[DONE]"`` included).
    """

    run_id: str
    response: int
    start: int
    lines: Sequence[bytes]


@dataclass(frozen=True, slots=True)
class AgentSummary:
    """One stored agent as ``agent-ref runs`` lists it.

    Attributes:
        agent_uuid: the agent.
        status: ``idle``, ``running`` or ``awaiting_frontend_tools``.
        run_id: the run in progress or paused, else ``None``.
        user_query: that run's prompt, else ``""``.
        lease_owner: who holds a ``running`` agent.
        lease_expires_at: when the hold ends unless renewed (0 when none).
        updated_at: the last save (seconds since the epoch).
        principal: who created the agent (spec server [OW1-a]), ``None`` if not recorded.
    """

    agent_uuid: str
    status: str
    run_id: str | None
    user_query: str
    lease_owner: str | None
    lease_expires_at: float
    updated_at: float
    principal: str | None = None

    def lease_alive(self, now: float | None = None) -> bool:
        """Whether a ``running`` agent's owner still holds it (spec §10.2-a; a dead owner here holds none, §10.2-c)."""
        now = time.time() if now is None else now
        return self.status == "running" and self.lease_expires_at > now and not owner_gone(self.lease_owner)


# ---------------------------------------------------------------- lease owners (spec agent-ref [R10.2-c])


def _proc_read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:  # /proc, tiny, read once
            return f.read()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22), or ``None``."""
    stat = _proc_read(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat.rpartition(")")[2].split()  # the name, in parentheses, may hold spaces
    return int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else None


def _pid_namespace() -> str | None:
    """This process's PID namespace (the inode of ``/proc/self/ns/pid``), or ``None`` without ``/proc``."""
    try:
        link = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    digits = "".join(c for c in link if c.isdigit())
    return digits or None


def _boot_id() -> str | None:
    text = _proc_read("/proc/sys/kernel/random/boot_id")
    return text.strip().replace("-", "")[:12] if text else None


#: The tag of an owner id that can be checked on its host: PID namespace, boot, start ticks, a random part.
_TAG: Final = re.compile(r"p(\d+)b([0-9a-f]+)s(\d+)-[0-9a-f]+")


def lease_owner_id(tag: str) -> str:
    """A lease owner id for this process: ``host:pid:p<pidns>b<boot>s<start>-<tag>`` (spec agent-ref [R10.2-c]).

    Where ``/proc`` is missing (not Linux) it is ``host:pid:<tag>``, which only its lease can
    declare dead.
    """
    pid = os.getpid()
    ns, boot, start = _pid_namespace(), _boot_id(), _start_ticks(pid)
    mark = f"p{ns}b{boot}s{start}-{tag}" if ns and boot and start is not None else tag
    return f"{socket.gethostname()}:{pid}:{mark}"


def owner_gone(owner: str | None) -> bool:
    """Whether a lease owner is a process of this machine that no longer runs (spec agent-ref [R10.2-c]).

    Only an owner id that names this host, this PID namespace and this boot is judged: then
    it is gone when its pid does not exist, or exists with another start time (the pid was
    reused). Any other owner (another host, another container, an id without those marks)
    is never gone here: its lease tells.
    """
    if not owner:
        return False
    host, _, rest = owner.partition(":")
    pid_text, _, tag = rest.partition(":")
    marks = _TAG.fullmatch(tag)
    if host != socket.gethostname() or not pid_text.isdigit() or marks is None:
        return False
    if marks.group(1) != _pid_namespace() or marks.group(2) != _boot_id():
        return False  # another container on this host, or an earlier boot: pids say nothing here
    pid = int(pid_text)
    if pid == os.getpid():
        return False  # this very process (its own runs are its manager's to judge)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass  # it exists, owned by another user
    start = _start_ticks(pid)
    return start is not None and str(start) != marks.group(3)


def _summary(state: AgentState, updated_at: float) -> AgentSummary:
    return AgentSummary(
        agent_uuid=state.agent_uuid,
        status=state.status,
        run_id=state.run.run_id if state.run is not None else None,
        user_query=state.run.user_query if state.run is not None else "",
        lease_owner=state.lease_owner,
        lease_expires_at=state.lease_expires_at,
        updated_at=updated_at,
        principal=state.principal,
    )


class Store(Protocol):
    """Where agents live between processes."""

    async def load(self, agent_uuid: str) -> AgentState | None:
        """The stored state, or ``None`` if the agent is unknown."""
        ...

    async def save(self, state: AgentState, *, log: LogBatch | None = None, run: RunRecord | None = None) -> None:
        """Write ``state`` (and ``log``, ``run``) in one transaction if nobody wrote since it was loaded.

        On success ``state.version`` is incremented in place.

        Raises:
            ConflictError: the stored version differs from ``state.version``.
        """
        ...

    async def run_log(self, run_id: str) -> list[bytes]:
        """Every line sent for the run, in order, across its responses."""
        ...

    async def run_responses(self, run_id: str) -> list[list[bytes]]:
        """The run's lines grouped by response, in order: each a complete stream ending with ``[DONE]``."""
        ...

    async def renew_lease(self, agent_uuid: str, owner: str, expires_at: float) -> bool:
        """Extend the hold of ``owner`` on a ``running`` agent (spec §10.2-a), without a version bump.

        Returns:
            ``False`` (and nothing written) if the agent is not ``running`` under ``owner``.
        """
        ...

    async def agents(self, principal: str | None = None) -> list[AgentSummary]:
        """Every stored agent, most recently changed first (for ``agent-ref runs``).

        Only ``principal``'s agents when given (spec server [OW2-a]).
        """
        ...

    async def runs(self, agent_uuid: str) -> list[RunRecord]:
        """The agent's completed runs, oldest first."""
        ...


class MemoryStore:
    """A ``Store`` in a dict, for tests and single-process use. States are copied in and out."""

    def __init__(self) -> None:
        """Create an empty store."""
        self._states: dict[str, bytes] = {}
        self._logs: dict[str, list[tuple[int, int, bytes]]] = {}
        self._runs: dict[str, list[RunRecord]] = {}
        self._updated: dict[str, float] = {}
        self._snapshots: dict[str, list[tuple[int, str, int, bytes]]] = {}  # spec §22: (step, run, run step, data)

    async def load(self, agent_uuid: str) -> AgentState | None:
        """See ``Store.load``."""
        data = self._states.get(agent_uuid)
        return decode_state(data) if data is not None else None

    async def save(self, state: AgentState, *, log: LogBatch | None = None, run: RunRecord | None = None) -> None:
        """See ``Store.save``."""
        data = self._states.get(state.agent_uuid)
        stored = decode_state(data).version if data is not None else 0
        if stored != state.version:
            raise ConflictError(_conflict(state, stored))
        state.version += 1
        self._states[state.agent_uuid] = encode_state(state)
        self._updated[state.agent_uuid] = time.time()
        if log is not None:
            entries = self._logs.setdefault(log.run_id, [])
            entries.extend((log.response, log.start + i, line) for i, line in enumerate(log.lines))
        if run is not None:
            self._runs.setdefault(run.agent_uuid, []).append(
                msgspec.json.decode(msgspec.json.encode(run), type=RunRecord)
            )

    async def run_log(self, run_id: str) -> list[bytes]:
        """See ``Store.run_log``."""
        return [line for _, _, line in sorted(self._logs.get(run_id, []), key=lambda e: (e[0], e[1]))]

    async def run_responses(self, run_id: str) -> list[list[bytes]]:
        """See ``Store.run_responses``."""
        return _group(sorted(self._logs.get(run_id, []), key=lambda e: (e[0], e[1])))

    async def renew_lease(self, agent_uuid: str, owner: str, expires_at: float) -> bool:
        """See ``Store.renew_lease``."""
        data = self._states.get(agent_uuid)
        if data is None:
            return False
        state = decode_state(data)
        if state.status != "running" or state.lease_owner != owner:
            return False
        state.lease_expires_at = expires_at
        self._states[agent_uuid] = encode_state(state)  # same version: a lease is not a change of state
        return True

    async def agents(self, principal: str | None = None) -> list[AgentSummary]:
        """See ``Store.agents``."""
        found = [_summary(decode_state(data), self._updated.get(uuid, 0.0)) for uuid, data in self._states.items()]
        if principal is not None:
            found = [a for a in found if a.principal == principal]
        return sorted(found, key=lambda a: a.updated_at, reverse=True)

    async def runs(self, agent_uuid: str) -> list[RunRecord]:
        """See ``Store.runs``."""
        return list(self._runs.get(agent_uuid, []))

    async def runs_of(self, agent_uuids: Sequence[str]) -> dict[str, list[RunRecord]]:
        """See ``SQLiteStore.runs_of``."""
        return {uuid: list(self._runs.get(uuid, [])) for uuid in agent_uuids}

    async def record_snapshot(self, agent_uuid: str, run_id: str, run_step: int, data: bytes) -> int:
        """See ``snapshots.SnapshotStore.record_snapshot``."""
        rows = self._snapshots.setdefault(agent_uuid, [])
        step = _next_step(rows[-1][:3] if rows else None, run_id, run_step)
        rows.append((step, run_id, run_step, bytes(data)))
        return step

    async def snapshots(self, agent_uuid: str, after_step: int) -> list[tuple[int, bytes]]:
        """See ``snapshots.SnapshotStore.snapshots``."""
        return [(step, data) for step, _, _, data in self._snapshots.get(agent_uuid, []) if step > after_step]

    async def drop_snapshots(self, agent_uuid: str, after_step: int) -> None:
        """See ``snapshots.SnapshotStore.drop_snapshots``."""
        self._snapshots[agent_uuid] = [r for r in self._snapshots.get(agent_uuid, []) if r[0] <= after_step]

    # ------------------------------------------------------------- streaming input (spec [IN1-a])

    def _inbox_state(self) -> tuple[threading.Lock, dict[str, list[Any]], dict[str, list[tuple[int, str]]]]:
        """The inbox's lock, its runs (agent -> [run id, open, last seq, taken]) and messages, made on first use."""
        if not hasattr(self, "_inbox_lock"):
            self._inbox_lock = threading.Lock()
            self._inbox_runs: dict[str, list[Any]] = {}
            self._inbox_items: dict[str, list[tuple[int, str]]] = {}
        return self._inbox_lock, self._inbox_runs, self._inbox_items

    def inbox_put(self, run_id: str, text: str, *, bounds: InboxBounds | None = None) -> InboxReceipt:
        """See ``sessions.InboxStore.inbox_put``."""
        lock, runs, items = self._inbox_state()
        with lock:
            for agent_uuid, entry in runs.items():
                if entry[0] == run_id and entry[1]:
                    data = self._states.get(agent_uuid)
                    if data is not None and decode_state(data).status == "running":
                        if bounds is not None:  # spec server [IB1-d]: checked under the lock that queues
                            waiting = [t for seq, t in items.get(agent_uuid, []) if seq > entry[3]]
                            bounds.check(len(waiting), sum(len(t.encode()) for t in waiting), text, run_id)
                        entry[2] += 1
                        items.setdefault(agent_uuid, []).append((entry[2], text))
                        return InboxReceipt(agent_uuid, entry[2], entry[2] - entry[3])
        raise StateError(_not_accepting(run_id))

    async def inbox_open(self, agent_uuid: str, run_id: str, delivered: int) -> None:
        """See ``sessions.InboxStore.inbox_open``."""
        lock, runs, items = self._inbox_state()
        with lock:
            entry = runs.setdefault(agent_uuid, [run_id, True, delivered, delivered])
            entry[0], entry[1], entry[2], entry[3] = run_id, True, max(entry[2], delivered), delivered
            items[agent_uuid] = [m for m in items.get(agent_uuid, []) if m[0] > delivered]

    async def inbox_take(self, agent_uuid: str, after: int) -> list[tuple[int, str]]:
        """See ``sessions.InboxStore.inbox_take``."""
        lock, runs, items = self._inbox_state()
        with lock:
            found = [m for m in items.get(agent_uuid, []) if m[0] > after]
            if found and agent_uuid in runs:
                runs[agent_uuid][3] = max(runs[agent_uuid][3], found[-1][0])
            return found

    async def inbox_close(self, agent_uuid: str, run_id: str, after: int, *, if_empty: bool) -> bool:
        """See ``sessions.InboxStore.inbox_close``."""
        lock, runs, items = self._inbox_state()
        with lock:
            if if_empty and any(m[0] > after for m in items.get(agent_uuid, [])):
                return False
            entry = runs.get(agent_uuid)
            if entry is not None and entry[0] == run_id:
                entry[1] = False
            return True

    async def snapshot_points(self, agent_uuid: str) -> list[tuple[int, str, int]]:
        """The agent's snapshot records as ``(step, run id, step of the run)``, in the order recorded ([IN4-a])."""
        return [(step, run, run_step) for step, run, run_step, _ in self._snapshots.get(agent_uuid, [])]


def _next_step(last: tuple[int, str, int] | None, run_id: str, run_step: int) -> int:
    """The agent's step of a new record (spec RU1-b): the last one's if the same (run, step), else the next."""
    if last is None:
        return 1
    step, last_run, last_run_step = last
    return step if (last_run, last_run_step) == (run_id, run_step) else step + 1


def _group(entries: Sequence[tuple[int, int, bytes]]) -> list[list[bytes]]:
    """Lines ``(response, seq, line)`` sorted by response then seq, grouped by response."""
    out: list[list[bytes]] = []
    current: int | None = None
    for response, _, line in entries:
        if response != current:
            out.append([])
            current = response
        out[-1].append(line)
    return out


def _conflict(state: AgentState, stored: int) -> str:
    if stored == 0:
        return f"agent {state.agent_uuid} is not stored (expected version {state.version})"
    return (
        f"agent {state.agent_uuid} was changed by another process (stored version {stored}, "
        f"this one loaded version {state.version}); nothing was written"
    )


_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS agents (
    agent_uuid TEXT PRIMARY KEY,
    version INTEGER NOT NULL,
    status TEXT NOT NULL,
    state BLOB NOT NULL,
    updated_at REAL NOT NULL,
    lease_owner TEXT,
    lease_expires_at REAL NOT NULL DEFAULT 0,
    principal TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    agent_uuid TEXT NOT NULL,
    finished_at REAL NOT NULL,
    stop_reason TEXT NOT NULL,
    record BLOB NOT NULL,
    principal TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_agent ON runs (agent_uuid, finished_at);
CREATE TABLE IF NOT EXISTS envelope_log (
    run_id TEXT NOT NULL,
    response INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    line BLOB NOT NULL,
    PRIMARY KEY (run_id, response, seq)
);
CREATE TABLE IF NOT EXISTS file_snapshots (
    agent_uuid TEXT NOT NULL,
    seq INTEGER NOT NULL,
    step INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    run_step INTEGER NOT NULL,
    changes BLOB NOT NULL,
    PRIMARY KEY (agent_uuid, seq)
);
CREATE TABLE IF NOT EXISTS inbox_runs (
    agent_uuid TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    open INTEGER NOT NULL,
    last_seq INTEGER NOT NULL DEFAULT 0,
    taken INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS inbox_runs_by_run ON inbox_runs (run_id);
CREATE TABLE IF NOT EXISTS inbox (
    agent_uuid TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    text TEXT NOT NULL,
    accepted_at REAL NOT NULL,
    PRIMARY KEY (agent_uuid, seq)
);
"""


class SQLiteStore:
    """A ``Store`` in one SQLite file, safe across processes (spec §4.2).

    Args:
        path: the database file; created with its tables if missing.
        timeout: seconds a writer waits for another writer's lock.
    """

    def __init__(self, path: str | Path, *, timeout: float = 10.0) -> None:
        """Open (lazily) the database at ``path``."""
        self.path = Path(path)
        self.timeout = timeout
        self._ready = False

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise _failure(f"cannot open the agent database {self.path}", exc) from None
        if not self._ready:
            self._prepare(conn)
            self._ready = True
        return conn

    def _prepare(self, conn: sqlite3.Connection) -> None:
        """WAL and the schema, once per store; retried while another connection holds the lock.

        Switching to WAL needs the database to itself and SQLite answers "database is
        locked" at once, without the busy timeout, when another store is preparing the
        same new file (two processes starting together): that is waited out, up to
        ``timeout``, not raised as a foreign error.
        """
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)
                # A database made before leases existed (spec §10.2-a): add their columns.
                columns = {row[1] for row in conn.execute("PRAGMA table_info(agents)")}
                if "lease_owner" not in columns:
                    conn.execute("ALTER TABLE agents ADD COLUMN lease_owner TEXT")
                if "lease_expires_at" not in columns:
                    conn.execute("ALTER TABLE agents ADD COLUMN lease_expires_at REAL NOT NULL DEFAULT 0")
                _add_principals(conn, columns)
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    conn.close()
                    raise _failure(f"cannot prepare the agent database {self.path}", exc) from None
                if time.monotonic() >= deadline:
                    conn.close()
                    raise UnavailableError(
                        f"the agent database {self.path} stayed locked for {self.timeout} s", public=_PUBLIC_BUSY
                    ) from None
                time.sleep(0.01)

    async def load(self, agent_uuid: str) -> AgentState | None:
        """See ``Store.load``."""
        return await _off_loop(self.path, self._load, agent_uuid)

    def _load(self, agent_uuid: str) -> AgentState | None:
        conn = self._connect()
        try:
            row = conn.execute(
                "SELECT state, version, lease_expires_at FROM agents WHERE agent_uuid = ?", (agent_uuid,)
            ).fetchone()
        finally:
            conn.close()
        if row is None:
            return None
        state = decode_state(row[0])
        state.version = int(row[1])
        state.lease_expires_at = float(row[2])  # renewed in its column, not in the blob
        return state

    async def save(self, state: AgentState, *, log: LogBatch | None = None, run: RunRecord | None = None) -> None:
        """See ``Store.save``."""
        await _off_loop(self.path, self._save, state, log, run)

    def _save(self, state: AgentState, log: LogBatch | None, run: RunRecord | None) -> None:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute("SELECT version FROM agents WHERE agent_uuid = ?", (state.agent_uuid,)).fetchone()
                stored = int(row[0]) if row is not None else 0
                if stored != state.version:
                    raise ConflictError(_conflict(state, stored))
                new_version = state.version + 1
                blob = encode_state(msgspec.structs.replace(state, version=new_version))
                now = time.time()
                lease = (state.lease_owner, state.lease_expires_at, state.principal)
                if row is None:
                    conn.execute(
                        "INSERT INTO agents (agent_uuid, version, status, state, updated_at, lease_owner,"
                        " lease_expires_at, principal) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (state.agent_uuid, new_version, state.status, blob, now, *lease),
                    )
                else:
                    conn.execute(
                        "UPDATE agents SET version = ?, status = ?, state = ?, updated_at = ?, lease_owner = ?,"
                        " lease_expires_at = ?, principal = ? WHERE agent_uuid = ? AND version = ?",
                        (new_version, state.status, blob, now, *lease, state.agent_uuid, state.version),
                    )
                if log is not None:
                    conn.executemany(
                        "INSERT INTO envelope_log (run_id, response, seq, line) VALUES (?, ?, ?, ?)",
                        [(log.run_id, log.response, log.start + i, line) for i, line in enumerate(log.lines)],
                    )
                if run is not None:
                    conn.execute(
                        "INSERT INTO runs (run_id, agent_uuid, finished_at, stop_reason, record, principal)"
                        " VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            run.run_id,
                            run.agent_uuid,
                            run.finished_at,
                            run.stop_reason,
                            msgspec.json.encode(run),
                            state.principal,
                        ),
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            state.version = new_version
        except sqlite3.Error as exc:
            raise _failure(f"cannot save agent {state.agent_uuid} to {self.path}", exc) from None
        finally:
            conn.close()

    async def run_log(self, run_id: str) -> list[bytes]:
        """See ``Store.run_log``."""
        return await _off_loop(self.path, self._run_log, run_id)

    def _run_log(self, run_id: str) -> list[bytes]:
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT line FROM envelope_log WHERE run_id = ? ORDER BY response, seq", (run_id,)
            ).fetchall()
        finally:
            conn.close()
        return [bytes(r[0]) for r in rows]

    async def run_responses(self, run_id: str) -> list[list[bytes]]:
        """See ``Store.run_responses``."""
        return await _off_loop(self.path, self._run_responses, run_id)

    async def renew_lease(self, agent_uuid: str, owner: str, expires_at: float) -> bool:
        """See ``Store.renew_lease``."""
        return await _off_loop(self.path, self._renew_lease, agent_uuid, owner, expires_at)

    def _renew_lease(self, agent_uuid: str, owner: str, expires_at: float) -> bool:
        conn = self._connect()
        try:
            cursor = conn.execute(
                "UPDATE agents SET lease_expires_at = ? WHERE agent_uuid = ? AND status = 'running'"
                " AND lease_owner = ?",
                (expires_at, agent_uuid, owner),
            )
            return cursor.rowcount == 1
        except sqlite3.Error as exc:
            raise _failure(f"cannot renew the lease of agent {agent_uuid} in {self.path}", exc) from None
        finally:
            conn.close()

    async def agents(self, principal: str | None = None) -> list[AgentSummary]:
        """See ``Store.agents``."""
        return await _off_loop(self.path, self._agents, principal)

    def _agents(self, principal: str | None) -> list[AgentSummary]:
        conn = self._connect()
        try:
            where, params = ("WHERE principal = ? ", (principal,)) if principal is not None else ("", ())
            rows = conn.execute(
                f"SELECT state, lease_expires_at, updated_at FROM agents {where}ORDER BY updated_at DESC",
                params,
            ).fetchall()
        finally:
            conn.close()
        out = []
        for blob, expires, updated in rows:
            state = decode_state(blob)
            state.lease_expires_at = float(expires)
            out.append(_summary(state, float(updated)))
        return out

    def _run_responses(self, run_id: str) -> list[list[bytes]]:
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT response, seq, line FROM envelope_log WHERE run_id = ? ORDER BY response, seq", (run_id,)
            ).fetchall()
        finally:
            conn.close()
        return _group([(int(r[0]), int(r[1]), bytes(r[2])) for r in rows])

    async def runs(self, agent_uuid: str) -> list[RunRecord]:
        """See ``Store.runs``."""
        return await _off_loop(self.path, self._runs, agent_uuid)

    def _runs(self, agent_uuid: str) -> list[RunRecord]:
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT record FROM runs WHERE agent_uuid = ? ORDER BY finished_at, rowid", (agent_uuid,)
            ).fetchall()
        finally:
            conn.close()
        return [msgspec.json.decode(r[0], type=RunRecord) for r in rows]

    async def runs_of(self, agent_uuids: Sequence[str]) -> dict[str, list[RunRecord]]:
        """The completed runs of each of ``agent_uuids`` (oldest first), read in one query.

        For the run list (spec server [OW3-a]): one store round trip, not one per agent.
        Every id asked is a key; an agent with no run maps to ``[]``.
        """
        return await _off_loop(self.path, self._runs_of, list(agent_uuids))

    def _runs_of(self, agent_uuids: list[str]) -> dict[str, list[RunRecord]]:
        out: dict[str, list[RunRecord]] = {uuid: [] for uuid in agent_uuids}
        if not agent_uuids:
            return out
        marks = ",".join("?" * len(agent_uuids))
        conn = self._connect()
        try:
            rows = conn.execute(
                f"SELECT agent_uuid, record FROM runs WHERE agent_uuid IN ({marks}) ORDER BY finished_at, rowid",
                agent_uuids,
            ).fetchall()
        finally:
            conn.close()
        for uuid, record in rows:
            out[str(uuid)].append(msgspec.json.decode(record, type=RunRecord))
        return out

    async def record_snapshot(self, agent_uuid: str, run_id: str, run_step: int, data: bytes) -> int:
        """See ``snapshots.SnapshotStore.record_snapshot``."""
        return await _off_loop(self.path, self._record_snapshot, agent_uuid, run_id, run_step, data)

    def _record_snapshot(self, agent_uuid: str, run_id: str, run_step: int, data: bytes) -> int:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT seq, step, run_id, run_step FROM file_snapshots WHERE agent_uuid = ?"
                    " ORDER BY seq DESC LIMIT 1",
                    (agent_uuid,),
                ).fetchone()
                last = (int(row[1]), str(row[2]), int(row[3])) if row is not None else None
                step = _next_step(last, run_id, run_step)
                conn.execute(
                    "INSERT INTO file_snapshots (agent_uuid, seq, step, run_id, run_step, changes)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (agent_uuid, int(row[0]) + 1 if row is not None else 1, step, run_id, run_step, data),
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return step
        except sqlite3.Error as exc:
            raise _failure(f"cannot record a snapshot of agent {agent_uuid} in {self.path}", exc) from None
        finally:
            conn.close()

    async def snapshots(self, agent_uuid: str, after_step: int) -> list[tuple[int, bytes]]:
        """See ``snapshots.SnapshotStore.snapshots``."""
        return await _off_loop(self.path, self._snapshots, agent_uuid, after_step)

    def _snapshots(self, agent_uuid: str, after_step: int) -> list[tuple[int, bytes]]:
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT step, changes FROM file_snapshots WHERE agent_uuid = ? AND step > ? ORDER BY seq",
                (agent_uuid, after_step),
            ).fetchall()
        finally:
            conn.close()
        return [(int(r[0]), bytes(r[1])) for r in rows]

    async def drop_snapshots(self, agent_uuid: str, after_step: int) -> None:
        """See ``snapshots.SnapshotStore.drop_snapshots``."""
        await _off_loop(self.path, self._drop_snapshots, agent_uuid, after_step)

    def _drop_snapshots(self, agent_uuid: str, after_step: int) -> None:
        conn = self._connect()
        try:
            conn.execute("DELETE FROM file_snapshots WHERE agent_uuid = ? AND step > ?", (agent_uuid, after_step))
        except sqlite3.Error as exc:
            raise _failure(f"cannot drop the snapshots of agent {agent_uuid} in {self.path}", exc) from None
        finally:
            conn.close()

    # ------------------------------------------------------------- streaming input (spec [IN1-a])

    def inbox_put(self, run_id: str, text: str, *, bounds: InboxBounds | None = None) -> InboxReceipt:
        """See ``sessions.InboxStore.inbox_put``: one ``BEGIN IMMEDIATE`` checks the run and its bounds, and inserts."""
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                row = conn.execute(
                    "SELECT r.agent_uuid, r.last_seq, r.taken, a.status FROM inbox_runs r"
                    " LEFT JOIN agents a ON a.agent_uuid = r.agent_uuid WHERE r.run_id = ? AND r.open = 1",
                    (run_id,),
                ).fetchone()
                if row is None or row[3] != "running":
                    raise StateError(_not_accepting(run_id))
                agent_uuid, seq = str(row[0]), int(row[1]) + 1
                if bounds is not None:  # spec server [IB1-d]: in the transaction that queues
                    count, size = conn.execute(
                        "SELECT count(*), coalesce(sum(length(CAST(text AS BLOB))), 0) FROM inbox"
                        " WHERE agent_uuid = ? AND seq > ?",
                        (agent_uuid, int(row[2])),
                    ).fetchone()
                    bounds.check(int(count), int(size), text, run_id)
                conn.execute("UPDATE inbox_runs SET last_seq = ? WHERE agent_uuid = ?", (seq, agent_uuid))
                conn.execute(
                    "INSERT INTO inbox (agent_uuid, seq, run_id, text, accepted_at) VALUES (?, ?, ?, ?, ?)",
                    (agent_uuid, seq, run_id, text, time.time()),
                )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return InboxReceipt(agent_uuid, seq, seq - int(row[2]))
        except sqlite3.Error as exc:
            raise _failure(f"cannot queue a message for run {run_id} in {self.path}", exc) from None
        finally:
            conn.close()

    async def inbox_open(self, agent_uuid: str, run_id: str, delivered: int) -> None:
        """See ``sessions.InboxStore.inbox_open``."""
        await _off_loop(
            self.path,
            self._inbox_write,
            f"open the inbox of agent {agent_uuid}",
            [
                (
                    "INSERT INTO inbox_runs (agent_uuid, run_id, open, last_seq, taken) VALUES (?, ?, 1, ?, ?)"
                    " ON CONFLICT (agent_uuid) DO UPDATE SET run_id = excluded.run_id, open = 1,"
                    " last_seq = max(last_seq, excluded.last_seq), taken = excluded.taken",
                    (agent_uuid, run_id, delivered, delivered),
                ),
                ("DELETE FROM inbox WHERE agent_uuid = ? AND seq <= ?", (agent_uuid, delivered)),
            ],
        )

    async def inbox_take(self, agent_uuid: str, after: int) -> list[tuple[int, str]]:
        """See ``sessions.InboxStore.inbox_take``."""
        return await _off_loop(self.path, self._inbox_take, agent_uuid, after)

    def _inbox_take(self, agent_uuid: str, after: int) -> list[tuple[int, str]]:
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT seq, text FROM inbox WHERE agent_uuid = ? AND seq > ? ORDER BY seq", (agent_uuid, after)
            ).fetchall()
            if rows:
                conn.execute(
                    "UPDATE inbox_runs SET taken = max(taken, ?) WHERE agent_uuid = ?", (int(rows[-1][0]), agent_uuid)
                )
        except sqlite3.Error as exc:
            raise _failure(f"cannot read the inbox of agent {agent_uuid} in {self.path}", exc) from None
        finally:
            conn.close()
        return [(int(r[0]), str(r[1])) for r in rows]

    async def inbox_close(self, agent_uuid: str, run_id: str, after: int, *, if_empty: bool) -> bool:
        """See ``sessions.InboxStore.inbox_close``: the check and the close in one ``BEGIN IMMEDIATE``."""
        return await _off_loop(self.path, self._inbox_close, agent_uuid, run_id, after, if_empty)

    def _inbox_close(self, agent_uuid: str, run_id: str, after: int, if_empty: bool) -> bool:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            waiting = (
                if_empty
                and conn.execute(
                    "SELECT 1 FROM inbox WHERE agent_uuid = ? AND seq > ? LIMIT 1", (agent_uuid, after)
                ).fetchone()
            )
            if not waiting:
                conn.execute("UPDATE inbox_runs SET open = 0 WHERE agent_uuid = ? AND run_id = ?", (agent_uuid, run_id))
            conn.execute("COMMIT")
            return not waiting
        except sqlite3.Error as exc:
            raise _failure(f"cannot close the inbox of agent {agent_uuid} in {self.path}", exc) from None
        finally:
            conn.close()

    async def snapshot_points(self, agent_uuid: str) -> list[tuple[int, str, int]]:
        """The agent's snapshot records as ``(step, run id, step of the run)``, in the order recorded ([IN4-a])."""
        return await _off_loop(self.path, self._snapshot_points, agent_uuid)

    def _snapshot_points(self, agent_uuid: str) -> list[tuple[int, str, int]]:
        conn = self._connect()
        try:
            rows = conn.execute(
                "SELECT step, run_id, run_step FROM file_snapshots WHERE agent_uuid = ? ORDER BY seq", (agent_uuid,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise _failure(f"cannot read the snapshots of agent {agent_uuid} in {self.path}", exc) from None
        finally:
            conn.close()
        return [(int(r[0]), str(r[1]), int(r[2])) for r in rows]

    def _inbox_write(self, doing: str, statements: list[tuple[str, tuple[object, ...]]]) -> None:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            for sql, params in statements:
                conn.execute(sql, params)
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _failure(f"cannot {doing} in {self.path}", exc) from None
        finally:
            conn.close()


_P = ParamSpec("_P")
_T = TypeVar("_T")

#: What a client reads when the SQLite file cannot be written or read now (spec server [S3.4-b]).
_PUBLIC_STORAGE: Final = "the server's storage cannot be used now (full, read-only or failing)"
#: ... when another writer holds the database for longer than the store waits.
_PUBLIC_BUSY: Final = "the server's database is busy"

#: SQLite's primary result codes of a storage that may come back (disk full, read-only
#: mount, I/O error, a file that cannot be opened, a lock held too long, out of memory).
_TRANSIENT: Final = frozenset(
    {
        "SQLITE_FULL",
        "SQLITE_IOERR",
        "SQLITE_READONLY",
        "SQLITE_CANTOPEN",
        "SQLITE_BUSY",
        "SQLITE_LOCKED",
        "SQLITE_NOMEM",
        "SQLITE_PROTOCOL",
        "SQLITE_NOLFS",
    }
)


def _add_principals(conn: sqlite3.Connection, columns: set[str]) -> None:
    """The columns of who created each agent and run (spec server [OW1-a]; PostgreSQL: migration 0004)."""
    # A new file has them from _SCHEMA; an older one gets them here. Two stores opening one older
    # file together may both try: the second's "duplicate column" is the first's success.
    if "principal" not in columns:
        _add_column(conn, "ALTER TABLE agents ADD COLUMN principal TEXT")
    if "principal" not in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}:
        _add_column(conn, "ALTER TABLE runs ADD COLUMN principal TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS agents_by_principal ON agents (principal, updated_at)")


def _add_column(conn: sqlite3.Connection, statement: str) -> None:
    try:
        conn.execute(statement)
    except sqlite3.OperationalError as exc:
        if "duplicate column" not in str(exc):
            raise


def _failure(message: str, exc: sqlite3.Error) -> StoreError:
    """The store error of a failed SQLite call (spec server [S3.4-b]): its text for the log, a public one for clients.

    ``str()`` keeps the detail (the file's path, SQLite's words) for the log and the
    command line; ``public`` names no path. A storage that may come back (full, read-only,
    I/O, busy) is ``UnavailableError`` (a server's ``503`` with ``Retry-After: 1``); any
    other SQLite failure (a corrupt file) is a ``StoreError`` (``503`` too, it may be
    repaired, spec server §3.4-a), never a ``409`` that reads like the agent's state.
    """
    name = getattr(exc, "sqlite_errorname", "") or ""
    primary = "_".join(name.split("_")[:2])  # SQLITE_IOERR_WRITE -> SQLITE_IOERR
    text = f"{message}: {exc}"
    words = str(exc).lower()
    if primary in _TRANSIENT or (not name and any(w in words for w in ("full", "readonly", "disk i/o", "locked"))):
        public = _PUBLIC_BUSY if primary in ("SQLITE_BUSY", "SQLITE_LOCKED") else _PUBLIC_STORAGE
        return UnavailableError(text, retry_after=1, public=public)
    return StoreError(text)


async def _off_loop(path: Path, call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """``call`` in a worker thread; a SQLite error no step caught becomes a store error ([S3.4-b])."""
    try:
        return await asyncio.to_thread(call, *args, **kwargs)
    except sqlite3.Error as exc:
        raise _failure(f"the agent database {path} failed", exc) from None


def _not_accepting(run_id: str) -> str:
    """Why a store's inbox refused a message (spec [SE2.3-a], [IN1-b])."""
    return (
        f"no run is working to take the message: run {run_id} has ended, is paused, is past its last step, "
        "or is not known"
    )
