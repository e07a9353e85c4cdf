"""The agent server's request side: checks, refusals, the ``Host`` check (spec ``spec/server.md`` §5).

Owns: ``_Refused`` (a request refused before any run starts: a 4xx/5xx JSON answer) and
what maps errors to it (``_refusal_of``), reading a request's JSON body within its
limits (``_read_json``: size, media type, numbers, lone surrogates; spec server §5.1),
the fields of a body (``_string``, ``_agent_uuid``, ``_unknown_keys``,
``_tool_results``), the bearer token (``_check_token``), and the ``Host`` check
middleware (``_HostCheck``, ``_allowed``; §5.3-a). Does not own: the routes
(``server/app.py``, ``server/stop.py``, ``server/interop.py``) or running anything.

The names keep their leading underscore: they are the server modules' shared
internals, not a public API (``server/app.py`` re-exports them for the modules that
imported them from there).
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import re
from typing import TYPE_CHECKING, Any, Final

from envelope._extras import import_failed

try:
    from starlette.responses import JSONResponse, Response
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover  # in a subprocess (tests/install)

from envelope.delivery import JournalError, JournalUnavailableError

from ..errors import ConflictError, StateError, ToolResultsError, UnavailableError
from .streams import RUN_ID_PATTERN, JournalFailedError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from starlette.requests import Request
    from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("agent_ref.server")


class _Refused(Exception):
    """A request the server refuses before any run starts: a 4xx JSON answer."""

    def __init__(self, status: int, type: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.extra = extra

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": 'Bearer realm="agent-ref"'} if self.status == 401 else None
        body = {"error": {"type": self.type, "message": self.message, **self.extra}}
        return JSONResponse(body, status_code=self.status, headers=headers)


def _check_token(request: Request, token: str | None) -> None:
    """spec server §5.2-a: the bearer token, compared in constant time."""
    if token is None:
        return
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise _Refused(401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer <token>)")


async def _read_json(request: Request, limit: int) -> dict[str, Any]:
    """The request's JSON object, read up to ``limit`` bytes (spec server §5.1)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise _Refused(415, "unsupported_media_type", f"expected Content-Type: application/json, got {media or 'none'}")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise _Refused(413, "body_too_large", f"request body over {limit} bytes (Content-Length: {declared[:20]})")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _Refused(413, "body_too_large", f"request body over {limit} bytes")
    try:
        text = bytes(body).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(400, "invalid_json", f"body is not UTF-8: byte {exc.start}") from None
    try:
        value = json.loads(text, parse_int=_Number.integer, parse_float=_Number.real, parse_constant=_Number.constant)
    except json.JSONDecodeError as exc:
        raise _Refused(
            400,
            "invalid_json",
            f"body is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno} (byte {exc.pos})",
        ) from None
    except RecursionError:
        raise _Refused(400, "invalid_json", "body is nested too deeply") from None
    value = _check_values(value)
    if not isinstance(value, dict):
        raise _Refused(422, "invalid_request", f"body must be a JSON object, got {_json_type(value)}", field="$")
    return value


#: The longest number literal a request may hold (spec server §5.1-d): more than any field needs.
MAX_NUMBER_CHARS: Final = 40


class _Number:
    """A JSON number or constant as its text: the parser's hooks keep it unconverted for ``_check_values``.

    Converting first is what failed: ``int()`` of a 5,000-digit literal raises past
    Python's digit limit, and ``NaN``/``Infinity`` are not JSON at all. The request
    fields take no numbers, so nothing is lost by keeping the text; ``_check_values``
    refuses what is too long or not JSON, naming where it is.
    """

    __slots__ = ("constant_", "text")

    def __init__(self, text: str, *, constant: bool = False) -> None:
        self.text = text
        self.constant_ = constant

    @classmethod
    def integer(cls, text: str) -> _Number:
        return cls(text)

    @classmethod
    def real(cls, text: str) -> _Number:
        return cls(text)

    @classmethod
    def constant(cls, text: str) -> _Number:
        return cls(text, constant=True)


