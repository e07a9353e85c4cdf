"""The file backend: produced files kept beside the store and served with their name (spec agent-ref §SF, server §FS).

The model is the recorded corpus call that produced a file (code execution), replayed
through the real ``anthropic`` client; the same mock transport answers the Files API
(its metadata and content), so the agent downloads the file as it would from the API.
Every stream is validated strictly.
"""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from anthropic import AsyncAnthropic

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools
from agent_ref.models.core import SDKModel
from agent_ref.models.replay import ReplayServer, load_events, split_calls
from agent_ref.server.app import create_app
from agent_ref.store.files import DirectoryFiles, FileIdError, file_url
from agent_ref_support import assert_valid_responses, fast_retry, meta
from server_support import get, running

if TYPE_CHECKING:
    from pathlib import Path

FILE_ID = "file_011CVnuVwfnHui7DMm9FwZM5"
CONTENT = b"%PDF-1.4 an invoice\n"


def _model(corpus: Path, filename: str = "invoice.pdf") -> SDKModel:
    """The corpus call that produced ``FILE_ID``, and a Files API that knows it as ``filename``."""
    replay = ReplayServer(split_calls(load_events(corpus / "anthropic_events_1.json")))

    def handle(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path == f"/v1/files/{FILE_ID}/content":
            return httpx2.Response(200, content=CONTENT, headers={"content-type": "application/pdf"})
        if path == f"/v1/files/{FILE_ID}":
            meta: dict[str, Any] = {"id": FILE_ID, "type": "file", "filename": filename, "mime_type": "application/pdf"}
            meta |= {"size_bytes": len(CONTENT), "created_at": "2026-01-01T00:00:00Z", "downloadable": True}
            return httpx2.Response(200, json=meta)
        return replay.handle(request)

    transport = httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
    client = AsyncAnthropic(api_key="offline", base_url="http://replay.invalid", max_retries=0, http_client=transport)
    return SDKModel(client, "replay")


def _run(model: SDKModel, backend: DirectoryFiles) -> tuple[list[bytes], Any]:
    server_tools = [{"type": "code_execution_20250825", "name": "code_execution"}]
    agent = Agent(model, tools=default_tools(), server_tools=server_tools, retry=fast_retry(), file_backend=backend)
    lines: list[bytes] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the SDK warns on a code-execution request
        result = asyncio.run(agent.run("Make an invoice", lines.append))
    assert_valid_responses(lines)
    return lines, result


def test_sf1_a_a_produced_file_is_kept_and_named_as_it_is(corpus: Path, tmp_path: Path) -> None:
    """meta_files names the real filename and the server URL; the bytes are in the backend [SF1-a]."""
    backend = DirectoryFiles(tmp_path / "files")
    lines, result = _run(_model(corpus), backend)
    assert result.stop_reason == "end_turn"
    (item,) = meta(lines, "meta_files")["files"]
    assert item == {"file_id": FILE_ID, "filename": "invoice.pdf", "storage_location": f"/files/{FILE_ID}"}
    assert meta(lines, "meta_final")["generated_files"] == [item]
    stored = asyncio.run(backend.get(FILE_ID))
    assert stored is not None
    assert (stored.filename, stored.path.read_bytes()) == ("invoice.pdf", CONTENT)


def test_sf1_a_a_file_that_cannot_be_fetched_keeps_the_files_api_location(corpus: Path, tmp_path: Path) -> None:
    """A failed download leaves spec §5.6-b's id and location, and the run ends as usual [SF1-a]."""
    backend = DirectoryFiles(tmp_path / "files")
    model = _model(corpus)
    model.client = model.client.with_options(base_url="http://replay.invalid/broken")  # the Files API 404s there
    lines, result = _run(model, backend)
    assert result.stop_reason == "end_turn"
    (item,) = meta(lines, "meta_files")["files"]
    assert item == {"file_id": FILE_ID, "filename": FILE_ID, "storage_location": f"/v1/files/{FILE_ID}/content"}


@pytest.mark.parametrize("bad", ["..", ".", "a.b", "a/b", "../etc", "", "x" * 129, "é"])
def test_fs1_b_an_id_that_is_not_a_plain_name_is_refused(tmp_path: Path, bad: str) -> None:
    """An id with a path, a dot or outside the alphabet is refused before the disk is looked at [FS1-b]."""
    backend = DirectoryFiles(tmp_path / "files")
    with pytest.raises(FileIdError, match="is not 1-128 letters"):
        asyncio.run(backend.get(bad))
    with pytest.raises(FileIdError):
        asyncio.run(backend.put(bad, "x.txt", b"x"))
    with pytest.raises(FileIdError):
        file_url(bad)


def test_fs1_a_the_server_serves_a_stored_file_with_its_name(tmp_path: Path) -> None:
    """``GET /files/{id}``: the bytes, with the real filename in Content-Disposition [FS1-a]; others refused [FS1-b]."""
    backend = DirectoryFiles(tmp_path / "files")
    asyncio.run(backend.put("file_abc", "../../report 2026.csv", b"a,b\n1,2\n"))
    (tmp_path / "secret.txt").write_text("not yours")
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, agent_config={"file_backend": backend})
    with running(app) as base:
        ok = get(base, file_url("file_abc"))
        missing = get(base, "/files/file_none")
        dotted = get(base, "/files/secret.txt")
        escaped = get(base, "/files/..%2Fsecret.txt")
    assert ok.status_code == 200
    assert ok.content == b"a,b\n1,2\n"
    assert ok.headers["content-disposition"] == "attachment; filename*=utf-8''report%202026.csv"  # RFC 6266
    assert ok.headers["x-content-type-options"] == "nosniff"
    assert ok.headers["content-type"].startswith("text/csv")  # from the real name, not the id
    assert missing.status_code == 404
    assert json.loads(missing.content)["error"]["type"] == "unknown_file"
    assert dotted.status_code == 400
    assert json.loads(dotted.content)["error"]["type"] == "invalid_file_id"
    assert escaped.status_code in (400, 404)
    assert b"not yours" not in escaped.content


def test_fs1_a_without_a_backend_there_is_no_files_route() -> None:
    """No ``file_backend``: ``/files/...`` is not a route of the app [FS1-a]."""
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel)
    with running(app) as base:
        assert get(base, "/files/file_abc").status_code == 404
