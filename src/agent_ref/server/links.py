"""Resume links of ``agent-ref serve``: one run's stream, for a page that cannot send a bearer (spec server §RL).

Owns: the keys links are signed with (``link_keys``: ``--link-key-file``, else derived
from ``--token``), the link headers of the answers that start or follow a run
(``with_link``), ``POST /agent/runs/{run_id}/link`` that refreshes one (``link_route``),
the follow route's acceptance of ``?token=`` (``link_grants``, ``linked_run``,
``LINK_HOLDER``). Does not own: the token format (``envelope.delivery.mint``/``verify``,
spec delivery §7), the bearer and JWT checks (``server/auth.py``), or who owns a run
(``server/owners.py``: a link is minted only for its run's owner).

A browser's ``EventSource`` cannot send an ``Authorization`` header, so its reconnect
carries a token in the URL that grants one run's stream and nothing else.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

from envelope._extras import import_failed
from envelope.delivery import TokenError, TokenScopeError, TokenWrongRunError, mint, verify

try:
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover  # in a subprocess (tests/install)

from .auth import Principal
from .http import _Refused
from .owners import owned_agent, principal_of
from .streams import RUN_ID_PATTERN

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from starlette.requests import Request

    from ..store.core import Store
    from .app import RunManager
    from .auth import JwtVerifier

__all__ = [
    "LINK_HEADER",
    "LINK_HOLDER",
    "LINK_TTL_SECONDS",
    "LinkKeyError",
    "jwt_link_keys",
    "link_grants",
    "link_keys",
    "link_route",
    "linked_run",
    "with_link",
]

#: Seconds a link lives (spec server [RL1-b]): long enough for a reconnect, short enough that a leaked URL dies.
LINK_TTL_SECONDS: Final = 300
#: The response header that carries a fresh link's token, and the one with its expiry (Unix seconds).
LINK_HEADER: Final = "X-Resume-Token"
EXPIRES_HEADER: Final = "X-Resume-Expires"
#: What the key derived from ``--token`` is for, so it signs nothing else (spec server [RL1-c]).
_DERIVED: Final = b"agent-ref resume links v1"
#: The line ``agent-ref serve`` prints when a JWKS server has no link key (spec server [RL3-b]).
LINKS_OFF_JWKS: Final = (
    "agent-ref serve: resume links are off: --jwks-file keys are public and cannot sign links;"
    " pass --link-key-file (the same file on every process) to turn them on"
)
#: The ``request.state`` attribute a request admitted by a link carries: the run it may follow.
_LINK_RUN: Final = "link_run"


class LinkKeyError(ValueError):
    """A ``--link-key-file`` that cannot be used; the text names the file and the line."""


#: Who a request admitted by a resume link is (spec server [RL1-a]): no one's principal; the
#: link is the right to its one run's stream, which the follow route checks (``linked_run``).
LINK_HOLDER: Final = Principal("resume-link", admin=False)


def linked_run(request: Request) -> str | None:
    """The run whose link admitted ``request`` (``link_grants``), or ``None``: it came with the bearer."""
    run = getattr(request.state, _LINK_RUN, None)
    return run if isinstance(run, str) else None


def link_keys(key_file: str | Path | None, token: str | None) -> tuple[bytes, ...]:
    """The keys links are signed with and accepted under (spec server [RL1-c]).

    ``key_file``: one key a line (at least 16 bytes; blank lines and ``#`` lines skipped),
    the first signs, every one is accepted (rotation: put the new key first, drop the old
    one after ``LINK_TTL_SECONDS``). Without it, one key derived from ``token`` (every
    process given the same ``--token`` accepts the others' links). Neither: no keys, no links.

    Raises:
        LinkKeyError: the file cannot be read, holds no key, or a key is too short.
    """
    if key_file is None:
        if not token:
            return ()
        return (hmac.new(token.encode(), _DERIVED, hashlib.sha256).digest(),)
    try:
        text = Path(key_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LinkKeyError(f"{key_file}: cannot read it ({type(exc).__name__})") from None
    keys: list[bytes] = []
    for number, line in enumerate(text.splitlines(), 1):
        key = line.strip()
        if not key or key.startswith("#"):
            continue
        if len(key.encode()) < 16:
            raise LinkKeyError(f"{key_file}:{number}: a key of {len(key.encode())} bytes; each needs 16 or more")
        keys.append(key.encode())
    if not keys:
        raise LinkKeyError(f"{key_file}: no key in it (one a line; the first signs)")
    return tuple(keys)


def jwt_link_keys(keys: tuple[bytes, ...], verifier: JwtVerifier | None) -> tuple[tuple[bytes, ...], str | None]:
    """The link keys of a JWT server, and the line to print when it has none (spec server [RL3-a], [RL3-b]).

    ``keys`` are ``link_keys``' (a ``--link-key-file``'s, kept as they are). Without them,
    an HS256 server (``--jwt-secret-file``) derives one from its secret as [RL1-c] does
    from ``--token`` (HMAC-SHA-256 of the fixed label, keyed by the secret), so a fleet that
    shares the secret shares links; a JWKS server (public keys only) mints no links and
    says so in ``LINKS_OFF_JWKS``.
    """
    if keys or verifier is None:
        return keys, None
    secrets = [key for _, algorithm, key in verifier.keys if algorithm == "HS256" and isinstance(key, bytes)]
    if not secrets:
        return (), LINKS_OFF_JWKS
    return (hmac.new(secrets[0], _DERIVED, hashlib.sha256).digest(),), None


def link_grants(request: Request, keys: Sequence[bytes]) -> bool:
    """Whether the follow request is admitted by its ``?token=`` (spec server [RL1-a]); ``False``: no link given.

    Raises:
        _Refused: a link that grants nothing: 401 malformed, forged or expired (the type
            says which), 404 for another run (as an unknown run, no existence leak).
    """
    given = request.query_params.get("token")
    if given is None or not keys:
        return False
    run_id = request.path_params.get("run_id", "")
    try:
        verify(list(keys), given, run_id)
    except (TokenWrongRunError, TokenScopeError):
        raise _Refused(404, "unknown_run", "no such run") from None
    except TokenError as exc:
        raise _Refused(401, exc.kind, f"{exc} (POST /agent/runs/{{run_id}}/link gives a new one)") from None
    setattr(request.state, _LINK_RUN, run_id)
    return True


def _fresh(keys: Sequence[bytes], run_id: str) -> tuple[str, int]:
    now = time.time()
    token = mint(list(keys), run_id, ttl=LINK_TTL_SECONDS, now=now)
    return token, int(now + LINK_TTL_SECONDS)


def with_link(request: Request, keys: Sequence[bytes], response: Response) -> Response:
    """``response`` with a fresh link of its run, when it names one and the request came with the bearer.

    A request a link admitted gets no new one (spec server [RL1-d]): a link never renews
    itself, so a leaked URL dies with its token.
    """
    run_id = response.headers.get("x-run-id")
    if keys and run_id and RUN_ID_PATTERN.fullmatch(run_id) and getattr(request.state, _LINK_RUN, None) is None:
        token, expires = _fresh(keys, run_id)
        response.headers[LINK_HEADER] = token
        response.headers[EXPIRES_HEADER] = str(expires)
    return response


def link_route(
    *,
    store: Store,
    manager: RunManager,
    keys: Sequence[bytes],
    route: Callable[[Callable[[Request], Awaitable[Response]]], Callable[[Request], Awaitable[Response]]],
) -> Route:
    """``POST /agent/runs/{run_id}/link``: a fresh link of a known run, for the bearer's holder (spec [RL1-e])."""

    async def link(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        if not keys:
            raise _Refused(
                404, "links_off", "this server mints no resume links (start it with --token or --link-key-file)"
            )
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise _Refused(404, "unknown_run", "no such run")
        if await owned_agent(principal_of(request), manager, store, run_id) is None:
            raise _Refused(404, "unknown_run", "no such run")  # spec server [OW1-b]: another's run is none
        token, expires = _fresh(keys, run_id)
        stream = f"/agent/runs/{run_id}/stream?token={token}"
        return JSONResponse({"run_id": run_id, "token": token, "expires_at": expires, "stream": stream})

    return Route("/agent/runs/{run_id}/link", route(link), methods=["POST"])
