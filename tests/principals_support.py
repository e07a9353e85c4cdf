"""Principals in tests: JWTs minted with PyJWT, an ``agent-ref serve`` with JWT keys, what "untouched" means.

Owns: the test issuer and audience, minting HS256 tokens (and signing with any key),
``Served`` (a started server: its URL and database), the headers of a principal,
``as_absent`` (a refusal compared with the answer for a run that does not exist), and a
stored agent's fingerprint (version, status, stored responses) to prove it untouched.
Does not own: starting the process (``cli_support.start_serve``) nor the assertions.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx2
import jwt

if TYPE_CHECKING:
    from agent_ref.store.core import Store

#: The ``iss`` and ``aud`` the test servers require.
ISSUER = "https://id.agent-ref.test"
AUDIENCE = "agent-ref-tests"


def claims(sub: str | None, **extra: Any) -> dict[str, Any]:
    """A valid token's claims for ``sub`` (``None``: no ``sub``), ``extra`` added or replacing."""
    now = int(time.time())
    out: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    if sub is not None:
        out["sub"] = sub
    out.update(extra)
    return {k: v for k, v in out.items() if v is not None}


def mint(secret: bytes, sub: str | None, *, admin: bool = False, **extra: Any) -> str:
    """An HS256 token for ``sub`` signed with ``secret``; ``admin`` adds ``"envelope_admin": true``."""
    body = claims(sub, **extra)
    if admin:
        body["envelope_admin"] = True
    return jwt.encode(body, secret, algorithm="HS256")


def bearer(token: str) -> dict[str, str]:
    """The ``Authorization`` header of ``token``."""
    return {"Authorization": f"Bearer {token}"}


@dataclass(frozen=True)
class Served:
    """A started server: its base URL and the secret its tokens are signed with."""

    base: str
    secret: bytes

    def headers(self, sub: str, *, admin: bool = False) -> dict[str, str]:
        """The headers of principal ``sub``."""
        return bearer(mint(self.secret, sub, admin=admin))

    def call(self, method: str, path: str, sub: str, **kwargs: Any) -> httpx2.Response:
        """One request as ``sub`` (the whole answer read)."""
        headers = {**self.headers(sub), **kwargs.pop("headers", {})}
        with httpx2.Client(timeout=60) as client:
            return client.request(method, self.base + path, headers=headers, **kwargs)


def absent_id() -> str:
    """A run or agent id no server has seen."""
    return str(uuid.uuid4())


def as_absent(refused: httpx2.Response, known: str, absent: httpx2.Response, unknown: str) -> None:
    """``refused`` (about ``known``) is exactly ``absent`` (about ``unknown``): status, and body with the id swapped."""
    assert refused.status_code == absent.status_code, (refused.status_code, refused.text, absent.text)
    assert refused.text.replace(known, "ID") == absent.text.replace(unknown, "ID")


async def fingerprint(store: Store, agent_uuid: str, run_id: str) -> tuple[Any, ...]:
    """What a wrong principal must not change: the agent's version and status, and the run's stored lines."""
    state = await store.load(agent_uuid)
    assert state is not None
    return (state.version, state.status, state.principal, await store.run_responses(run_id))
