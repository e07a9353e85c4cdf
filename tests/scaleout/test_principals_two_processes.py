"""Two ``agent-ref serve --jwt-secret-file`` processes on one PostgreSQL database (spec server [OW1-b], [OW1-a]).

Alice's run pauses on process A; bob, on process B, tries every endpoint that names it and is
answered as for a run that does not exist; the database shows the run untouched; alice, on
B, follows and answers it. The owner is in the shared store (migration 0004), not in a process.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import sys
from typing import TYPE_CHECKING, Any

import httpx2

from browser.agent_server import serving
from cli_support import clean_env
from principals_support import AUDIENCE, ISSUER, absent_id, as_absent, bearer, fingerprint, mint
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

_URL = re.compile(r"(http://127\.0\.0\.1:\d+)")


def _print(url: str, agent: str, run_id: str) -> tuple[Any, ...]:
    from agent_ref.store.postgres import PostgresStore

    async def read() -> tuple[Any, ...]:
        store = PostgresStore(url)
        try:
            return await fingerprint(store, agent, run_id)
        finally:
            await store.aclose()

    return asyncio.run(read())


def test_spec_ow1_b_another_principal_is_refused_on_every_process(pg_schema_url: str, tmp_path: Path) -> None:
    """Bob on process B: follow, the log, answers, stop, messages, continue, fork of alice's run (from A): 404 [OW1-b]."""
    secret = secrets.token_hex(32).encode()
    (tmp_path / "jwt.secret").write_bytes(secret)
    command = [sys.executable, "-m", "agent_ref", "serve", "--db", pg_schema_url, "--port", "0"]
    command += ["--jwt-secret-file", str(tmp_path / "jwt.secret"), "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE]
    alice, bob = bearer(mint(secret, "alice")), bearer(mint(secret, "bob"))
    with (
        serving(command, url=_URL, env=clean_env()) as a,
        serving(command, url=_URL, env=clean_env()) as b,
        httpx2.Client(timeout=60) as client,
    ):
        started = client.post(f"{a}/agent/run", json={"prompt": "Please confirm: clean up"}, headers=alice)
        assert started.status_code == 200, started.text
        assert_valid(started.content)
        run_id, agent = started.headers["x-run-id"], started.headers["x-agent-uuid"]
        before = _print(pg_schema_url, agent, run_id)
        assert before[1:3] == ("awaiting_frontend_tools", "alice")  # [OW1-a]: recorded in the shared store
        call_id = _pending(pg_schema_url, agent)
        answer = {"agent_uuid": agent, "tool_results": [{"tool_use_id": call_id, "content": "yes"}]}
        gone, gone_agent = absent_id(), absent_id()
        tries: list[tuple[str, str, dict[str, Any], str, str]] = [
            ("GET", f"/agent/runs/{run_id}/stream", {}, run_id, gone),
            ("GET", f"/agent/runs/{run_id}/stream?response=0", {}, run_id, gone),
            ("GET", f"/agent/runs/{run_id}/stream", {"headers": {"Last-Event-ID": f"{run_id}:0:0"}}, run_id, gone),
            ("POST", "/agent/tool_results", {"json": answer}, agent, gone_agent),
            ("POST", f"/agent/runs/{run_id}/stop", {}, run_id, gone),
            ("POST", f"/agent/runs/{run_id}/messages", {"json": {"text": "hijack"}}, run_id, gone),
            ("POST", "/agent/run", {"json": {"prompt": "go on", "agent_uuid": agent}}, agent, gone_agent),
            ("POST", "/agent/run", {"json": {"prompt": "f", "agent_uuid": agent, "fork": True}}, agent, gone_agent),
        ]
        for method, path, kwargs, known, unknown in tries:
            headers = {**bob, **kwargs.get("headers", {})}
            extra = {k: v for k, v in kwargs.items() if k != "headers"}
            refused = client.request(method, b + path, headers=headers, **extra)
            assert refused.status_code == 404, (path, refused.text)
            swapped = {k: _swap(v, known, unknown) for k, v in extra.items()}
            absent_headers = {k: v.replace(known, unknown) for k, v in headers.items()}
            absent = client.request(method, b + path.replace(known, unknown), headers=absent_headers, **swapped)
            as_absent(refused, known, absent, unknown)
        assert run_id not in {r["run_id"] for r in client.get(f"{b}/agent/runs", headers=bob).json()["runs"]}
        assert _print(pg_schema_url, agent, run_id) == before
        # alice, on the other process, follows and answers her run
        replay = client.get(f"{b}/agent/runs/{run_id}/stream?response=0", headers=alice)
        assert replay.status_code == 200
        assert_valid(replay.content)
        done = client.post(f"{b}/agent/tool_results", json=answer, headers=alice)
        assert done.status_code == 200, done.text
        assert_valid(done.content)
        assert run_id in {r["run_id"] for r in client.get(f"{a}/agent/runs", headers=alice).json()["runs"]}
    assert _print(pg_schema_url, agent, run_id)[1] == "idle"


def _pending(url: str, agent: str) -> str:
    from agent_ref.store.postgres import PostgresStore

    async def read() -> str:
        store = PostgresStore(url)
        try:
            state = await store.load(agent)
            assert state is not None
            (pending,) = state.pending_frontend
            return pending.tool_use_id
        finally:
            await store.aclose()

    return asyncio.run(read())


def _swap(value: Any, known: str, unknown: str) -> Any:
    if isinstance(value, str):
        return value.replace(known, unknown)
    if isinstance(value, dict):
        return {k: _swap(v, known, unknown) for k, v in value.items()}
    return [_swap(v, known, unknown) for v in value] if isinstance(value, list) else value
