"""The server's AG-UI and AI SDK (``useChat``) endpoints: the same runs, in the frontends' own dialects.

Owns (spec ``spec/server.md`` §9, ``spec/interop.md`` §8): ``POST /agui`` (an AG-UI
``RunAgentInput`` in, SSE of AG-UI events out), ``POST /api/chat`` (a ``useChat`` body
in, the UI message stream out) and ``GET /api/chat/{id}/stream`` (the AI SDK's
reconnect); the map from a conversation id (AG-UI ``threadId``, the chat ``id``) to its
agent (``agent_for_conversation``); converting each response's envelope lines as the
run writes them.
Does not own: the runs (``server/app.py``'s ``RunManager``, journal and store: every run
goes through the same manager as ``/agent/run``, so what is stored and journaled is the
envelope stream itself), the request checks (``server/app.py``'s, imported), reading the
foreign requests and converting streams (``envelope.interop``).

``create_app`` mounts ``interop_routes(...)``; every route goes through its ``route``
wrapper (the token, JSON errors) and its Host check.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

from envelope._extras import import_failed

try:
    from starlette.responses import Response
    from starlette.routing import Route
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover  # in a subprocess (tests/install)

from envelope.interop import InteropError
from envelope.interop.agui import CUSTOM_PREFIX, EnvelopeToAgui, request_from_run_input
from envelope.interop.vercel import HEADERS, EnvelopeToVercel, request_from_chat

from .auth import LOCAL, owns
from .http import _read_json, _refusal_of, _Refused, _tool_results
from .owners import principal_of
from .quotas import admit_run
from .streams import DONE_LINE

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

    from sse_starlette import EventSourceResponse
    from starlette.requests import Request

    from envelope.interop.agui import ServerRequest

    from ..agent import Agent
    from ..store.core import Store
    from ..store.state import AgentState
    from .app import RunManager, ServerConfig
    from .auth import Principal
    from .quotas import QuotaState
    from .streams import LiveStream

    Handler = Callable[[Request], Awaitable[Response]]

__all__ = ["BODY_FACTOR", "MAX_CONVERSATION_CHARS", "agent_for_conversation", "interop_routes"]

log = logging.getLogger("agent_ref.server")

#: The foreign clients send the whole conversation with every request: their bodies may
#: be this many times ``max_body_bytes`` (4 MiB by default), still read with a bound.
BODY_FACTOR: Final = 16
#: The longest conversation id (``threadId``, chat ``id``) accepted.
MAX_CONVERSATION_CHARS: Final = 256

_VERCEL_HEADER: Final = {"x-vercel-ai-ui-message-stream": HEADERS["x-vercel-ai-ui-message-stream"]}


def agent_for_conversation(dialect: str, conversation: str, principal: str | None = None) -> str:
    """The agent of a conversation: ``<dialect>-`` and 32 hex digits of the id's SHA-256.

    Deterministic, so every process of a fleet on one store finds the same agent with no
    stored map (spec server §9.2-a); ``dialect`` (``agui``, ``chat``) keeps the two
    clients' id spaces apart, and ``principal`` (a JWT server's ``sub``) each user's: the
    same thread id of two users names two agents (spec server [OW1-c]).
    """
    scoped = conversation if principal is None else f"{principal}\x00{conversation}"
    digest = hashlib.sha256(scoped.encode("utf-8")).hexdigest()[:32]
    return f"{dialect}-{digest}"


def interop_routes(
    *,
    store: Store,
    manager: RunManager,
    config: ServerConfig,
    new_agent: Callable[[str], Agent],
    route: Callable[[Handler], Handler],
    sse: Callable[[AsyncIterator[bytes], Mapping[str, str]], EventSourceResponse],
    quota: QuotaState | None = None,
) -> list[Route]:
    """The routes ``create_app`` mounts (spec server §9).

    Args:
        store: the agents' store.
        manager: the app's run manager (journal, live streams).
        config: the app's limits.
        new_agent: a new ``Agent`` with the given id, configured as the app's agents are.
        route: wraps a handler with the token check and the JSON error answers.
        sse: the app's SSE response (keep-alive comments, headers).
        quota: the app's per-principal quota counts (spec server [QU2-a]); ``None``: no quotas.
    """
    endpoints = _Endpoints(store=store, manager=manager, config=config, new_agent=new_agent, sse=sse, quota=quota)
    return [
        Route("/agui", route(endpoints.agui), methods=["POST"]),
        Route("/api/chat", route(endpoints.chat), methods=["POST"]),
        Route("/api/chat/{id}/stream", route(endpoints.chat_stream), methods=["GET"]),
    ]


class _Endpoints:
    """The handlers of ``interop_routes``, over the app's store, run manager, limits and SSE response."""

    def __init__(
        self,
        *,
        store: Store,
        manager: RunManager,
        config: ServerConfig,
        new_agent: Callable[[str], Agent],
        sse: Callable[[AsyncIterator[bytes], Mapping[str, str]], EventSourceResponse],
        quota: QuotaState | None = None,
    ) -> None:
        self.store = store
        self.quota = quota
        self.manager = manager
        self.config = config
        self.new_agent = new_agent
        self.sse = sse
        self.limit = config.max_body_bytes * BODY_FACTOR

    def conversation_agent(self, dialect: str, conversation: str, principal: Principal) -> str:
        """The agent id of ``principal``'s conversation: per principal on a JWT server (spec server [OW1-c])."""
        return agent_for_conversation(dialect, conversation, principal.sub if self.config.jwt is not None else None)

    async def agent_of(self, dialect: str, asked: ServerRequest, principal: Principal) -> Agent:
        """The conversation's agent: loaded from the store, or new (404 to resume one that has no run)."""
        uuid = self.conversation_agent(dialect, asked.conversation, principal)
        state = await self.store.load(uuid)
        if state is not None and not owns(principal, state.principal):
            state = None  # spec server [OW1-b]: not the principal's: as if there were none (a new agent fails to save)
        if state is None:
            if asked.path == "/agent/tool_results":
                raise _Refused(404, "unknown_conversation", f"conversation {asked.conversation!r} has no run to resume")
            agent = self.new_agent(uuid)
            agent.state.principal = principal.sub  # spec server [OW1-a]
            return agent
        agent = self.new_agent(uuid)
        agent.state = state
        return agent

    async def start(self, agent: Agent, asked: ServerRequest, principal: Principal) -> LiveStream:
        """Start the run ``asked`` names through the app's run manager, behind the quotas (spec server [QU2-a]).

        The quotas are checked before the run manager saves anything: a refused request
        leaves no agent, no run, no journal line (spec server [QU1-a]).
        """
        if self.quota is None:
            return await self._start(agent, asked)
        async with admit_run(self.quota, self.store, principal.sub, default=LOCAL.sub):
            return await self._start(agent, asked)

    async def _start(self, agent: Agent, asked: ServerRequest) -> LiveStream:
        """Start the run ``asked`` names through the app's run manager (its refusals as ``/agent/...``'s)."""
        manager = self.manager
        try:
            if asked.path == "/agent/run":
                prompt: str = asked.body["prompt"]
                return await manager.start(agent, lambda sink: agent.run(prompt, sink))
            results: list[dict[str, Any]] = asked.body["tool_results"]
            return await manager.start(agent, lambda sink: agent.continue_with_tool_results(results, sink))
        except Exception as exc:
            raise _refusal_of(exc) from None

    async def agui(self, request: Request) -> Response:
        """``POST /agui``: an AG-UI ``RunAgentInput`` in, its run's AG-UI events out."""
        body = await _read_json(request, self.limit)
        try:
            asked = request_from_run_input(body)
        except InteropError as exc:
            raise _invalid(exc) from None
        _conversation(asked.conversation, "$.threadId")
        run_id = body["runId"]
        _conversation(run_id, "$.runId")
        _check(asked, body, self.config)
        principal = principal_of(request)
        agent = await self.agent_of("agui", asked, principal)
        if asked.path == "/agent/tool_results":
            asked = _answers_only(asked, agent.state)
        stream = await self.start(agent, asked, principal)
        answered = {r["tool_use_id"] for r in asked.body.get("tool_results", ())}
        converter = EnvelopeToAgui(thread_id=asked.conversation, run_id=run_id, message_prefix=_prefix(stream))
        return self.sse(_agui_events(_lines(stream), converter, answered), _headers(stream))

    async def chat(self, request: Request) -> Response:
        """``POST /api/chat``: a ``useChat`` body in, its run's UI message stream out."""
        body = await _read_json(request, self.limit)
        try:
            asked = request_from_chat(body)
        except InteropError as exc:
            raise _invalid(exc) from None
        _conversation(asked.conversation, "$.id")
        _check(asked, body, self.config)
        principal = principal_of(request)
        stream = await self.start(await self.agent_of("chat", asked, principal), asked, principal)
        return self.sse(_vercel_chunks(_lines(stream), EnvelopeToVercel()), {**_VERCEL_HEADER, **_headers(stream)})

    async def chat_stream(self, request: Request) -> Response:
        """The AI SDK's reconnect: the chat's response being written, from its start; else 204."""
        conversation = request.path_params["id"]
        _conversation(conversation, "id")
        principal = principal_of(request)
        state = await self.store.load(self.conversation_agent("chat", conversation, principal))
        if state is None or not owns(principal, state.principal):  # spec server [OW1-b]: as a chat with no run
            return Response(status_code=204)
        if state.status != "running" or state.run is None:
            return Response(status_code=204)
        run_id = state.run.run_id
        response = await self.manager.latest(run_id)  # the stored claim may predate the response's index
        lines = None if response is None else await self._written(run_id, response)
        if response is None or lines is None:
            return Response(status_code=204)
        extra = {"X-Run-Id": run_id, "X-Agent-Uuid": state.agent_uuid, "X-Response-Index": str(response)}
        return self.sse(_vercel_chunks(lines, EnvelopeToVercel()), {**_VERCEL_HEADER, **extra})

    async def _written(self, run_id: str, response: int) -> AsyncIterator[bytes] | None:
        """The lines of a response being written, live here or followed in a shared journal; else ``None``."""
        live = self.manager.live.get((run_id, response))
        if live is not None:
            return _lines(live)
        shared = getattr(self.manager.journal, "follow", None)
        journaled = await self.manager.io.read(run_id, response)  # spec server [SL1-a]: off the loop, bounded
        if shared is None or not journaled or journaled[-1] == DONE_LINE:
            return None
        return _followed(shared(run_id, response, -1))


