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
from ._common import InteropError, check_depth, dumps

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


def _text_of(content: Any, what: str, where: str) -> str:
    """A message's content as text: a string, or text parts joined (other parts cannot cross)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InteropError("I202", f"{what}: {where} must be a string or parts", position=_HERE, field=where)
    texts: list[str] = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise InteropError(
                "I203", f"{what}: a {kind!r} part has no counterpart in a prompt", position=_HERE, field=f"{where}[{i}]"
            )
        texts.append(part["text"])
    return "".join(texts)


def _need(value: Any, key: str, kind: type, where: str) -> Any:
    """``value[key]`` of ``kind``, else I202 naming its path (``where`` is ``value``'s)."""
    got = value.get(key) if isinstance(value, dict) else None
    if not isinstance(got, kind):
        names: dict[type, str] = {str: "a string", list: "an array", dict: "an object"}
        name = names.get(kind, kind.__name__)
        raise InteropError("I202", f"{where}.{key} must be {name}", position=_HERE, field=f"{where}.{key}")
    return got


def request_from_run_input(body: Mapping[str, Any]) -> ServerRequest:
    """An AG-UI ``RunAgentInput`` as a request of the reference server.

    Trailing ``tool`` messages answer a paused run's frontend tools (AG-UI's client-tool
    flow): a resume. Otherwise the last message must be the user's: a new prompt.

    Raises:
        InteropError: I202 a field missing or mistyped; I203 content with no counterpart
            (an image in a prompt); I204 nothing to answer (the last message is neither);
            I209 a body nested deeper than ``MAX_NESTING_DEPTH``.
    """
    check_depth(body, _HERE, "the body")
    thread = _need(body, "threadId", str, "$")
    _need(body, "runId", str, "$")
    messages = _need(body, "messages", list, "$")
    results: list[dict[str, Any]] = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        where = f"$.messages[{index}]"
        result: dict[str, Any] = {
            "tool_use_id": _need(message, "toolCallId", str, where),
            "content": _text_of(message.get("content"), "a tool message", f"{where}.content"),
        }
        if message.get("error") is not None:
            _need(message, "error", str, where)
            result["is_error"] = True
        results.append(result)
    if results:
        return ServerRequest("/agent/tool_results", {"tool_results": results[::-1]}, thread)
    last = messages[-1] if messages else None
    if not isinstance(last, dict) or last.get("role") != "user":
        raise InteropError(
            "I204", "the last message is neither the user's nor tool results", position=_HERE, field="$.messages"
        )
    where = f"$.messages[{len(messages) - 1}].content"
    return ServerRequest("/agent/run", {"prompt": _text_of(last.get("content"), "the user message", where)}, thread)


_PAUSE = "data-awaiting-frontend-tools"


def request_from_chat(body: Mapping[str, Any]) -> ServerRequest:
    """A ``useChat`` request body (``{id, messages, trigger}``) as a request of the reference server.

    When the last message is the assistant's and holds our ``data-awaiting-frontend-tools``
    part, the outputs the browser gave those calls (``addToolResult``) are a resume.
    Otherwise the last message must be the user's: a new prompt.

    Raises:
        InteropError: I202 a field missing or mistyped; I203 a regenerate request, or
            parts with no counterpart in a prompt; I204 a paused call with no output yet,
            or nothing to answer; I209 a body nested deeper than ``MAX_NESTING_DEPTH``.
    """
    check_depth(body, _HERE, "the body")
    chat = _need(body, "id", str, "$")
    messages = _need(body, "messages", list, "$")
    trigger = _need(body, "trigger", str, "$") if body.get("trigger") is not None else None
    if trigger not in (None, "submit-message"):
        raise InteropError(
            "I203", f"trigger {trigger!r}: only submit-message has a counterpart", position=_HERE, field="$.trigger"
        )
    last = messages[-1] if messages else None
    if not isinstance(last, dict):
        raise InteropError("I204", "no message to answer", position=_HERE, field="$.messages")
    at = f"$.messages[{len(messages) - 1}]"
    parts = _need(last, "parts", list, at)
    if last.get("role") == "assistant":
        pauses = [p for p in parts if isinstance(p, dict) and p.get("type") == _PAUSE]
        if not pauses:
            raise InteropError(
                "I204", "the last message is the assistant's and it is not paused", position=_HERE, field=at
            )
        data = pauses[-1].get("data")
        pending = data.get("data") if isinstance(data, dict) else None
        if not isinstance(pending, list):
            raise InteropError("I202", "the pause part carries no list of calls", position=_HERE, field=f"{at}.parts")
        tools = {p.get("toolCallId"): p for p in parts if isinstance(p, dict) and "toolCallId" in p}
        results: list[dict[str, Any]] = []
        for call in pending:
            tid = call.get("tool_use_id") if isinstance(call, dict) else None
            part = tools.get(tid)
            if part is None or part.get("state") not in ("output-available", "output-error"):
                raise InteropError(
                    "I204", f"paused call {tid!r} has no output yet", position=_HERE, field=f"{at}.parts"
                )
            if part["state"] == "output-error":
                text = _need(part, "errorText", str, f"{at}.parts[{parts.index(part)}]")
                results.append({"tool_use_id": tid, "content": text, "is_error": True})
            else:
                output = part.get("output")
                results.append({"tool_use_id": tid, "content": output if isinstance(output, str) else dumps(output)})
        return ServerRequest("/agent/tool_results", {"tool_results": results}, chat)
    if last.get("role") != "user":
        raise InteropError(
            "I204", "the last message is neither the user's nor a paused answer", position=_HERE, field=at
        )
    return ServerRequest("/agent/run", {"prompt": _text_of(parts, "the user message", f"{at}.parts")}, chat)
