"""Resume links for browsers: short-lived tokens signed for one run's stream (spec delivery §7).

Owns: minting and verifying a token that grants the stream of one run (all of its
responses) and nothing else, and the ``authorize`` hook of ``Delivery`` that reads one
from the query string. Does not own: who may have a link (the app's own login decides
before it mints one), nor the keys (the app holds them).

A browser's ``EventSource`` cannot send an ``Authorization`` header, so the page that
reconnects carries its right to one stream in the URL: ``/streams/run-1?token=...``.
Sans-I/O: stdlib ``hmac``, ``hashlib`` and ``base64`` only; the clock is read only when the
caller does not pass ``now``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from typing import TYPE_CHECKING, Final, Protocol

from ._errors import ResumeDenied
from ._ids import RUN_ID_PATTERN

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    #: One key or several (the first signs), as bytes or text.
    Keys = bytes | str | Sequence[bytes | str]

__all__ = [
    "LEEWAY_SECONDS",
    "MAX_TOKEN_CHARS",
    "MAX_TTL_SECONDS",
    "MIN_KEY_BYTES",
    "STREAM_SCOPE",
    "TOKEN_PARAM",
    "TokenError",
    "TokenExpiredError",
    "TokenMalformedError",
    "TokenScopeError",
    "TokenSignatureError",
    "TokenWrongRunError",
    "mint",
    "query_token",
    "verify",
]

#: The token format's version, its first field (spec delivery [D7.1-a]).
VERSION: Final = "e1"
#: The scope of a link to a run's stream (``Delivery.route``).
STREAM_SCOPE: Final = "stream"
#: The query parameter a resume link carries its token in.
TOKEN_PARAM: Final = "token"
#: Seconds past its expiry a token is still accepted: clocks of a fleet differ a little ([D7.1-c]).
LEEWAY_SECONDS: Final = 5
#: The longest lifetime ``mint`` gives a token ([D7.1-c]).
MAX_TTL_SECONDS: Final = 3600
#: The shortest key ``mint`` and ``verify`` take: 128 bits.
MIN_KEY_BYTES: Final = 16
#: The longest token ``verify`` reads; anything longer is malformed before any work ([D7.1-b]).
MAX_TOKEN_CHARS: Final = 256

_SCOPE = re.compile(r"[a-z][a-z0-9_-]{0,31}")
_EXPIRY = re.compile(r"[1-9][0-9]{0,11}")
_SIGNATURE = re.compile(r"[A-Za-z0-9_-]{43}")
_CONTEXT: Final = b"envelope resume token\x00"


class TokenError(ValueError):
    """A resume token that grants nothing here; ``kind`` names which check refused it.

    The text never says why a signature did not match, only that it did not.

    Attributes:
        kind: ``token_malformed``, ``token_bad_signature``, ``token_expired``,
            ``token_wrong_run`` or ``token_wrong_scope``.
    """

    kind = "token_invalid"


class TokenMalformedError(TokenError):
    """Not a token of this format (too long, wrong fields, a field out of range)."""

    kind = "token_malformed"


class TokenSignatureError(TokenError):
    """A token none of the keys signed (forged, altered, or signed with a key now retired)."""

    kind = "token_bad_signature"


class TokenExpiredError(TokenError):
    """A genuine token past its expiry (and the leeway): the page should ask for a new link."""

    kind = "token_expired"


class TokenWrongRunError(TokenError):
    """A genuine token of another run."""

    kind = "token_wrong_run"


class TokenScopeError(TokenError):
    """A genuine token of this run for another endpoint (scope)."""

    kind = "token_wrong_scope"


def _keys(keys: Keys) -> list[bytes]:
    listed = [keys] if isinstance(keys, (bytes, str)) else list(keys)
    if not listed:
        raise ValueError("no key: give at least one (the first signs)")
    out = [key.encode() if isinstance(key, str) else bytes(key) for key in listed]
    short = [n for n, key in enumerate(out) if len(key) < MIN_KEY_BYTES]
    if short:
        raise ValueError(f"key {short[0]} is shorter than {MIN_KEY_BYTES} bytes")
    return out


def _sign(key: bytes, body: str) -> str:
    digest = hmac.new(key, _CONTEXT + body.encode("ascii"), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def mint(keys: Keys, run_id: str, *, scope: str = STREAM_SCOPE, ttl: float = 300, now: float | None = None) -> str:
    """A token granting ``scope`` of ``run_id`` for ``ttl`` seconds from ``now``, signed by the first key.

    Args:
        keys: one key, or several (the first signs; rotation, [D7.1-d]); bytes or text,
            each at least ``MIN_KEY_BYTES`` long.
        run_id: the run (spec delivery §1.1-b).
        scope: what the token grants (``STREAM_SCOPE``: the run's stream and its replays).
        ttl: seconds it lives, above 0 and at most ``MAX_TTL_SECONDS``.
        now: the time (Unix seconds); the clock's when ``None``.

    Raises:
        ValueError: a run id, scope, ttl or key out of range.
    """
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise ValueError(f"not a run id: {run_id[:80]!r}")
    if not _SCOPE.fullmatch(scope):
        raise ValueError(f"not a scope: {scope[:40]!r} (a lower-case letter, then up to 31 of [a-z0-9_-])")
    if not 0 < ttl <= MAX_TTL_SECONDS:
        raise ValueError(f"a token's ttl is above 0 and at most {MAX_TTL_SECONDS} s, not {ttl:g}")
    expiry = int((time.time() if now is None else now) + ttl)
    body = f"{VERSION}.{run_id}.{scope}.{expiry}"
    return f"{body}.{_sign(_keys(keys)[0], body)}"


def verify(keys: Keys, token: str, run_id: str, *, scope: str = STREAM_SCOPE, now: float | None = None) -> int:
    """Check that ``token`` grants ``scope`` of ``run_id`` at ``now``; return its expiry (Unix seconds).

    The checks run in this order, so a claim is only reported from a genuine token:
    format, signature (every key, each compared in constant time), run, scope, expiry.

    Raises:
        TokenMalformedError: not a token of this format.
        TokenSignatureError: no key signed it.
        TokenWrongRunError: signed for another run.
        TokenScopeError: signed for another scope.
        TokenExpiredError: past its expiry plus ``LEEWAY_SECONDS``.
        ValueError: a key out of range (the caller's error, not the token's).
    """
    candidates = _keys(keys)
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS or not token.isascii():
        raise TokenMalformedError(f"not a resume token (at most {MAX_TOKEN_CHARS} ASCII characters)")
    fields = token.split(".")
    if len(fields) != 5 or fields[0] != VERSION:
        raise TokenMalformedError(f"not a resume token (expected {VERSION}.RUN.SCOPE.EXPIRY.SIGNATURE)")
    _, claimed_run, claimed_scope, expiry, signature = fields
    if not (
        RUN_ID_PATTERN.fullmatch(claimed_run)
        and _SCOPE.fullmatch(claimed_scope)
        and _EXPIRY.fullmatch(expiry)
        and _SIGNATURE.fullmatch(signature)
    ):
        raise TokenMalformedError("not a resume token (a field out of range)")
    body = token.rsplit(".", 1)[0]
    matched = False
    for key in candidates:  # every key, so the time taken does not say which one matched
        matched |= hmac.compare_digest(_sign(key, body), signature)
    if not matched:
        raise TokenSignatureError("the resume token's signature does not match")
    if not hmac.compare_digest(claimed_run, run_id):
        raise TokenWrongRunError("the resume token is for another run")
    if claimed_scope != scope:
        raise TokenScopeError(f"the resume token is for {claimed_scope!r}, not {scope!r}")
    if (time.time() if now is None else now) > int(expiry) + LEEWAY_SECONDS:
        raise TokenExpiredError("the resume token has expired; ask for a new link")
    return int(expiry)


class _HasQuery(Protocol):
    """What ``query_token``'s hook reads of a request: its query string (Starlette's ``Request`` has it)."""

    @property
    def query_params(self) -> Mapping[str, str]: ...


#: The statuses a refused token gets: expired and invalid ones 401 (ask for a new link), another run's 404.
_STATUS: Final = {
    TokenWrongRunError: 404,
    TokenScopeError: 404,
}


def query_token(
    keys: Keys | Callable[[], Keys], *, scope: str = STREAM_SCOPE, param: str = TOKEN_PARAM
) -> Callable[[_HasQuery, str], None]:
    """An ``authorize`` hook for ``Delivery``: the request's ``?token=`` must grant this run's stream.

    Only the query string is read, never a header or a cookie ([D7.2-a]). ``keys`` may be
    a function returning the current keys, for rotation without a restart.

    A request without a token, or with one that is malformed, forged or expired, is
    refused ``401`` with ``kind`` as the error's type (``token_missing``, ...); a genuine
    token of another run or scope is refused ``404``, as an unknown run is (spec delivery
    [D6.2-b]).
    """

    def authorize(request: _HasQuery, run_id: str) -> None:
        given = request.query_params.get(param)
        if not given:
            raise ResumeDenied(401, "token_missing", f"this stream needs ?{param}= (a resume link)")
        try:
            verify(keys() if callable(keys) else keys, given, run_id, scope=scope)
        except TokenError as exc:
            raise ResumeDenied(_STATUS.get(type(exc), 401), exc.kind, str(exc)) from None

    return authorize
