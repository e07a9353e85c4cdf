"""Whose runs are whose: the ownership checks of the server's endpoints and the list endpoints (spec server §OW).

Owns: reading a request's principal (``principal_of``; ``_guarded`` in ``server/app.py`` sets
it), finding the agent a run belongs to (``run_agent``: this process, the journal, the store's
log), the check that a run is the principal's (``owned_run``), and ``GET /agents`` and
``GET /agent/runs`` (only the principal's own; an admin's, everyone's). Does not own: who a
request is from (``server/auth.py``), nor what each endpoint does once the check has passed.

Another principal's run or agent is answered exactly as one that does not exist (spec server
[OW1-b]): the checks here say only *whether*; each endpoint raises its own not-found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from envelope._extras import import_failed

try:
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover

from .auth import Principal, owns
from .http import _Refused
from .streams import stream_agent

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    from ..store.core import AgentSummary, Store
    from ..store.state import RunRecord
    from .app import RunManager

__all__ = [
    "LIST_LIMIT",
    "QUERY_SHOWN",
    "list_routes",
    "listed_query",
    "listed_runs",
    "owned_agent",
    "principal_of",
    "run_agent",
    "runs_of",
]

#: The most agents ``GET /agents`` and ``GET /agent/runs`` answer with, newest first (spec server [OW2-a]).
LIST_LIMIT: Final = 100
#: The most characters of a run's ``user_query`` ``GET /agent/runs`` answers with, the cut marked (spec server [OW2-b]).
QUERY_SHOWN: Final = 200
#: What ends a query cut to ``QUERY_SHOWN`` (it counts as one of them).
CUT: Final = "\u2026"


def principal_of(request: Request) -> Principal:
    """The principal ``_guarded`` found for ``request``.

    Raises:
        _Refused: 401 when the handler runs without the app's guard (nothing is assumed).
    """
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):
        raise _Refused(401, "unauthorized", "no verified principal for this request")
    return principal


async def run_agent(manager: RunManager, store: Store, run_id: str) -> str | None:
    """The agent a run belongs to: from this process, else the journal's first line, else the store's log."""
    here = manager.agents.get(run_id)
    if here is not None:
        return here.agent_uuid
    lines = await manager.io.read(run_id, 0)  # spec server [SL1-a]: off the loop, bounded
    if not lines:
        lines = await store.run_log(run_id)
    return stream_agent(lines)


async def owned_agent(principal: Principal, manager: RunManager, store: Store, run_id: str) -> str | None:
    """The agent of ``run_id`` when the run is ``principal``'s; ``None`` when it is not, or is not known.

    A run's owner is its agent's (spec server [OW1-a]): every run of an agent is started by
    a principal the agent's owner check let through. The two ``None`` cases are one answer
    on purpose (spec server [OW1-b]): an endpoint cannot tell them apart, so neither can a client.
    """
    agent_uuid = await run_agent(manager, store, run_id)
    if agent_uuid is None or principal.admin:
        return agent_uuid
    state = await store.load(agent_uuid)
    return agent_uuid if state is not None and owns(principal, state.principal) else None


async def runs_of(store: Store, agent_uuids: list[str]) -> dict[str, list[RunRecord]]:
    """The completed runs of each agent: the store's one-query ``runs_of``, else one ``runs`` per agent.

    The project's stores all have ``runs_of`` (spec server [OW3-a]); a store of the
    ``Store`` protocol without it still lists, at one query an agent.
    """
    batch = getattr(store, "runs_of", None)
    if batch is not None:
        found: dict[str, list[RunRecord]] = await batch(agent_uuids)
        return found
    return {uuid: await store.runs(uuid) for uuid in agent_uuids}


def listed_query(query: str) -> str:
    """``query`` as the run list carries it: whole up to ``QUERY_SHOWN`` characters, else cut and ending in ``CUT``."""
    return query if len(query) <= QUERY_SHOWN else query[: QUERY_SHOWN - len(CUT)] + CUT


def listed_runs(summaries: list[AgentSummary], every: dict[str, list[RunRecord]]) -> list[dict[str, Any]]:
    """The runs of ``GET /agent/runs``, newest first across the agents (spec server [OW2-a], [OW2-b]).

    A finished run's time is its ``finished_at``; one in progress or paused has its agent's
    last save (``updated_at``), which is later than every finished run of that agent. Ties
    keep the store's order reversed, so an agent's later run stays above its earlier one.
    """
    out: list[dict[str, Any]] = []
    for summary in summaries:
        records = every[summary.agent_uuid]
        out += [
            {"run_id": r.run_id, "agent_uuid": r.agent_uuid, "status": "finished", "stop_reason": r.stop_reason}
            | {"started_at": r.started_at, "finished_at": r.finished_at, "updated_at": r.finished_at}
            | {"user_query": listed_query(r.user_query)}
            for r in records
        ]
        if summary.run_id is not None and summary.run_id not in {r.run_id for r in records}:
            out.append(
                {"run_id": summary.run_id, "agent_uuid": summary.agent_uuid, "status": summary.status}
                | {"stop_reason": None, "started_at": None, "finished_at": None, "updated_at": summary.updated_at}
                | {"user_query": listed_query(summary.user_query)}
            )
    ordered = sorted(enumerate(out), key=lambda pair: (pair[1]["updated_at"], pair[0]), reverse=True)
    return [run for _, run in ordered]


def list_routes(
    *,
    store: Store,
    route: Callable[[Callable[[Request], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]],
) -> list[Route]:
    """``GET /agents`` and ``GET /agent/runs`` (spec server [OW2-a]), with the app's checks (``route``)."""

    async def listed(request: Request) -> list[Any]:
        principal = principal_of(request)
        found = await store.agents(None if principal.admin else principal.sub)
        return found[:LIST_LIMIT]

    async def agents(request: Request) -> Response:
        return JSONResponse(
            {
                "agents": [
                    {
                        "agent_uuid": a.agent_uuid,
                        "status": a.status,
                        "run_id": a.run_id,
                        "principal": a.principal,
                        "updated_at": a.updated_at,
                    }
                    for a in await listed(request)
                ]
            }
        )

    async def runs(request: Request) -> Response:
        summaries = await listed(request)
        every = await runs_of(store, [s.agent_uuid for s in summaries])  # spec server [OW3-a]: one query
        return JSONResponse({"runs": listed_runs(summaries, every)})

    return [
        Route("/agents", route(agents), methods=["GET"]),
        Route("/agent/runs", route(runs), methods=["GET"]),
    ]
