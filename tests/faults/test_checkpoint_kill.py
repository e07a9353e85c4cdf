"""kill -9 of a checkpointed run, continued by another process, on SQLite and PostgreSQL (issue 30 §2).

[CK1.2-a] [CK1.3-b] [CK1.4-a] [CK1.4-b]

Each test starts ``checkpoint_process.py run`` (a real process), waits until it holds
between steps or inside a tool, kills it with SIGKILL, then starts ``checkpoint_process.py
recover`` (another process), which continues the run. Checked: every tool call happened
exactly once (the ``note`` tool's side-effect file), the continuation's stream and the run's
whole log (what a follower reads back across the death) pass the strict validator, and the
run ends. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Literal

from agent_ref import SQLiteStore
from agent_ref.run.checkpoints import UNKNOWN_RESULT
from fault_support import checkpoint_held, wait_until
from faults.kill_support import Server
from server_support import data_lines, get
from validating import assert_valid

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "checkpoint_process.py"
#: Bound on the dying process reaching its hold, and on the recovering process (seconds).
WAIT = 40.0
PROMPT = 'call note with {"text": "first"} and call note with {"text": "hold"}'
BETWEEN = 'call note with {"text": "first"} and call note with {"text": "second"}'


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    return env


def _kill_when_held(store: str, agent: str, prompt: str, hold: Literal["tool", "model"], tmp_path: Path) -> Path:
    """Start the run, wait for its hold, SIGKILL it; the calls file."""
    calls, entered, errors = tmp_path / "calls.txt", tmp_path / "entered", tmp_path / "run.err"
    args = [sys.executable, str(SCRIPT), "run", store, agent, prompt, "--calls", str(calls)]
    with errors.open("wb") as err:
        process = subprocess.Popen(
            [*args, "--entered", str(entered), "--hold", hold], stdout=subprocess.DEVNULL, stderr=err, env=_env()
        )
    try:
        deadline = time.monotonic() + WAIT
        while not entered.exists():
            assert process.poll() is None, errors.read_text()
            assert time.monotonic() < deadline, "the run never reached its hold"
            time.sleep(0.05)
        wait_until(lambda: checkpoint_held(store, agent, hold), "the held run's checkpoint in the store", WAIT)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=WAIT)
    return calls


def _recover(store: str, agent: str, calls: Path) -> list[bytes]:
    """Another process continues the run; its stdout lines, strictly valid."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "recover", store, agent, "--calls", str(calls)],
        capture_output=True,
        timeout=WAIT,
        env=_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert b"recovered: end_turn" in done.stderr
    lines = [line for line in done.stdout.split(b"\n") if line]
    assert_valid(lines)
    return lines


def _final_text(lines: list[bytes]) -> str:
    return "".join(json.loads(line)["delta"] for line in lines if line.startswith(b'{"type":"text"'))


async def _log_sqlite(db: Path, agent: str) -> list[list[bytes]]:
    store = SQLiteStore(db)
    state = await store.load(agent)
    assert state is not None
    assert state.status == "idle"
    records = await store.runs(agent)
    assert [r.stop_reason for r in records] == ["end_turn"]
    return await store.run_responses(records[0].run_id)


async def _log_pg(url: str, agent: str) -> list[list[bytes]]:
    from agent_ref.store.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        state = await store.load(agent)
        assert state is not None
        assert state.status == "idle"
        records = await store.runs(agent)
        assert [r.stop_reason for r in records] == ["end_turn"]
        return await store.run_responses(records[0].run_id)
    finally:
        await store.aclose()


def _check_log(responses: list[list[bytes]]) -> None:
    """The run's log across the death: the dead response closed, then the continuation; strictly valid."""
    assert len(responses) == 2
    assert b'\\"type\\": \\"lost\\"' in responses[0][1]
    assert b'\\"continued\\": true' in responses[1][0]
    assert_valid([line for response in responses for line in response])


def _between_steps(store: str, tmp_path: Path) -> tuple[str, list[bytes], Path]:
    agent = str(uuid.uuid4())
    calls = _kill_when_held(store, agent, BETWEEN, "model", tmp_path)
    lines = _recover(store, agent, calls)
    assert sorted(calls.read_text().split()) == ["first", "second"]  # each exactly once
    text = _final_text(lines)
    assert "note gave: noted first" in text
    assert "note gave: noted second" in text
    return agent, lines, calls


def _during_a_tool(store: str, tmp_path: Path) -> tuple[str, list[bytes], Path]:
    agent = str(uuid.uuid4())
    calls = _kill_when_held(store, agent, PROMPT, "tool", tmp_path)
    lines = _recover(store, agent, calls)
    assert sorted(calls.read_text().split()) == ["first", "hold"]  # the killed call not run again
    text = _final_text(lines)
    assert "note gave: noted first" in text  # the finished call's result reused
    assert "note failed: " + UNKNOWN_RESULT in text
    return agent, lines, calls


def test_sqlite_kill_9_between_steps_continues_on_another_process(tmp_path: Path) -> None:
    """Killed in step 2's model call: another process continues from step 2, each tool once; a follower
    of the run through a server on the same file reads both responses, strictly valid."""
    db = tmp_path / "agents.db"
    agent, _, _ = _between_steps(str(db), tmp_path)
    responses = asyncio.run(_log_sqlite(db, agent))
    _check_log(responses)
    run_id = json.loads(json.loads(responses[0][0])["delta"])["run_id"]
    with Server(db) as server:
        followed = [get(server.base, f"/agent/runs/{run_id}/stream?response={i}") for i in (0, 1)]
    assert [r.status_code for r in followed] == [200, 200]
    lines = [data_lines(r.content) for r in followed]
    assert lines == responses
    assert_valid([line for response in lines for line in response])


def test_sqlite_kill_9_during_a_tool_continues_with_an_unknown_result(tmp_path: Path) -> None:
    """Killed inside a tool call: it is not run again, the model is told its result is unknown."""
    db = tmp_path / "agents.db"
    agent, _, _ = _during_a_tool(str(db), tmp_path)
    _check_log(asyncio.run(_log_sqlite(db, agent)))


def test_pg_kill_9_between_steps_continues_on_another_process(pg_schema_url: str, tmp_path: Path) -> None:
    """As on SQLite, with PostgreSQL."""
    agent, _, _ = _between_steps(pg_schema_url, tmp_path)
    _check_log(asyncio.run(_log_pg(pg_schema_url, agent)))


def test_pg_kill_9_during_a_tool_continues_with_an_unknown_result(pg_schema_url: str, tmp_path: Path) -> None:
    """As on SQLite, with PostgreSQL."""
    agent, _, _ = _during_a_tool(pg_schema_url, tmp_path)
    _check_log(asyncio.run(_log_pg(pg_schema_url, agent)))
