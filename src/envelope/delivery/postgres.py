"""A ``Journal`` on PostgreSQL for several server processes: ``PostgresJournal`` (spec delivery §3.4).

Install the extra that brings the driver: ``pip install 'envelope-stream[postgres]'``
(psycopg 3 with its binary wheels). This module is the only one of ``envelope`` that
imports psycopg; ``import envelope`` and ``import envelope.delivery`` never load it.

Why psycopg 3: a sync API for ``append`` (the ``Journal`` protocol is synchronous
because ``LiveStream.append`` is) and an async one for ``follow``, one driver and one
set of errors for both, and LISTEN/NOTIFY on either.

Every process appends through one autocommit connection and follows through its own:
a line is committed before it is sent (spec delivery §3.1-a), a NOTIFY names it, and a
follower on any process reads it from the table (the notification is only a wake-up).
A session advisory lock per response says "a live process writes this response", so a
starting process closes only responses whose writer is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Final, TypeVar

from envelope._extras import import_failed

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "postgres") from None  # pragma: no cover  # in a subprocess (tests/install)

from ._errors import JournalError, JournalGapError, JournalTakenOverError, JournalUnavailableError
from ._offloop import DEFAULT_CALL_TIMEOUT, upto_outcome
from ._shared_follow import SharedFollows

if TYPE_CHECKING:
    from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence

    from psycopg.rows import TupleRow

__all__ = [
    "CHANNEL",
    "JOURNAL_TABLE",
    "STATEMENT_TIMEOUT",
    "STOP_CHANNEL",
    "TCP_USER_TIMEOUT",
    "PostgresJournal",
    "connection_settings",
    "create_journal_table",
    "describe_database",
    "settings_for",
]

log = logging.getLogger("envelope.delivery.postgres")

_T = TypeVar("_T")

#: The terminator as the journal stores it.
_DONE: Final = b"[DONE]"
#: The NOTIFY channel on which the journal announces each appended line (a wake-up hint only).
CHANNEL: Final = "envelope_journal"
#: The NOTIFY channel on which a stop request names its run (spec delivery §3.5); the payload is the run id.
STOP_CHANNEL: Final = "envelope_stop"
#: Key of the advisory lock that serialises creating the table across processes starting together.
_SCHEMA_LOCK: Final = 0x656E7632

#: The journal's table: one row per line. The reference agent's migration ``0001`` creates the same table.
JOURNAL_TABLE: Final = (
    "CREATE TABLE IF NOT EXISTS stream_journal ("
    " run_id TEXT NOT NULL, response INTEGER NOT NULL, seq INTEGER NOT NULL, line BYTEA NOT NULL,"
    " PRIMARY KEY (run_id, response, seq))"
)


#: Seconds a statement may run on the server before it cancels it (spec delivery §3.6-c).
STATEMENT_TIMEOUT: Final = 5.0
#: TCP keepalive probes: first after this many idle seconds, then every ``KEEPALIVE_INTERVAL``,
#: ``KEEPALIVE_COUNT`` unanswered ones end the connection (spec delivery §3.6-c).
KEEPALIVE_IDLE: Final = 5
KEEPALIVE_INTERVAL: Final = 2
KEEPALIVE_COUNT: Final = 3
#: Seconds data sent may stay unacknowledged before the kernel ends the connection (``TCP_USER_TIMEOUT``).
TCP_USER_TIMEOUT: Final = 10.0


def connection_settings(
    *,
    connect_timeout: float = 3.0,
    statement_timeout: float | None = STATEMENT_TIMEOUT,
    keepalive_idle: int = KEEPALIVE_IDLE,
    keepalive_interval: int = KEEPALIVE_INTERVAL,
    keepalive_count: int = KEEPALIVE_COUNT,
    tcp_user_timeout: float | None = TCP_USER_TIMEOUT,
) -> dict[str, str | int]:
    """libpq connection parameters that bound every wait on a database (spec delivery §3.6-c).

    ``connect_timeout`` bounds a new connection (libpq's floor is 2 s); ``statement_timeout``
    has the server cancel a statement running longer; TCP keepalives and
    ``tcp_user_timeout`` end a connection whose peer vanished or black-holes packets (a
    failover), which no statement timeout can (the server never answers). ``None`` leaves
    a bound out. Keyword parameters win over a URL's, so a URL's own ``options`` (a
    search path) must be joined with this one's: ``settings_for(url, settings)`` does it.

    Returns:
        Keyword arguments for ``psycopg.connect`` / ``AsyncConnection.connect``.
    """
    out: dict[str, str | int] = {
        "connect_timeout": max(2, int(connect_timeout)),
        "keepalives": 1,
        "keepalives_idle": max(1, keepalive_idle),
        "keepalives_interval": max(1, keepalive_interval),
        "keepalives_count": max(1, keepalive_count),
    }
    if tcp_user_timeout is not None:
        out["tcp_user_timeout"] = max(1, int(tcp_user_timeout * 1000))
    if statement_timeout is not None:
        out["options"] = f"-c statement_timeout={max(1, int(statement_timeout * 1000))}"
    return out


def settings_for(url: str, settings: dict[str, str | int]) -> str:
    """The conninfo of ``url`` with ``settings`` (``connection_settings``); the URL's own ``options`` kept first."""
    try:
        own = conninfo_to_dict(url).get("options")
    except psycopg.Error:
        return url  # psycopg.connect reports the unparsable URL
    if own and "options" in settings:
        settings = {**settings, "options": f"{own} {settings['options']}"}
    return make_conninfo(url, **settings)


def describe_database(url: str) -> str:
    """The database a URL names, for error messages: host, port and name, never a password."""
    try:
        info = conninfo_to_dict(url)
    except psycopg.Error:
        return "the PostgreSQL database (unparsable URL)"
    return f"PostgreSQL {info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"


def create_journal_table(conn: psycopg.Connection[TupleRow]) -> None:
    """Create the ``stream_journal`` table if it is missing (``PostgresJournal``'s default ``prepare``)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(JOURNAL_TABLE)


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


#: The most lines one statement commits together (spec delivery [D3.4-f]).
BATCH_LINES: Final = 256


class _Pending:
    """A line waiting for the writer connection, and what became of it."""

    __slots__ = ("after", "done", "error", "key", "line", "response", "run_id")

    def __init__(self, run_id: str, response: int, line: bytes, after: _Pending | None) -> None:
        self.after = after  # the line before it of the same response in the same call: if that one fails, so does this
        self.run_id = run_id
        self.response = response
        self.key = (run_id, response)
        self.line = line
        self.done = False
        self.error: Exception | None = None


class PostgresJournal:
    """A ``Journal`` in PostgreSQL: every process sees every process's lines (spec delivery §3.4).

    One autocommit connection writes; each ``append`` is one round trip that inserts the
    line at the next ``seq`` of its response and sends a NOTIFY naming it, so the line is
    durable (committed) before the server sends it (spec delivery §3.1-a); lines that come
    together (``append_together``, ``append_upto``) share a statement and a NOTIFY per
    response (spec delivery [D3.4-f]). The first append
    of a response takes a session advisory lock on it, released after ``[DONE]``: the
    lock says "a live process writes this response", so ``unfinished()`` on a starting
    process returns only responses whose writer is gone (its connection closed; spec
    delivery §3.4-c) and never closes a response another live process is writing.

    The writer connection is replaced when it dies (spec delivery §3.4-d): the next call
    opens a new one (``connect_timeout``), and an append cut by the failure is tried once
    more on it. The locks died with the old session, so each response this process was
    writing takes its lock again before its next line, and checks that nobody wrote to it
    meanwhile (``JournalTakenOverError`` otherwise). While the database cannot be reached,
    calls fail with ``JournalUnavailableError``; a failed connection attempt is not repeated for
    four times as long as it took, so a database that times out connections blocks the
    event loop at most a fifth of the time.

    The protocol is synchronous; an event loop calls it through ``off_loop`` (spec
    delivery §3.6-a), in a thread of its own and bounded by ``call_timeout``, as
    ``LiveStream`` and the reference server do; ``follow`` is async and uses its own
    connection. Every connection has a statement timeout, TCP keepalives and a TCP user
    timeout (``connection_settings``, spec delivery §3.6-c).

    Args:
        url: the database (the same one as the store's, or another).
        poll_seconds: the longest a follower waits before it reads the table again
            without a notification (notifications are hints; the table is the truth).
        listen: wake followers by LISTEN/NOTIFY; ``False`` polls every ``poll_seconds``.
        connect_timeout: seconds a new connection may take (at least 2, libpq's floor).
        statement_timeout: seconds the server lets a statement run (``None``: its own setting).
        tcp_user_timeout: seconds sent data may go unacknowledged before the connection
            is ended (``None``: the kernel's default); TCP keepalives are on besides
            (spec delivery §3.6-c).
        call_timeout: seconds an event loop waits for one call (``off_loop``, spec
            delivery §3.6-a) before it answers ``JournalUnavailableError``.
        prepare: what makes the database ready on the first connection (default
            ``create_journal_table``; an application that creates ``stream_journal`` in
            its own migrations passes those).

    Raises:
        JournalUnavailableError: the database cannot be reached (the text names it; never a password).
        JournalError: ``prepare`` failed on it.
    """

    def __init__(
        self,
        url: str,
        *,
        poll_seconds: float = 0.5,
        listen: bool = True,
        connect_timeout: float = 3.0,
        prepare: Callable[[psycopg.Connection[TupleRow]], object] = create_journal_table,
        statement_timeout: float | None = STATEMENT_TIMEOUT,
        tcp_user_timeout: float | None = TCP_USER_TIMEOUT,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
    ) -> None:
        """Connect and make the table ready (``prepare``)."""
        self.url = url
        self.poll_seconds = poll_seconds
        self.listen = listen
        self.connect_timeout = max(2, int(connect_timeout))
        self.call_timeout = call_timeout
        self._conninfo = settings_for(
            url,
            connection_settings(
                connect_timeout=connect_timeout, statement_timeout=statement_timeout, tcp_user_timeout=tcp_user_timeout
            ),
        )
        self._where = describe_database(url)
        self._lock = threading.Lock()
        self._next: dict[tuple[str, int], int] = {}
        self._held: set[tuple[str, int]] = set()
        self._quiet_until = 0.0
        self._followers = SharedFollows(self._read_response)
        self._waiting: list[_Pending] = []
        self._waiting_lock = threading.Lock()
        try:
            conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise JournalUnavailableError(f"cannot open the journal in {describe_database(url)}: {exc}") from None
        try:
            prepare(conn)
        except psycopg.Error as exc:
            conn.close()
            raise JournalError(f"cannot prepare the journal in {describe_database(url)}: {exc}") from None
        except BaseException:
            conn.close()
            raise
        self._conn: psycopg.Connection[TupleRow] | None = conn

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
            raise JournalUnavailableError(f"cannot reach {self._where}: its last connection attempt failed just now")
        try:
            self._conn = psycopg.connect(self._conninfo, autocommit=True)
        except psycopg.Error as exc:
            self._quiet_until = time.monotonic() + 4 * (time.monotonic() - now)
            raise JournalUnavailableError(f"cannot reach {self._where}: {exc}") from None
        log.warning("journal: a new connection to %s replaces the lost one", self._where)
        return self._conn

    def _run(self, doing: str, work: Callable[[psycopg.Connection[TupleRow]], _T]) -> _T:
        """``work(connection)`` under the lock, tried once more on a new connection if the first one was lost."""
        with self._lock:
            return self._run_locked(doing, work)

    def _run_locked(self, doing: str, work: Callable[[psycopg.Connection[TupleRow]], _T]) -> _T:
        """``_run`` for a caller that holds the lock."""
        for attempt in (1, 2):
            conn = self._connection()
            try:
                return work(conn)
            except psycopg.OperationalError as exc:
                if attempt == 1 and (conn.closed or conn.broken):
                    log.warning("journal: lost the connection to %s (%s); trying again", self._where, exc)
                    continue
                raise JournalUnavailableError(f"cannot {doing} in {self._where}: {exc}") from None
            except psycopg.Error as exc:
                raise JournalError(f"cannot {doing} in {self._where}: {type(exc).__name__}: {exc}") from None
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

        Lines that arrive together from several threads (several responses written at
        once) are committed together, in one statement (spec delivery [D3.4-f]): the
        thread that gets the connection writes every line waiting for it, and each
        caller returns once its own line is committed.

        Raises:
            JournalUnavailableError: the database cannot be reached (the line may not be journaled).
            JournalTakenOverError: another process closed the response while this one's
                connection was lost.
            JournalError: the database refused the line.
        """
        error = self.append_together([(run_id, response, line)])[0]
        if error is not None:
            raise error

    def append_upto(self, run_id: str, response: int, lines: Sequence[bytes]) -> tuple[int, Exception | None]:
        """``append`` of each line, in order, up to the first that fails, most in one statement ([D3.6-d]).

        Returns:
            How many of ``lines`` were committed, and the exception of the one after them
            (``None`` when all were).
        """
        return upto_outcome(self.append_together([(run_id, response, line) for line in lines]))

    def append_together(self, lines: Sequence[tuple[str, int, bytes]]) -> list[Exception | None]:
        """Append ``(run_id, response, line)``s of any responses, each as ``append`` would (spec delivery [D3.4-f]).

        Lines of responses this connection already writes go in one statement (up to
        ``BATCH_LINES``, several of one response in their order); a response's first line,
        its ``[DONE]`` and lines after a reconnection go one by one, as ``append``. Every
        line is committed before this returns, and the lines of one response in their order.

        Returns:
            For each line, ``None`` if it was committed, else the exception ``append`` would have raised.
        """
        items: list[_Pending] = []
        last: dict[tuple[str, int], _Pending] = {}
        for run_id, response, line in lines:
            item = _Pending(run_id, response, line, last.get((run_id, response)))
            last[item.key] = item
            items.append(item)
        with self._waiting_lock:
            self._waiting.extend(items)
        with self._lock:
            while not all(item.done for item in items):
                self._write(self._take_batch())
        return [item.error for item in items]

    def _take_batch(self) -> list[_Pending]:
        """The waiting lines to write now: the first ``BATCH_LINES``, in the order they came."""
        with self._waiting_lock:
            batch, self._waiting = self._waiting[:BATCH_LINES], self._waiting[BATCH_LINES:]
        return batch

    def _writes(self, key: tuple[str, int]) -> bool:
        """This connection writes that response: it holds its lock and knows its next ``seq``."""
        return key in self._held and key in self._next

    def _write(self, batch: list[_Pending]) -> None:
        """Commit ``batch`` (caller holds the lock): together where it can, each line on its own otherwise.

        Each response's lines stay in their order: its first line on its own if this
        connection does not write it yet (that takes its lock), then its lines up to its
        ``[DONE]`` in one statement with the other responses', then what is left one by one.
        Every line of the batch is done when this returns, by any way out: its caller waits on nothing else.
        """
        responses: dict[tuple[str, int], list[_Pending]] = {}
        for item in batch:
            responses.setdefault(item.key, []).append(item)
        try:
            for items in responses.values():
                if not self._writes(items[0].key) and not self._not_tried(items[0]):
                    self._write_one(items)
            together = []
            for key, items in responses.items():
                for item in items:
                    if item.done:
                        continue
                    if not self._writes(key) or item.line == _DONE or self._not_tried(item):
                        break
                    together.append(item)
            if len(together) >= 2:
                self._insert_together(together)
            for items in responses.values():
                for n, item in enumerate(items):
                    if not item.done and not self._not_tried(item):
                        self._write_one(items[n:])
        finally:
            for item in batch:
                if not item.done:
                    item.error = JournalError(f"cannot journal a line of run {item.run_id}: its writer was interrupted")
                    item.done = True

    @staticmethod
    def _not_tried(item: _Pending) -> bool:
        """The line before it in its call failed: it fails too, untried, as a loop of ``append`` would stop."""
        if item.done or item.after is None or item.after.error is None:
            return False
        item.error = JournalError(f"not journaled: an earlier line of run {item.run_id} failed")
        item.done = True
        return True

    def _write_one(self, items: list[_Pending]) -> None:
        """``items[0]`` on its own; the lines after it (of its response) tell what a lost connection committed."""
        item = items[0]
        try:
            kept = self._run_locked(
                f"journal a line of run {item.run_id}",
                lambda conn: self._append_one(conn, item.run_id, item.response, [p.line for p in items]),
            )
        except Exception as exc:  # the caller's, raised in its own thread
            item.error = exc
            kept = 1
        for done in items[:kept]:
            done.done = True

    def _insert_together(self, items: list[_Pending]) -> None:
        """One statement for lines of responses this connection already writes, each response's in its order, and a
        NOTIFY for each response's last line (followers read the table from where they are). If it fails, nothing
        of it is known to be committed, and each line goes the one-by-one way, which recognises lines that were."""
        try:
            conn = self._connection()
            nexts = {p.key: self._next[p.key] for p in items}
            seqs = []
            for p in items:
                seqs.append(nexts[p.key])
                nexts[p.key] += 1
            conn.execute(
                "WITH added AS (INSERT INTO stream_journal (run_id, response, seq, line)"
                " SELECT * FROM unnest(%s::text[], %s::int[], %s::int[], %s::bytea[]))"
                " SELECT pg_notify(%s, n) FROM unnest(%s::text[]) AS n",
                (
                    [p.run_id for p in items],
                    [p.response for p in items],
                    seqs,
                    [p.line for p in items],
                    CHANNEL,
                    [f"{run_id}:{response}:{seq - 1}" for (run_id, response), seq in nexts.items()],
                ),
            )
        except (psycopg.Error, JournalError) as exc:
            log.info("journal: %d lines together failed (%s); writing each on its own", len(items), exc)
            return
        self._next.update(nexts)
        for p in items:
            p.done = True

    def _append_one(self, conn: psycopg.Connection[TupleRow], run_id: str, response: int, lines: list[bytes]) -> int:
        """``lines[0]`` on its own: a response's first, its ``[DONE]``, one after a reconnection, or a lone one.

        Returns how many of ``lines`` are committed: 1, or after a reconnection the lines
        the lost connection had committed (one statement of several; spec delivery [D3.4-f]).
        """
        key = (run_id, response)
        line = lines[0]
        seq = self._next.get(key)
        if seq is None:  # the first line this process writes there (a new response, or a recovery)
            self._hold(conn, run_id, response, wait=True)
            seq = self._tail(conn, run_id, response)[0]
        elif key not in self._held:  # a new connection: take the lock again, check nobody wrote meanwhile
            if not self._hold(conn, run_id, response, wait=False):
                self._next.pop(key, None)
                raise JournalTakenOverError(f"response {run_id}:{response} is being closed by another process")
            stored, last = self._tail(conn, run_id, response)
            if seq < stored <= seq + len(lines) and self._stored(conn, key, seq, stored, last) == lines[: stored - seq]:
                self._next[key] = stored  # the lost connection had committed these very lines
                if lines[stored - seq - 1] == _DONE:
                    self._let_go(conn, run_id, response)
                return stored - seq
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
        return 1

    @staticmethod
    def _stored(
        conn: psycopg.Connection[TupleRow], key: tuple[str, int], start: int, end: int, last: bytes | None
    ) -> list[bytes]:
        """The committed lines ``start`` to ``end - 1`` of a response (``last`` is line ``end - 1``, read already)."""
        if end - start == 1:
            return [] if last is None else [last]
        rows = conn.execute(
            "SELECT line FROM stream_journal WHERE run_id = %s AND response = %s AND seq >= %s AND seq < %s"
            " ORDER BY seq",
            (*key, start, end),
        ).fetchall()
        return [bytes(row[0]) for row in rows]

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
        """See ``Journal.unfinished``: only responses no live process is writing (spec delivery §3.4-c).

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
        """Become the writer of a response whose writer is gone, to close it (spec delivery §3.4-d).

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

        Every follower of one response in one event loop shares one reader of it (spec
        delivery [D3.4-e], ``SharedFollows``): one connection and one read per wake-up,
        however many browsers watch the run. The reader reads the table, then waits for a
        NOTIFY naming this response (or ``poll_seconds``) and reads again from the next
        expected ``seq``. Lines are committed in ``seq`` order by their single writer, so
        each read returns a gap-free continuation.

        Stops without ``[DONE]`` when no process holds the response's writer lock and no
        line is left to read (its writer died; a process that starts later closes it).

        Raises:
            JournalGapError: a read skipped or repeated a ``seq`` (a broken invariant).
            JournalUnavailableError: the database cannot be reached.
            JournalError: the database failed.
        """
        async for seq, line in self._followers.follow(run_id, response, after):
            yield seq, line

    async def _read_response(self, run_id: str, response: int) -> AsyncGenerator[tuple[int, bytes], None]:
        """One reader of a whole response on a connection of its own (what ``follow``'s followers share)."""
        expected = 0
        prefix = f"{run_id}:{response}:"
        try:
            async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as conn:
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
                        # spec delivery §3.4-b: nobody writes it (its process died before [DONE]):
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
            raise JournalUnavailableError(f"cannot follow run {run_id} in {self._where}: {exc}") from None
        except psycopg.Error as exc:
            raise JournalError(f"cannot follow run {run_id} in {self._where}: {exc}") from None

    def request_stop(self, run_id: str) -> None:
        """Ask whichever process writes ``run_id`` to stop it: a NOTIFY on ``STOP_CHANNEL`` (spec delivery §3.5).

        A notification reaches only the sessions listening at that moment, so a caller
        that must know the run ended sends it again until it sees the end (the journal's
        ``[DONE]``, or its own state), within a bound of its choosing.

        Raises:
            JournalUnavailableError: the database cannot be reached.
            JournalError: the database refused it.
        """
        self._run(
            f"request a stop of run {run_id}",
            lambda conn: conn.execute("SELECT pg_notify(%s, %s)", (STOP_CHANNEL, run_id)),
        )

    async def stop_requests(self) -> AsyncGenerator[str, None]:
        """Yield the run id of every stop request any process sends from now on (spec delivery §3.5).

        One connection of its own, listening on ``STOP_CHANNEL``; it ends only by its
        caller (cancellation, or leaving the loop) or by a database failure, after which
        the caller listens again (requests sent meanwhile are missed: senders repeat them).

        Raises:
            JournalUnavailableError: the database cannot be reached, or the connection was lost.
            JournalError: the database failed.
        """
        try:
            async with await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True) as conn:
                await conn.execute(f"LISTEN {STOP_CHANNEL}")
                async for note in conn.notifies():
                    yield note.payload
        except psycopg.OperationalError as exc:
            raise JournalUnavailableError(f"cannot listen for stop requests in {self._where}: {exc}") from None
        except psycopg.Error as exc:
            raise JournalError(f"cannot listen for stop requests in {self._where}: {exc}") from None

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
