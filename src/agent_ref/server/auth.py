"""Who is asking: the principal of a request, from a verified JWT or the single-user token (spec server §PR).

Owns: ``Principal`` (the ``sub`` of a verified token and whether it carries the admin claim),
``JwtVerifier`` (the keys of ``--jwt-secret-file`` or ``--jwks-file``, read once at start-up,
and the check of one bearer token against them, with PyJWT), ``authenticate`` (the request's
principal, or a 401 naming what is wrong) and ``owns`` (whether a principal may touch what
an owner created). Does not own: where the principal is kept (``request.state.principal``,
set by ``_guarded`` in ``server/app.py`` before any handler runs) nor the ownership checks of
each endpoint (the route modules).

Why PyJWT: it is well kept, small, verifies ``exp``/``nbf``/``iss``/``aud`` with a leeway,
refuses every algorithm not named by the caller (``none`` included), and ``PyJWKSet`` reads
a JWKS document as it is published.
"""

from __future__ import annotations

import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from envelope._extras import import_failed

try:
    import jwt
    import starlette  # noqa: F401  # the module's own name in the error when the server extra is missing
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "server") from None  # pragma: no cover

from .http import _Refused

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = [
    "ADMIN_CLAIM",
    "LEEWAY_SECONDS",
    "LOCAL",
    "MIN_SECRET_BYTES",
    "JwtVerifier",
    "KeyFileError",
    "Principal",
    "authenticate",
    "owns",
]

