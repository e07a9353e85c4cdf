"""kill -9 of a server in checkpoint mode: another server continues the dead run by itself, live (spec server §CN).

[CN1-a] [CN1-b] [CN2-a]

Each server is ``checkpoint_serve_process.py`` (``create_app`` with checkpoints on, the
store and journal ``agent-ref serve`` uses, a ``note`` tool counting its calls in a file).
A runs a two-call tool run and is killed with SIGKILL between steps, or inside a tool; B,
on the same SQLite file (started after the kill) or on the same PostgreSQL schema (up
before, following A's run), continues the run without any request: a client following
the run on B reads the continuation live (B's model waits for a gate the test opens only
once the client is reading it) to its ``meta_final``. Checked: every tool call happened
once (or, for the call the kill cut, its result is unknown: agent-ref [CK1.3-b]); the
dead response ends with the ``lost`` error naming the next response and no
``meta_final``; the whole (dead response, then continuation) passes the strict validator;
the journal and the store's log agree; the run ends ``end_turn``. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Literal

import httpx2

from agent_ref import SQLiteStore
from agent_ref.run.checkpoints import UNKNOWN_RESULT
from fault_support import Reader, checkpoint_held, wait_until
from server_support import data_lines, get
from validating import assert_valid

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "checkpoint_serve_process.py"
#: Bound on each wait (seconds).
WAIT = 40.0
PROMPT = 'call note with {"text": "first"} and call note with {"text": "hold"}'
BETWEEN = 'call note with {"text": "first"} and call note with {"text": "second"}'


class Serve:
    """One ``checkpoint_serve_process.py`` process; ``kill()`` is SIGKILL to our own child, by its pid."""

    def __init__(self, db: str, *args: str) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
        self.log = ""
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), db, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline() if self.proc.stdout else ""))
        reader.start()
        reader.join(WAIT)
        if not line or not line[0].startswith("http://127.0.0.1:"):
            self.stop()
            raise AssertionError(f"the server did not start: {self.log[-2000:]}")
        self.base = line[0].strip().rstrip("/")
        deadline = time.monotonic() + WAIT  # it answers once its lifespan (the recovery) has run
        while True:
            try:
                httpx2.get(self.base + "/", timeout=5)
                break
            except httpx2.TransportError:
                assert self.proc.poll() is None, "the server died before it answered"
                assert time.monotonic() < deadline, "the server never answered"
                time.sleep(0.05)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(WAIT)
        self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, self.log = self.proc.communicate(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, self.log = self.proc.communicate(timeout=10)


def wait_for_file(path: Path, process: Serve) -> None:
    """Wait (bounded) until ``path`` exists, failing if ``process`` dies first."""
    deadline = time.monotonic() + WAIT
    while not path.exists():
        assert process.proc.poll() is None, "the server died before its hold"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def _payloads(lines: list[bytes], kind: str) -> list[Any]:
    out = []
    for line in lines:
        if line != b"[DONE]" and json.loads(line)["type"] == kind:
            out.append(json.loads(json.loads(line)["delta"]))
    return out


def _text(lines: list[bytes]) -> str:
    return "".join(json.loads(line)["delta"] for line in lines if line.startswith(b'{"type":"text"'))


def start_and_kill(
    db: str, tmp_path: Path, prompt: str, hold: Literal["tool", "model"]
) -> tuple[str, str, Path, bytes]:
    """A starts the run, holds, is killed: (run id, agent, calls file, what A's client read)."""
    calls, entered = tmp_path / "calls.txt", tmp_path / "entered"
    a = Serve(db, "--calls", str(calls), "--entered", str(entered), "--hold", hold)
    try:
        writer = Reader("POST", a.base + "/agent/run", json={"prompt": prompt})
        writer.wait_open()
        assert writer.status == 200
        wait_for_file(entered, a)
        agent = writer.headers["x-agent-uuid"]
        wait_until(lambda: checkpoint_held(db, agent, hold), "the held run's checkpoint in the store", WAIT)
    finally:
        a.kill()
    writer.join(WAIT)
    return writer.headers["x-run-id"], writer.headers["x-agent-uuid"], calls, bytes(writer.body)


def _follow_live(base: str, run_id: str, gate: Path) -> list[bytes]:
    """Follow the run's latest response (no index): the continuation, live; open the gate only while reading it."""
    follower = Reader("GET", f"{base}/agent/runs/{run_id}/stream")
    follower.wait_open()
    assert follower.status == 200, bytes(follower.body)
    assert follower.headers["x-response-index"] == "1"
    follower.wait_for(b'\\"continued\\": true', timeout=WAIT)
    assert b"meta_final" not in follower.body  # the model waits for the gate: the response is live
    gate.touch()
    body = follower.finish(timeout=WAIT)
    assert follower.error is None, follower.error
    return data_lines(body)


def _check(dead: list[bytes], continuation: list[bytes]) -> None:
    """The dead response closed as continued (no meta_final), the continuation to its end; strictly valid."""
    assert dead[-1] == b"[DONE]"
    errors = _payloads(dead, "error")
    assert [e["type"] for e in errors] == ["lost"]
    assert "in the next response" in errors[0]["message"]
    assert _payloads(dead, "meta_final") == []
    assert continuation[-1] == b"[DONE]"
    resume = _payloads(continuation, "meta_init")[0]["resume"]
    assert resume["continued"] is True
    assert resume["response"] == 1
    assert [m["stop_reason"] for m in _payloads(continuation, "meta_final")] == ["end_turn"]
    assert_valid(dead)
    assert_valid(continuation)
    assert_valid([*dead, *continuation])  # what a follower reads across the death


def _check_calls(calls: Path, prompt: str, text: str) -> None:
    if prompt == BETWEEN:
        assert sorted(calls.read_text().split()) == ["first", "second"]  # each exactly once
        assert "note gave: noted second" in text
    else:
        assert sorted(calls.read_text().split()) == ["first", "hold"]  # the cut call not run again
        assert "note failed: " + UNKNOWN_RESULT in text
    assert "note gave: noted first" in text


async def _stored(store: Any, agent: str) -> list[list[bytes]]:
    deadline = time.monotonic() + WAIT
    while True:
        state = await store.load(agent)
        if state is not None and state.status == "idle":
            break
        assert time.monotonic() < deadline, "the agent never went idle"
        await asyncio.sleep(0.1)
    records = await store.runs(agent)
    assert [r.stop_reason for r in records] == ["end_turn"]
    responses: list[list[bytes]] = await store.run_responses(records[0].run_id)
    return responses


def _sqlite_case(tmp_path: Path, prompt: str, hold: Literal["tool", "model"]) -> None:
    db, gate = tmp_path / "agents.db", tmp_path / "gate"
    run_id, agent, calls, seen = start_and_kill(str(db), tmp_path, prompt, hold)
    b = Serve(str(db), "--calls", str(calls), "--gate", str(gate))
    try:
        continuation = _follow_live(b.base, run_id, gate)  # nobody asked B: its start continued the run
        dead = data_lines(get(b.base, f"/agent/runs/{run_id}/stream?response=0").content)
        again = data_lines(get(b.base, f"/agent/runs/{run_id}/stream?response=1").content)
    finally:
        b.stop()
    assert data_lines(seen) == dead[: len(data_lines(seen))]  # A's client read the start of the same response
    _check(dead, continuation)
    assert again == continuation  # a reconnect replays it
    _check_calls(calls, prompt, _text(continuation))
    assert asyncio.run(_stored(SQLiteStore(db), agent)) == [dead, continuation]  # the store's log agrees
    assert "continued here from its checkpoint" in b.log


def test_spec_cn1_a_sqlite_kill_9_between_steps_the_next_server_continues_live(tmp_path: Path) -> None:
    """A killed in step 2's model call; B, started on the same file, continues from step 2 by itself."""
    _sqlite_case(tmp_path, BETWEEN, "model")


def test_spec_cn1_a_sqlite_kill_9_during_a_tool_the_next_server_continues_live(tmp_path: Path) -> None:
    """A killed inside a tool call; B continues: the call is not run again, its result is unknown."""
    _sqlite_case(tmp_path, PROMPT, "tool")


def test_spec_cn1_a_two_servers_starting_at_once_on_the_file_one_continues(tmp_path: Path) -> None:
    """A killed between steps; B and C start together on the same file: exactly one continues the run,
    the other leaves it (the claim decides); each tool ran once, one closing and one continuation."""
    db, gate = tmp_path / "agents.db", tmp_path / "gate"
    run_id, agent, calls, _ = start_and_kill(str(db), tmp_path, BETWEEN, "model")
    servers: list[Serve] = []

    def start() -> None:
        servers.append(Serve(str(db), "--calls", str(calls), "--gate", str(gate)))

    starting = [threading.Thread(target=start) for _ in range(2)]
    for thread in starting:
        thread.start()
    for thread in starting:
        thread.join(2 * WAIT)
    try:
        assert len(servers) == 2, "a server did not start"
        gate.touch()
        responses = asyncio.run(_stored(SQLiteStore(db), agent))
    finally:
        for server in servers:
            server.stop()
    assert sum("continued here from its checkpoint" in server.log for server in servers) == 1
    dead, continuation = responses
    _check(dead, continuation)
    streams = tmp_path / "agents.db.streams"
    assert (streams / f"{run_id}.0.log").read_bytes().split(b"\n")[:-1] == dead  # closed once, by the winner
    assert (streams / f"{run_id}.1.log").read_bytes().split(b"\n")[:-1] == continuation
    assert not (streams / f"{run_id}.2.log").exists()
    _check_calls(calls, BETWEEN, _text(continuation))


async def _stored_pg(url: str, agent: str) -> list[list[bytes]]:
    from agent_ref.store.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        return await _stored(store, agent)
    finally:
        await store.aclose()


def _pg_case(url: str, tmp_path: Path, prompt: str, hold: Literal["tool", "model"]) -> None:
    calls, entered, gate = tmp_path / "calls.txt", tmp_path / "entered", tmp_path / "gate"
    b = Serve(url, "--calls", str(calls), "--gate", str(gate))
    a = Serve(url, "--calls", str(calls), "--entered", str(entered), "--hold", hold)
    try:
        writer = Reader("POST", a.base + "/agent/run", json={"prompt": prompt})
        writer.wait_open()
        assert writer.status == 200
        wait_for_file(entered, a)
        run_id, agent = writer.headers["x-run-id"], writer.headers["x-agent-uuid"]
        wait_until(lambda: checkpoint_held(url, agent, hold), "the held run's checkpoint in the store", WAIT)
        follower = Reader("GET", f"{b.base}/agent/runs/{run_id}/stream?response=0")  # A's run, through B
        follower.wait_open()
        assert follower.status == 200
        follower.wait_for(b'"name":"note"')  # B replayed what A journaled and follows the rest
        a.kill()
        body = follower.finish(timeout=WAIT)  # A's lease (2 s) runs out; B closes the response, continues
        assert follower.error is None, follower.error
        dead = data_lines(body)
        continuation = _follow_live(b.base, run_id, gate)
    finally:
        a.stop()
        b.stop()
    seen = data_lines(bytes(writer.body))
    assert dead[: len(seen)] == seen  # the follower read what A's own client read, then the closing lines
    _check(dead, continuation)
    _check_calls(calls, prompt, _text(continuation))
    assert asyncio.run(_stored_pg(url, agent)) == [dead, continuation]
    assert "continued here from its checkpoint" in b.log


def test_spec_cn1_a_pg_follower_on_the_survivor_sees_the_dead_run_continued_live(
    pg_schema_url: str, tmp_path: Path
) -> None:
    """A and B up on one database; a client follows A's run through B; A killed between steps:
    B notices (lock free, lease expired), closes the response and continues the run itself."""
    _pg_case(pg_schema_url, tmp_path, BETWEEN, "model")


def test_spec_cn2_a_pg_kill_9_during_a_tool_the_follower_reads_on_into_the_next_response(
    pg_schema_url: str, tmp_path: Path
) -> None:
    """As above, A killed inside a tool call: the follower's response ends ``lost`` (no ``meta_final``),
    and the run's latest response is the continuation, where the cut call's result is unknown."""
    _pg_case(pg_schema_url, tmp_path, PROMPT, "tool")
