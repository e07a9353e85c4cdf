"""A detached background child joined from outside, across processes on PostgreSQL (spec agent-ref §SA4).

Alice's agent runs here (its principal set as a server sets it) with
``BackgroundQueue(outlive=True)``: its response ends with the task pending. An ``agent-ref
worker`` process (its model held by a file the test creates, so the task is seen running) claims it; an ``agent-ref serve
--jwt-secret-file`` process on the same database answers ``GET /agents/{id}/tasks``, and
``agent-ref tasks`` runs as its own process. Both show the task running, then joined
completed with its result; bob sees none of alice's child on any list, and the child's
agent, run and task rows name alice. Every parent stream is validated strictly.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import httpx2
import psycopg

from agent_ref import Agent, ScriptedModel
from agent_ref.fleet.task_queue import PostgresTaskQueue, Task
from agent_ref.run.background import BackgroundQueue
from agent_ref.store.postgres import PostgresStore
from agent_ref_support import assert_valid_responses
from browser.agent_server import serving
from cli_support import clean_env
from fleet_support import CHILD_GATE_ENV, SUBAGENTS, WorkerProcess, wait_until
from principals_support import AUDIENCE, ISSUER, absent_id, as_absent, bearer, mint

if TYPE_CHECKING:
    from pathlib import Path

_URL = re.compile(r"(http://127\.0\.0\.1:\d+)")
WORKER_ARGS = ("--agent", "fleet_support:fleet_agent", "--lease", "30", "--poll", "0.2")


async def _alice_run(url: str) -> tuple[str, str, list[bytes]]:
    """Alice's parent: its response ends with its background task pending on the queue ([SA3-a])."""
    queue = PostgresTaskQueue(url, poll_seconds=0.2)
    store = PostgresStore(url)
    lines: list[bytes] = []
    try:
        remote = BackgroundQueue(queue=queue, poll_seconds=0.2, outlive=True)
        agent = Agent(ScriptedModel(), store=store, subagents=SUBAGENTS, background_queue=remote)
        agent.state.principal = "alice"  # as the server records the principal that creates an agent
        result = await asyncio.wait_for(agent.run("Research tides in the background", lines.append), timeout=90)
        assert result.stop_reason == "end_turn"
        (row,) = await queue.tasks(parent=agent.agent_uuid)
        assert row.status == "pending"
    finally:
        await queue.aclose()
        await store.aclose()
    return agent.agent_uuid, row.task_id, lines


def _row(url: str, task_id: str) -> Task | None:
    async def read() -> Task | None:
        queue = PostgresTaskQueue(url)
        try:
            return await queue.get(task_id)
        finally:
            await queue.aclose()

    return asyncio.run(read())


def _cli(url: str, agent: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "agent_ref", "tasks", agent, "--db", url, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=clean_env(), check=False)


def _lines(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def _principals(url: str, child: str) -> tuple[Any, ...]:
    with psycopg.connect(url, autocommit=True) as conn:
        agent = conn.execute("SELECT principal FROM agents WHERE agent_uuid = %s", (child,)).fetchall()
        runs = conn.execute("SELECT principal FROM runs WHERE agent_uuid = %s", (child,)).fetchall()
    return tuple(r[0] for r in agent), tuple(r[0] for r in runs)


def test_bj1_a_a_detached_child_is_polled_and_joined_from_outside(pg_schema_url: str, tmp_path: Path) -> None:
    """CLI and endpoint show the task running, then joined completed; bob sees nothing of it [BJ1-a] [BJ1-b] [SA4-b]."""
    url = pg_schema_url
    agent, task_id, first = asyncio.run(_alice_run(url))
    assert_valid_responses(first)
    secret = secrets.token_hex(32).encode()
    (tmp_path / "jwt.secret").write_bytes(secret)
    command = [sys.executable, "-m", "agent_ref", "serve", "--db", url, "--port", "0"]
    command += ["--jwt-secret-file", str(tmp_path / "jwt.secret"), "--jwt-issuer", ISSUER, "--jwt-audience", AUDIENCE]
    alice, bob = bearer(mint(secret, "alice")), bearer(mint(secret, "bob"))
    gate = tmp_path / "let-the-child-answer"  # the child stays running until the test creates it
    worker = WorkerProcess(url, "w1", tmp_path / "w1.log", *WORKER_ARGS, env={CHILD_GATE_ENV: str(gate)})
    try:
        with serving(command, url=_URL, env=clean_env()) as base, httpx2.Client(timeout=60) as client:
            row = wait_until(
                lambda: (r := _row(url, task_id)) is not None and r.status != "pending" and r, 60, "a claim"
            )
            assert row.status == "running"
            child = row.payload["agent_uuid"]
            polled = client.get(f"{base}/agents/{agent}/tasks", headers=alice)
            assert polled.status_code == 200, polled.text
            (item,) = polled.json()["tasks"]
            assert (item["task_id"], item["status"], item["subagent"], item["queue"]) == (
                task_id,
                "running",
                "researcher",
                True,
            )
            assert "result" not in item
            assert polled.json()["running"] == 1
            listed = _cli(url, agent)
            assert listed.returncode == 0, listed.stderr
            assert [(i["task_id"], i["status"], i["agent"]) for i in _lines(listed)] == [(task_id, "running", child)]
            short = _cli(url, agent, "--wait", "--timeout", "0.5")  # [BJ1-a]: bounded, and says so
            assert short.returncode == 1
            assert f"timed out after 0.5 s waiting for {task_id} (researcher, running)" in short.stderr
            assert [i["status"] for i in _lines(short)] == ["running"]
            # [BJ1-b] / [SA4-b]: another principal's agent is the 404 of one that does not exist
            gone = absent_id()
            refused = client.get(f"{base}/agents/{agent}/tasks?wait=1&timeout=1", headers=bob)
            as_absent(refused, agent, client.get(f"{base}/agents/{gone}/tasks", headers=bob), gone)
            assert refused.status_code == 404
            assert refused.json()["error"]["type"] == "unknown_agent"
            gate.touch()
            joined = _cli(url, agent, "--wait", "--timeout", "90")
            assert joined.returncode == 0, joined.stderr
            (done,) = _lines(joined)
            assert done["status"] == "completed"
            assert done["result"].startswith("Findings on tides")
            again = client.get(f"{base}/agents/{agent}/tasks?wait=1&timeout=5", headers=alice).json()
            assert again["running"] == 0
            assert again["tasks"] == [done]
            # [SA4-b]: the child's rows are alice's; bob's lists hold none of them, alice's do
            assert row.payload["principal"] == "alice"
            assert _principals(url, child) == (("alice",), ("alice",))
            for who, sees in ((bob, False), (alice, True)):
                agents = {a["agent_uuid"] for a in client.get(f"{base}/agents", headers=who).json()["agents"]}
                runs = {r["agent_uuid"] for r in client.get(f"{base}/agent/runs", headers=who).json()["runs"]}
                assert (child in agents, agent in agents, child in runs) == (sees, sees, sees)
    finally:
        worker.kill()
    assert worker.completions() == [(task_id, 1)]