# ---------------------------------------------------------------------- checks


def _invalid(exc: InteropError) -> _Refused:
    """A foreign request ``envelope.interop`` cannot read: 422, with its code and path."""
    extra: dict[str, Any] = {"code": exc.code}
    if exc.field is not None:
        extra["field"] = exc.field
    return _Refused(422, "invalid_request", f"{exc.code}: {exc.message}", **extra)


def _conversation(value: str, where: str) -> None:
    if not value.strip() or len(value) > MAX_CONVERSATION_CHARS:
        raise _Refused(
            422,
            "invalid_request",
            f"{where} must be a non-blank string of at most {MAX_CONVERSATION_CHARS} characters",
            field=where,
        )


def _check(asked: ServerRequest, body: Mapping[str, Any], config: ServerConfig) -> None:
    """The checks of ``/agent/run`` and ``/agent/tool_results`` (spec server §5.1), at the foreign paths."""
    where = f"$.messages[{len(body['messages']) - 1}]"
    if asked.path == "/agent/run":
        prompt: str = asked.body["prompt"]
        if not prompt.strip():
            raise _Refused(422, "invalid_request", f"{where}: the user message has no text", field=where)
        if len(prompt) > config.max_prompt_chars:
            raise _Refused(
                422,
                "invalid_request",
                f"{where}: the user message is longer than {config.max_prompt_chars} characters",
                field=where,
            )
        return
    if len(asked.body["tool_results"]) > config.max_tool_results:
        raise _Refused(422, "invalid_request", f"more than {config.max_tool_results} tool results", field="$.messages")
    _tool_results(asked.body, config.max_tool_results)


