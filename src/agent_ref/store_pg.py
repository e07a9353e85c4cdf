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
import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Final, TypeVar

import msgspec
import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from .errors import ConflictError, StateError, StoreError, UnavailableError
from .migrations import migrations
from .state import AgentState, RunRecord, decode_state, encode_state
from .store import AgentSummary, LogBatch, _conflict, _group, _summary

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from psycopg.rows import TupleRow

__all__ = [
    "JournalGapError",
    "JournalTakenOverError",
    "PostgresJournal",
    "PostgresStore",
    "is_postgres_url",
    "migrate",
]

log = logging.getLogger("agent_ref.store_pg")

_T = TypeVar("_T")

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

    The database may go away and come back at any time (spec scaleout §1.4-a). Each
    connection is checked as it leaves the pool (``AsyncConnectionPool.check_connection``,
    an empty query), so a restart between two requests costs nothing. A connection that
    fails marks the store *down*: every operation then first tries one new connection
    (bounded by ``connect_timeout``; concurrent callers share that one try), fails at once
    with ``UnavailableError`` while the database is unreachable, and on success replaces
    the pool with a fresh one (the old pool's own reconnection backs off for seconds).
    Failures are ``StoreError`` / ``UnavailableError``: their text names the database for
    the log; their ``public`` text names nothing.

    Args:
        url: ``postgresql://user@host:port/db`` (libpq URL; ``?options=-csearch_path%3Ds``
            puts the tables in schema ``s``).
        max_size: connections in the pool.
        timeout: seconds to wait for a free connection of the pool.
        connect_timeout: seconds a new connection may take (at least 2, libpq's floor).
    """

    def __init__(self, url: str, *, max_size: int = 8, timeout: float = 10.0, connect_timeout: float = 3.0) -> None:
        """See the class docstring; nothing is opened yet."""
        self.url = url
        self.max_size = max_size
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._pool: AsyncConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._migrated = False
        self._down = False
        self._failures = 0
        self._tried_at = 0.0
        self._gate: asyncio.Lock | None = None

    def _new_pool(self) -> AsyncConnectionPool:
        return AsyncConnectionPool(
            self.url,
            min_size=1,
            max_size=self.max_size,
            timeout=self.timeout,
            kwargs={"autocommit": True, "connect_timeout": max(2, int(self.connect_timeout))},
            open=False,
        )

    async def _open(self) -> AsyncConnectionPool:
        """The pool of the running loop: opened (and the schema migrated) on first use, renewed after an outage."""
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is loop and not self._down:
            return self._pool
        if self._gate is None or self._loop is not loop:
            self._gate, self._loop, self._pool, self._down = asyncio.Lock(), loop, None, False
        asked = time.monotonic()
        async with self._gate:
            if self._pool is not None and not self._down:
                return self._pool  # another caller reopened it while this one waited
            if self._down and self._tried_at > asked:
                raise self._unavailable("reach the database", "it did not answer a moment ago")
            self._tried_at = time.monotonic()
            pool = self._new_pool()
            try:
                if not self._migrated:
                    await asyncio.to_thread(self._migrate)
                    self._migrated = True
                else:  # one connection first: a database that refuses it answers at once, not after a pool's wait
                    probe = await psycopg.AsyncConnection.connect(
                        self.url, autocommit=True, connect_timeout=max(2, int(self.connect_timeout))
                    )
                    await probe.close()
                await pool.open(wait=True, timeout=self.connect_timeout + 1)
            except psycopg.Error as exc:  # PoolTimeout is an OperationalError too
                await pool.close(timeout=1)
                raise self._failure("open the database", exc) from None
            old, self._pool = self._pool, pool
            if self._down:
                log.warning("%s answers again; a new pool replaces the old one", _where(self.url))
            self._down, self._failures = False, 0
        if old is not None:
            await old.close(timeout=1)
        return pool

    def _migrate(self) -> None:
        with psycopg.connect(self.url, autocommit=True, connect_timeout=max(2, int(self.connect_timeout))) as conn:
            migrate(conn)

    def _unavailable(self, doing: str, why: object) -> UnavailableError:
        return UnavailableError(
            f"cannot {doing} in {_where(self.url)}: {why}", retry_after=min(2 ** max(0, self._failures - 1), 10)
        )

    def _failure(self, doing: str, exc: BaseException) -> StoreError:
        """The error to raise for a driver failure; a lost connection marks the store down."""
        if isinstance(exc, PoolTimeout):  # every connection busy for ``timeout`` s: not down, but try later
            return UnavailableError(
                f"cannot {doing} in {_where(self.url)}: no free connection in {self.timeout} s",
                retry_after=1,
                public="the server's database is busy",
            )
        if isinstance(exc, psycopg.OperationalError):
            if not self._down:
                log.warning("%s is unreachable (%s); every operation now tries it again first", _where(self.url), exc)
            self._down = True
            self._failures += 1
            return self._unavailable(doing, exc)
        return StoreError(f"cannot {doing} in {_where(self.url)}: {type(exc).__name__}: {exc}")

    @contextlib.asynccontextmanager
    async def _connection(self, doing: str) -> AsyncIterator[psycopg.AsyncConnection[TupleRow]]:
        """A checked connection of the pool (autocommit), returned afterwards; driver errors become ``StoreError``."""
        pool, conn = await self._checked(doing)
        try:
            yield conn
        except psycopg.Error as exc:
            raise self._failure(doing, exc) from None
        finally:
            await pool.putconn(conn)

    async def _checked(self, doing: str) -> tuple[AsyncConnectionPool, psycopg.AsyncConnection[TupleRow]]:
        """A connection that just answered an empty query; a dead one renews the pool once (spec scaleout §1.4-a).

        The check is ``AsyncConnectionPool.check_connection``, called here rather than
        given as the pool's ``check=``: on a failed check the pool waits its whole
        ``timeout`` for a replacement, while the database may be down; here a failed check
        goes through ``_open``, which tries one new connection and answers at once.
        """
        pool = await self._open()
        try:
            conn = await pool.getconn()
        except psycopg.Error as exc:
            raise self._failure(doing, exc) from None
        try:
            await AsyncConnectionPool.check_connection(conn)
        except psycopg.Error as exc:
            await pool.putconn(conn)  # a broken connection is discarded, not kept
            self._failure(doing, exc)  # marks the store down: _open tries a new connection first
            pool = await self._open()
            try:
                conn = await pool.getconn()
            except psycopg.Error as again:
                raise self._failure(doing, again) from None
        return pool, conn

    async def aclose(self) -> None:
        """Close the pool (a later call opens a new one)."""
        pool, self._pool, self._loop = self._pool, None, None
        if pool is not None:
            await pool.close()

    async def load(self, agent_uuid: str) -> AgentState | None:
        """See ``Store.load``."""
        async with self._connection(f"load agent {agent_uuid}") as conn:
            cur = await conn.execute(
                "SELECT state, version, lease_expires_at FROM agents WHERE agent_uuid = %s", (agent_uuid,)
            )
            row = await cur.fetchone()
        if row is None:
            return None
        state = decode_state(bytes(row[0]))
        state.version = int(row[1])
        state.lease_expires_at = float(row[2])  # renewed in its column, not in the blob
        return state

    async def save(self, state: AgentState, *, log: LogBatch | None = None, run: RunRecord | None = None) -> None:
        """See ``Store.save`` (spec scaleout §1.2-a: row lock, then the version compare)."""
        new_version = state.version + 1
        async with self._connection(f"save agent {state.agent_uuid}") as conn, conn.transaction():
            cur = await conn.execute("SELECT version FROM agents WHERE agent_uuid = %s FOR UPDATE", (state.agent_uuid,))
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
        state.version = new_version

    async def _rows(self, what: str, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        async with self._connection(f"read {what}") as conn:
            cur = await conn.execute(sql.encode(), params)
            return list(await cur.fetchall())

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
        async with self._connection(f"renew the lease of agent {agent_uuid}") as conn:
            cur = await conn.execute(
                "UPDATE agents SET lease_expires_at = %s WHERE agent_uuid = %s AND status = 'running'"
                " AND lease_owner = %s",
                (expires_at, agent_uuid, owner),
            )
            return cur.rowcount == 1

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


class JournalTakenOverError(StoreError):
    """A response this process was writing was closed by another process while its connection was lost."""


class PostgresJournal:
    """The server's ``Journal`` in PostgreSQL: every process sees every process's lines (spec scaleout §2).

    One autocommit connection writes; each ``append`` is one round trip that inserts the
    line at the next ``seq`` of its response and sends a NOTIFY naming it, so the line is
    durable (committed) before the server sends it (spec server §3.1-a). The first append
    of a response takes a session advisory lock on it, released after ``[DONE]``: the
    lock says "a live process writes this response", so ``unfinished()`` on a starting
    process returns only responses whose writer is gone (its connection closed; spec
    scaleout §2.2-a) and never closes a response another live process is writing.

    The writer connection is replaced when it dies (spec scaleout §2.3-a): the next call
    opens a new one (``connect_timeout``), and an append cut by the failure is tried once
    more on it. The locks died with the old session, so each response this process was
    writing takes its lock again before its next line, and checks that nobody wrote to it
    meanwhile (``JournalTakenOverError`` otherwise). While the database cannot be reached,
    calls fail with ``UnavailableError``; a failed connection attempt is not repeated for
    four times as long as it took, so a database that times out connections blocks the
    event loop at most a fifth of the time.

    The protocol is synchronous (``LiveStream.append`` is), so ``append`` blocks the event
    loop for one loopback round trip; ``follow`` is async and uses its own connection.

    Args:
        url: the database (the same one as the store's, or another).
        poll_seconds: the longest a follower waits before it reads the table again
            without a notification (notifications are hints; the table is the truth).
        listen: wake followers by LISTEN/NOTIFY; ``False`` polls every ``poll_seconds``.
        connect_timeout: seconds a new connection may take (at least 2, libpq's floor).
    """

    def __init__(
        self, url: str, *, poll_seconds: float = 0.5, listen: bool = True, connect_timeout: float = 3.0
    ) -> None:
        """Connect and apply the migrations."""
        self.url = url
        self.poll_seconds = poll_seconds
        self.listen = listen
        self.connect_timeout = max(2, int(connect_timeout))
        self._lock = threading.Lock()
        self._next: dict[tuple[str, int], int] = {}
        self._held: set[tuple[str, int]] = set()
        self._quiet_until = 0.0
        try:
            self._conn: psycopg.Connection[TupleRow] | None = psycopg.connect(
                url, autocommit=True, connect_timeout=self.connect_timeout
            )
            migrate(self._conn)
        except psycopg.Error as exc:
            raise StateError(f"cannot open the journal in {_where(url)}: {exc}") from None

    def _connection(self) -> psycopg.Connection[TupleRow]:
        """The writer connection; a new one if the last one died (caller holds ``_lock``)."""
        conn = self._conn
        if conn is not None and not conn.closed and not conn.broken:
            return conn
        if conn is not None:
            conn.close()
            self._conn = None
            self._held.clear()  # the session's advisory locks ended with it
        now = time.monotonic()
        if now < self._quiet_until:
            raise UnavailableError(f"cannot reach {_where(self.url)}: its last connection attempt failed just now")
        try:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=self.connect_timeout)
        except psycopg.Error as exc:
            self._quiet_until = time.monotonic() + 4 * (time.monotonic() - now)
            raise UnavailableError(f"cannot reach {_where(self.url)}: {exc}") from None
        log.warning("journal: a new connection to %s replaces the lost one", _where(self.url))
        return self._conn

    def _run(self, doing: str, work: Callable[[psycopg.Connection[TupleRow]], _T]) -> _T:
        """``work(connection)`` under the lock, tried once more on a new connection if the first one was lost."""
        with self._lock:
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    return work(conn)
                except psycopg.OperationalError as exc:
                    if attempt == 1 and (conn.closed or conn.broken):
                        log.warning("journal: lost the connection to %s (%s); trying again", _where(self.url), exc)
                        continue
                    raise UnavailableError(f"cannot {doing} in {_where(self.url)}: {exc}") from None
                except psycopg.Error as exc:
                    raise StoreError(f"cannot {doing} in {_where(self.url)}: {type(exc).__name__}: {exc}") from None
            raise AssertionError("unreachable")  # pragma: no cover

    def _hold(self, conn: psycopg.Connection[TupleRow], run_id: str, response: int, *, wait: bool) -> bool:
        """Take the writer lock of a response; with ``wait=False``, only if it is free."""
        verb = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
        row = conn.execute(f"SELECT {verb}(hashtext(%s), %s)::text", (run_id, response)).fetchone()
        taken = wait or (row is not None and row[0] == "true")
        if taken:
            self._held.add((run_id, response))
        return taken

    def _let_go(self, conn: psycopg.Connection[TupleRow], run_id: str, response: int) -> None:
        key = (run_id, response)
        self._next.pop(key, None)
        if key in self._held:
            self._held.discard(key)
            conn.execute("SELECT pg_advisory_unlock(hashtext(%s), %s)", (run_id, response))

    @staticmethod
    def _tail(conn: psycopg.Connection[TupleRow], run_id: str, response: int) -> tuple[int, bytes | None]:
        """The next free ``seq`` of a response and its last line (``None`` if it has none)."""
        row = conn.execute(
            "SELECT seq, line FROM stream_journal WHERE run_id = %s AND response = %s ORDER BY seq DESC LIMIT 1",
            (run_id, response),
        ).fetchone()
        return (0, None) if row is None else (int(row[0]) + 1, bytes(row[1]))

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """See ``Journal.append``: committed before it returns; the response's lock is released after ``[DONE]``.

        Raises:
            UnavailableError: the database cannot be reached (the line may not be journaled).
            JournalTakenOverError: another process closed the response while this one's
                connection was lost.
            StoreError: the database refused the line.
        """
        key = (run_id, response)

        def work(conn: psycopg.Connection[TupleRow]) -> None:
            seq = self._next.get(key)
            if seq is None:  # the first line this process writes there (a new response, or a recovery)
                self._hold(conn, run_id, response, wait=True)
                seq = self._tail(conn, run_id, response)[0]
            elif key not in self._held:  # a new connection: take the lock again, check nobody wrote meanwhile
                if not self._hold(conn, run_id, response, wait=False):
                    self._next.pop(key, None)
                    raise JournalTakenOverError(f"response {run_id}:{response} is being closed by another process")
                stored, last = self._tail(conn, run_id, response)
                if stored == seq + 1 and last == line:  # the lost connection had committed this very line
                    self._next[key] = seq + 1
                    if line == _DONE:
                        self._let_go(conn, run_id, response)
                    return
                if stored != seq:
                    self._let_go(conn, run_id, response)
                    raise JournalTakenOverError(
                        f"response {run_id}:{response} was written by another process (line {stored}, expected {seq})"
                    )
            conn.execute(
                "WITH added AS (INSERT INTO stream_journal (run_id, response, seq, line)"
                " VALUES (%s, %s, %s, %s)) SELECT pg_notify(%s, %s)",
                (run_id, response, seq, line, CHANNEL, f"{run_id}:{response}:{seq}"),
            )
            self._next[key] = seq + 1
            if line == _DONE:
                self._let_go(conn, run_id, response)

        self._run(f"journal a line of run {run_id}", work)

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """See ``Journal.read``."""
        rows = self._run(
            f"read the journal of run {run_id}",
            lambda conn: conn.execute(
                "SELECT line FROM stream_journal WHERE run_id = %s AND response = %s ORDER BY seq",
                (run_id, response),
            ).fetchall(),
        )
        return [bytes(r[0]) for r in rows] if rows else None

    def responses(self, run_id: str) -> int:
        """See ``Journal.responses``."""
        row = self._run(
            f"read the journal of run {run_id}",
            lambda conn: conn.execute(
                "SELECT coalesce(max(response) + 1, 0) FROM stream_journal WHERE run_id = %s", (run_id,)
            ).fetchone(),
        )
        return int(str(row[0])) if row is not None else 0

    def unfinished(self) -> list[tuple[str, int]]:
        """See ``Journal.unfinished``: only responses no live process is writing (spec scaleout §2.2-a).

        A response returned here stays locked by this journal, so the caller's closing
        lines are appended by this process alone even if others start at the same time.
        """

        def work(conn: psycopg.Connection[TupleRow]) -> list[tuple[str, int]]:
            rows = conn.execute(
                "SELECT run_id, response FROM (SELECT DISTINCT ON (run_id, response) run_id, response, line"
                " FROM stream_journal ORDER BY run_id, response, seq DESC) AS last WHERE line <> %s",
                (_DONE,),
            ).fetchall()
            out: list[tuple[str, int]] = []
            for run_id, response in rows:
                key = (str(run_id), int(str(response)))
                if key in self._next or not self._hold(conn, *key, wait=False):
                    continue  # written by this process, or by another live one
                self._next[key] = self._tail(conn, *key)[0]
                out.append(key)
            return out

        return self._run("list the unfinished responses", work)

    def claim(self, run_id: str, response: int) -> bool:
        """Become the writer of a response whose writer is gone, to close it (spec scaleout §2.2-b).

        Returns:
            ``True`` if this journal now holds the response's writer lock (the caller
            appends its closing lines, or calls ``release``); ``False`` if another live
            session holds it. The caller makes sure this process is not writing it.
        """
        key = (run_id, response)

        def work(conn: psycopg.Connection[TupleRow]) -> bool:
            if key not in self._held and not self._hold(conn, run_id, response, wait=False):
                return False
            self._next[key] = self._tail(conn, run_id, response)[0]  # what the table holds, not what was meant
            return True

        return self._run(f"claim response {run_id}:{response}", work)

    def release(self, run_id: str, response: int) -> None:
        """Give back a response taken by ``claim`` or ``unfinished`` without ending it."""
        self._run(f"release response {run_id}:{response}", lambda conn: self._let_go(conn, run_id, response))

    async def follow(self, run_id: str, response: int, after: int = -1) -> AsyncIterator[tuple[int, bytes]]:
        """Yield ``(seq, line)`` of a response for ``seq > after`` as any process writes them, up to ``[DONE]``.

        Reads the table, then waits for a NOTIFY naming this response (or ``poll_seconds``)
        and reads again from the next expected ``seq``. Lines are committed in ``seq`` order
        by their single writer, so each read returns a gap-free continuation.

        Stops without ``[DONE]`` when no process holds the response's writer lock and no
        line is left to read (its writer died; a process that starts later closes it).

        Raises:
            JournalGapError: a read skipped or repeated a ``seq`` (a broken invariant).
            UnavailableError: the database cannot be reached.
            StoreError: the database failed.
        """
        expected = after + 1
        prefix = f"{run_id}:{response}:"
        try:
            async with await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, connect_timeout=self.connect_timeout
            ) as conn:
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
        except psycopg.OperationalError as exc:
            raise UnavailableError(f"cannot follow run {run_id} in {_where(self.url)}: {exc}") from None
        except psycopg.Error as exc:
            raise StoreError(f"cannot follow run {run_id} in {_where(self.url)}: {exc}") from None

    def close(self) -> None:
        """Close the writer connection; its response locks are released before this returns.

        (A closed session's locks are released when its server process exits, a moment
        later; releasing them first makes ``close`` a clear point for the next claimer.)
        """
        with self._lock:
            self._next.clear()
            self._held.clear()
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    if not conn.closed and not conn.broken:
                        conn.execute("SELECT pg_advisory_unlock_all()")
                conn.close()
