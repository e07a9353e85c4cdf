"""JWKS keys, the single-user modes, rows from before owners, and the command line's refusals (spec server §PR, §OW).

``agent-ref serve --jwks-file`` with an RSA and an EC public key generated here with
``cryptography``; tokens signed here with PyJWT. The database is seeded, before the server
starts, with a run made the way every run was made before principals (no owner).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from typing import TYPE_CHECKING, Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from agent_ref import Agent, ScriptedModel
from agent_ref.server.app import ServerConfig
from agent_ref.server.auth import JwtVerifier
from agent_ref.store.core import SQLiteStore
from cli_support import serve_refusal, start_serve, stop_serve
from principals_support import claims
from validating import ValidatedSink, assert_valid

if TYPE_CHECKING:
    from pathlib import Path


def _public_jwk(key: Any, kid: str) -> dict[str, Any]:
    algorithm = jwt.algorithms.RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
    jwk: dict[str, Any] = json.loads(algorithm.to_jwk(key.public_key()))
    return {**jwk, "kid": kid}


def _legacy_run(db: Path) -> tuple[str, str]:
    """A run stored with no owner, as every run was before principals: its run id and agent."""

    async def make() -> tuple[str, str]:
        agent = Agent(ScriptedModel(), store=SQLiteStore(db))
        sink = ValidatedSink()
        await agent.run("hi", sink.append)
        sink.check()
        state = await agent.store.load(agent.agent_uuid)
        assert state is not None
        assert state.principal is None
        assert state.run is None
        records = await agent.store.runs(agent.agent_uuid)
        return records[-1].run_id, agent.agent_uuid

    return asyncio.run(make())


def test_spec_pr1_b_jwks_keys_rs256_and_es256_and_no_algorithm_confusion(tmp_path: Path) -> None:
    """RS256 and ES256 tokens of the JWKS's keys pass; HS256 with the public key, none, an unknown key: 401 [PR1-b].

    The run made before owners (no ``principal``) is an admin's only [OW1-d].
    """
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    stranger = ec.generate_private_key(ec.SECP256R1())
    jwks = {"keys": [_public_jwk(rsa_key, "r1"), _public_jwk(ec_key, "e1")]}
    (tmp_path / "jwks.json").write_text(json.dumps(jwks))
    legacy_run, _ = _legacy_run(tmp_path / "agents.db")
    proc, host, port = start_serve(tmp_path, "--jwks-file", str(tmp_path / "jwks.json"))
    base = f"http://{host}:{port}"
    pem = rsa_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    tokens = {
        "rs256": jwt.encode(claims("alice"), rsa_key, algorithm="RS256", headers={"kid": "r1"}),
        "es256": jwt.encode(claims("alice"), ec_key, algorithm="ES256", headers={"kid": "e1"}),
        "es256 no kid": jwt.encode(claims("alice"), ec_key, algorithm="ES256"),
        "admin": jwt.encode({**claims("root"), "envelope_admin": True}, ec_key, algorithm="ES256"),
    }
    bad = {
        "hs256 with the public key": _hs256(pem),
        "none": jwt.encode(claims("alice"), "", algorithm="none"),
        "a key not in the JWKS": jwt.encode(claims("alice"), stranger, algorithm="ES256", headers={"kid": "e1"}),
    }
    try:
        with httpx2.Client(timeout=60) as client:
            for name, token in tokens.items():
                answer = client.get(f"{base}/agents", headers={"Authorization": f"Bearer {token}"})
                assert answer.status_code == 200, (name, answer.text)
            for name, token in bad.items():
                answer = client.get(f"{base}/agents", headers={"Authorization": f"Bearer {token}"})
                assert (answer.status_code, answer.json()["error"]["type"]) == (401, "token_invalid"), name
            alice = {"Authorization": f"Bearer {tokens['rs256']}"}
            run = client.post(f"{base}/agent/run", json={"prompt": "hi"}, headers=alice)
            assert run.status_code == 200
            assert_valid(run.content)
            # [OW1-d]: the ownerless run: not alice's, an admin's
            refused = client.get(f"{base}/agent/runs/{legacy_run}/stream?response=0", headers=alice)
            assert (refused.status_code, refused.json()["error"]["type"]) == (404, "unknown_run")
            assert legacy_run not in {
                r["run_id"] for r in client.get(f"{base}/agent/runs", headers=alice).json()["runs"]
            }
            admin = {"Authorization": f"Bearer {tokens['admin']}"}
            replay = client.get(f"{base}/agent/runs/{legacy_run}/stream?response=0", headers=admin)
            assert replay.status_code == 200
            assert_valid(replay.content)
            assert legacy_run in {r["run_id"] for r in client.get(f"{base}/agent/runs", headers=admin).json()["runs"]}
    finally:
        stop_serve(proc)


def _hs256(secret: bytes) -> str:
    """An HS256 token whose HMAC key is ``secret`` (PyJWT refuses a PEM as an HMAC key, so it is signed by hand)."""
    import base64
    import hashlib
    import hmac

    def part(value: bytes) -> bytes:
        return base64.urlsafe_b64encode(value).rstrip(b"=")

    head = part(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + b"." + part(json.dumps(claims("alice")).encode())
    return (head + b"." + part(hmac.new(secret, head, hashlib.sha256).digest())).decode()


def test_spec_pr1_e_the_token_mode_is_one_local_admin(tmp_path: Path) -> None:
    """``--token``: one principal, ``local``, who sees the rows of before owners too; token with jwt refused [PR1-e]."""
    legacy_run, legacy_agent = _legacy_run(tmp_path / "agents.db")
    token = secrets.token_hex(16)
    proc, host, port = start_serve(tmp_path, "--token", token)
    try:
        with httpx2.Client(timeout=60) as client:
            auth = {"Authorization": f"Bearer {token}"}
            run = client.post(f"http://{host}:{port}/agent/run", json={"prompt": "hi"}, headers=auth)
            assert run.status_code == 200
            assert_valid(run.content)
            agents = client.get(f"http://{host}:{port}/agents", headers=auth).json()["agents"]
            by_id = {a["agent_uuid"]: a["principal"] for a in agents}
            assert by_id[run.headers["x-agent-uuid"]] == "local"
            assert by_id[legacy_agent] is None  # [OW1-d]: listed for the single user, still ownerless
            replay = client.get(f"http://{host}:{port}/agent/runs/{legacy_run}/stream?response=0", headers=auth)
            assert replay.status_code == 200
            assert_valid(replay.content)
    finally:
        stop_serve(proc)
    (tmp_path / "s").write_bytes(secrets.token_hex(32).encode())
    with pytest.raises(ValueError, match="not both"):
        ServerConfig(token="t", jwt=JwtVerifier.from_secret_file(tmp_path / "s"))


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--token", "t", "--jwt-secret-file", "SECRET"), "--jwt-secret-file: error: cannot be used with --token"),
        (("--jwt-secret-file", "SHORT"), "has 8 bytes; HS256 needs at least 32"),
        (("--jwt-secret-file", "MISSING"), "cannot read the JWT secret file"),
        (("--jwt-secret-file", "SECRET", "--jwks-file", "JWKS"), "were both given"),
        (("--jwt-issuer", "https://id.test"), "--jwt-issuer: error: checks a JWT claim, but no JWT key was given"),
        (("--jwks-file", "PRIVATE"), "is a private key; give the public keys only"),
        (("--jwks-file", "OCT"), "only RSA (RS256) and EC (ES256) keys are accepted"),
        (("--jwks-file", "SHORT"), "is not a JWKS document"),
    ],
)
def test_spec_rc13_a_unusable_jwt_flags_are_one_line_before_listening(
    tmp_path: Path, args: tuple[str, ...], said: str
) -> None:
    """Each unusable JWT flag is one line naming the flag and the file, exit 2, never the key [RC13-a]."""
    secret = secrets.token_hex(32)
    (tmp_path / "SECRET").write_text(secret)
    (tmp_path / "SHORT").write_text("12345678")
    ec_key = ec.generate_private_key(ec.SECP256R1())
    private = json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key))
    (tmp_path / "PRIVATE").write_text(json.dumps({"keys": [private]}))
    (tmp_path / "OCT").write_text(json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}))
    (tmp_path / "JWKS").write_text(json.dumps({"keys": [_public_jwk(ec_key, "e")]}))
    named = tuple(
        str(tmp_path / a) if a in {"SECRET", "SHORT", "MISSING", "PRIVATE", "OCT", "JWKS"} else a for a in args
    )
    done = serve_refusal(tmp_path, *named)
    assert said in done.stderr, done.stderr
    assert secret not in done.stderr
    assert private["d"] not in done.stderr
    assert "Traceback" not in done.stderr