def _answers_only(asked: ServerRequest, state: AgentState) -> ServerRequest:
    """The trailing tool messages that answer the pause: not those of calls the server answered itself.

    AG-UI's reducer puts the results the server sent (``TOOL_CALL_RESULT``) right after
    the assistant message, so the client's own answers follow them: all are trailing
    ``tool`` messages, but only the paused calls are the client's to answer (spec
    interop §7-a). An id the server never answered is kept, and refused by the agent.
    """
    pending = {p.tool_use_id for p in state.pending_frontend}
    if not pending:
        return asked  # not paused: the agent refuses a stale answer (409 agent_state, spec server §1.2-b)
    ours = {str(b.get("tool_use_id")) for b in state.pending_backend_results}
    for message in state.messages:
        content = message.get("content")
        if isinstance(content, list):
            ours |= {
                str(b.get("tool_use_id")) for b in content if isinstance(b, dict) and b.get("type") == "tool_result"
            }
    results = [r for r in asked.body["tool_results"] if r["tool_use_id"] in pending or r["tool_use_id"] not in ours]
    if not results:
        raise _Refused(
            422, "invalid_request", "the trailing tool messages answer no call the run waits for", field="$.messages"
        )
    return replace(asked, body={"tool_results": results})


def _prefix(stream: LiveStream) -> str:
    """The ``messageId`` prefix of a response's AG-UI events: ids stay unique across a thread's runs.

    AG-UI's reducer appends a ``TEXT_MESSAGE_CONTENT`` to the message of that id already in
    the client's history; each request's converter counts from 1 again.
    """
    return f"{stream.run_id}.{stream.response}."


