"""``GET /agents/{agent_id}/tasks``: an agent's background tasks, polled or long-polled (spec agent-ref [BJ1-b]).

Owns: the route (``tasks_routes``): the owner check (another principal's agent is the
same 404 ``unknown_agent`` as a missing one, spec server [OW1-b]), the query (``wait``,
``timeout``, bounded by ``MAX_WAIT``) and the answer ``{"agent_uuid", "tasks", "running"}``.
Does not own: reading the tasks (``fleet/joining.py``), who the request is from
(``server/auth.py``, ``server/owners.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from envelope._extras import import_failed

try:
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover

from ..fleet.joining import ENDED, agent_tasks, join_tasks, queue_for
from .auth import owns
from .http import _Refused
from .owners import principal_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    from ..store.core import Store

__all__ = ["DEFAULT_WAIT", "MAX_WAIT", "tasks_routes"]

#: The longest a ``?wait=1`` request is held (seconds), below common proxies' read timeouts (60 s).
MAX_WAIT: Final = 30.0
#: How long ``?wait=1`` waits without a ``timeout``.
DEFAULT_WAIT: Final = 20.0


def _query(request: Request) -> float | None:
    """How long to wait: ``None`` without ``wait``; a 400 for a value that is not one of the allowed."""
    wait = request.query_params.get("wait", "0")
    if wait not in ("0", "1", "true", "false"):
        raise _Refused(400, "invalid_request", f"wait must be 1 or 0, not {wait!r}", field="wait")
    raw = request.query_params.get("timeout")
    if wait in ("0", "false"):
        if raw is not None:
            raise _Refused(400, "invalid_request", "timeout needs wait=1", field="timeout")
        return None
    if raw is None:
        return DEFAULT_WAIT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= MAX_WAIT:
        raise _Refused(
            400,
            "invalid_request",
            f"timeout must be a number of seconds above 0, at most {MAX_WAIT:g}",
            field="timeout",
        )
    return seconds


def tasks_routes(
    *,
    store: Store,
    route: Callable[[Callable[[Request], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]],
) -> list[Route]:
    """``GET /agents/{agent_id}/tasks`` with the app's checks (``route``), on ``store``'s task queue if it has one."""

    async def tasks(request: Request) -> Response:
        principal = principal_of(request)
        agent_uuid = str(request.path_params["agent_id"])
        wait = _query(request)
        state = await store.load(agent_uuid)
        if state is None or not owns(principal, state.principal):
            raise _Refused(404, "unknown_agent", f"no agent {agent_uuid} in the store")
        queue = queue_for(store)
        try:
            found: list[dict[str, Any]] | None
            if wait is None:
                found = await agent_tasks(store, agent_uuid, queue)
            else:
                found = await join_tasks(store, agent_uuid, queue, wait)
        finally:
            if queue is not None:
                await queue.aclose()
        items = found or []
        running = sum(1 for i in items if i["status"] not in ENDED)
        return JSONResponse({"agent_uuid": agent_uuid, "tasks": items, "running": running})

    return [Route("/agents/{agent_id}/tasks", route(tasks), methods=["GET"])]
