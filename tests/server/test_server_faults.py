"""Load and faults on loopback (issue 15 §5; spec/server.md §3.3, §4): bounded, self-stopping.

- 200 concurrent runs on the scripted model: every stream valid, every line the store
  logged was received, in order, and nothing else.
- A server process killed (SIGKILL) mid-run and started again: the run's journal replays,
  is closed as ``server_restarted``, validates, and the agent can run again.
Malformed, oversized and unauthenticated requests are in ``test_server_requests.py``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING

import httpx2
import pytest

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import create_app
from server_support import data_lines, get, post, read_events, running, start_server_process, stop_server_process
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


RUNS = 200


def test_spec_server_4_1_b_200_concurrent_runs_all_valid_nothing_lost() -> None:
    """[S4.1-a] [S3.1-a]: 200 runs at once; each stream validates and equals the run's stored log."""
    store = MemoryStore()
    prompts = ["What is 5 + (10 * 2)?", "hello there", "cite a source", "long"]

    async def one(client: httpx2.AsyncClient, base: str, i: int) -> tuple[str, bytes]:
        r = await client.post(base + "/agent/run", json={"prompt": prompts[i % len(prompts)]})
        assert r.status_code == 200
        return r.headers["x-run-id"], r.content

    async def all_runs(base: str) -> list[tuple[str, bytes]]:
        limits = httpx2.Limits(max_connections=RUNS, max_keepalive_connections=0)
        async with httpx2.AsyncClient(timeout=120, limits=limits) as client:
            return await asyncio.gather(*(one(client, base, i) for i in range(RUNS)))

    with running(create_app(store=store, model_factory=ScriptedModel)) as base:
        results = asyncio.run(all_runs(base))
    assert len({run_id for run_id, _ in results}) == RUNS
    for run_id, body in results:
        assert_valid(body)
        logged = asyncio.run(store.run_log(run_id))
        assert data_lines(body) == logged  # nothing lost, doubled or reordered


def _stream_until_tool_call(base: str) -> Iterator[bytes]:
    with (
        httpx2.Client(timeout=30) as client,
        client.stream("POST", base + "/agent/run", json={"prompt": "What is 5 + (10 * 2)?"}) as r,
    ):
        buffer = b""
        for chunk in r.iter_raw():
            buffer += chunk
            yield chunk
            if b'"type":"tool_call"' in buffer and buffer.endswith(b"\n\n"):
                return


def test_spec_server_3_3_c_killed_server_restarts_and_the_run_log_replays(tmp_path: Path) -> None:
    """[S3.3-b]: SIGKILL mid-run, start again on the same database: the client reconnects and gets a valid, closed stream."""
    db = tmp_path / "agents.db"
    proc, base = start_server_process(db, "--gate", str(tmp_path / "never"))
    try:
        received = b"".join(_stream_until_tool_call(base))
        proc.send_signal(signal.SIGKILL)  # our own child, by its pid
        proc.wait(20)
    finally:
        stop_server_process(proc)
    seen = read_events(received)
    run_id = seen[0].id.split(":")[0]
    agent = json.loads(seen[0].data)["agent"]
    proc, base = start_server_process(db)
    try:
        rest = get(base, f"/agent/runs/{run_id}/stream", headers={"Last-Event-ID": seen[-1].id})
        assert rest.status_code == 200
        whole = get(base, f"/agent/runs/{run_id}/stream")
        again = post(base, "/agent/run", {"prompt": "What is 1 + 1?", "agent_uuid": agent})
    finally:
        stop_server_process(proc)
    lines = [e.data.encode() for e in seen] + data_lines(rest.content)
    assert lines == data_lines(whole.content)  # exactly once across the restart
    assert_valid(whole.content)
    error = [json.loads(json.loads(x)["delta"]) for x in lines[:-1] if json.loads(x)["type"] == "error"]
    assert [e["type"] for e in error] == ["server_restarted"]
    assert again.status_code == 200  # the agent was released
    assert_valid(again.content)


def test_spec_server_4_1_c_shutdown_aborts_running_runs_and_ends_their_streams() -> None:
    """[S4.1-a]: stopping the server aborts a run stuck in a tool; its journaled response ends properly."""
    from agent_ref.server.streams import MemoryJournal
    from server_support import Gate

    gate = Gate()
    journal = MemoryJournal()
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, tools=gate.tools(), journal=journal)
    run_ids: list[str] = []

    def open_gate_once_ended() -> None:
        # The tool's thread blocks the loop's executor shutdown; let it go once the
        # abort has ended the response (or after 20 s, and the assertions below fail).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (run_ids and (journal.read(run_ids[0], 0) or [b""])[-1] == b"[DONE]"):
            time.sleep(0.01)
        gate.opened.set()

    watcher = threading.Thread(target=open_gate_once_ended)
    try:
        with running(app) as base:
            received = b"".join(_stream_until_tool_call(base))
            run_ids.append(read_events(received)[0].id.split(":")[0])
            assert gate.entered.wait(20)
            watcher.start()
    finally:
        if watcher.is_alive():
            watcher.join(30)
        gate.opened.set()
    lines = journal.read(run_ids[0], 0)
    assert lines is not None
    assert_valid(lines)
    final = json.loads(json.loads(lines[-2])["delta"])
    assert final["stop_reason"] == "aborted"


def test_load_server_benchmark_smoke() -> None:
    """benchmarks/load_server.py runs end to end on a tiny load (no timing is asserted)."""
    from benchmarks import load_server

    assert load_server.main(["--runs", "3", "--concurrency", "2", "--store", "memory"]) == 0


def test_serve_main_reports_a_busy_port(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``agent-ref serve`` on a port in use exits 2 with one clear line, no traceback."""
    import socket

    from agent_ref.cli.serve import main

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert main(["--port", str(port), "--db", str(tmp_path / "a.db")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agent-ref serve: error: cannot listen on 127.0.0.1:")
    assert "Traceback" not in err


def test_serve_main_stops_on_ctrl_c_without_a_traceback(tmp_path: Path) -> None:
    """``agent-ref serve`` (here ``python -m agent_ref.cli.serve``): Ctrl-C stops it with one line and status 130."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_ref.cli.serve", "--port", "0", "--db", str(tmp_path / "a.db")],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("agent-ref: serving on http://127.0.0.1:"), line
        url = line.split()[3]
        deadline = time.monotonic() + 20
        while True:  # the port is bound before uvicorn installs its handlers: wait until it answers
            try:
                if httpx2.get(url, timeout=5).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, "the server never answered"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=30)[1]
    finally:
        stop_server_process(proc)
    assert proc.returncode == 130
    assert err == "agent-ref: stopped\n"


class _Stop(Exception):
    pass


def test_serve_accepts_connections_as_soon_as_it_announces_the_url() -> None:
    """``serve`` listens before ``ready(url)``: a client that connects at once is queued, not refused (a race seen in CI)."""
    import socket

    from agent_ref.server.app import serve

    connected: list[bool] = []

    def ready(url: str) -> None:
        port = int(url.rstrip("/").rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            connected.append(True)
        raise _Stop  # end serve() before uvicorn runs

    with pytest.raises(_Stop):
        serve(create_app(store=MemoryStore(), model_factory=ScriptedModel), "127.0.0.1", 0, ready=ready)
    assert connected == [True]