def _lone_surrogate(text: str) -> int:
    """The index of the first lone surrogate in ``text`` (not UTF-8 encodable), or -1."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return -1


def _check_values(value: object) -> object:
    """Refuse, naming its path, any string or key with a lone surrogate and any number too long or not JSON.

    spec server §5.1-d. Numbers the parser kept as text (``_Number``) are converted once
    checked; the value is returned with them in place. Iterative: a body nested as deeply
    as the parser allows must not overflow the stack here either.
    """
    if isinstance(value, _Number):
        return _number(value, "$")
    todo: list[tuple[object, str]] = [(value, "$")]
    while todo:
        item, where = todo.pop()
        if isinstance(item, str):
            at = _lone_surrogate(item)
            if at >= 0:
                raise _Refused(
                    422,
                    "invalid_request",
                    f"{where} holds a lone surrogate (\\u{ord(item[at]):04x}) at character {at}: text must be Unicode",
                    field=where,
                )
            continue
        members: list[tuple[Any, str, object]]
        if isinstance(item, dict):
            members = []
            for key in item:
                if _lone_surrogate(key) >= 0:
                    raise _Refused(422, "invalid_request", f"a key of {where} holds a lone surrogate", field=where)
                members.append((key, f"{where}.{key}", item[key]))
        elif isinstance(item, list):
            members = [(i, f"{where}[{i}]", member) for i, member in enumerate(item)]
        else:
            continue
        for key, path, member in members:
            if isinstance(member, _Number):
                item[key] = _number(member, path)
            else:
                todo.append((member, path))
    return value


def _number(number: _Number, where: str) -> int | float:
    """A checked number's value (spec server §5.1-d); ``where`` names it in the refusal."""
    if number.constant_:
        raise _Refused(400, "invalid_json", f"{where} is {number.text}, which is not JSON", field=where)
    if len(number.text) > MAX_NUMBER_CHARS:
        raise _Refused(
            422,
            "invalid_request",
            f"{where} is a number of {len(number.text)} characters; at most {MAX_NUMBER_CHARS} are accepted",
            field=where,
        )
    value = float(number.text) if any(c in number.text for c in ".eE") else int(number.text)
    if isinstance(value, float) and not math.isfinite(value):
        raise _Refused(422, "invalid_request", f"{where} is a number too large for a float", field=where)
    return value


def _string(body: Mapping[str, Any], key: str, *, required: bool, limit: int) -> str | None:
    value = body.get(key)
    if value is None and not required and key not in body:
        return None
    if not isinstance(value, str):
        raise _Refused(422, "invalid_request", f"{key} must be a string, got {_json_type(value)}", field=f"$.{key}")
    if required and not value.strip():
        raise _Refused(422, "invalid_request", f"{key} must not be empty", field=f"$.{key}")
    if len(value) > limit:
        raise _Refused(422, "invalid_request", f"{key} is longer than {limit} characters", field=f"$.{key}")
    return value


def _agent_uuid(body: Mapping[str, Any], *, required: bool) -> str | None:
    value = _string(body, "agent_uuid", required=required, limit=128)
    if value is not None and not RUN_ID_PATTERN.fullmatch(value):
        raise _Refused(
            422, "invalid_request", "agent_uuid holds characters an agent id never has", field="$.agent_uuid"
        )
    return value


def _json_type(value: object) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _unknown_keys(body: Mapping[str, Any], allowed: Sequence[str]) -> None:
    extra = sorted(set(body) - set(allowed))
    if extra:
        raise _Refused(422, "invalid_request", f"unknown field(s): {', '.join(extra)}", field=f"$.{extra[0]}")


def _tool_results(body: Mapping[str, Any], limit: int) -> list[dict[str, Any]]:
    """Shape checks only; which ids are right is the agent's call (ToolResultsError)."""
    results = body.get("tool_results")
    if not isinstance(results, list):
        raise _Refused(
            422, "invalid_request", f"tool_results must be an array, got {_json_type(results)}", field="$.tool_results"
        )
    if not results:
        raise _Refused(422, "invalid_request", "tool_results must not be empty", field="$.tool_results")
    if len(results) > limit:
        raise _Refused(422, "invalid_request", f"more than {limit} tool results", field="$.tool_results")
    for i, item in enumerate(results):
        where = f"$.tool_results[{i}]"
        if not isinstance(item, dict):
            raise _Refused(422, "invalid_request", f"{where} must be an object, got {_json_type(item)}", field=where)
        if not isinstance(item.get("tool_use_id"), str):
            raise _Refused(
                422, "invalid_request", f"{where}.tool_use_id must be a string", field=f"{where}.tool_use_id"
            )
        if "decision" in item:
            _approval_shape(item, where)  # spec server S1.2-d: an approval answer, not a result
            continue
        if not isinstance(item.get("content"), str | list):
            raise _Refused(
                422, "invalid_request", f"{where}.content must be a string or an array", field=f"{where}.content"
            )
        if "is_error" in item and not isinstance(item["is_error"], bool):
            raise _Refused(422, "invalid_request", f"{where}.is_error must be a boolean", field=f"{where}.is_error")
    return results


#: The JSON type each key of an approval answer must have (spec server S1.2-d).
_APPROVAL_TYPES: Final = {
    "decision": (str,),
    "updated_input": (dict,),
    "updated_permissions": (list,),
    "updated_mode": (str,),
    "message": (str,),
    "interrupt": (bool,),
}


