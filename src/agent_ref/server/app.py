"""The agent server: the reference agent over HTTP, as resumable SSE streams, with a browser page.

Owns: the ASGI app (Starlette, ``sse-starlette``'s ``EventSourceResponse``) and its
endpoints (``spec/server.md``): ``POST /agent/run``, ``POST /agent/tool_results``,
``GET /agent/runs/{run_id}/stream`` (replay with ``Last-Event-ID``, then follow the
live run), the page at ``/`` with its module and the JavaScript decoder under
``/static/``; request checks, the ``Host`` check, the optional bearer token, keep-alive
comments, the client-gone policy, recovery of what a dead process left (through the
agent's own recovery; in checkpoint mode, the dead run continued here, live: spec server
§CN), and ``serve`` (uvicorn on a bound socket); the command line is
``cli/serve.py``.
Does not own: the agent loop and its store (``agent.py``, ``store/core.py``: every run goes
through ``Agent.run`` / ``Agent.continue_with_tool_results``), the encoding of
envelopes (``envelope``, used only through its public API: ``frame`` gives each
event's ``data:`` bytes, the server adds the ``id:`` line), ids and the journal
(``server/streams.py``).

A run is a task of its own, not of the request that started it: the request only
*follows* it. A client that goes away stops following; the run goes on and is stored,
and any client can pick it up again with ``Last-Event-ID`` (spec server §4.1).

Mount it in an existing ASGI app::

    from starlette.applications import Starlette
    from starlette.routing import Mount
    from agent_ref import SQLiteStore, ScriptedModel
    from agent_ref.server.app import create_app

    agent_app = create_app(store=SQLiteStore("agents.db"), model_factory=ScriptedModel)
    app = Starlette(routes=[Mount("/assistant", app=agent_app)], lifespan=agent_app.router.lifespan_context)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING, Any, Final

from envelope._extras import import_failed

try:
    import uvicorn
    from sse_starlette import EventSourceResponse
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover  # in a subprocess (tests/install)

from envelope import Emitter, EnvelopeError, MetaFinal, decode
from envelope.delivery import (
    DEFAULT_CALL_TIMEOUT,
    NO_PING,
    JournalError,
    JournalUnavailableError,
    OffLoopJournal,
    off_loop,
    replay_events,
    with_keepalives,
)

from ..agent import Agent, save_released
from ..errors import ConflictError, StoreError, UnavailableError
from ..run import checkpoints
from ..store.core import LogBatch, Store, owner_gone
from ..store.sessions import InboxBounds
from ..store.state import roll_back_dead_run
from ..tools.demo import default_tools
from .auth import LOCAL, JwtVerifier, Principal, authenticate, owns
from .http import (
    LOOPBACK_HOSTS,
    MAX_NUMBER_CHARS,
    _agent_uuid,
    _HostCheck,
    _json_type,
    _store_failure,
    _string,
)
from .http import (
    _allowed as _allowed,
)
from .http import (
    _read_json as _read_json,
)
from .http import (
    _refusal_of as _refusal_of,
)

# Re-exported under their old home (server_interop.py and serve_cli.py import them from here).
from .http import (
    _Refused as _Refused,
)
from .http import (
    _tool_results as _tool_results,
)
from .http import (
    _unknown_keys as _unknown_keys,
)
from .links import LINK_HOLDER, link_grants, link_route, linked_run, with_link
from .owners import owned_agent, principal_of
from .quotas import Quotas, QuotaState, admit_run
from .streams import (
    DONE_LINE,
    JOURNAL_LOST,
    RUN_ID_PATTERN,
    Journal,
    JournalFailedError,
    LiveStream,
    MemoryJournal,
    closing_lines,
    frame_event,
    parse_event_id,
    stream_agent,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

    from starlette.requests import Request

    from ..agent import AgentResult, Sink
    from ..models.core import Model
    from ..store.state import AgentState
    from ..tools.core import Tool

__all__ = ["LOOPBACK_HOSTS", "MAX_NUMBER_CHARS", "ServerConfig", "create_app", "serve"]

log = logging.getLogger("agent_ref.server")


#: The files of the page, served under ``/static/``, with their media types.
_WEB_FILES: Final = {
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "envelope-decoder.mjs": "text/javascript; charset=utf-8",
    "envelope-client.mjs": "text/javascript; charset=utf-8",
}


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The server's limits and options (spec ``spec/server.md``).

    Attributes:
        token: when set, every ``/agent/...`` request needs ``Authorization: Bearer <token>``
            (the single-user mode: its principal is ``auth.LOCAL``, spec server [PR1-e]).
        jwt: when set, the bearer token is a JWT these keys verify, its ``sub`` the principal
            (spec server §PR1); not together with ``token``.
        max_body_bytes: the largest request body accepted (413 above).
        max_prompt_chars: the longest prompt accepted (422 above).
        max_tool_results: the most tool results one resume may carry (422 above).
        keepalive_seconds: a ``: keep-alive`` comment is sent after this long without an event.
        shutdown_grace_seconds: on shutdown, how long runs have to end after ``abort()``.
        inbox_bounds: what a run's inbox may hold waiting (spec server [IB1-a]; 429 past it).
        storage_timeout: seconds a request waits for one store call made in a worker thread
            (the inbox's), ``503`` past it (spec server [SL1-c]).
        link_keys: the keys resume links are signed with (the first) and accepted under
            (``links.link_keys``; spec server [RL1-c]); empty: no links.
        quotas: the limits per principal (spec server [QU1-a]).
    """

    token: str | None = None
    jwt: JwtVerifier | None = None
    max_body_bytes: int = 256 * 1024
    max_prompt_chars: int = 32_000
    max_tool_results: int = 64
    keepalive_seconds: float = 15.0
    shutdown_grace_seconds: float = 10.0
    inbox_bounds: InboxBounds = field(default_factory=InboxBounds)
    storage_timeout: float = DEFAULT_CALL_TIMEOUT
    link_keys: tuple[bytes, ...] = ()
    quotas: Quotas = field(default_factory=Quotas)

    def __post_init__(self) -> None:
        """Refuse ``token`` with ``jwt`` (spec server [PR1-e]): one shared user, or principals.

        Raises:
            ValueError: both were given.
        """
        if self.token is not None and self.jwt is not None:
            raise ValueError("ServerConfig takes token (one user) or jwt (principals), not both")


