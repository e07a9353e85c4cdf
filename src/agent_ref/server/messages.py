"""Streaming input over HTTP: ``POST /agent/runs/{run_id}/messages`` (spec ``spec/server.md`` §SE).

Owns: the route that queues a user message for a working run (``Agent.send``, spec
``spec/agent-ref.md`` §S2). Does not own: the queue and its delivery at a step boundary
(``sessions.Inbox``, ``loop.steps``).

Reach: the fleet. With a store that keeps the inbox (``sessions.InboxStore``: the
memory, SQLite and PostgreSQL stores) the message is written to the store's inbox in a
transaction that checks the run works and takes input, so any process of a fleet on one
database accepts it and the run takes it at its next step boundary wherever it works
(spec server [IN2-a]). With a user's store that keeps none, only the process running the
run accepts it (the run manager's ``agents``), as before.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..errors import StateError, StoreError
from ..store.sessions import InboxStore
from .http import _read_json, _Refused, _string, _unknown_keys
from .streams import RUN_ID_PATTERN

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    from .app import RunManager, ServerConfig

__all__ = ["messages_route"]


def messages_route(
    *,
    manager: RunManager,
    max_body_bytes: int,
    config: ServerConfig,
    route: Callable[[Callable[[Request], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]],
) -> Route:
    """The ``POST /agent/runs/{run_id}/messages`` route, with the app's checks (``route``)."""

    async def messages(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        body = await _read_json(request, max_body_bytes)
        _unknown_keys(body, ("text",))
        text = _string(body, "text", required=True, limit=config.max_prompt_chars)
        assert text is not None
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise _Refused(404, "unknown_run", "no such run")
        store = manager.store
        if isinstance(store, InboxStore):  # spec [IN1-a]: whichever process answers, through the store
            try:
                receipt = await asyncio.to_thread(store.inbox_put, run_id, text)
            except StoreError:
                raise  # spec server [S3.4-b]: the storage failed, not the run: 503 (``_guarded``), naming nothing
            except StateError as exc:  # spec server [SVSE2-b]: ended, paused, past its last step
                raise _Refused(409, "not_accepting", f"run {run_id}: {exc}", run_id=run_id) from None
            return JSONResponse(
                {"run_id": run_id, "agent_uuid": receipt.agent_uuid, "queued": receipt.waiting}, status_code=202
            )
        agent = manager.agents.get(run_id)
        if agent is None:
            raise _Refused(
                409,
                "not_accepting",
                f"run {run_id} is not working in this process (it has ended, is paused, or runs elsewhere); "
                "start the next run with the message instead",
                run_id=run_id,
            )
        try:
            queued = agent.send(text)
        except StateError as exc:  # spec server [SVSE2-b]: past its last step
            raise _Refused(409, "not_accepting", f"run {run_id}: {exc}", run_id=run_id) from None
        return JSONResponse({"run_id": run_id, "agent_uuid": agent.agent_uuid, "queued": queued}, status_code=202)

    return Route("/agent/runs/{run_id}/messages", route(messages), methods=["POST"])
