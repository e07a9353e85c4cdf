"""A dead owner on the same host is dead now (spec agent-ref [R10.2-c], issue 38 case 5).

[R10.2-c]

A process that claimed a resume is killed with SIGKILL before its first line; a server
started again on the same host gets the same answer and must accept it at once, not
refuse it for the rest of the dead process's 30 s lease. Leases of other hosts, and of a
pid of this host now used by another process, are judged as the brief says: the first by
its time, the second as dead.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_ref import Agent, MemoryStore, ScriptedModel, SQLiteStore
from agent_ref.errors import StateError
from agent_ref.server.app import create_app
from agent_ref.server.streams import FileJournal
from agent_ref.store.core import lease_owner_id, owner_gone
from agent_ref.tools.demo import default_tools
from agent_ref_support import meta
from server_support import data_lines, post, running
from validating import assert_valid

CONFIRM = "Please confirm: delete the temp files"
PROCESS = Path(__file__).with_name("dead_owner_process.py")


def _pending_id(body: bytes) -> str:
    awaiting: Any = meta(data_lines(body), "awaiting_frontend_tools")  # a list for this block
    (pending,) = awaiting
    return str(pending["tool_use_id"])


def _store(where: str) -> Any:
    if where.startswith("postgresql://"):
        from agent_ref.store.postgres import PostgresStore

        return PostgresStore(where)
    return SQLiteStore(where)


def test_spec_agent_ref_10_2_c_a_resume_killed_before_its_first_line_is_answered_at_once(tmp_path: Path) -> None:
    """[R10.2-c]: kill -9 while the claim is held, restart on the same host: the same answer is 200, the model replies."""
    _killed_then_answered(str(tmp_path / "agents.db"), tmp_path)


def test_spec_agent_ref_10_2_c_on_postgresql_too(pg_schema_url: str, tmp_path: Path) -> None:
    """[R10.2-c]: the same with the PostgreSQL store."""
    _killed_then_answered(pg_schema_url, tmp_path)


def _killed_then_answered(db: str, tmp_path: Path) -> None:
    journal = tmp_path / "streams"

    def app() -> Any:
        return create_app(store=_store(db), model_factory=ScriptedModel, journal=FileJournal(journal))

    with running(app()) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        assert_valid(first.content)
    agent_uuid = first.headers["x-agent-uuid"]
    results = [{"tool_use_id": _pending_id(first.content), "content": "yes"}]

    ready = tmp_path / "claimed"
    proc = subprocess.Popen(
        [sys.executable, str(PROCESS), db, agent_uuid, json.dumps(results), str(ready)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
            assert time.monotonic() < deadline, "the resuming process never claimed the agent"
            time.sleep(0.02)
    finally:
        proc.kill()  # our own child, by its pid
        proc.wait(30)
        if proc.stderr is not None:
            proc.stderr.close()

    async def load() -> Any:
        store = _store(db)
        try:
            return await store.load(agent_uuid)
        finally:
            close = getattr(store, "aclose", None)
            if close is not None:
                await close()

    claimed = asyncio.run(load())
    assert claimed is not None
    assert claimed.status == "running"
    assert claimed.lease_expires_at > time.time() + 10  # the dead process's lease has long to run

    with running(app()) as base:
        answer = post(base, "/agent/tool_results", {"agent_uuid": agent_uuid, "tool_results": results})
        assert answer.status_code == 200, answer.text
        assert_valid(answer.content)
        assert meta(data_lines(answer.content), "meta_final")["stop_reason"] == "end_turn"


def _running_under(owner: str) -> Agent:
    agent = Agent(ScriptedModel(), store=MemoryStore(), tools=default_tools())
    agent.state.status = "running"
    agent.state.lease_owner = owner
    agent.state.lease_expires_at = time.time() + 30
    return agent


def test_spec_agent_ref_10_2_c_another_hosts_lease_keeps_its_time() -> None:
    """[R10.2-c]: an owner of another host, with a pid that does not exist here, holds the agent until its lease ends."""
    mine = lease_owner_id("abcd1234")
    _, pid, tag = mine.split(":")
    elsewhere = f"another-host.example:{pid}9999:{tag}"
    agent = _running_under(elsewhere)
    assert agent.lease_alive()
    with pytest.raises(StateError, match="running in another process"):
        asyncio.run(agent.run("hello", lambda _: None))


def test_spec_agent_ref_10_2_c_a_reused_pid_of_this_host_is_dead() -> None:
    """[R10.2-c]: this host's pid that runs, but started at another time than the owner's, is another process."""
    mine = lease_owner_id("abcd1234")
    if mine.count(":") != 2 or not mine.split(":")[2].startswith("p"):
        pytest.skip("no /proc here: owner ids carry no start time")
    host, _, tag = mine.split(":")
    parent = 1  # init: alive, and started at boot, long before this process: another start time
    assert not owner_gone(f"{host}:{os.getpid()}:{tag}")
    assert owner_gone(f"{host}:{parent}:{tag}")
    true_start = lease_owner_id("abcd1234").split(":")[2]
    assert owner_gone(f"{host}:999999999:{true_start}")  # no such pid
    agent = _running_under(f"{host}:{parent}:{tag}")
    assert not agent.lease_alive()
