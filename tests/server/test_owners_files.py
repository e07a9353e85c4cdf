"""Stored files belong to the principal whose run produced them (spec server [FS2-a]).

Two JWT principals minted with PyJWT; another's file is answered exactly as a missing one.
The run that produces a file is the recorded corpus call (as ``test_files.py`` replays
it, through the real ``anthropic`` client), its stream validated strictly.
"""

from __future__ import annotations

import asyncio
import secrets
import warnings
from typing import TYPE_CHECKING, Any

import httpx2
from anthropic import AsyncAnthropic

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools
from agent_ref.models.core import SDKModel
from agent_ref.models.replay import ReplayServer, load_events, split_calls
from agent_ref.server.app import ServerConfig, create_app
from agent_ref.server.auth import JwtVerifier
from agent_ref.store.files import DirectoryFiles, file_url, keep_files
from agent_ref_support import assert_valid_responses, fast_retry
from principals_support import AUDIENCE, ISSUER, bearer, mint
from server_support import get, running

if TYPE_CHECKING:
    from pathlib import Path

FILE_ID = "file_011CVnuVwfnHui7DMm9FwZM5"  # the file the corpus call produced
CONTENT = b"%PDF-1.4 an invoice\n"


def _model(corpus: Path) -> SDKModel:
    """The corpus call that produced ``FILE_ID``, and a Files API that serves it."""
    replay = ReplayServer(split_calls(load_events(corpus / "anthropic_events_1.json")))

    def handle(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == f"/v1/files/{FILE_ID}/content":
            return httpx2.Response(200, content=CONTENT, headers={"content-type": "application/pdf"})
        if request.url.path == f"/v1/files/{FILE_ID}":
            meta: dict[str, Any] = {"id": FILE_ID, "type": "file", "filename": "invoice.pdf", "downloadable": True}
            meta |= {"mime_type": "application/pdf", "size_bytes": len(CONTENT), "created_at": "2026-01-01T00:00:00Z"}
            return httpx2.Response(200, json=meta)
        return replay.handle(request)

    transport = httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
    client = AsyncAnthropic(api_key="offline", base_url="http://replay.invalid", max_retries=0, http_client=transport)
    return SDKModel(client, "replay")


def test_spec_fs2_a_a_run_records_its_principal_and_run_beside_the_file(corpus: Path, tmp_path: Path) -> None:
    """The file a run of alice's produced is recorded as hers, with the run's id [FS2-a]."""
    backend = DirectoryFiles(tmp_path / "files")
    server_tools = [{"type": "code_execution_20250825", "name": "code_execution"}]
    agent = Agent(
        _model(corpus), tools=default_tools(), server_tools=server_tools, retry=fast_retry(), file_backend=backend
    )
    agent.state.principal = "alice"
    lines: list[bytes] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the SDK warns on a code-execution request
        result = asyncio.run(agent.run("Make an invoice", lines.append))
    assert_valid_responses(lines)
    stored = asyncio.run(backend.get(FILE_ID))
    assert stored is not None
    assert (stored.principal, stored.run_id, stored.path.read_bytes()) == ("alice", result.run_id, CONTENT)


def test_spec_fs2_a_keep_files_records_the_owner_given(tmp_path: Path) -> None:
    """``keep_files`` writes the owner it is given; without one none is recorded [FS2-a]."""
    backend = DirectoryFiles(tmp_path / "files")

    async def fetch(file_id: str) -> tuple[str, bytes]:
        return f"{file_id}.txt", b"x"

    asyncio.run(keep_files(backend, [{"file_id": "file_a"}], fetch, principal="bob", run_id="run-1"))
    asyncio.run(keep_files(backend, [{"file_id": "file_b"}], fetch))
    owned, legacy = asyncio.run(backend.get("file_a")), asyncio.run(backend.get("file_b"))
    assert owned is not None
    assert legacy is not None
    assert (owned.principal, owned.run_id) == ("bob", "run-1")
    assert (legacy.principal, legacy.run_id) == (None, None)


def test_spec_fs2_a_anothers_file_is_404_as_a_missing_one(tmp_path: Path) -> None:
    """Alice reads hers, bob gets hers as a missing file; an admin reads all; an unowned file only an admin [FS2-a]."""
    secret = secrets.token_hex(32).encode()
    (tmp_path / "jwt.secret").write_bytes(secret)
    verifier = JwtVerifier.from_secret_file(tmp_path / "jwt.secret", issuer=ISSUER, audience=AUDIENCE)
    backend = DirectoryFiles(tmp_path / "files")
    asyncio.run(backend.put("file_alice", "alice.csv", b"a,1\n", principal="alice", run_id="run-a"))
    asyncio.run(backend.put("file_bob", "bob.csv", b"b,2\n", principal="bob", run_id="run-b"))
    asyncio.run(backend.put("file_old", "old.csv", b"o,3\n"))  # kept before owners were recorded
    app = create_app(
        store=MemoryStore(),
        model_factory=ScriptedModel,
        agent_config={"file_backend": backend},
        config=ServerConfig(jwt=verifier),
    )
    alice, bob = bearer(mint(secret, "alice")), bearer(mint(secret, "bob"))
    admin = bearer(mint(secret, "root", admin=True))
    with running(app) as base:
        hers = get(base, file_url("file_alice"), headers=alice)
        bobs_own = get(base, file_url("file_bob"), headers=bob)
        refused = get(base, file_url("file_alice"), headers=bob)
        missing = get(base, "/files/file_none", headers=bob)
        old = get(base, file_url("file_old"), headers=alice)
        anonymous = get(base, file_url("file_alice"))
        admins = [get(base, file_url(f), headers=admin) for f in ("file_alice", "file_bob", "file_old")]
    assert (hers.status_code, hers.content) == (200, b"a,1\n")
    assert (bobs_own.status_code, bobs_own.content) == (200, b"b,2\n")
    assert refused.status_code == missing.status_code == old.status_code == 404
    assert refused.content == missing.content == old.content  # no existence leak
    assert refused.json()["error"]["type"] == "unknown_file"
    assert b"a,1" not in refused.content
    assert anonymous.status_code == 401
    assert [(a.status_code, a.content) for a in admins] == [(200, b"a,1\n"), (200, b"b,2\n"), (200, b"o,3\n")]
