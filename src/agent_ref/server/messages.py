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
import math
from typing import TYPE_CHECKING, Any, Final

from envelope._extras import import_failed

try:
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover  # in a subprocess (tests/install)

from ..errors import StateError, StoreError, UnavailableError
from ..store.sessions import InboxFullError, InboxStore
from .http import _read_json, _Refused, _string, _unknown_keys
from .owners import owned_agent, principal_of
from .quotas import rate_limited
from .streams import RUN_ID_PATTERN

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from starlette.requests import Request

    from ..store.sessions import InboxBounds, InboxReceipt
    from .app import RunManager, ServerConfig
    from .quotas import QuotaState

__all__ = ["messages_route"]


def messages_route(
    *,
    manager: RunManager,
    max_body_bytes: int,
    config: ServerConfig,
    route: Callable[[Callable[[Request], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]],
    quota: QuotaState | None = None,
) -> Route:
    """The ``POST /agent/runs/{run_id}/messages`` route, with the app's checks (``route``) and ``quota``."""

    async def messages(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        body = await _read_json(request, max_body_bytes)
        _unknown_keys(body, ("text",))
        text = _string(body, "text", required=True, limit=config.max_prompt_chars)
        assert text is not None
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise _Refused(404, "unknown_run", "no such run")
        bounds = config.inbox_bounds
        _refuse_too_large(bounds, run_id, text)
        store = manager.store
        if await owned_agent(principal_of(request), manager, store, run_id) is None:
            # spec server [OW1-b]: a run not known and another principal's run: one answer, as stop's
            raise _Refused(404, "unknown_run", f"no run {run_id} here")
        if isinstance(store, InboxStore):  # spec [IN1-a]: whichever process answers, through the store
            try:
                receipt = await _bounded(config, store.inbox_put, run_id, text, bounds=bounds)
            except InboxFullError as exc:  # spec server [IB1-b]: 429, which bound, nothing queued
                raise _InboxFull(exc) from None
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
            # spec server [IB1-a]: a user's store keeps no inbox: the agent's own queue, on this loop
            # thread with no await before the put, so nothing is queued between the check and it
            queued = agent.send(text, bounds=bounds, run_id=run_id)
        except InboxFullError as exc:
            raise _InboxFull(exc) from None
        except StateError as exc:  # spec server [SVSE2-b]: past its last step
            raise _Refused(409, "not_accepting", f"run {run_id}: {exc}", run_id=run_id) from None
        return JSONResponse({"run_id": run_id, "agent_uuid": agent.agent_uuid, "queued": queued}, status_code=202)

    return Route("/agent/runs/{run_id}/messages", route(rate_limited(quota, messages)), methods=["POST"])


def _refuse_too_large(bounds: InboxBounds, run_id: str, text: str) -> None:
    """Refuse a message past its own bound: no retry would fit it, so 413, before the store (spec server [IB1-c])."""
    size = len(text.encode())
    if size > bounds.max_message_bytes:
        raise _Refused(
            413,
            "message_too_large",
            str(InboxFullError(run_id, "inbox_message_bytes", bounds.max_message_bytes, size, size)),
            run_id=run_id,
            bound="inbox_message_bytes",
            limit=bounds.max_message_bytes,
        )


#: Seconds a client is told to wait after a full inbox (spec server [IB1-b]): about a step of the run.
INBOX_RETRY_AFTER: Final = 2


class _InboxFull(_Refused):
    """``429 inbox_full`` with ``Retry-After`` and the bound passed (spec server [IB1-b])."""

    def __init__(self, exc: InboxFullError) -> None:
        super().__init__(
            429,
            "inbox_full",
            f"{exc}; try again in {INBOX_RETRY_AFTER} s",
            run_id=exc.run_id,
            bound=exc.bound,
            limit=exc.limit,
            waiting=exc.waiting,
            waiting_bytes=exc.waiting_bytes,
        )

    def response(self) -> JSONResponse:
        answer = super().response()
        answer.headers["Retry-After"] = str(INBOX_RETRY_AFTER)
        return answer


async def _bounded(config: ServerConfig, call: Callable[..., InboxReceipt], *args: Any, **kwargs: Any) -> InboxReceipt:
    """``call`` in a worker thread, awaited at most ``config.storage_timeout`` s (spec server [SL1-c]).

    A thread blocked on a stalled database cannot be interrupted: past the bound the
    request is answered ``503`` and the call ends whenever the database answers (its
    transaction then commits or not; a message that committed is delivered, as any).
    """
    try:
        return await asyncio.wait_for(asyncio.to_thread(call, *args, **kwargs), config.storage_timeout)
    except TimeoutError:
        raise UnavailableError(
            f"the store did not answer within {config.storage_timeout:g} s",
            retry_after=max(1, math.ceil(config.storage_timeout)),
            public="the server's storage is not answering",
        ) from None