@dataclass(slots=True)
class _Start:
    """A run being started: the stream appears with its first line, or the start fails."""

    agent: Agent
    first: asyncio.Future[LiveStream]
    stream: LiveStream | None = None
    #: The lease owner the run claimed the agent under, known from its first line on.
    owner: str | None = None


@dataclass(slots=True)
class _Debt:
    """A response this process ended without the journal or the store (spec server §3.3-d): owed once they answer."""

    run_id: str
    response: int
    agent_uuid: str
    owner: str | None
    error: dict[str, str]
    journal_open: bool


@dataclass(slots=True)
class RunManager:
    """The runs of this process: their tasks, live streams and journal (spec server §3, §4).

    Args:
        store: the agents' store.
        journal: where every line is written before it is sent.
        max_bytes: the line bound (for the closing lines the server writes itself).
    """

    store: Store
    journal: Journal
    max_bytes: int = 2048
    #: Loads a stored agent with the server's model and tools (to recover a run this process lost).
    reload: Callable[[str], Awaitable[Agent]] | None = None
    live: dict[tuple[str, int], LiveStream] = field(default_factory=dict)
    agents: dict[str, Agent] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    #: Responses ended without the journal or the store, to settle once they answer (spec server §3.3-d).
    owed: dict[tuple[str, int], _Debt] = field(default_factory=dict)
    repair: asyncio.Task[None] | None = None
    #: Checkpoint mode (``AgentOptions.checkpoints``): a dead run that can continue from its
    #: checkpoint is continued here, as a live response of this process (spec server [CN1-a]).
    continues: bool = False

    async def start(
        self,
        agent: Agent,
        call: Callable[[Sink], Awaitable[AgentResult | None]],
        *,
        opened: Callable[[], Awaitable[None]] | None = None,
    ) -> LiveStream:
        """Run ``call(sink)`` as a task of its own; return its stream once the first line is out.

        ``opened`` is called once, just before the first line is journaled (the run's claim
        is stored by then): a continuation closes the dead response there (spec server [CN1-b]).

        Raises:
            Whatever the run raised before it sent a line (``StateError``,
            ``ConflictError``, ``ToolResultsError``, ``UnavailableError``...): nothing
            was sent. ``JournalFailedError`` if the first line could not be journaled.
        """
        await self._settle_agent(agent)
        start = _Start(agent, asyncio.get_running_loop().create_future())
        start.first.add_done_callback(_retrieved)  # a client gone before the first line never reads it

        async def sink(line: bytes) -> None:
            stream = start.stream
            if stream is None:
                current = agent.current_response
                assert current is not None  # the agent sets its run before its first line
                start.owner = agent.lease_owner  # the claim is stored before the first line
                if opened is not None:
                    await opened()
                stream = LiveStream(current[0], current[1], agent.agent_uuid, self.journal, max_bytes=self.max_bytes)
                # spec delivery §3.6-b: journaled off the loop; the agent goes on once it is kept.
                await stream.write(line)  # JournalFailedError: nothing was sent; the start fails (503)
                start.stream = stream
                self.live[(stream.run_id, stream.response)] = stream
                self.agents[stream.run_id] = agent
                start.first.set_result(stream)
            else:
                await stream.write(line)
            if stream.done:
                self._forget(stream)

        task = asyncio.create_task(self._drive(start, call, sink))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return await asyncio.shield(start.first)

    async def _drive(self, start: _Start, call: Callable[[Sink], Awaitable[AgentResult | None]], sink: Sink) -> None:
        """Run the call; whatever happens, end its response and never raise (spec server §3.3)."""
        try:
            await call(sink)
        except asyncio.CancelledError:
            self._close(start, {"type": "server_shutdown", "message": "the server stopped during this response"})
            raise
        except Exception as exc:
            if not start.first.done():
                start.first.set_exception(exc)
            elif isinstance(exc, JournalFailedError | StoreError):
                log.warning("run %s stopped: %s", start.stream.run_id if start.stream else "?", exc)
            else:
                log.exception("run %s failed inside the server", start.stream.run_id if start.stream else "?")
            error = JOURNAL_LOST if isinstance(exc, JournalFailedError | UnavailableError) else INTERNAL_ERROR
            self._close(start, error)
            if start.owner is not None:  # the claim was stored: the agent may be left running (spec server §3.3-d)
                self._owe(start, error)
        else:
            if not start.first.done():  # pragma: no cover  # the agent always sends meta_init
                start.first.set_exception(RuntimeError("the run ended without sending a line"))
            self._close(start, {"type": "internal_error", "message": "the run ended without closing its response"})

    def _close(self, start: _Start, error: dict[str, str]) -> None:
        """End a response its run left open (spec server §3.3-a); never raises (§3.3-d)."""
        stream = start.stream
        if stream is None:
            return
        stream.end(error)
        stream.add_done_callback(lambda _: self._forget(stream))  # once its closing lines are journaled and sent

    def _forget(self, stream: LiveStream) -> None:
        """A finished response is read from the journal from now on (memory stays bounded)."""
        self.live.pop((stream.run_id, stream.response), None)
        if self.agents.get(stream.run_id) is not None and not any(k[0] == stream.run_id for k in self.live):
            del self.agents[stream.run_id]

    def _owe(self, start: _Start, error: dict[str, str]) -> None:
        """Remember a failed run's response and agent; settle them once the database answers (spec server §3.3-d)."""
        current = start.agent.current_response
        stream = start.stream
        if stream is not None:
            key = (stream.run_id, stream.response)
        elif current is not None:
            key = current
        else:
            return
        journal_open = stream is not None and stream.unjournaled > 0
        self.owed[key] = _Debt(key[0], key[1], start.agent.agent_uuid, start.owner, error, journal_open)
        if self.repair is None or self.repair.done():
            self.repair = asyncio.create_task(self._settle_owed())

    async def _settle_owed(self) -> None:
        """Settle every debt, trying again with a growing pause (0.25 s to 2 s) while the database is unavailable."""
        pause = 0.25
        while self.owed:
            for key, debt in list(self.owed.items()):
                with contextlib.suppress(JournalUnavailableError):  # tried again after the pause (store or journal)
                    await self._settle(key, debt)
            if self.owed:
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)

    async def _settle(self, key: tuple[str, int], debt: _Debt) -> None:
        """Close the debt's response in the journal, recover its agent, forget the debt.

        Raises:
            UnavailableError: the database still cannot be reached (the debt is kept).
        """
        try:
            if debt.journal_open:
                await self.end_in_journal(debt.run_id, debt.response, debt.error)
                debt.journal_open = False
            await self._recover_agent(debt)
        except JournalUnavailableError:
            raise
        except Exception:
            log.exception("cannot settle response %s:%d; left to the next start", *key)
        self.owed.pop(key, None)

    async def _settle_agent(self, agent: Agent) -> None:
        """Before a run of an agent this process owes a recovery: settle it now, and reload the agent's state.

        Raises:
            UnavailableError: the database still cannot be reached.
        """
        debts = [(key, debt) for key, debt in self.owed.items() if debt.agent_uuid == agent.agent_uuid]
        if not debts:
            return
        for key, debt in debts:
            await self._settle(key, debt)
        await agent.reload()

    async def _recover_agent(self, debt: _Debt) -> None:
        """Put an agent whose run this process lost back in order, by the agent's own recovery (spec agent-ref §10.2-b).

        Only when the store still shows it running that run under this process's lease:
        the lease is ours and the run is dead, so it need not wait for the lease to expire.
        """
        if self.reload is None or debt.owner is None:
            return
        agent = await self.reload(debt.agent_uuid)
        owner = debt.owner
        if self.continues and checkpoints.can_continue(agent.state) and agent.lease_owner == owner:
            # spec server [CN1-c]: the continuation is a live response of this process, journaled
            lines = await self.io.read(debt.run_id, debt.response) or []
            dead_log = lines if lines and lines[-1] == DONE_LINE else None
            key = (debt.run_id, debt.response)
            self.owed.pop(key, None)  # ``start`` settles the agent's debts first: not this one again
            try:
                await self.start(agent, lambda sink: agent.recover_dead(debt.run_id, owner, sink, dead_log=dead_log))
            except JournalUnavailableError:
                self.owed[key] = debt  # tried again once the database answers
                raise
            log.warning("agent %s: run %s, lost with the database, continues", debt.agent_uuid, debt.run_id)
            return
        await agent.recover_dead(debt.run_id, owner)
        log.warning("agent %s: run %s, lost with the database, was recovered", debt.agent_uuid, debt.run_id)

    @property
    def io(self) -> OffLoopJournal:
        """The journal's calls off the event loop, each bounded in time (spec delivery §3.6-a)."""
        return off_loop(self.journal)

    async def claim(self, run_id: str, response: int) -> bool:
        """Become the only writer of a response whose writer is gone (``journal.claim``; a journal without it: yes)."""
        claim = getattr(self.journal, "claim", None)
        return claim is None or bool(await self.io.call(claim, run_id, response))

    async def writer_dead(self, run_id: str, response: int) -> bool:
        """Whether a journaled response's writer is gone for sure (spec scaleout §2.2-b).

        The caller saw its writer lock free; that alone is not enough (a database restart
        frees every lock while the writers live and reconnect). Dead means, besides: not
        written here, not ended, and its agent is no longer running that response under a
        live lease (the lease expired, or the agent went on: idle, paused, or a later
        response claimed it).
        """
        if (run_id, response) in self.live:
            return False
        lines = await self.io.read(run_id, response) or []
        if not lines or lines[-1] == DONE_LINE:
            return False
        agent_uuid = stream_agent(lines)
        state = await self.store.load(agent_uuid) if agent_uuid is not None else None
        if state is None or state.status != "running" or state.run is None or state.run.run_id != run_id:
            return True
        # A checkpoint is saved with the response's index counted ([CN1-d]); a claim before it.
        current = response + 1 if state.run.checkpoint is not None else response
        return state.run.responses > current or state.lease_expires_at <= time.time()

    async def end_in_journal(self, run_id: str, response: int, error: dict[str, str]) -> list[bytes] | None:
        """Write the closing lines of a response this process ended without the journal (spec server §3.3-d).

        They are ``closing_lines`` of what the journal holds with the same ``error``, so
        the journal ends as the client's stream did. With a shared journal (``claim``),
        only if no other live session holds the response. A response that ended already,
        or that has no line, gets nothing.

        Returns:
            The response's lines, closing lines included, or ``None`` if another
            process writes it or it holds nothing.

        Raises:
            UnavailableError: the journal's database cannot be reached.
        """
        if (run_id, response) in self.live:
            return None
        if not await self.claim(run_id, response):
            return None
        lines = await self.io.read(run_id, response) or []
        tail = closing_lines(lines, run_id, error, max_bytes=self.max_bytes) if lines else []
        if not tail:
            release = getattr(self.journal, "release", None)
            if release is not None:
                await self.io.call(release, run_id, response)
            return lines or None
        await self.io.append_many(run_id, response, tail)
        return [*lines, *tail]

    async def latest(self, run_id: str) -> int | None:
        """The index of the run's newest response known here, or ``None``."""
        live = [response for run, response in self.live if run == run_id]
        stored = await self.io.responses(run_id) - 1
        best = max([*live, stored])
        return best if best >= 0 else None

    async def recover(self) -> list[tuple[str, int]]:
        """End every journaled response a dead process left open, and recover its agent (spec server §8.1-a).

        Called at start; a follower that finds a response whose writer died may call it
        too (``journal.unfinished()`` lists only responses no live process writes).

        Returns:
            The ``(run_id, response)`` pairs closed.
        """
        closed: list[tuple[str, int]] = []
        for run_id, response in await self.io.unfinished():
            if (run_id, response) in self.live or await self._written_elsewhere(run_id, response):
                continue  # [CK2.1-a]: another live server on the same store writes it
            if await self.close_dead(run_id, response):
                closed.append((run_id, response))
        return closed

    async def _written_elsewhere(self, run_id: str, response: int) -> bool:
        """Whether another live process writes this journaled response (spec server [CK2.1-a]).

        Its agent runs this run under a lease that has not expired, and the lease's owner
        (``host:pid:tag``) is a process alive on this host; on another host the lease alone
        decides.
        """
        agent_uuid = stream_agent(await self.io.read(run_id, response) or [])
        try:
            state = await self.store.load(agent_uuid) if agent_uuid is not None else None
        except Exception:
            return False
        if state is None or state.status != "running" or state.run is None or state.run.run_id != run_id:
            return False
        return state.lease_expires_at > time.time() and _owner_alive(state.lease_owner or "")

    async def close_dead(self, run_id: str, response: int) -> bool:
        """Close one response whose writer died, then put its agent back in order (spec server §8.1).

        The caller must know the writer is dead (the journal listed it as unfinished). If
        the store still holds the dead process's claim of this very response, the agent
        is recovered through the agent's own path (``state.roll_back_dead_run``, spec
        agent-ref §10.2-b): a resume is put back to its pause, and the response then ends
        with the same ``awaiting_frontend_tools`` (the client asks again); a run is closed
        as ``lost``, its prompt taken back out of the context. If the store logged the
        response whole (the process died after its final save, before sending), the
        journal gets the stored rest. Otherwise it gets the closing lines of §3.3-a.

        In checkpoint mode (``continues``) a run that can continue from its checkpoint is
        continued instead (``_continue_dead``, spec server [CN1-a]).

        Returns:
            ``False`` if the journal of that response could not be read (left as it is).
        """
        lines = await self.io.read(run_id, response) or []
        agent_uuid = stream_agent(lines)
        if self.continues:
            continued = await self._continue_dead(agent_uuid, run_id, response, lines)
            if continued is not None:
                return continued
        state = await self._dead_claim(agent_uuid, run_id, response)
        error = {
            "type": "server_restarted",
            "message": "the server stopped while sending this response; the run did not finish",
        }
        try:
            stored = await self._stored_rest(run_id, response, lines)
            if stored is not None:
                tail = stored
            elif state is not None and state.pending_frontend:
                error["message"] = (
                    "the server stopped while sending this response; "
                    "the run is paused again and waits for the same tool results"
                )
                tail = _paused_closing(lines, run_id, error, state, self.max_bytes)
            else:
                tail = closing_lines(lines, run_id, error, max_bytes=self.max_bytes)
        except Exception:
            log.exception("journal of run %s response %d is unreadable; left as it is", run_id, response)
            return False
        await self.io.append_many(run_id, response, tail)
        if state is not None:
            await self._release(state, run_id, response, [*lines, *tail])
        return True

    async def _continue_dead(
        self, agent_uuid: str | None, run_id: str, response: int, lines: list[bytes]
    ) -> bool | None:
        """Continue a dead checkpointed run here, live: its next response is this process's (spec server [CN1-a]).

        When the store still shows the dead process's checkpoint of this very response and
        the run can continue (``checkpoints.can_continue``), the agent is loaded and its
        recovery (``Agent.recover_dead``) runs as a run of this process (``start``): it
        claims the agent and stores the dead response's log closed with the ``lost`` error
        of [CK1.4-b] in one save; only then (``opened``) does the journal get the same
        closing lines, and the continuation, response ``response + 1``, is journaled and
        followed like any run (spec server [CN1-b]).

        Returns:
            ``None``: not a run to continue here (the caller closes it as before); ``True``:
            continued, or continued by another process first; ``False``: it failed (logged,
            left as it is, for a follower or the next start).
        """
        if agent_uuid is None or self.reload is None or not lines:
            return None
        try:
            agent = await self.reload(agent_uuid)
        except Exception:
            log.exception("could not load agent %s of interrupted run %s", agent_uuid, run_id)
            return None
        state, run = agent.state, agent.state.run
        if run is None or run.run_id != run_id or run.responses != response + 1 or not checkpoints.can_continue(state):
            return None
        if state.lease_expires_at > time.time() and _owner_alive(state.lease_owner or ""):
            return self._continued_elsewhere(run_id)  # another live process claimed it since it was found dead
        assert run.checkpoint is not None
        try:
            tail = _continued_closing(
                lines, run_id, checkpoints.lost_error(run.checkpoint.step), agent_uuid, self.max_bytes
            )
        except Exception:
            log.exception("journal of run %s response %d is unreadable; left as it is", run_id, response)
            return False
        owner, dead_log = state.lease_owner or "", [*lines, *tail]

        async def opened() -> None:  # the claim and the dead response's log are stored: close it in the journal
            await self.io.append_many(run_id, response, tail)

        try:
            await self.start(
                agent, lambda sink: agent.recover_dead(run_id, owner, sink, dead_log=dead_log), opened=opened
            )
        except ConflictError:
            return self._continued_elsewhere(run_id)
        except Exception:
            log.exception("could not continue interrupted run %s; left as it is", run_id)
            return False
        log.warning("run %s: its process died; continued here from its checkpoint", run_id)
        return True

    def _continued_elsewhere(self, run_id: str) -> bool | None:
        """Another process claimed the dead run first (spec server [CN1-a]): who closes the dead response.

        With a shared journal that has writer locks (``claim``), this process holds the dead
        response's lock, so the other one keeps no journal (``agent-ref recover``): ``None``,
        the caller closes it as before. Otherwise the other one is a server on the same
        journal, which closes it: ``True``, nothing to write here.
        """
        log.warning("run %s: another process continued it first", run_id)
        return None if getattr(self.journal, "claim", None) is not None else True

    async def _dead_claim(self, agent_uuid: str | None, run_id: str, response: int) -> AgentState | None:
        """The stored state, if it is still the claim of the dead ``response`` of ``run_id``, else ``None``."""
        if agent_uuid is None:
            return None
        try:
            state = await self.store.load(agent_uuid)
        except Exception:
            log.exception("could not load agent %s of interrupted run %s", agent_uuid, run_id)
            return None
        if state is None or state.status != "running" or state.run is None:
            return None
        if state.run.run_id != run_id or state.run.responses != response:
            return None  # recovered already, or another process went on with the run
        return state

    async def _release_children(self, parent: AgentState, owner: str | None) -> None:
        """Put back to their pause the paused children the dead resume had claimed (spec server §8.1-b).

        A claim names its process (``host:pid:tag``, agent-ref §10.2-a): a child claimed by
        the same process as the parent's dead claim died with it, so its lease need not be
        waited out either. Children claimed by any other process are left to their lease.
        """
        if owner is None or owner.count(":") < 2:
            return
        process = owner.rsplit(":", 1)[0] + ":"
        for child in parent.pending_children:
            try:
                state = await self.store.load(child.agent_uuid)
                if state is None or state.status != "running" or not (state.lease_owner or "").startswith(process):
                    continue
                await save_released(self.store, state, roll_back_dead_run(state))
            except Exception:
                log.exception("could not recover subagent %s of a dead resume", child.agent_uuid)

    async def _stored_rest(self, run_id: str, response: int, lines: list[bytes]) -> list[bytes] | None:
        """The lines after ``lines`` if the store logged this response whole (saved, then killed before sending)."""
        try:
            stored = await self.store.run_responses(run_id)
        except Exception:
            log.exception("could not read the stored log of interrupted run %s", run_id)
            return None
        whole = stored[response] if response < len(stored) else []
        if whole and whole[-1] == DONE_LINE and whole[: len(lines)] == lines:
            return whole[len(lines) :]
        return None

    async def _release(self, state: AgentState, run_id: str, response: int, lines: list[bytes]) -> None:
        """Recover a dead run's agent as the agent itself would (spec agent-ref §10.2-b), with the response's log."""
        owner = state.lease_owner
        try:
            outcome = roll_back_dead_run(state)
            if outcome == "paused":
                await self._release_children(state, owner)
            batch = LogBatch(run_id=run_id, response=response, start=0, lines=lines)
            await save_released(self.store, state, outcome, log=batch)
            log.warning("agent %s of interrupted run %s: %s", state.agent_uuid, run_id, outcome)
        except Exception:
            log.exception("could not recover agent %s of interrupted run %s", state.agent_uuid, run_id)

    async def shutdown(self, grace: float) -> None:
        """Abort every run; give them ``grace`` seconds to end their streams, then cancel them.

        Debts still owed (the database never came back) are left to the next start, which
        closes what the journal holds (spec server §3.3-b).
        """
        for agent in list(self.agents.values()):
            agent.abort()
        tasks = list(self.tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        if self.repair is not None:
            self.repair.cancel()
            await asyncio.gather(self.repair, return_exceptions=True)


def _owner_alive(owner: str) -> bool:
    """Whether a lease owner ``host:pid:tag`` may be alive: on this host, its process exists (spec server [CK2.1-a]).

    An owner id that carries its process's start time is judged by ``owner_gone`` (a pid
    reused by another process is gone too, agent-ref [R10.2-c]); an older one by its pid.
    """
    if owner_gone(owner):
        return False
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return True  # another host's process: its lease tells
    if int(pid_text) == os.getpid():
        return False  # this process writes its live responses through its manager's ``live``
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, owned by someone else
    return True


def _retrieved(future: asyncio.Future[LiveStream]) -> None:
    """Mark a start's outcome as read (asyncio logs a failure nobody read)."""
    if not future.cancelled():
        future.exception()


#: The ``error`` payload of a response the server ended after a failure of its own (spec server §3.3-a).
INTERNAL_ERROR: Final = {"type": "internal_error", "message": "the server failed during this response"}


def _paused_closing(
    lines: Sequence[bytes], run_id: str, error: dict[str, str], state: AgentState, max_bytes: int
) -> list[bytes]:
    """The closing lines of a resumed response whose run goes back to its pause (spec server §8.1-b).

    As ``closing_lines`` (open blocks closed, an ``error`` per agent), except that the
    paused agent ends with the same ``awaiting_frontend_tools`` as its pause instead of a
    ``meta_final``: the run did not end, and a client reading this response asks for the
    same tool results again.
    """
    pending = json.dumps([p.element() for p in state.pending_frontend], ensure_ascii=False)
    awaiting = Emitter(state.agent_uuid, max_bytes).buffered("awaiting_frontend_tools", pending)
    return _closing_instead_of_final(lines, run_id, error, state.agent_uuid, max_bytes, awaiting)


def _continued_closing(
    lines: Sequence[bytes], run_id: str, error: dict[str, str], agent_uuid: str, max_bytes: int
) -> list[bytes]:
    """The closing lines of a dead response whose run continues in the next one (spec server [CN1-b]).

    As ``closing_lines`` (open blocks closed, an ``error`` per agent, a subagent's
    ``meta_final``), without the root agent's ``meta_final``: the run did not end
    (agent-ref [CK1.4-b]).
    """
    return _closing_instead_of_final(lines, run_id, error, agent_uuid, max_bytes, [])


def _closing_instead_of_final(
    lines: Sequence[bytes], run_id: str, error: dict[str, str], agent_uuid: str, max_bytes: int, instead: list[bytes]
) -> list[bytes]:
    """``closing_lines`` with the root agent's ``meta_final`` (however many lines) replaced by ``instead``, once."""
    out: list[bytes] = []
    for line in closing_lines(lines, run_id, error, max_bytes=max_bytes):
        try:
            envelope = decode(line) if line != DONE_LINE else None
        except EnvelopeError:
            envelope = None
        if envelope is not None and isinstance(envelope, MetaFinal) and envelope.agent == agent_uuid:
            out += instead
            instead = []  # a meta_final split over several lines is replaced once
            continue
        out.append(line)
    return out


# ---------------------------------------------------------------------- request checks


# ---------------------------------------------------------------------- the app


def create_app(
    *,
    store: Store,
    model_factory: Callable[[], Model],
    tools: Sequence[Tool] | None = None,
    agent_config: Mapping[str, Any] | None = None,
    journal: Journal | None = None,
    config: ServerConfig | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The agent server as an ASGI app (spec ``spec/server.md``).

    Args:
        store: where agents are stored (any process with the same store can resume them).
        model_factory: makes the model of each run (``ScriptedModel`` for the embedded one).
        tools: the agent's tools; ``default_tools()`` (calculator, frontend ``confirm``) when ``None``.
        agent_config: other ``Agent`` arguments (``max_steps``, ``max_bytes``...).
        journal: where lines are written before they are sent; a ``MemoryJournal`` when
            ``None`` (then a restart forgets the streams; the store keeps finished runs' logs).
            That one is bounded (spec server §3.1-d): finished responses are replayed from
            the store's log after 600 s or 256 newer ones; pass
            ``MemoryJournal(keep_finished=..., keep_seconds=...)`` to choose.
        config: limits and the token.
        allowed_hosts: the names and addresses a request's ``Host`` may carry (port aside;
            ``"*"``: any); others are refused with 421 (spec server §5.3-a). ``None``:
            ``LOOPBACK_HOSTS``. ``serve`` adds the address it binds.

    Raises:
        ValueError: an allowed host that is not a host name or address.

    Returns:
        A Starlette app; its lifespan recovers interrupted responses at start and aborts
        the running ones at shutdown.
    """
    cfg = config or ServerConfig()
    hosts = _allowed(LOOPBACK_HOSTS if allowed_hosts is None else allowed_hosts)
    settings = dict(agent_config or {})
    toolset = list(tools) if tools is not None else default_tools()

    async def reload(agent_uuid: str) -> Agent:
        return await Agent.load(agent_uuid, store, model_factory(), tools=toolset, **settings)

    continues = bool(settings.get("checkpoints") or getattr(settings.get("options"), "checkpoints", False))
    manager = RunManager(
        store,
        journal if journal is not None else MemoryJournal(),
        int(settings.get("max_bytes", 2048)),
        reload=reload,
        continues=continues,
    )
    app = _App(store, manager, cfg, model_factory, toolset, settings, QuotaState(cfg.quotas))
    starlette = Starlette(
        routes=_routes(app),
        lifespan=lambda _: _lifespan(app),
        middleware=[Middleware(_HostCheck, hosts=hosts)],
        exception_handlers={JournalError: _store_failure},  # spec server §3.4-a: whichever endpoint met it
    )
    starlette.state.manager = manager
    starlette.state.allowed_hosts = hosts
    return starlette


def _routes(app: _App) -> list[Route]:
    """Every route of the app, by group."""
    from .interop import interop_routes  # spec server §9: AG-UI and useChat on the same runs
    from .stop import stop_route  # spec server §1.4: stopping a run

    stop = stop_route(
        store=app.store, manager=app.manager, max_body_bytes=app.cfg.max_body_bytes, load=app.load, route=app.route
    )
    interop = interop_routes(
        store=app.store,
        manager=app.manager,
        config=app.cfg,
        new_agent=app.new_agent,
        route=app.route,
        sse=app.sse,
        quota=app.quota,
    )
    from .messages import messages_route  # spec server: streaming input to a working run

    messages = messages_route(
        manager=app.manager, max_body_bytes=app.cfg.max_body_bytes, config=app.cfg, route=app.route, quota=app.quota
    )
    from .files import files_routes  # spec server §FS: the stored files the runs name in meta_files
    from .owners import list_routes  # spec server [OW2-a]: each principal's own agents and runs
    from .tasks import tasks_routes  # spec agent-ref [BJ1-b]: an agent's background tasks, long-polled

    lists = list_routes(store=app.store, route=app.route) + tasks_routes(store=app.store, route=app.route)
    files = files_routes(app.settings, app.route)
    link = link_route(store=app.store, manager=app.manager, keys=app.cfg.link_keys, route=app.route)
    return [*interop, *_page_routes(), *_run_routes(app), _follow_route(app), stop, messages, *lists, *files, link]


@dataclass(slots=True, eq=False)
class _App:
    """What the routes of one app share: the store, the run manager, the limits, how agents are made."""

    store: Store
    manager: RunManager
    cfg: ServerConfig
    model_factory: Callable[[], Model]
    toolset: list[Tool]
    settings: dict[str, Any]
    #: The quotas' per-process counts (spec server §QU).
    quota: QuotaState

    def new_agent(self, agent_uuid: str | None = None) -> Agent:
        """A new agent of this server's configuration."""
        return Agent(self.model_factory(), store=self.store, agent_uuid=agent_uuid, tools=self.toolset, **self.settings)

    async def load(self, agent_uuid: str, principal: Principal) -> Agent:
        """A stored agent of ``principal``, or a 404 that names it (both endpoints that continue an agent).

        Another principal's agent is the same 404 as one the store does not have (spec
        server [OW1-b]); a store that fails is the server's
        error (503 by ``guarded`` for a ``StoreError``, spec server §3.4-a; else 500), whose
        text, which may name the database, stays in the log.
        """
        state = await self.store.load(agent_uuid)
        if state is None or not owns(principal, state.principal):
            raise _Refused(404, "unknown_agent", f"no agent {agent_uuid} in the store")
        agent = self.new_agent(agent_uuid)
        agent.state = state  # the public way to continue a stored agent (Agent.load reads the store again)
        return agent

    def sse(self, events: AsyncIterator[bytes], extra: Mapping[str, str]) -> EventSourceResponse:
        """An SSE answer with the keep-alive comments (spec server §2)."""
        return EventSourceResponse(
            with_keepalives(events, self.cfg.keepalive_seconds),  # spec delivery §6.1-c: during silences only
            headers={"Cache-Control": "no-cache", **extra},
            ping=NO_PING,
            sep="\n",
        )

    def route(
        self, handler: Callable[[Request], Awaitable[Response]], *, link: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` behind the app's checks (the token; a resume link instead where ``link``), refusals as JSON."""

        async def endpoint(request: Request) -> Response:
            return await _guarded(self.cfg, request, handler, link=link)

        return endpoint


async def _guarded(
    cfg: ServerConfig, request: Request, handler: Callable[[Request], Awaitable[Response]], *, link: bool = False
) -> Response:
    try:
        if link and link_grants(request, cfg.link_keys):  # spec server [RL1-a]: ?token= on the stream only
            request.state.principal = LINK_HOLDER  # the link is its holder's right to this one run's stream
        else:
            # spec server [PR1-a]: the principal is known before any handler runs; handlers read it here.
            request.state.principal = authenticate(request, cfg.token, cfg.jwt)
        return with_link(request, cfg.link_keys, await handler(request))  # spec server [RL1-d]
    except _Refused as refused:
        return refused.response()
    except JournalError as exc:  # spec server §3.4-a: the database (store or journal) failed: 503, naming nothing
        return _refusal_of(exc).response()
    except Exception:
        # spec server §1: never a traceback; the details (paths, the store's text) stay in the log.
        log.exception("%s %s failed before its answer started", request.method, request.url.path)
        return _Refused(500, "internal_error", "the server failed on this request; see its log").response()


def _headers(stream: LiveStream) -> dict[str, str]:
    return {
        "X-Run-Id": stream.run_id,
        "X-Agent-Uuid": stream.agent_uuid,
        "X-Response-Index": str(stream.response),
    }


def _run_routes(app: _App) -> list[Route]:
    """``POST /agent/run`` and ``POST /agent/tool_results`` (spec server §1.1, §1.2)."""
    cfg, manager = app.cfg, app.manager

    async def run(request: Request) -> Response:
        body = await _read_json(request, cfg.max_body_bytes)
        _unknown_keys(body, ("prompt", "agent_uuid", "fork"))
        prompt = _string(body, "prompt", required=True, limit=cfg.max_prompt_chars)
        assert prompt is not None
        agent_uuid = _agent_uuid(body, required=False)
        fork = _fork_flag(body, agent_uuid)
        principal = principal_of(request)
        agent = app.new_agent() if agent_uuid is None else await app.load(agent_uuid, principal)
        # spec server [QU1-a]: the quotas before anything is created (the fork included)
        async with admit_run(app.quota, app.store, principal.sub, default=LOCAL.sub):
            try:
                if fork:
                    agent = await agent.fork()  # spec server [SVSE1-a]: the run is the fork's
                if agent_uuid is None or fork:
                    agent.state.principal = principal.sub  # spec server [OW1-a]: its creator; saved with its first line
                stream = await manager.start(agent, lambda sink: agent.run(prompt, sink))
            except Exception as exc:
                raise _refusal_of(exc) from None
        return app.sse(stream.follow(), _headers(stream))

    async def tool_results(request: Request) -> Response:
        body = await _read_json(request, cfg.max_body_bytes)
        _unknown_keys(body, ("agent_uuid", "tool_results"))
        agent_uuid = _agent_uuid(body, required=True)
        assert agent_uuid is not None
        results = _tool_results(body, cfg.max_tool_results)
        principal = principal_of(request)
        agent = await app.load(agent_uuid, principal)
        async with admit_run(app.quota, app.store, principal.sub, default=LOCAL.sub):  # [QU1-a]
            try:
                stream = await manager.start(agent, lambda sink: agent.continue_with_tool_results(results, sink))
            except Exception as exc:
                raise _refusal_of(exc) from None
        return app.sse(stream.follow(), _headers(stream))

    return [
        Route("/agent/run", app.route(run), methods=["POST"]),
        Route("/agent/tool_results", app.route(tool_results), methods=["POST"]),
    ]


def _fork_flag(body: Mapping[str, Any], agent_uuid: str | None) -> bool:
    """``fork`` of ``POST /agent/run``: a boolean, only with ``agent_uuid`` (spec server [SVSE1-a])."""
    fork = body.get("fork", False)
    if not isinstance(fork, bool):
        got = _json_type(fork)
        raise _Refused(422, "invalid_request", f"fork must be true or false, got {got}", field="$.fork")
    if fork and agent_uuid is None:
        raise _Refused(422, "invalid_request", "fork needs agent_uuid (the agent to fork)", field="$.fork")
    return fork


def _follow_route(app: _App) -> Route:
    """``GET /agent/runs/{run_id}/stream``: replay with ``Last-Event-ID``, then follow (spec server §1.3, §2.3)."""
    store, manager = app.store, app.manager

    async def follow(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise _Refused(404, "unknown_run", "no such run")
        last = request.headers.get("last-event-id")
        if last:
            parsed = parse_event_id(last)
            if parsed is None or parsed[0] != run_id:
                raise _Refused(
                    400, "invalid_last_event_id", f"Last-Event-ID {last[:80]!r} is not an id of run {run_id}"
                )
            _, response, after = parsed
        if linked_run(request) != run_id and await owned_agent(principal_of(request), manager, store, run_id) is None:
            # spec server [OW1-b]: another principal's run is answered as a run that does not exist
            number = response if last else _response_param(request, None)
            raise _Refused(404, "unknown_run", f"no response {number} of run {run_id} here")
        if not last:
            latest = await manager.latest(run_id)
            if latest is None:  # a run made without this server's journal: the store's log
                latest = len(await _stored_responses(store, run_id)) - 1
            response, after = _response_param(request, latest if latest >= 0 else None), -1
        stream = manager.live.get((run_id, response))
        if stream is not None:
            if after >= len(stream.lines):
                raise _Refused(400, "invalid_last_event_id", f"Last-Event-ID {last!r} is past what was sent")
            return app.sse(stream.follow(after), _headers(stream))
        return await _finished(app, run_id, response, after, last)

    return Route("/agent/runs/{run_id}/stream", app.route(follow, link=True), methods=["GET"])


async def _finished(app: _App, run_id: str, response: int, after: int, last: str | None) -> Response:
    """A response no live run of this process writes: from the journal, or the store's log (spec server §2.3)."""
    manager = app.manager
    lines = await manager.io.read(run_id, response) or None  # a journal's empty response holds nothing
    if lines is None:
        stored = await _stored_responses(app.store, run_id)
        lines = (stored[response] or None) if response < len(stored) else None
    if lines is None:
        raise _Refused(404, "unknown_run", f"no response {response} of run {run_id} here")
    if after >= len(lines):
        raise _Refused(400, "invalid_last_event_id", f"Last-Event-ID {last!r} is past the end of that response")
    if after == len(lines) - 1 and lines[-1] == DONE_LINE:
        return Response(status_code=204)  # spec server §2.3-c: the client has it all; EventSource stops on 204
    agent = stream_agent(lines) or ""
    extra = {"X-Run-Id": run_id, "X-Agent-Uuid": agent, "X-Response-Index": str(response)}
    shared = getattr(manager.journal, "follow", None)
    if lines[-1] != DONE_LINE and shared is not None:
        # spec scaleout §2.1-a: another process is writing this response; follow it in the shared journal
        return app.sse(_followed(manager, shared, run_id, response, after), extra)
    return app.sse(_replay(run_id, response, lines, after), extra)


def _page_routes() -> list[Route]:
    """The browser page at ``/`` and its files under ``/static/``."""

    async def page(_: Request) -> Response:
        return Response(_web("index.html"), media_type="text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _WEB_FILES:
            return JSONResponse({"error": {"type": "not_found", "message": "no such file"}}, status_code=404)
        return Response(_web(name), media_type=_WEB_FILES[name], headers={"Cache-Control": "no-cache"})

    return [Route("/", page, methods=["GET"]), Route("/static/{name}", static, methods=["GET"])]


@contextlib.asynccontextmanager
async def _lifespan(app: _App) -> AsyncIterator[None]:
    """At start, close what a previous process left open; at shutdown, abort the runs and close the store."""
    from .stop import listen_for_stops

    manager = app.manager
    closed = await manager.recover()
    if closed:
        log.warning("closed %d response(s) left open by a previous process", len(closed))
    stops = asyncio.create_task(listen_for_stops(manager))  # spec server §1.4-c: stops sent by other processes
    yield
    stops.cancel()
    await manager.shutdown(app.cfg.shutdown_grace_seconds)
    close = getattr(app.store, "aclose", None)
    if close is not None:  # a pooled store (PostgreSQL) stops its workers with the app
        await close()


def _response_param(request: Request, latest: int | None) -> int:
    raw = request.query_params.get("response")
    if raw is None:
        if latest is None:
            raise _Refused(404, "unknown_run", "no such run")
        return latest
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9:
        raise _Refused(400, "invalid_request", "response must be a non-negative integer", field="response")
    return int(raw)


async def _stored_responses(store: Store, run_id: str) -> list[list[bytes]]:
    """The responses of a run from the store's log (runs made without this server's journal)."""
    lines = await store.run_log(run_id)
    responses: list[list[bytes]] = [[]]
    for line in lines:
        responses[-1].append(line)
        if line == DONE_LINE:
            responses.append([])
    if not responses[-1]:
        responses.pop()
    return responses


async def _followed(
    manager: RunManager,
    shared: Callable[[str, int, int], AsyncIterator[tuple[int, bytes]]],
    run_id: str,
    response: int,
    after: int,
) -> AsyncIterator[bytes]:
    """Frame the lines another process writes to a shared journal, as they arrive, up to ``[DONE]``.

    When the writer is gone without ``[DONE]`` (its lock free, and its agent's lease of
    the run expired or taken by a later response), this process claims the response and
    closes it then, recovering its agent (``RunManager.close_dead``, spec server §8.1,
    scaleout §2.2-b), and the follower reads the closing lines. While the lock is
    free but the lease lives (the writer may be reconnecting to the database), it reads
    again every ``poll_seconds``. A database failure ends the stream without ``[DONE]``:
    the client reconnects with ``Last-Event-ID`` (and meets a 503 while it is down).
    """
    position = after
    pause = float(getattr(manager.journal, "poll_seconds", 0.5))
    try:
        while True:
            async for seq, line in shared(run_id, response, position):
                yield frame_event(run_id, response, seq, line)
                position = seq
                if line == DONE_LINE:
                    return
            if await manager.writer_dead(run_id, response):
                if await manager.claim(run_id, response):  # else another process closes it: read its lines
                    await manager.close_dead(run_id, response)
                    log.warning("closed response %s:%d: its writing process is gone", run_id, response)
                continue  # read the closing lines (ours, or those of the process that claimed it first)
            await asyncio.sleep(pause)
    except JournalError as exc:
        log.warning("stopped following response %s:%d: %s", run_id, response, exc)


async def _replay(run_id: str, response: int, lines: Sequence[bytes], after: int) -> AsyncIterator[bytes]:
    for event in replay_events(run_id, response, lines, after):
        yield event


def _web(name: str) -> bytes:
    return (resources.files("agent_ref.server") / "web" / name).read_bytes()


# ---------------------------------------------------------------------- running it


def serve(
    app: Starlette,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    ready: Callable[[str], None] | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> None:
    """Run ``app`` with uvicorn until interrupted; ``ready(url)`` is called once the port is bound.

    Port 0 picks a free port; ``ready`` learns which. For an app made by ``create_app``,
    the ``Host`` names it answers to (spec server §5.3-a) gain ``host`` (the bound
    address) and ``allowed_hosts``.

    Raises:
        ValueError: an allowed host that is not a host name or address.
    """
    names = getattr(getattr(app, "state", None), "allowed_hosts", None)
    if isinstance(names, set):
        names |= _allowed([host, *(allowed_hosts or ())])
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    with sock:
        sock.bind((host, port))
        sock.listen(2048)  # connections queue from now on, so ``ready`` may announce the URL before uvicorn runs
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5))
        if ready is not None:
            ready(f"http://{shown}:{bound}/")
        server.run(sockets=[sock])
