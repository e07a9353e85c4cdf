"""PostgreSQL for a deployment of several server processes: ``PostgresStore`` and ``PostgresJournal``.

Owns: the ``Store`` protocol (``store.py``) and the server's ``Journal`` protocol
(``server_streams.py``) on one PostgreSQL database, the schema migrations that database
gets on first use (``migrations/``), and a cross-process follower of a journaled
response (``PostgresJournal.follow``). Semantics are those of ``SQLiteStore`` and
``FileJournal``; what sharing adds is in ``spec/scaleout.md``.
Does not own: what a state means (``state.py``, ``agent.py``), HTTP (``server.py``),
choosing a store from a URL on the command line (``cli.py``, ``server.py``).

Why psycopg 3 (``psycopg[binary,pool]``): it has both an async API (the store, whose
protocol is async) and a sync one (the journal, whose protocol is sync because
``LiveStream.append`` is), one driver and one set of errors for both, LISTEN/NOTIFY on
either, and a maintained pool. asyncpg is async only, so the journal would have needed a
second driver.

Concurrency (spec scaleout §1.2-a): ``save`` takes the agent's row with
``SELECT ... FOR UPDATE`` and compares versions inside that transaction, so of two
processes that loaded the same version exactly one commits; the other gets
``ConflictError`` and wrote nothing. A new agent is inserted ``ON CONFLICT DO NOTHING``:
a racing creator sees zero rows inserted and conflicts too.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Final

import msgspec
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from .errors import ConflictError, StateError
from .migrations import migrations
from .state import AgentState, RunRecord, decode_state, encode_state
from .store import AgentSummary, LogBatch, _conflict, _group, _summary

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = [
    "JournalGapError",
    "PostgresJournal",
    "PostgresStore",
    "is_postgres_url",
    "migrate",
]

#: The terminator as the journal stores it.
_DONE: Final = b"[DONE]"
#: Key of the advisory lock that serialises migrations across processes starting together.
_MIGRATION_LOCK: Final = 0x656E7631
#: The NOTIFY channel on which the journal announces each appended line (a wake-up hint only).
CHANNEL: Final = "envelope_journal"


def is_postgres_url(text: str) -> bool:
    """Whether ``--db`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return text.startswith(("postgresql://", "postgres://"))


def _where(url: str) -> str:
    """The database a URL names, for error messages: host, port and name, never a password."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return "the PostgreSQL database (unparsable URL)"
    return f"PostgreSQL {info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


_CREATE_MIGRATIONS: Final = (
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
)


def migrate(conn: psycopg.Connection[tuple[object, ...]]) -> list[int]:
    """Apply the migrations ``conn``'s database has not recorded, in order, in one transaction.

    An advisory lock makes processes that start together apply them once (spec scaleout §1.1-a).

    Args:
        conn: an open connection (autocommit or not; the work runs in its own transaction).

    Returns:
        The versions applied now (empty when the schema was current).

    Raises:
        StateError: the database records a version this code does not know (it is newer).
    """
    known = migrations()
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        conn.execute(_CREATE_MIGRATIONS)
        done = {int(str(row[0])) for row in conn.execute("SELECT version FROM schema_migrations").fetchall()}
        newest = max((v for v, _, _ in known), default=0)
        if done and max(done) > newest:
            # spec scaleout §1.1-b: never run old code on a schema it does not know.
            raise StateError(
                f"the database's schema is at version {max(done)}, newer than this code's {newest}; upgrade agent-ref"
            )
        for version, name, sql in known:
            if version in done:
                continue
            conn.execute(sql.encode())  # several statements, no parameters: one simple query
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
            applied_now.append(version)
    return applied_now


class PostgresStore:
    """A ``Store`` in PostgreSQL, shared by any number of processes (spec scaleout §1).

    The pool opens on first use, in the running event loop, and applies the migrations
    then. Use one store from one event loop; ``aclose()`` closes its connections.

    Args:
        url: ``postgresql://user@host:port/db`` (libpq URL; ``?options=-csearch_path%3Ds``
            puts the tables in schema ``s``).
        max_size: connections in the pool.
        timeout: seconds to wait for a connection.
    """

    def __init__(self, url: str, *, max_size: int = 8, timeout: float = 10.0) -> None:
        """See the class docstring; nothing is opened yet."""
        self.url = url
        self.max_size = max_size
        self.timeout = timeout
        self._pool: AsyncConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _open(self) -> AsyncConnectionPool:
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is loop:
            return self._pool
        try:
            await asyncio.to_thread(self._migrate)
            pool = AsyncConnectionPool(self.url, min_size=1, max_size=self.max_size, timeout=self.timeout, open=False)
            await pool.open(wait=True, timeout=self.timeout)
        except psycopg.Error as exc:
            raise StateError(f"cannot open {_where(self.url)}: {exc}") from None
        except Exception as exc:  # psycopg_pool.PoolTimeout is not a psycopg.Error
            raise StateError(f"cannot open {_where(self.url)}: {type(exc).__name__}: {exc}") from None
        self._pool, self._loop = pool, loop
        return pool

    def _migrate(self) -> None:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=int(self.timeout)) as conn:
            migrate(conn)

    async def aclose(self) -> None:
        """Close the pool (a later call opens a new one)."""
        pool, self._pool, self._loop = self._pool, None, None
        if pool is not None:
            await pool.close()

    async def load(self, agent_uuid: str) -> AgentState | None:
        """See ``Store.load``."""
        pool = await self._open()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(
                    "SELECT state, version, lease_expires_at FROM agents WHERE agent_uuid = %s", (agent_uuid,)
                )
                row = await cur.fetchone()
        except psycopg.Error as exc:
            raise StateError(f"cannot load agent {agent_uuid} from {_where(self.url)}: {exc}") from None
        if row is None:
            return None
        state = decode_state(bytes(row[0]))
        state.version = int(row[1])
        state.lease_expires_at = float(row[2])  # renewed in its column, not in the blob
        return state

    async def save(self, state: AgentState, *, log: LogBatch | None = None, run: RunRecord | None = None) -> None:
        """See ``Store.save`` (spec scaleout §1.2-a: row lock, then the version compare)."""
        pool = await self._open()
        new_version = state.version + 1
        try:
            async with pool.connection() as conn, conn.transaction():
                cur = await conn.execute(
                    "SELECT version FROM agents WHERE agent_uuid = %s FOR UPDATE", (state.agent_uuid,)
                )
                row = await cur.fetchone()
                stored = int(row[0]) if row is not None else 0
                if stored != state.version:
                    raise ConflictError(_conflict(state, stored))
                blob = encode_state(msgspec.structs.replace(state, version=new_version))
                values = (new_version, state.status, blob, time.time(), state.lease_owner, state.lease_expires_at)
                if row is None:
                    cur = await conn.execute(
                        "INSERT INTO agents (version, status, state, updated_at, lease_owner, lease_expires_at,"
                        " agent_uuid) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (agent_uuid) DO NOTHING",
                        (*values, state.agent_uuid),
                    )
                    if cur.rowcount != 1:  # another process created it since our SELECT
                        raise ConflictError(
                            f"agent {state.agent_uuid} was created by another process meanwhile; nothing was written"
                        )
                else:
                    await conn.execute(
                        "UPDATE agents SET version = %s, status = %s, state = %s, updated_at = %s, lease_owner = %s,"
                        " lease_expires_at = %s WHERE agent_uuid = %s",
                        (*values, state.agent_uuid),
                    )
                if log is not None and log.lines:
                    async with conn.cursor() as many:
                        await many.executemany(
                            "INSERT INTO envelope_log (run_id, response, seq, line) VALUES (%s, %s, %s, %s)",
                            [(log.run_id, log.response, log.start + i, line) for i, line in enumerate(log.lines)],
                        )
                if run is not None:
                    await conn.execute(
                        "INSERT INTO runs (run_id, agent_uuid, finished_at, stop_reason, record)"
                        " VALUES (%s, %s, %s, %s, %s)",
                        (run.run_id, run.agent_uuid, run.finished_at, run.stop_reason, msgspec.json.encode(run)),
                    )
        except psycopg.Error as exc:
            raise StateError(f"cannot save agent {state.agent_uuid} to {_where(self.url)}: {exc}") from None
        state.version = new_version

    async def _rows(self, what: str, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        pool = await self._open()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(sql.encode(), params)
                return list(await cur.fetchall())
        except psycopg.Error as exc:
            raise StateError(f"cannot read {what} from {_where(self.url)}: {exc}") from None

    async def run_log(self, run_id: str) -> list[bytes]:
        """See ``Store.run_log``."""
        rows = await self._rows(
            f"the log of run {run_id}",
            "SELECT line FROM envelope_log WHERE run_id = %s ORDER BY response, seq",
            (run_id,),
        )
        return [bytes(r[0]) for r in rows]  # type: ignore[call-overload]  # BYTEA comes back as bytes

    async def run_responses(self, run_id: str) -> list[list[bytes]]:
        """See ``Store.run_responses``."""
        rows = await self._rows(
            f"the log of run {run_id}",
            "SELECT response, seq, line FROM envelope_log WHERE run_id = %s ORDER BY response, seq",
            (run_id,),
        )
        return _group([(int(str(r[0])), int(str(r[1])), bytes(r[2])) for r in rows])  # type: ignore[call-overload]  # BYTEA

    async def renew_lease(self, agent_uuid: str, owner: str, expires_at: float) -> bool:
        """See ``Store.renew_lease``."""
        pool = await self._open()
        try:
            async with pool.connection() as conn:
                cur = await conn.execute(
                    "UPDATE agents SET lease_expires_at = %s WHERE agent_uuid = %s AND status = 'running'"
                    " AND lease_owner = %s",
                    (expires_at, agent_uuid, owner),
                )
                return cur.rowcount == 1
        except psycopg.Error as exc:
            raise StateError(f"cannot renew the lease of agent {agent_uuid} in {_where(self.url)}: {exc}") from None

    async def agents(self) -> list[AgentSummary]:
        """See ``Store.agents``."""
        rows = await self._rows(
            "the agents", "SELECT state, lease_expires_at, updated_at FROM agents ORDER BY updated_at DESC", ()
        )
        out = []
        for blob, expires, updated in rows:
            state = decode_state(bytes(blob))  # type: ignore[call-overload]  # BYTEA
            state.lease_expires_at = float(str(expires))
            out.append(_summary(state, float(str(updated))))
        return out

    async def runs(self, agent_uuid: str) -> list[RunRecord]:
        """See ``Store.runs``."""
        rows = await self._rows(
            f"the runs of agent {agent_uuid}",
            "SELECT record FROM runs WHERE agent_uuid = %s ORDER BY finished_at, position",
            (agent_uuid,),
        )
        return [msgspec.json.decode(bytes(r[0]), type=RunRecord) for r in rows]  # type: ignore[call-overload]  # BYTEA


async def _writer_alive(conn: psycopg.AsyncConnection[tuple[object, ...]], run_id: str, response: int) -> bool:
    """Whether some session holds the writer lock of a response (read from ``pg_locks``, taking nothing)."""
    cur = await conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND classid = ((hashtext(%s)::bigint + 4294967296) %% 4294967296)::oid"
        " AND objid = %s::bigint::oid AND objsubid = 2",
        (run_id, response),
    )
    row = await cur.fetchone()
    return row is not None and int(str(row[0])) > 0


class JournalGapError(StateError):
    """A follower found a line missing or repeated in a journaled response (never expected; a bug)."""


class PostgresJournal:
    """The server's ``Journal`` in PostgreSQL: every process sees every process's lines (spec scaleout §2).

    One autocommit connection writes; each ``append`` is one round trip that inserts the
    line at the next ``seq`` of its response and sends a NOTIFY naming it, so the line is
    durable (committed) before the server sends it (spec server §3.1-a). The first append
    of a response takes a session advisory lock on it, released after ``[DONE]``: the
    lock says "a live process writes this response", so ``unfinished()`` on a starting
    process returns only responses whose writer is gone (its connection closed; spec
    scaleout §2.2-a) and never closes a response another live process is writing.

    The protocol is synchronous (``LiveStream.append`` is), so ``append`` blocks the event
    loop for one loopback round trip; ``follow`` is async and uses its own connection.

    Args:
        url: the database (the same one as the store's, or another).
        poll_seconds: the longest a follower waits before it reads the table again
            without a notification (notifications are hints; the table is the truth).
        listen: wake followers by LISTEN/NOTIFY; ``False`` polls every ``poll_seconds``.
    """

    def __init__(self, url: str, *, poll_seconds: float = 0.5, listen: bool = True) -> None:
        """Connect and apply the migrations."""
        self.url = url
        self.poll_seconds = poll_seconds
        self.listen = listen
        self._lock = threading.Lock()
        self._next: dict[tuple[str, int], int] = {}
        try:
            self._conn = psycopg.connect(url, autocommit=True)
            migrate(self._conn)
        except psycopg.Error as exc:
            raise StateError(f"cannot open the journal in {_where(url)}: {exc}") from None

    def _hold(self, run_id: str, response: int, *, wait: bool) -> bool:
        """Take the writer lock of a response; with ``wait=False``, only if it is free."""
        verb = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
        row = self._conn.execute(f"SELECT {verb}(hashtext(%s), %s)::text", (run_id, response)).fetchone()
        return wait or (row is not None and row[0] == "true")

    def _next_seq(self, run_id: str, response: int) -> int:
        row = self._conn.execute(
            "SELECT coalesce(max(seq) + 1, 0) FROM stream_journal WHERE run_id = %s AND response = %s",
            (run_id, response),
        ).fetchone()
        return int(str(row[0])) if row is not None else 0

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """See ``Journal.append``: committed before it returns; the response's lock is released after ``[DONE]``."""
        key = (run_id, response)
        with self._lock:
            try:
                seq = self._next.get(key)
                if seq is None:  # the first line this process writes there (a new response, or a recovery)
                    self._hold(run_id, response, wait=True)
                    seq = self._next_seq(run_id, response)
                self._conn.execute(
                    "WITH added AS (INSERT INTO stream_journal (run_id, response, seq, line)"
                    " VALUES (%s, %s, %s, %s)) SELECT pg_notify(%s, %s)",
                    (run_id, response, seq, line, CHANNEL, f"{run_id}:{response}:{seq}"),
                )
                self._next[key] = seq + 1
                if line == _DONE:
                    del self._next[key]
                    self._conn.execute("SELECT pg_advisory_unlock(hashtext(%s), %s)", (run_id, response))
            except psycopg.Error as exc:
                raise StateError(f"cannot journal a line of run {run_id} in {_where(self.url)}: {exc}") from None

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """See ``Journal.read``."""
        with self._lock:
            rows = self._conn.execute(
                "SELECT line FROM stream_journal WHERE run_id = %s AND response = %s ORDER BY seq",
                (run_id, response),
            ).fetchall()
        return [bytes(r[0]) for r in rows] if rows else None

    def responses(self, run_id: str) -> int:
        """See ``Journal.responses``."""
        with self._lock:
            row = self._conn.execute(
                "SELECT coalesce(max(response) + 1, 0) FROM stream_journal WHERE run_id = %s", (run_id,)
            ).fetchone()
        return int(str(row[0])) if row is not None else 0

    def unfinished(self) -> list[tuple[str, int]]:
        """See ``Journal.unfinished``: only responses no live process is writing (spec scaleout §2.2-a).

        A response returned here stays locked by this journal, so the caller's closing
        lines are appended by this process alone even if others start at the same time.
        """
        with self._lock:
            rows = self._conn.execute(
                "SELECT run_id, response FROM (SELECT DISTINCT ON (run_id, response) run_id, response, line"
                " FROM stream_journal ORDER BY run_id, response, seq DESC) AS last WHERE line <> %s",
                (_DONE,),
            ).fetchall()
            out: list[tuple[str, int]] = []
            for run_id, response in rows:
                key = (str(run_id), int(str(response)))
                if key in self._next or not self._hold(*key, wait=False):
                    continue  # written by this process, or by another live one
                self._next[key] = self._next_seq(*key)
                out.append(key)
        return out

    async def follow(self, run_id: str, response: int, after: int = -1) -> AsyncIterator[tuple[int, bytes]]:
        """Yield ``(seq, line)`` of a response for ``seq > after`` as any process writes them, up to ``[DONE]``.

        Reads the table, then waits for a NOTIFY naming this response (or ``poll_seconds``)
        and reads again from the next expected ``seq``. Lines are committed in ``seq`` order
        by their single writer, so each read returns a gap-free continuation.

        Stops without ``[DONE]`` when no process holds the response's writer lock and no
        line is left to read (its writer died; a process that starts later closes it).

        Raises:
            JournalGapError: a read skipped or repeated a ``seq`` (a broken invariant).
            StateError: the database failed.
        """
        expected = after + 1
        prefix = f"{run_id}:{response}:"
        try:
            async with await psycopg.AsyncConnection.connect(self.url, autocommit=True) as conn:
                if self.listen:
                    await conn.execute(f"LISTEN {CHANNEL}")
                while True:
                    cur = await conn.execute(
                        "SELECT seq, line FROM stream_journal WHERE run_id = %s AND response = %s AND seq >= %s"
                        " ORDER BY seq",
                        (run_id, response, expected),
                    )
                    for seq, line in await cur.fetchall():
                        if seq != expected:
                            raise JournalGapError(
                                f"journal of run {run_id} response {response}: expected line {expected}, read {seq}"
                            )
                        expected += 1
                        yield seq, bytes(line)
                        if line == _DONE:
                            return
                    if not await _writer_alive(conn, run_id, response):
                        # spec scaleout §2.1-b: nobody writes it (its process died before [DONE]):
                        # read once more (a last line may have landed), then stop rather than hang.
                        cur = await conn.execute(
                            "SELECT count(*) FROM stream_journal WHERE run_id = %s AND response = %s AND seq >= %s",
                            (run_id, response, expected),
                        )
                        row = await cur.fetchone()
                        if row is None or int(str(row[0])) == 0:
                            return
                        continue
                    if not self.listen:
                        await asyncio.sleep(self.poll_seconds)
                        continue
                    async for note in conn.notifies(timeout=self.poll_seconds):
                        if note.payload.startswith(prefix):
                            break
        except psycopg.Error as exc:
            raise StateError(f"cannot follow run {run_id} in {_where(self.url)}: {exc}") from None

    def close(self) -> None:
        """Close the writer connection (its response locks are released with it)."""
        with self._lock:
            self._next.clear()
            self._conn.close()
