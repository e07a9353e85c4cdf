"""Two real server processes on one PostgreSQL database (spec scaleout §3).

Each process is ``tests/scaleout/serve_pg.py`` (uvicorn on 127.0.0.1 port 0, a
``PostgresStore`` and a ``PostgresJournal``). Every stream a test receives is validated
strictly as the raw SSE bytes it got.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import TYPE_CHECKING, Any, cast

import httpx2

from agent_ref.store.postgres import PostgresStore
from agent_ref_support import assert_valid_responses, meta
from fault_support import wait_until
from server_support import data_lines, get, post
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from scaleout_support import Process

CONFIRM = "Please confirm: delete the temp files"
ARITHMETIC = "What is 5 + (10 * 2)?"


def _answer(first: httpx2.Response) -> dict[str, Any]:
    (pending,) = cast("list[dict[str, Any]]", meta(data_lines(first.content), "awaiting_frontend_tools"))
    return {
        "agent_uuid": first.headers["x-agent-uuid"],
        "tool_results": [{"tool_use_id": pending["tool_use_id"], "content": "yes"}],
    }


def _stored(url: str, run_id: str) -> list[list[bytes]]:
    async def body() -> list[list[bytes]]:
        store = PostgresStore(url)
        try:
            return await store.run_responses(run_id)
        finally:
            await store.aclose()

    return asyncio.run(body())


def test_spec_scaleout_3_1_a_pause_on_a_resume_on_b(processes: Callable[..., Process], pg_schema_url: str) -> None:
    """A run paused on process A is resumed on process B; both streams valid, the log holds both [P3.1-a]."""
    a, b = processes(), processes()
    first = post(a.base, "/agent/run", {"prompt": CONFIRM})
    assert first.status_code == 200
    assert_valid(first.content)
    second = post(b.base, "/agent/tool_results", _answer(first))
    assert second.status_code == 200, second.text
    assert_valid(second.content)
    assert meta(data_lines(second.content), "meta_final")["stop_reason"] == "end_turn"
    run_id = first.headers["x-run-id"]
    assert second.headers["x-run-id"] == run_id
    stored = _stored(pg_schema_url, run_id)
    assert stored == [data_lines(first.content), data_lines(second.content)]
    assert_valid_responses([line for response in stored for line in response])
    # Either process replays either response from the shared journal.
    replay = get(a.base, f"/agent/runs/{run_id}/stream?response=1")
    assert replay.status_code == 200
    assert_valid(replay.content)
    assert data_lines(replay.content) == data_lines(second.content)


def _resume(base: str, answer: dict[str, Any], barrier: threading.Barrier, results: list[httpx2.Response]) -> None:
    barrier.wait(10)
    results.append(post(base, "/agent/tool_results", answer))


def test_spec_scaleout_3_1_b_concurrent_resumes_on_two_processes_one_wins(
    processes: Callable[..., Process], pg_schema_url: str
) -> None:
    """Resumes posted at once to A and B: one streams, the other is 409; one continuation stored [P3.1-b]."""
    a, b = processes(), processes()
    for _ in range(3):
        first = post(a.base, "/agent/run", {"prompt": CONFIRM})
        answer = _answer(first)
        results: list[httpx2.Response] = []
        barrier = threading.Barrier(2)
        threads = [threading.Thread(target=_resume, args=(p.base, answer, barrier, results)) for p in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(r.status_code for r in results) == [200, 409], [r.text[:200] for r in results]
        (won,) = [r for r in results if r.status_code == 200]
        (lost,) = [r for r in results if r.status_code == 409]
        assert_valid(won.content)
        assert lost.json()["error"]["type"] in ("conflict", "agent_state")
        stored = _stored(pg_schema_url, first.headers["x-run-id"])
        assert len(stored) == 2  # the pause and exactly one continuation
        assert stored[1] == data_lines(won.content)


def test_spec_scaleout_3_2_a_dead_process_run_recovered_through_its_lease(
    processes: Callable[..., Process], tmp_path: Path
) -> None:
    """A is killed mid-run; B recovers its agent at once, A being a dead process of this host [P3.2-a] [R10.2-c].

    A process started after the kill closes A's journaled response (A's writer lock died
    with it), so the response replays as a valid stream from any process.
    """
    a = processes("--gate", str(tmp_path / "never"), "--lease", "2")
    b = processes("--lease", "2")
    opened: dict[str, str] = {}
    read = bytearray()

    def start_run() -> None:
        try:
            with (
                httpx2.Client(timeout=30) as client,
                client.stream("POST", a.base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
            ):
                opened.update(run=r.headers["x-run-id"], agent=r.headers["x-agent-uuid"])
                for chunk in r.iter_bytes():
                    read.extend(chunk)
        except httpx2.HTTPError:
            pass  # the process is killed under it

    reader = threading.Thread(target=start_run)
    reader.start()
    deadline = time.monotonic() + 30
    while "run" not in opened and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "run" in opened, "the run on A did not start"
    # the run is mid-run: its calculator call was sent, and the tool waits for a gate that never opens
    wait_until(lambda: b'"name":"calculator"' in read, "A's stream showing the calculator call")
    a.kill()
    reader.join(30)

    # spec agent-ref [R10.2-c]: A's owner id names this host and a pid that no longer runs, so
    # its lease is void at once (a lease of another host keeps its time: tests/faults/test_dead_owner.py)
    later = post(b.base, "/agent/run", {"prompt": ARITHMETIC, "agent_uuid": opened["agent"]})
    assert later.status_code == 200, later.text
    assert_valid(later.content)
    assert meta(data_lines(later.content), "meta_final")["stop_reason"] == "end_turn"

    c = processes()  # its start closes what A left open
    replay = get(c.base, f"/agent/runs/{opened['run']}/stream?response=0")
    assert replay.status_code == 200
    assert_valid(replay.content)
    lines = data_lines(replay.content)
    assert lines[-1] == b"[DONE]"
    assert b"server_restarted" in b"".join(lines)


def test_spec_scaleout_3_3_a_follow_a_live_run_of_a_from_b(processes: Callable[..., Process], tmp_path: Path) -> None:
    """A client on B follows a run A is writing: every line of A's response once, in order, then [DONE] [P3.3-a]."""
    gate = tmp_path / "gate"
    a = processes("--gate", str(gate))
    b = processes()
    opened: dict[str, str] = {}
    body = bytearray()

    def run_on_a() -> None:
        with (
            httpx2.Client(timeout=60) as client,
            client.stream("POST", a.base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
        ):
            opened["run"] = r.headers["x-run-id"]
            for chunk in r.iter_bytes():
                body.extend(chunk)

    writer = threading.Thread(target=run_on_a)
    writer.start()
    deadline = time.monotonic() + 30
    while "run" not in opened and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "run" in opened, "the run on A did not start"
    followed: list[bytes] = []

    def follow_on_b() -> None:
        with (
            httpx2.Client(timeout=60) as client,
            client.stream("GET", f"{b.base}/agent/runs/{opened['run']}/stream?response=0") as r,
        ):
            for chunk in r.iter_bytes():
                followed.append(chunk)

    follower = threading.Thread(target=follow_on_b)
    follower.start()
    # B is following (it has sent what A journaled so far) while A waits in the gated tool
    wait_until(lambda: b'"name":"calculator"' in b"".join(followed), "B replaying A's calculator call")
    gate.touch()
    writer.join(60)
    follower.join(60)
    seen = b"".join(followed)
    assert_valid(bytes(body))
    assert_valid(seen)
    assert data_lines(seen) == data_lines(bytes(body))
