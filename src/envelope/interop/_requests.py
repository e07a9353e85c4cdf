"""Requests of the other protocols' clients, read as requests of the reference server (spec/interop.md §7).

Owns: turning an AG-UI ``RunAgentInput`` body (what ``HttpAgent`` posts) and a
``useChat`` body (what the AI SDK's ``DefaultChatTransport`` posts) into what the
reference server's own endpoints take (spec/server.md §1): a new prompt for
``POST /agent/run``, or a paused run's frontend tool results for
``POST /agent/tool_results``. Sans-I/O, like the converters.
Does not own: the endpoints themselves (issue 27 item 5), nor which agent a
conversation id names (the endpoint keeps that map).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from .._errors import Position
from ._common import InteropError, dumps, need, optional

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["ServerRequest", "request_from_chat", "request_from_run_input"]

_HERE = Position()


@dataclass(frozen=True, slots=True)
class ServerRequest:
    """One request of the other protocol, as the reference server's own request.

    Attributes:
        path: ``/agent/run`` (a new prompt) or ``/agent/tool_results`` (a resume).
        body: that endpoint's body (spec/server.md §1) without ``agent_uuid``, which the
            endpoint adds from its own map of ``conversation`` to agent.
        conversation: the AG-UI ``threadId`` or the ``useChat`` chat ``id``.
    """

    path: Literal["/agent/run", "/agent/tool_results"]
    body: dict[str, Any]
    conversation: str


def _text_of(content: Any, what: str) -> str:
    """A message's content as text: a string, or text parts joined (other parts cannot cross)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InteropError("I202", f"{what}: content must be a string or parts", position=_HERE)
    texts: list[str] = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise InteropError("I203", f"{what}: a {kind!r} part has no counterpart in a prompt", position=_HERE)
        texts.append(part["text"])
    return "".join(texts)


def request_from_run_input(body: Mapping[str, Any]) -> ServerRequest:
    """An AG-UI ``RunAgentInput`` as a request of the reference server.

    Trailing ``tool`` messages answer a paused run's frontend tools (AG-UI's client-tool
    flow): a resume. Otherwise the last message must be the user's: a new prompt.

    Raises:
        InteropError: I202 a field missing or mistyped; I203 content with no counterpart
            (an image in a prompt); I204 nothing to answer (the last message is neither).
    """
    thread = need(body, "threadId", str, _HERE)
    need(body, "runId", str, _HERE)
    messages = need(body, "messages", list, _HERE)
    results: list[dict[str, Any]] = []
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        result: dict[str, Any] = {
            "tool_use_id": need(message, "toolCallId", str, _HERE),
            "content": _text_of(message.get("content"), "a tool message"),
        }
        if optional(message, "error", str, _HERE) is not None:
            result["is_error"] = True
        results.append(result)
    if results:
        return ServerRequest("/agent/tool_results", {"tool_results": results[::-1]}, thread)
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "user":
        raise InteropError("I204", "the last message is neither the user's nor tool results", position=_HERE)
    return ServerRequest("/agent/run", {"prompt": _text_of(last.get("content"), "the user message")}, thread)


_PAUSE = "data-awaiting-frontend-tools"


def request_from_chat(body: Mapping[str, Any]) -> ServerRequest:
    """A ``useChat`` request body (``{id, messages, trigger}``) as a request of the reference server.

    When the last message is the assistant's and holds our ``data-awaiting-frontend-tools``
    part, the outputs the browser gave those calls (``addToolResult``) are a resume.
    Otherwise the last message must be the user's: a new prompt.

    Raises:
        InteropError: I202 a field missing or mistyped; I203 a regenerate request, or
            parts with no counterpart in a prompt; I204 a paused call with no output yet,
            or nothing to answer.
    """
    chat = need(body, "id", str, _HERE)
    messages = need(body, "messages", list, _HERE)
    trigger = optional(body, "trigger", str, _HERE)
    if trigger not in (None, "submit-message"):
        raise InteropError("I203", f"trigger {trigger!r}: only submit-message has a counterpart", position=_HERE)
    last = messages[-1] if messages else None
    if not isinstance(last, dict):
        raise InteropError("I204", "no message to answer", position=_HERE)
    parts = need(last, "parts", list, _HERE)
    if last.get("role") == "assistant":
        pauses = [p for p in parts if isinstance(p, dict) and p.get("type") == _PAUSE]
        if not pauses:
            raise InteropError("I204", "the last message is the assistant's and it is not paused", position=_HERE)
        pending = (pauses[-1].get("data") or {}).get("data")
        if not isinstance(pending, list):
            raise InteropError("I202", "the pause part carries no list of calls", position=_HERE)
        tools = {p.get("toolCallId"): p for p in parts if isinstance(p, dict) and "toolCallId" in p}
        results: list[dict[str, Any]] = []
        for call in pending:
            tid = call.get("tool_use_id") if isinstance(call, dict) else None
            part = tools.get(tid)
            if part is None or part.get("state") not in ("output-available", "output-error"):
                raise InteropError("I204", f"paused call {tid!r} has no output yet", position=_HERE)
            if part["state"] == "output-error":
                results.append({"tool_use_id": tid, "content": need(part, "errorText", str, _HERE), "is_error": True})
            else:
                output = part.get("output")
                results.append({"tool_use_id": tid, "content": output if isinstance(output, str) else dumps(output)})
        return ServerRequest("/agent/tool_results", {"tool_results": results}, chat)
    if last.get("role") != "user":
        raise InteropError("I204", "the last message is neither the user's nor a paused answer", position=_HERE)
    return ServerRequest("/agent/run", {"prompt": _text_of(parts, "the user message")}, chat)
