"""Helpers of the fault-injection suite (``tests/faults/``): reading a stream while a fault is injected.

``Reader`` reads one HTTP answer (an SSE stream) in a thread, so the test can stop a
database or kill a process while the stream is open, then wait for its end with a
deadline: a server that hangs fails the test instead of hanging it. ``wait_until`` polls
any condition against a deadline and fails naming it (``wait_until_async`` does so inside
an event loop); ``checkpoint_held`` is the condition the kill tests wait for before they
kill (the dying run's checkpoint is in the store).
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

import httpx2

from agent_ref import MemoryStore, SQLiteStore
from agent_ref.errors import UnavailableError
from agent_ref.server.streams import MemoryJournal

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from agent_ref.store.core import LogBatch, Store
    from agent_ref.store.state import AgentState, RunRecord


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 30.0, every: float = 0.02) -> None:
    """Poll ``condition`` every ``every`` s until it holds; fail naming ``what`` if it does not within ``timeout`` s.

    The shape every test waits in: a state it can see, polled against a deadline, never
    a sleep sized for a quiet machine. ``every`` is the pause between two looks (larger
    when a look costs something, e.g. an HTTP request that starts a run).
    """
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(every)


async def wait_until_async(
    condition: Callable[[], Awaitable[bool] | bool], what: str, timeout: float = 30.0, every: float = 0.02
) -> None:
    """``wait_until`` inside an event loop: the loop keeps running between two looks.

    ``condition`` may be a coroutine function (a query of the database) or a plain one.
    """
    deadline = time.monotonic() + timeout
    while True:
        held = condition()
        if not isinstance(held, bool):
            held = await held
        if held:
            return
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        await asyncio.sleep(every)


def _open_store(where: str) -> Store:
    if where.startswith("postgresql://"):
        from agent_ref.store.postgres import PostgresStore

        return PostgresStore(where)
    return SQLiteStore(where)


def checkpoint_held(where: str, agent: str, hold: Literal["tool", "model"]) -> bool:
    """Whether the store at ``where`` holds the checkpoint a run held at ``hold`` saved last.

    ``tool``: the step's calls are marked started and the call that finished before the
    held one has its result saved (that save runs beside the held call, so the held call
    can signal before it is done: the reason the kill tests once slept). ``model``: the
    checkpoint before the next model call (saved before the model is called).
    """

    async def look() -> bool:
        store = _open_store(where)
        try:
            state = await store.load(agent)
        finally:
            close = getattr(store, "aclose", None)
            if close is not None:
                await close()
        checkpoint = state.run.checkpoint if state is not None and state.run is not None else None
        if checkpoint is None:
            return False
        if hold == "tool":
            return checkpoint.phase == "tools" and len(checkpoint.results) >= 1
        return checkpoint.phase == "model" and checkpoint.step >= 2

    # in a thread of its own: the caller may be inside an event loop (the browser tests' is)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(look())).result()


class Reader(threading.Thread):
    """Read one streamed answer in the background: ``Reader("POST", url, json=...)``.

    Attributes:
        status: the status code, once the headers came.
        headers: the headers, once they came.
        body: every byte read so far.
        error: what ended the read abnormally (a dropped connection), if anything.
        opened: set when the headers came.
    """

    def __init__(self, method: str, url: str, *, timeout: float = 60, **kwargs: Any) -> None:
        """Start reading at once (a daemon thread: a stuck read never keeps the test process alive)."""
        super().__init__(daemon=True)
        self.method = method
        self.url = url
        self.timeout = timeout
        self.kwargs = kwargs
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = bytearray()
        self.error: Exception | None = None
        self.opened = threading.Event()
        self.start()

    def run(self) -> None:
        """Read until the server ends the answer, the connection drops, or ``timeout`` passes."""
        try:
            with (
                httpx2.Client(timeout=self.timeout) as client,
                client.stream(self.method, self.url, **self.kwargs) as answer,
            ):
                self.status = answer.status_code
                self.headers = dict(answer.headers)
                self.opened.set()
                for chunk in answer.iter_bytes():
                    self.body.extend(chunk)
        except httpx2.HTTPError as exc:
            self.error = exc
        finally:
            self.opened.set()

    def wait_open(self, timeout: float = 30) -> None:
        """Wait (bounded) for the headers; fail if they did not come."""
        assert self.opened.wait(timeout), f"no answer from {self.url} within {timeout} s"
        assert self.status is not None, f"{self.url}: {self.error!r}"

    def wait_for(self, needle: bytes, timeout: float = 30) -> None:
        """Wait (bounded) until ``needle`` was read."""
        deadline = time.monotonic() + timeout
        while needle not in self.body:
            assert self.is_alive() or needle in self.body, f"the stream ended without {needle!r}: {bytes(self.body)!r}"
            assert time.monotonic() < deadline, f"{needle!r} not read within {timeout} s: {bytes(self.body)[-600:]!r}"
            time.sleep(0.02)

    def finish(self, timeout: float) -> bytes:
        """Wait (bounded) for the server to end the answer; return everything read."""
        self.join(timeout)
        assert not self.is_alive(), f"the stream did not end within {timeout} s; read: {bytes(self.body)[-600:]!r}"
        return bytes(self.body)


#: What the failing store and journal name in their errors (a client must never read it).
SECRET = "PostgreSQL db.internal:6543/agents: server closed the connection unexpectedly"


class FlakyStore(MemoryStore):
    """A ``MemoryStore`` that fails like an unreachable database while ``down``."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise UnavailableError(f"cannot reach {SECRET}", retry_after=3)

    async def load(self, agent_uuid: str) -> AgentState | None:
        self._check()
        return await super().load(agent_uuid)

    async def save(self, state: AgentState, *, log: LogBatch | None = None, run: RunRecord | None = None) -> None:
        self._check()
        await super().save(state, log=log, run=run)

    async def renew_lease(self, agent_uuid: str, owner: str, expires_at: float) -> bool:
        self._check()
        return await super().renew_lease(agent_uuid, owner, expires_at)


class FlakyJournal(MemoryJournal):
    """A ``MemoryJournal`` whose appends and reads fail like an unreachable database while ``down``."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def append(self, run_id: str, response: int, line: bytes) -> None:
        if self.down:
            raise UnavailableError(f"cannot journal a line in {SECRET}")
        super().append(run_id, response, line)

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        if self.down:
            raise UnavailableError(f"cannot read the journal in {SECRET}")
        return super().read(run_id, response)