#: The claim that lets a principal read and act on every principal's agents (spec server [PR1-d]).
ADMIN_CLAIM: Final = "envelope_admin"
#: Seconds of clock difference allowed on ``exp`` and ``nbf`` (spec server [PR1-c]).
LEEWAY_SECONDS: Final = 30
#: The shortest HS256 secret accepted: as long as the hash (RFC 7518 §3.2; spec server [PR1-b]).
MIN_SECRET_BYTES: Final = 32
#: The algorithms a JWKS key may sign with, by key type (spec server [PR1-b]).
_JWKS_ALGORITHMS: Final = {"RSA": "RS256", "EC": "ES256"}


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request is from (spec server [PR1-a]).

    Attributes:
        sub: the verified token's ``sub``, or ``local`` in the single-user modes.
        admin: whether it may read and act on every principal's agents and runs.
    """

    sub: str
    admin: bool


#: The one principal of ``--token`` mode and of a server with no token at all (spec server [PR1-e]).
LOCAL: Final = Principal("local", admin=True)


class KeyFileError(ValueError):
    """A key file that cannot be used; the message names the file and what is wrong (never the key)."""


def owns(principal: Principal, owner: str | None) -> bool:
    """Whether ``principal`` may touch what ``owner`` created (spec server [OW1-a], [OW1-d]).

    An admin may touch everything; a row with no owner (made before owners were recorded)
    only an admin; anyone else only their own.
    """
    return principal.admin or (owner is not None and owner == principal.sub)


@dataclass(frozen=True, slots=True)
class JwtVerifier:
    """The keys a bearer JWT must be signed with, and the claims it must carry (spec server §PR1).

    Make one with ``from_secret_file`` (HS256) or ``from_jwks_file`` (RS256/ES256): the keys
    are read once, at start-up.

    Attributes:
        keys: ``(kid, algorithm, key)`` for each usable key (``kid`` may be ``None``).
        issuer: the ``iss`` every token must name, or ``None`` for no check.
        audience: the ``aud`` every token must include, or ``None`` for no check.
    """

    keys: tuple[tuple[str | None, str, Any], ...]
    issuer: str | None = None
    audience: str | None = None

    @classmethod
    def from_secret_file(
        cls, path: str | Path, *, issuer: str | None = None, audience: str | None = None
    ) -> JwtVerifier:
        """An HS256 verifier whose secret is the file's bytes (one trailing newline dropped).

        Raises:
            KeyFileError: the file cannot be read, or holds fewer than ``MIN_SECRET_BYTES`` bytes.
        """
        try:
            secret = Path(path).read_bytes()
        except OSError as exc:
            raise KeyFileError(f"cannot read the JWT secret file {path}: {exc.strerror or exc}") from None
        secret = secret.removesuffix(b"\n").removesuffix(b"\r")
        if len(secret) < MIN_SECRET_BYTES:
            raise KeyFileError(
                f"the JWT secret in {path} has {len(secret)} bytes; HS256 needs at least {MIN_SECRET_BYTES}"
            )
        return cls(((None, "HS256", secret),), issuer, audience)

    @classmethod
    def from_jwks_file(cls, path: str | Path, *, issuer: str | None = None, audience: str | None = None) -> JwtVerifier:
        """A verifier for the RSA and EC public keys of a JWKS document (``{"keys": [...]}``).

        Raises:
            KeyFileError: the file cannot be read, is not a JWKS document, or has no RSA/EC key.
        """
        try:
            document = json.loads(Path(path).read_bytes())
        except OSError as exc:
            raise KeyFileError(f"cannot read the JWKS file {path}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise KeyFileError(f"the JWKS file {path} is not JSON: {exc}") from None
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise KeyFileError(f'the JWKS file {path} is not a JWKS document (an object with a "keys" list)')
        keys: list[tuple[str | None, str, Any]] = []
        for index, entry in enumerate(document["keys"]):
            keys.append(_jwk(path, index, entry))
        if not keys:
            raise KeyFileError(f"the JWKS file {path} has no keys")
        return cls(tuple(keys), issuer, audience)

    def verify(self, token: str) -> Principal:
        """The principal of a valid token.

        Raises:
            _Refused: 401 with ``token_expired``, ``token_not_yet_valid``, ``token_wrong_issuer``,
                ``token_wrong_audience``, ``token_no_subject`` or ``token_invalid`` (spec server [PR1-f]).
        """
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise _unauthorized("token_invalid", "the bearer token is not a JWT") from None
        candidates = [k for k in self.keys if header.get("kid") in (None, k[0]) or k[0] is None]
        claims: dict[str, Any] | None = None
        for _, algorithm, key in candidates or self.keys:
            claims = self._decode(token, algorithm, key)
            if claims is not None:
                break
        if claims is None:
            raise _unauthorized("token_invalid", "the bearer token's signature or algorithm is not accepted")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise _unauthorized("token_no_subject", "the bearer token has no sub (the principal)")
        return Principal(sub, admin=claims.get(ADMIN_CLAIM) is True)

    def _decode(self, token: str, algorithm: str, key: Any) -> dict[str, Any] | None:
        """The claims if ``key`` signed the token; ``None`` if not; a 401 for a signed token that fails a claim."""
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                issuer=self.issuer,
                audience=self.audience,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp"], "verify_aud": self.audience is not None},
            )
        except (jwt.InvalidSignatureError, jwt.InvalidAlgorithmError, jwt.DecodeError):
            return None
        except jwt.ExpiredSignatureError:
            raise _unauthorized("token_expired", "the bearer token has expired") from None
        except jwt.ImmatureSignatureError:
            raise _unauthorized("token_not_yet_valid", "the bearer token is not valid yet (nbf)") from None
        except jwt.InvalidIssuerError:
            raise _unauthorized("token_wrong_issuer", "the bearer token's iss is not this server's issuer") from None
        except jwt.InvalidAudienceError:
            raise _unauthorized("token_wrong_audience", "the bearer token's aud does not name this server") from None
        except jwt.MissingRequiredClaimError as exc:
            raise _unauthorized("token_invalid", f"the bearer token has no {exc.claim} claim") from None
        except jwt.PyJWTError:
            raise _unauthorized("token_invalid", "the bearer token's claims are not valid") from None
        return claims


def _jwk(path: str | Path, index: int, entry: object) -> tuple[str | None, str, Any]:
    """One JWKS key as ``(kid, algorithm, public key)``; a private or symmetric key is refused."""
    where = f"key {index} of the JWKS file {path}"
    if not isinstance(entry, dict):
        raise KeyFileError(f"{where} is not an object")
    algorithm = _JWKS_ALGORITHMS.get(str(entry.get("kty")))
    if algorithm is None:
        raise KeyFileError(f"{where} has kty {entry.get('kty')!r}; only RSA (RS256) and EC (ES256) keys are accepted")
    if entry.get("alg", algorithm) != algorithm:
        raise KeyFileError(f"{where} has alg {entry.get('alg')!r}; a {entry['kty']} key here signs with {algorithm}")
    if "d" in entry:
        raise KeyFileError(f"{where} is a private key; give the public keys only")
    try:
        key = jwt.PyJWK(entry, algorithm).key
    except (jwt.PyJWTError, ValueError, TypeError):
        raise KeyFileError(f"{where} is not a usable {entry['kty']} public key") from None
    kid = entry.get("kid")
    return (kid if isinstance(kid, str) else None, algorithm, key)


def _unauthorized(code: str, message: str) -> _Refused:
    return _Refused(401, code, message)


def authenticate(request: Request, token: str | None, verifier: JwtVerifier | None) -> Principal:
    """The principal of ``request`` (spec server [PR1-a], [PR1-e]; §5.2-a).

    With a verifier, the bearer token must be a JWT it accepts; with ``token``, the header
    must carry it (constant-time comparison) and the principal is ``LOCAL``; with neither,
    every request is ``LOCAL``.

    Raises:
        _Refused: 401 (``unauthorized`` for no or a wrong token; ``token_*`` for a JWT refused).
    """
    if verifier is None and token is None:
        return LOCAL
    header = request.headers.get("authorization", "")
    scheme, _, given = header.partition(" ")
    given = given.strip()
    if verifier is not None:
        if scheme.lower() != "bearer" or not given:
            raise _Refused(401, "unauthorized", "missing bearer token (Authorization: Bearer <JWT>)")
        return verifier.verify(given)
    assert token is not None
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.encode(), token.encode()):
        raise _Refused(401, "unauthorized", "missing or wrong bearer token (Authorization: Bearer <token>)")
    return LOCAL
