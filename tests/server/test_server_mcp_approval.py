"""Issue 29's "done when" in one test: an MCP tool over stdio and an approval, answered on a second server.

``agent-ref serve`` process A (``--mcp-config`` naming the test MCP server, run over stdio as a
child process of the server) starts a run whose model calls the MCP tool and a backend tool
that needs approval (mode ``auto``, MCP tools allowed): the MCP tool runs, the run pauses on
the approval. The approval is POSTed to ``/agent/tool_results`` of process B on the same
store, which runs the approved call (once) and finishes the run. Both responses, and the
stored recording of the whole run, go through the strict validator and ``envelope validate
--strict`` (spec server [S1.2-d], agent-ref §12.6, §19).

SQLite: A is stopped before B starts, as a deploy or a crash between the pause and the answer
would have it (two ``agent-ref serve`` processes on one SQLite file at once are a known issue
of their own, not approvals'); the stored recording (``agent-ref log``) is then the two
responses back to back. PostgreSQL: A stays alive while B answers (two servers behind a
load balancer).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref_support import sse_lines
from browser.agent_server import CLI, serving
from mcp_support import SERVER_SCRIPT, calling_prompt
from validating import assert_valid

if TYPE_CHECKING:
    import contextlib
    from collections.abc import Iterator

BIN = Path(sys.executable).parent
#: The MCP tool runs (allowed); the calculator needs approval (mode auto asks about unknown tools).
CALLS: list[tuple[str, dict[str, Any]]] = [("mcp__io__echo", {"text": "hi"}), ("calculator", {"expression": "6 * 7"})]
PERMISSIONS = ("--permission-mode", "auto", "--allow", "mcp__*")


def _post(base: str, path: str, body: object) -> tuple[int, bytes]:
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _strict(body: bytes, tmp_path: Path, name: str) -> list[dict[str, Any]]:
    assert_valid(body)
    path = tmp_path / f"{name}.sse"
    path.write_bytes(body)
    done = subprocess.run(
        [str(BIN / "envelope"), "validate", "--strict", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in sse_lines(body) if line != b"[DONE]"]


def _server(db: str, config: Path) -> contextlib.AbstractContextManager[str]:
    return serving([*CLI, "--db", db, "--host", "127.0.0.1", "--port", "0", "--mcp-config", str(config), *PERMISSIONS])


def _config(tmp_path: Path) -> Path:
    servers = {"io": {"command": sys.executable, "args": [str(SERVER_SCRIPT), "io"]}}
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def _start(base: str, tmp_path: Path) -> tuple[str, dict[str, Any], bytes]:
    """POST the run to A: the MCP tool ran, the calculator waits for approval."""
    status, body = _post(base, "/agent/run", {"prompt": calling_prompt(CALLS)})
    assert status == 200, body
    envs = _strict(body, tmp_path, "first")
    results = {e["name"]: e["delta"] for e in envs if e["type"] == "tool_result"}
    assert results == {"mcp__io__echo": "io echoes: hi"}  # the MCP tool's result, over stdio
    (pause,) = [e for e in envs if e["type"] == "awaiting_frontend_tools"]
    (element,) = json.loads(pause["delta"])
    assert element["name"] == "calculator"
    assert element["approval"]["reason"]
    return pause["agent"], element, body


def _approve(base: str, agent: str, element: dict[str, Any], tmp_path: Path) -> bytes:
    """POST the approval to B: the calculator runs there, once, and the run ends."""
    answer = {"tool_use_id": element["tool_use_id"], "decision": "approve"}
    status, body = _post(base, "/agent/tool_results", {"agent_uuid": agent, "tool_results": [answer]})
    assert status == 200, body
    envs = _strict(body, tmp_path, "second")
    assert json.loads(envs[-1]["delta"])["stop_reason"] == "end_turn"
    return body


def _check_whole_run(first_body: bytes, second_body: bytes, element: dict[str, Any], tmp_path: Path) -> None:
    """Both responses as one stream: strictly valid; the MCP result in it; the approved call ran once, on B."""
    whole = _strict(first_body + second_body, tmp_path, "whole")
    second = _strict(second_body, tmp_path, "second")
    first = whole[: len(whole) - len(second)]
    assert [e["delta"] for e in whole if e["type"] == "tool_result" and e["name"].startswith("mcp__")] == [
        "io echoes: hi"
    ]
    call = element["tool_use_id"]
    ran = [e for e in first + second if e["type"] == "tool_result" and e["id"] == call]
    assert [e["delta"] for e in ran] == ["42"]  # the approved call ran exactly once
    assert ran[0] in second  # on B
    final = [e for e in second if e["type"] == "text" and "42" in e.get("delta", "")]
    assert final  # the model read the approved result


def test_issue_29_done_when_mcp_and_approval_through_a_second_server_sqlite(tmp_path: Path) -> None:
    """A pauses (MCP tool ran), A stops, B takes the approval and finishes; one strictly valid run."""
    config = _config(tmp_path)
    db = str(tmp_path / "agents.db")
    with _server(db, config) as a:
        agent, element, first = _start(a, tmp_path)
    with _server(db, config) as b:
        second = _approve(b, agent, element, tmp_path)
    _check_whole_run(first, second, element, tmp_path)
    run_id = json.loads(next(e for e in _strict(first, tmp_path, "first") if e["type"] == "meta_init")["delta"])
    log = subprocess.run(
        [str(BIN / "agent-ref"), "log", run_id["run_id"], "--db", db], capture_output=True, check=False, timeout=60
    )
    assert log.returncode == 0, log.stderr
    # The stored recording is the two responses, back to back, strictly valid.
    assert sse_lines(log.stdout) == sse_lines(first) + sse_lines(second)
    assert_valid(sse_lines(log.stdout))


@pytest.fixture
def pg_servers(pg_schema_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    config = _config(tmp_path)
    with _server(pg_schema_url, config) as a, _server(pg_schema_url, config) as b:
        yield a, b


def test_issue_29_done_when_mcp_and_approval_through_a_second_server_postgres(
    pg_servers: tuple[str, str], tmp_path: Path
) -> None:
    """Both servers alive on one PostgreSQL database: A pauses, B approves and finishes, A serves the log."""
    a, b = pg_servers
    agent, element, first = _start(a, tmp_path)
    second = _approve(b, agent, element, tmp_path)
    _check_whole_run(first, second, element, tmp_path)