def _headers(stream: LiveStream) -> dict[str, str]:
    return {"X-Run-Id": stream.run_id, "X-Agent-Uuid": stream.agent_uuid, "X-Response-Index": str(stream.response)}


# ---------------------------------------------------------------------- streams


async def _lines(stream: LiveStream) -> AsyncIterator[bytes]:
    """The envelope lines of a live response, as the run writes them, up to ``[DONE]``."""
    seq = 0
    async for _ in stream.follow():
        yield stream.lines[seq]
        seq += 1


async def _followed(lines: AsyncIterator[tuple[int, bytes]]) -> AsyncIterator[bytes]:
    async for _, line in lines:
        yield line


def _data(value: Any) -> bytes:
    return b"data: " + json.dumps(value, separators=(",", ":")).encode() + b"\n\n"


async def _agui_events(
    lines: AsyncIterator[bytes], converter: EnvelopeToAgui, answered: set[str]
) -> AsyncIterator[bytes]:
    """AG-UI events of one response; the results the client itself just sent are not echoed (spec interop §8-b)."""
    try:
        async for line in lines:
            for event in converter.feed(line):
                if not _echo(event, answered):
                    yield _data(event)
        for event in converter.close():
            yield _data(event)
    except InteropError as exc:
        log.error("AG-UI conversion of a stored response failed: %s", exc)
        yield _data({"type": "RUN_ERROR", "message": "the server could not convert this response", "code": exc.code})


def _echo(event: Mapping[str, Any], answered: set[str]) -> bool:
    if event.get("type") == "TOOL_CALL_RESULT":
        return event.get("toolCallId") in answered
    if event.get("type") == "CUSTOM" and event.get("name") == CUSTOM_PREFIX + "piece":
        value = event.get("value")
        return isinstance(value, dict) and value.get("type") == "tool_result" and value.get("id") in answered
    return False


async def _vercel_chunks(lines: AsyncIterator[bytes], converter: EnvelopeToVercel) -> AsyncIterator[bytes]:
    """UI message stream chunks of one response, ``[DONE]`` last."""
    try:
        async for line in lines:
            for chunk in [*converter.feed(line)]:
                yield b"data: [DONE]\n\n" if chunk == "[DONE]" else _data(chunk)
        for chunk in converter.close():
            yield b"data: [DONE]\n\n" if chunk == "[DONE]" else _data(chunk)
    except InteropError as exc:
        log.error("UI message stream conversion of a stored response failed: %s", exc)
        yield _data({"type": "error", "errorText": f"the server could not convert this response ({exc.code})"})