def _approval_shape(item: Mapping[str, Any], where: str) -> None:
    """An approval answer's shape (spec server S1.2-d); what it may say is the agent's check (ToolResultsError)."""
    if item["decision"] not in ("approve", "deny"):
        raise _Refused(
            422, "invalid_request", f"{where}.decision must be 'approve' or 'deny'", field=f"{where}.decision"
        )
    for key, types in _APPROVAL_TYPES.items():
        if key in item and not isinstance(item[key], types):
            kind = {str: "a string", dict: "an object", list: "an array", bool: "a boolean"}[types[0]]
            raise _Refused(422, "invalid_request", f"{where}.{key} must be {kind}", field=f"{where}.{key}")


def _refusal_of(exc: Exception) -> _Refused:
    """What a run that failed before its first line answers (nothing was sent); also any database failure.

    A database that cannot be reached (``UnavailableError``, or a first line the journal
    refused) is ``503`` with ``Retry-After``; another database failure is ``503`` too, as
    it may pass. Either way the client reads the error's public text only: the database's
    host, port, name and the driver's words stay in the log (spec server §3.4-a).
    """
    if isinstance(exc, JournalFailedError):
        exc = exc.cause if isinstance(exc.cause, JournalError) else UnavailableError(str(exc))
    if isinstance(exc, JournalError):  # the store's StoreError is one too
        log.warning("refused a request, the database failed: %s", exc)
        retry = exc.retry_after if isinstance(exc, JournalUnavailableError) else 5
        return _Unavailable(exc.public, retry)
    if isinstance(exc, ToolResultsError):
        return _Refused(
            422,
            "invalid_tool_results",
            str(exc),
            missing=exc.missing,
            unexpected=exc.unexpected,
            duplicated=exc.duplicated,
        )
    if isinstance(exc, ConflictError):
        return _Refused(409, "conflict", str(exc))
    if isinstance(exc, StateError):
        return _Refused(409, "agent_state", str(exc))
    log.error("run failed before its first line: %s", type(exc).__name__, exc_info=exc)
    return _Refused(500, "internal_error", "the server could not start the run; see its log")


class _Unavailable(_Refused):
    """``503 database_unavailable`` with ``Retry-After`` (spec server §3.4-a)."""

    def __init__(self, public: str, retry_after: int) -> None:
        super().__init__(503, "database_unavailable", f"{public}; try again in {retry_after} s")
        self.retry_after = retry_after

    def response(self) -> JSONResponse:
        answer = super().response()
        answer.headers["Retry-After"] = str(self.retry_after)
        return answer


async def _store_failure(_: Request, exc: Exception) -> Response:
    """The app's handler of a ``StoreError`` no endpoint caught: the same ``503`` (spec server §3.4-a)."""
    return _refusal_of(exc).response()


#: The names a server answers to when not told otherwise (spec server §5.3-a): loopback only.
LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")


#: What a host name or address is made of (lower-cased; ``:`` for IPv6 addresses).
_HOST_CHARS: Final = re.compile(r"[a-z0-9.:_-]+")


def _host_name(value: str) -> str | None:
    """The host of a ``Host`` header or an allowed-host entry, lower-case, without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1 :] and not (value[end + 1] == ":" and value[end + 2 :].isdigit())):
            return None
        inner = value[1:end]
        return inner if _HOST_CHARS.fullmatch(inner) else None
    name, colon, port = value.rpartition(":")
    if colon and ":" not in name:  # host:port (an IPv6 address without brackets has several colons)
        if not port.isdigit():
            return None
        value = name
    return value if _HOST_CHARS.fullmatch(value) else None


class _HostCheck:
    """ASGI middleware: answer only requests whose ``Host`` is allowed (spec server §5.3-a).

    A web page can reach a local server through DNS rebinding (its own name made to point
    at 127.0.0.1); its requests then carry that name in ``Host``. ``hosts`` is shared with
    ``app.state.allowed_hosts`` so ``serve`` can add the address it binds.
    """

    def __init__(self, app: ASGIApp, hosts: set[str]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or "*" in self.hosts:
            await self.app(scope, receive, send)
            return
        raw = next((v for k, v in scope.get("headers", []) if k == b"host"), None)
        shown = raw.decode("latin-1")[:100] if raw is not None else ""
        name = _host_name(shown) if raw is not None else None
        if name is None:
            refused = _Refused(400, "invalid_host", "the request has no valid Host header")
        elif name not in self.hosts:
            refused = _Refused(
                421,
                "misdirected_request",
                f"this server does not answer to Host {shown!r}; allow that name with --allowed-host "
                "(and protect a server reachable beyond loopback with --token)",
            )
        else:
            await self.app(scope, receive, send)
            return
        await refused.response()(scope, receive, send)


def _allowed(hosts: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for host in hosts:
        name = _host_name(host) if host != "*" else "*"
        if name is None:
            raise ValueError(f"not a host name or address: {host!r}")
        out.add(name)
    return out
