"""Stopping a run from HTTP: ``POST /agent/runs/{run_id}/stop`` (spec server §1.4), on any process of a fleet.

Owns: the stop endpoint, and the listener that carries a stop request to the process
running the run (``listen_for_stops``, started by the app's lifespan).
Does not own: the abort itself (``Agent.abort``, spec agent-ref §5.5: the run closes its
open blocks, answers its calls, ends with ``error`` ``aborted``, ``meta_final`` and
``[DONE]``), nor the closing of a paused run (``Agent.abandon``, §10.3), nor the signal
between processes (the journal's ``request_stop`` / ``stop_requests``: on PostgreSQL a
NOTIFY, ``envelope.delivery.postgres``, spec delivery §3.5).

How a stop reaches the run: the process that answers finds the run's agent in the
store. If the agent runs that run here, it is aborted here. If it runs elsewhere, the
request is sent through the journal (every process listens) and sent again every
``RESEND_SECONDS`` until the store shows the run ended, for at most ``WAIT_SECONDS``
(a notification reaches only the processes listening at that moment). A paused run
is abandoned (its closing response is journaled like any other, so followers see it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Final

from envelope._extras import import_failed

try:
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover  # in a subprocess (tests/install)

from envelope.delivery import JournalError

from .http import _read_json, _refusal_of, _Refused, _unknown_keys
from .owners import owned_agent, principal_of
from .streams import RUN_ID_PATTERN

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    from ..agent import Agent
    from ..store.core import Store
    from ..store.state import AgentState
    from .app import RunManager
    from .auth import Principal

__all__ = ["RESEND_SECONDS", "STOP_REASON_TEXT", "WAIT_SECONDS", "listen_for_stops", "stop_route"]

log = logging.getLogger("agent_ref.server")

#: The longest a stop request waits for the run to end before it answers ``202``.
WAIT_SECONDS: Final = 10.0
#: How often a stop request for a run on another process is sent again while it waits.
RESEND_SECONDS: Final = 0.5
#: What a paused run's calls are answered with when it is stopped (``abandoned: <this>``).
STOP_REASON_TEXT: Final = "stopped by the user"


async def _body(request: Request, limit: int) -> None:
    """The body is optional; when sent it is a JSON object with no field (spec server §1.4-a)."""
    if "content-type" not in request.headers:
        body = await request.body()
        if not body:
            return
    _unknown_keys(await _read_json(request, limit), ())


def _runs_it(state: AgentState | None, run_id: str) -> bool:
    return state is not None and state.status != "idle" and state.run is not None and state.run.run_id == run_id


async def _ended(store: Store, agent_uuid: str, run_id: str) -> Response:
    """``200`` with how the run ended (its run record), once it has."""
    records = [r for r in await store.runs(agent_uuid) if r.run_id == run_id]
    reason = records[-1].stop_reason if records else None
    state = await store.load(agent_uuid)
    return JSONResponse(
        {
            "run_id": run_id,
            "agent_uuid": agent_uuid,
            "stopped": True,
            "stop_reason": reason,
            "status": state.status if state is not None else None,
        }
    )


async def _finished(store: Store, agent_uuid: str, run_id: str, state: AgentState | None) -> _Refused:
    """``409 run_finished``: the run had already ended; its state says how."""
    records = [r for r in await store.runs(agent_uuid) if r.run_id == run_id]
    return _Refused(
        409,
        "run_finished",
        f"run {run_id} has already ended; nothing to stop",
        run_id=run_id,
        agent_uuid=agent_uuid,
        agent_status=state.status if state is not None else None,
        stop_reason=records[-1].stop_reason if records else None,
    )


async def _abandon(manager: RunManager, agent: Agent) -> None:
    """Close a paused run (``Agent.abandon``) and journal its closing response, as any response is.

    ``abandon`` stores every line before it sends one (they are all closing lines), so the
    lines are gathered and journaled once it returns; a follower or a replay then finds
    them in the journal like those of any other response.
    """
    current = agent.current_response
    assert current is not None
    run_id, index = current[0], current[1] + 1  # the response abandon is about to open
    lines: list[bytes] = []
    try:
        await agent.abandon(lines.append, reason=STOP_REASON_TEXT)
    except Exception as exc:
        raise _refusal_of(exc) from None
    try:
        await manager.io.append_many(run_id, index, lines)  # spec server [SL1-a]: off the loop, bounded
    except Exception as exc:
        # spec server [S3.5-c]: the abandon is stored (its closing response is in the store's
        # log, which a replay reads when the journal lacks it): the stop took, and says so.
        log.warning("run %s: stopped, but its closing response could not be journaled: %s", run_id, exc)


def stop_route(
    *,
    store: Store,
    manager: RunManager,
    max_body_bytes: int,
    load: Callable[[str, Principal], Awaitable[Agent]],
    route: Callable[[Callable[[Request], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]],
    wait_seconds: float = WAIT_SECONDS,
) -> Route:
    """The ``POST /agent/runs/{run_id}/stop`` route (spec server §1.4), with the app's checks (``route``)."""

    async def stop(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        await _body(request, max_body_bytes)
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise _Refused(404, "unknown_run", "no such run")
        principal = principal_of(request)
        agent_uuid = await owned_agent(principal, manager, store, run_id)
        if agent_uuid is None:  # spec server [OW1-b]: another principal's run is answered as one not known
            raise _Refused(404, "unknown_run", f"no run {run_id} here")
        state = await store.load(agent_uuid)
        if not _runs_it(state, run_id):
            raise await _finished(store, agent_uuid, run_id, state)
        assert state is not None
        if state.status == "awaiting_frontend_tools":
            await _abandon(manager, await load(agent_uuid, principal))
            return await _ended(store, agent_uuid, run_id)
        deadline = time.monotonic() + wait_seconds
        sent = 0.0
        while True:
            here = manager.agents.get(run_id)
            if here is not None:
                here.abort()
            elif time.monotonic() - sent >= RESEND_SECONDS:
                request_stop = getattr(manager.journal, "request_stop", None)
                if request_stop is None:  # a journal of this process only: the run's process cannot be reached
                    raise _Refused(409, "agent_state", f"run {run_id} runs in a process this one cannot reach")
                await manager.io.call(request_stop, run_id)  # spec server [SL1-a]: a NOTIFY, off the loop
                sent = time.monotonic()
            await asyncio.sleep(0.05)
            state = await store.load(agent_uuid)
            if state is not None and _runs_it(state, run_id) and state.status == "awaiting_frontend_tools":
                # it reached a pause before the abort: §1.4-b
                await _abandon(manager, await load(agent_uuid, principal))
            if not _runs_it(await store.load(agent_uuid), run_id):
                return await _ended(store, agent_uuid, run_id)
            if time.monotonic() > deadline:
                body: dict[str, Any] = {"run_id": run_id, "agent_uuid": agent_uuid, "stopped": False}
                body["message"] = f"stop requested; the run had not ended after {wait_seconds:g} s"
                return JSONResponse(body, status_code=202)

    return Route("/agent/runs/{run_id}/stop", route(stop), methods=["POST"])


async def listen_for_stops(manager: RunManager, pause: float = 1.0) -> None:
    """Abort the runs of this process that any process is asked to stop (until cancelled).

    A journal without ``stop_requests`` (one process only) needs no listener: its stop
    requests are answered where the run is. While the database is away, listens again
    every ``pause`` seconds; requests sent meanwhile are sent again by their senders.
    """
    requests = getattr(manager.journal, "stop_requests", None)
    if requests is None:
        return
    while True:
        try:
            async for run_id in requests():
                agent = manager.agents.get(run_id)
                if agent is not None:
                    log.info("run %s: stop requested by another process", run_id)
                    agent.abort()
        except JournalError as exc:
            log.warning("listening for stop requests again in %.1f s: %s", pause, exc)
        await asyncio.sleep(pause)
