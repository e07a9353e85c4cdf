"""Resume links on JWT servers (spec server [RL3-a], [RL3-b]), ``agent-ref serve`` started as a user starts it.

HS256: a fleet sharing ``--jwt-secret-file`` shares links, with no key file. JWKS without
``--link-key-file``: links are off, said once at start-up. Tokens minted with PyJWT;
every stream validated strictly.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import secrets
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from agent_ref.server.links import LINKS_OFF_JWKS
from envelope.delivery import TokenError, verify
from principals_support import bearer, claims, mint
from serve_cli_support import agent_ref_serve
from server_support import get, post
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


def _secret(path: Path) -> tuple[str, bytes]:
    secret = secrets.token_hex(32).encode()
    path.write_bytes(secret + b"\n")
    return str(path), secret


def derived(secret: bytes) -> bytes:
    """The link key [RL3-a] names: HMAC-SHA-256 of [RL1-c]'s fixed label, keyed by the JWT secret."""
    return hmac.new(secret, b"agent-ref resume links v1", hashlib.sha256).digest()


def test_spec_rl3_a_a_fleet_sharing_the_jwt_secret_shares_links(tmp_path: Path) -> None:
    """A mints alice's link; B (same secret, same store) replays by it alone; C (another secret) refuses it [RL3-a]."""
    db = str(tmp_path / "a.db")
    shared, secret = _secret(tmp_path / "jwt.secret")
    other, _ = _secret(tmp_path / "other.secret")
    with (
        agent_ref_serve("--db", db, "--jwt-secret-file", shared) as a,
        agent_ref_serve("--db", db, "--jwt-secret-file", shared) as b,
        agent_ref_serve("--db", db, "--jwt-secret-file", other) as c,
    ):
        first = post(a, "/agent/run", {"prompt": "What is 2 + 2?"}, headers=bearer(mint(secret, "alice")))
        run_id, link = first.headers["x-run-id"], first.headers["x-resume-token"]
        on_b = get(b, f"/agent/runs/{run_id}/stream?token={link}")
        on_c = get(c, f"/agent/runs/{run_id}/stream?token={link}")
        minted_on_b = post(b, f"/agent/runs/{run_id}/link", {}, headers=bearer(mint(secret, "alice")))
        bobs = post(b, f"/agent/runs/{run_id}/link", {}, headers=bearer(mint(secret, "bob")))
    assert first.status_code == 200, first.text
    assert_valid(first.content)
    assert on_b.status_code == 200, on_b.text
    assert_valid(on_b.content)
    assert on_b.content == first.content
    assert on_c.status_code == 401
    assert on_c.json()["error"]["type"] == "token_bad_signature"
    assert minted_on_b.status_code == 200, minted_on_b.text
    assert bobs.status_code == 404  # the link is the owner's to mint, on every process
    assert verify([derived(secret)], link, run_id) > 0  # the key is the one [RL3-a] derives
    with pytest.raises(TokenError):  # the secret itself signs no link
        verify([secret], link, run_id)


@contextlib.contextmanager
def _serve_said(*flags: str) -> Iterator[tuple[str, list[str]]]:
    """``agent-ref serve`` until the block ends: its base URL and the lines it printed before listening."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_ref.cli.serve", "--port", "0", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    said: list[str] = []
    try:
        for line in proc.stderr:  # ends when the process does: a failed start is its stderr, not a hang
            if "serving on " in line:
                yield line.split("serving on ", 1)[1].split()[0].rstrip("/"), said
                break
            said.append(line.rstrip("\n"))
        else:
            raise AssertionError(f"agent-ref serve did not start: {said}")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=10)


def test_spec_rl3_b_a_jwks_server_without_a_link_key_has_links_off_and_says_so(tmp_path: Path) -> None:
    """JWKS, no --link-key-file: one start-up line naming the flag, no X-Resume-Token, 404 links_off [RL3-b]."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(key.public_key()))
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [{**public, "kid": "e1"}]}), encoding="utf-8")
    token = jwt.encode(claims("alice"), key, algorithm="ES256", headers={"kid": "e1"})
    jwks = ("--jwks-file", str(tmp_path / "jwks.json"), "--db", str(tmp_path / "a.db"))
    (tmp_path / "links.key").write_text("a-link-key-of-enough-bytes\n", encoding="utf-8")
    with _serve_said(*jwks) as (base, said):
        run = post(base, "/agent/run", {"prompt": "What is 2 + 2?"}, headers=bearer(token))
        link = post(base, f"/agent/runs/{run.headers['x-run-id']}/link", {}, headers=bearer(token))
    with _serve_said(*jwks, "--link-key-file", str(tmp_path / "links.key")) as (keyed, said_keyed):
        keyed_run = post(keyed, "/agent/run", {"prompt": "What is 2 + 2?"}, headers=bearer(token))
    assert said == [LINKS_OFF_JWKS]
    assert "--link-key-file" in LINKS_OFF_JWKS
    assert run.status_code == 200, run.text
    assert_valid(run.content)
    assert "x-resume-token" not in run.headers
    assert link.status_code == 404
    assert link.json()["error"]["type"] == "links_off"
    assert said_keyed == []  # with a key file, nothing to say, and links are minted
    assert keyed_run.status_code == 200
    assert_valid(keyed_run.content)
    assert keyed_run.headers["x-resume-token"]
