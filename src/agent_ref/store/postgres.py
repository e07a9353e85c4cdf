"""PostgreSQL for a deployment of several server processes: ``PostgresStore``, and the journal on the same database.

Owns: the ``Store`` protocol (``store/core.py``) on one PostgreSQL database, and the schema
migrations that database gets on first use (``migrations/``, which create the journal's
table too). The journal itself, with its cross-process follower, is
``envelope.delivery.postgres.PostgresJournal`` (``spec/delivery.md`` §3.4); here it only
runs the agent's migrations first. Semantics are those of ``SQLiteStore``; what sharing
adds is in ``spec/scaleout.md``.
Does not own: what a state means (``store/state.py``, ``agent.py``), HTTP (``server/app.py``),
choosing a store from a URL on the command line (``cli/commands.py``, ``server/app.py``).

Why psycopg 3 (``psycopg[binary,pool]``): it has both an async API (the store, whose
protocol is async) and a sync one (the journal's, whose protocol is sync because
``LiveStream.append`` is), one driver and one set of errors for both, and a maintained
pool. asyncpg is async only, so the journal would have needed a second driver.

Concurrency (spec scaleout §1.2-a): ``save`` takes the agent's row with
``SELECT ... FOR UPDATE`` and compares versions inside that transaction, so of two
processes that loaded the same version exactly one commits; the other gets
``ConflictError`` and wrote nothing. A new agent is inserted ``ON CONFLICT DO NOTHING``:
a racing creator sees zero rows inserted and conflicts too.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from typing import TYPE_CHECKING, Any, Concatenate, Final, ParamSpec, TypeVar

import msgspec

from envelope._extras import import_failed

try:
    import psycopg
    from psycopg_pool import AsyncConnectionPool, PoolTimeout
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "postgres") from None  # pragma: no cover  # in a subprocess (tests/install)

from envelope.delivery import DEFAULT_CALL_TIMEOUT, JournalError, JournalGapError, JournalTakenOverError
from envelope.delivery import postgres as _postgres
from envelope.delivery.postgres import CHANNEL
from envelope.delivery.postgres import describe_database as _where

from ..errors import ConflictError, StateError, StoreError, UnavailableError
from .core import AgentSummary, LogBatch, _conflict, _group, _next_step, _not_accepting, _summary
from .migrations import migrations
from .sessions import InboxBounds, InboxReceipt
from .state import AgentState, RunRecord, decode_state, encode_state

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Coroutine, Sequence

    from psycopg.rows import TupleRow

__all__ = [
    "CHANNEL",
    "JournalGapError",
    "JournalTakenOverError",
    "PostgresJournal",
    "PostgresStore",
    "is_postgres_url",
    "migrate",
]

log = logging.getLogger("agent_ref.store_pg")

#: Key of the advisory lock that serialises migrations across processes starting together.
_MIGRATION_LOCK: Final = 0x656E7631


def is_postgres_url(text: str) -> bool:
    """Whether ``--db`` names a PostgreSQL database (``postgresql://`` or ``postgres://``)."""
    return text.startswith(("postgresql://", "postgres://"))


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


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _bounded(
    method: Callable[Concatenate[PostgresStore, _P], Coroutine[Any, Any, _T]],
) -> Callable[Concatenate[PostgresStore, _P], Coroutine[Any, Any, _T]]:
    """``method`` awaited at most ``store.call_timeout`` seconds (spec server [SL1-b]).

    The operation runs as a task of its own: past the bound it is cancelled but not
    awaited (psycopg then cancels the statement in the server and closes a connection
    that does not answer, which can take seconds more), the store is marked down (the
    next operation tries one new connection first, bounded by ``connect_timeout``), and
    the caller gets ``UnavailableError`` at once.
    """

    async def bounded(self: PostgresStore, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        task = asyncio.ensure_future(method(self, *args, **kwargs))
        try:
            done, _ = await asyncio.wait({task}, timeout=self.call_timeout)
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task in done:
            return task.result()
        task.cancel()
        task.add_done_callback(_retrieved)
        if not self._down:
            log.warning(
                "%s did not answer in %g s; every operation now tries it again first",
                _where(self.url),
                self.call_timeout,
            )
        self._down = True
        self._failures += 1
        raise UnavailableError(
            f"cannot {method.__name__.replace('_', ' ')} in {_where(self.url)}: no answer in {self.call_timeout:g} s",
            retry_after=max(1, math.ceil(self.call_timeout)),
            public="the server's database is not answering",
        )

    functools.update_wrapper(bounded, method)
    return bounded


def _retrieved(task: asyncio.Future[Any]) -> None:
    """Read a late operation's outcome (asyncio logs an exception nobody read)."""
    if not task.cancelled():
        task.exception()


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
        statement_timeout: seconds the server lets a statement run (``None``: its own setting).
        tcp_user_timeout: seconds sent data may go unacknowledged before a connection is
            ended; TCP keepalives are on besides (spec scaleout §1.4-c).
        call_timeout: seconds its caller waits for one operation (the pool's wait, the
            check, the statements), ``UnavailableError`` past it (spec server [SL1-b]):
            a database whose process is stopped acknowledges on loopback, so none of the
            database's or TCP's own timeouts fires.
    """

    def __init__(
        self,
        url: str,
        *,
        max_size: int = 8,
        timeout: float = 10.0,
        connect_timeout: float = 3.0,
        statement_timeout: float | None = _postgres.STATEMENT_TIMEOUT,
        tcp_user_timeout: float | None = _postgres.TCP_USER_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        """See the class docstring; nothing is opened yet."""
        self.url = url
        self.call_timeout = call_timeout
        self.max_size = max_size
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        # spec scaleout §1.4-c: every wait on the database is bounded (statement, keepalive, user timeouts)
        self._conninfo = _postgres.settings_for(
            url,
            _postgres.connection_settings(
                connect_timeout=connect_timeout, statement_timeout=statement_timeout, tcp_user_timeout=tcp_user_timeout
            ),
        )
        self._pool: AsyncConnectionPool | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._migrated = False
        self._down = False
        self._failures = 0
        self._tried_at = 0.0
        self._gate: asyncio.Lock | None = None

    def _new_pool(self) -> AsyncConnectionPool:
        return AsyncConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self.max_size,
            timeout=self.timeout,
            kwargs={"autocommit": True},
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
                    probe = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
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
        with psycopg.connect(self._conninfo, autocommit=True) as conn:
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

    @_bounded
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

    @_bounded
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
            lease = (state.lease_owner, state.lease_expires_at, state.principal)
            values = (new_version, state.status, blob, time.time(), *lease)
            if row is None:
                cur = await conn.execute(
                    "INSERT INTO agents (version, status, state, updated_at, lease_owner, lease_expires_at,"
                    " principal, agent_uuid) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                    " ON CONFLICT (agent_uuid) DO NOTHING",
                    (*values, state.agent_uuid),
                )
                if cur.rowcount != 1:  # another process created it since our SELECT
                    raise ConflictError(
                        f"agent {state.agent_uuid} was created by another process meanwhile; nothing was written"
                    )
            else:
                await conn.execute(
                    "UPDATE agents SET version = %s, status = %s, state = %s, updated_at = %s, lease_owner = %s,"
                    " lease_expires_at = %s, principal = %s WHERE agent_uuid = %s",
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
                    "INSERT INTO runs (run_id, agent_uuid, finished_at, stop_reason, record, principal)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    (
                        run.run_id,
                        run.agent_uuid,
                        run.finished_at,
                        run.stop_reason,
                        msgspec.json.encode(run),
                        state.principal,
                    ),
                )
        state.version = new_version

    async def _rows(self, what: str, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        async with self._connection(f"read {what}") as conn:
            cur = await conn.execute(sql.encode(), params)
            return list(await cur.fetchall())

    @_bounded
    async def run_log(self, run_id: str) -> list[bytes]:
        """See ``Store.run_log``."""
        rows = await self._rows(
            f"the log of run {run_id}",
            "SELECT line FROM envelope_log WHERE run_id = %s ORDER BY response, seq",
            (run_id,),
        )
        return [bytes(r[0]) for r in rows]  # type: ignore[call-overload]  # BYTEA comes back as bytes

    @_bounded
    async def run_responses(self, run_id: str) -> list[list[bytes]]:
        """See ``Store.run_responses``."""
        rows = await self._rows(
            f"the log of run {run_id}",
            "SELECT response, seq, line FROM envelope_log WHERE run_id = %s ORDER BY response, seq",
            (run_id,),
        )
        return _group([(int(str(r[0])), int(str(r[1])), bytes(r[2])) for r in rows])  # type: ignore[call-overload]  # BYTEA

    @_bounded
    async def renew_lease(self, agent_uuid: str, owner: str, expires_at: float) -> bool:
        """See ``Store.renew_lease``."""
        async with self._connection(f"renew the lease of agent {agent_uuid}") as conn:
            cur = await conn.execute(
                "UPDATE agents SET lease_expires_at = %s WHERE agent_uuid = %s AND status = 'running'"
                " AND lease_owner = %s",
                (expires_at, agent_uuid, owner),
            )
            return cur.rowcount == 1

    @_bounded
    async def agents(self, principal: str | None = None) -> list[AgentSummary]:
        """See ``Store.agents``."""
        where, params = ("WHERE principal = %s ", (principal,)) if principal is not None else ("", ())
        rows = await self._rows(
            "the agents",
            f"SELECT state, lease_expires_at, updated_at FROM agents {where}ORDER BY updated_at DESC",
            params,
        )
        out = []
        for blob, expires, updated in rows:
            state = decode_state(bytes(blob))  # type: ignore[call-overload]  # BYTEA
            state.lease_expires_at = float(str(expires))
            out.append(_summary(state, float(str(updated))))
        return out

    @_bounded
    async def runs(self, agent_uuid: str) -> list[RunRecord]:
        """See ``Store.runs``."""
        rows = await self._rows(
            f"the runs of agent {agent_uuid}",
            "SELECT record FROM runs WHERE agent_uuid = %s ORDER BY finished_at, position",
            (agent_uuid,),
        )
        return [msgspec.json.decode(bytes(r[0]), type=RunRecord) for r in rows]  # type: ignore[call-overload]  # BYTEA

    @_bounded
    async def runs_of(self, agent_uuids: Sequence[str]) -> dict[str, list[RunRecord]]:
        """See ``SQLiteStore.runs_of``: one query for every agent asked (spec server [OW3-a])."""
        out: dict[str, list[RunRecord]] = {uuid: [] for uuid in agent_uuids}
        if not out:
            return out
        rows = await self._rows(
            f"the runs of {len(out)} agents",
            "SELECT agent_uuid, record FROM runs WHERE agent_uuid = ANY(%s) ORDER BY finished_at, position",
            (list(out),),
        )
        for uuid, record in rows:
            out[str(uuid)].append(msgspec.json.decode(bytes(record), type=RunRecord))  # type: ignore[call-overload]
        return out

    @_bounded
    async def record_snapshot(self, agent_uuid: str, run_id: str, run_step: int, data: bytes) -> int:
        """See ``snapshots.SnapshotStore.record_snapshot`` (one agent's records serialised by an advisory lock)."""
        async with self._connection(f"record a snapshot of agent {agent_uuid}") as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"file_snapshots:{agent_uuid}",))
            cur = await conn.execute(
                "SELECT seq, step, run_id, run_step FROM file_snapshots WHERE agent_uuid = %s"
                " ORDER BY seq DESC LIMIT 1",
                (agent_uuid,),
            )
            row = await cur.fetchone()
            last = (int(str(row[1])), str(row[2]), int(str(row[3]))) if row is not None else None
            step = _next_step(last, run_id, run_step)
            seq = int(str(row[0])) + 1 if row is not None else 1
            await conn.execute(
                "INSERT INTO file_snapshots (agent_uuid, seq, step, run_id, run_step, changes)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (agent_uuid, seq, step, run_id, run_step, data),
            )
        return step

    @_bounded
    async def snapshots(self, agent_uuid: str, after_step: int) -> list[tuple[int, bytes]]:
        """See ``snapshots.SnapshotStore.snapshots``."""
        rows = await self._rows(
            f"the snapshots of agent {agent_uuid}",
            "SELECT step, changes FROM file_snapshots WHERE agent_uuid = %s AND step > %s ORDER BY seq",
            (agent_uuid, after_step),
        )
        return [(int(str(r[0])), bytes(r[1])) for r in rows]  # type: ignore[call-overload]  # BYTEA

    @_bounded
    async def drop_snapshots(self, agent_uuid: str, after_step: int) -> None:
        """See ``snapshots.SnapshotStore.drop_snapshots``."""
        async with self._connection(f"drop the snapshots of agent {agent_uuid}") as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM file_snapshots WHERE agent_uuid = %s AND step > %s", (agent_uuid, after_step)
            )

    # ------------------------------------------------------------- streaming input (spec [IN1-a])

    def inbox_put(self, run_id: str, text: str, *, bounds: InboxBounds | None = None) -> InboxReceipt:
        """See ``sessions.InboxStore.inbox_put``: the run's ``inbox_runs`` row ``FOR UPDATE``, the bounds, the insert.

        The row lock serialises every process's messages for one run, so the bounds read
        under it hold until the insert commits (spec server [IB1-d]): of two processes
        racing for the last slot, one inserts and the other is refused.

        Synchronous (``Agent.send`` is; the server calls it in a thread): a connection of its own.
        """
        doing = f"queue a message for run {run_id}"
        try:
            if not self._migrated:
                self._migrate()
                self._migrated = True
            with psycopg.connect(self._conninfo) as conn:
                row = conn.execute(
                    "SELECT r.agent_uuid, r.last_seq, r.taken, a.status FROM inbox_runs r"
                    " LEFT JOIN agents a ON a.agent_uuid = r.agent_uuid WHERE r.run_id = %s AND r.open"
                    " FOR UPDATE OF r",
                    (run_id,),
                ).fetchone()
                if row is None or row[3] != "running":
                    raise StateError(_not_accepting(run_id))
                agent_uuid, seq = str(row[0]), int(str(row[1])) + 1
                if bounds is not None:
                    found = conn.execute(
                        "SELECT count(*), coalesce(sum(octet_length(text)), 0) FROM inbox"
                        " WHERE agent_uuid = %s AND seq > %s",
                        (agent_uuid, int(str(row[2]))),
                    ).fetchone()
                    assert found is not None  # an aggregate always has its row
                    bounds.check(int(str(found[0])), int(str(found[1])), text, run_id)
                conn.execute("UPDATE inbox_runs SET last_seq = %s WHERE agent_uuid = %s", (seq, agent_uuid))
                conn.execute(
                    "INSERT INTO inbox (agent_uuid, seq, run_id, text, accepted_at) VALUES (%s, %s, %s, %s, %s)",
                    (agent_uuid, seq, run_id, text, time.time()),
                )
        except psycopg.Error as exc:
            raise StoreError(f"cannot {doing} in {_where(self.url)}: {type(exc).__name__}: {exc}") from None
        return InboxReceipt(agent_uuid, seq, seq - int(str(row[2])))

    @_bounded
    async def inbox_open(self, agent_uuid: str, run_id: str, delivered: int) -> None:
        """See ``sessions.InboxStore.inbox_open``."""
        async with self._connection(f"open the inbox of agent {agent_uuid}") as conn, conn.transaction():
            await conn.execute(
                "INSERT INTO inbox_runs (agent_uuid, run_id, open, last_seq, taken) VALUES (%s, %s, true, %s, %s)"
                " ON CONFLICT (agent_uuid) DO UPDATE SET run_id = EXCLUDED.run_id, open = true,"
                " last_seq = GREATEST(inbox_runs.last_seq, EXCLUDED.last_seq), taken = EXCLUDED.taken",
                (agent_uuid, run_id, delivered, delivered),
            )
            await conn.execute("DELETE FROM inbox WHERE agent_uuid = %s AND seq <= %s", (agent_uuid, delivered))

    @_bounded
    async def inbox_take(self, agent_uuid: str, after: int) -> list[tuple[int, str]]:
        """See ``sessions.InboxStore.inbox_take``."""
        async with self._connection(f"read the inbox of agent {agent_uuid}") as conn:
            cur = await conn.execute(
                "SELECT seq, text FROM inbox WHERE agent_uuid = %s AND seq > %s ORDER BY seq", (agent_uuid, after)
            )
            rows = [(int(str(r[0])), str(r[1])) for r in await cur.fetchall()]
            if rows:
                await conn.execute(
                    "UPDATE inbox_runs SET taken = GREATEST(taken, %s) WHERE agent_uuid = %s", (rows[-1][0], agent_uuid)
                )
        return rows

    @_bounded
    async def inbox_close(self, agent_uuid: str, run_id: str, after: int, *, if_empty: bool) -> bool:
        """See ``sessions.InboxStore.inbox_close``: row ``FOR UPDATE``, then the check and the close."""
        async with self._connection(f"close the inbox of agent {agent_uuid}") as conn, conn.transaction():
            await conn.execute("SELECT 1 FROM inbox_runs WHERE agent_uuid = %s FOR UPDATE", (agent_uuid,))
            if if_empty:
                cur = await conn.execute(
                    "SELECT 1 FROM inbox WHERE agent_uuid = %s AND seq > %s LIMIT 1", (agent_uuid, after)
                )
                if await cur.fetchone() is not None:
                    return False
            await conn.execute(
                "UPDATE inbox_runs SET open = false WHERE agent_uuid = %s AND run_id = %s", (agent_uuid, run_id)
            )
        return True

    @_bounded
    async def snapshot_points(self, agent_uuid: str) -> list[tuple[int, str, int]]:
        """The agent's snapshot records as ``(step, run id, step of the run)``, in the order recorded ([IN4-a])."""
        rows = await self._rows(
            f"the snapshots of agent {agent_uuid}",
            "SELECT step, run_id, run_step FROM file_snapshots WHERE agent_uuid = %s ORDER BY seq",
            (agent_uuid,),
        )
        return [(int(str(r[0])), str(r[1]), int(str(r[2]))) for r in rows]


class PostgresJournal(_postgres.PostgresJournal):
    """``envelope.delivery.postgres.PostgresJournal`` on the agent's database: its first connection migrates it.

    The agent's migrations create the journal's table with the store's (``0001``), so
    the store and the journal may share one database and open in either order.

    Raises:
        StateError: the database cannot be reached or migrated (the text names where; never a password).
    """

    def __init__(
        self,
        url: str,
        *,
        poll_seconds: float = 0.5,
        listen: bool = True,
        connect_timeout: float = 3.0,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        """See ``envelope.delivery.postgres.PostgresJournal``; ``prepare`` is the agent's ``migrate``."""
        try:
            super().__init__(
                url,
                poll_seconds=poll_seconds,
                listen=listen,
                connect_timeout=connect_timeout,
                prepare=migrate,
                call_timeout=call_timeout,
            )
        except JournalError as exc:
            raise StateError(str(exc)) from None
