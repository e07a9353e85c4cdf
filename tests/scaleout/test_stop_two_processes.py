"""Stopping a run through another process of a PostgreSQL fleet (spec server §1.4, issue 26 item 3).

A runs the run inside a gated calculator (the gate never opens); the stop is posted to
B, which reaches A through the journal's stop requests. Every stream is validated.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

import httpx2

from agent_ref_support import meta
from server_support import data_lines, get, post
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from scaleout_support import Process

ARITHMETIC = "What is 5 + (10 * 2)?"
CONFIRM = "Please confirm: delete the temp files"


def _run_in_thread(base: str, opened: dict[str, Any], body: bytearray) -> threading.Thread:
    def read() -> None:
        with (
            httpx2.Client(timeout=60) as client,
            client.stream("POST", base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
        ):
            opened.update(run=r.headers["x-run-id"], agent=r.headers["x-agent-uuid"])
            for chunk in r.iter_bytes():
                body.extend(chunk)
                if b"tool_call" in body:
                    opened["in_tool"] = True

    thread = threading.Thread(target=read)
    thread.start()
    deadline = time.monotonic() + 30
    while "in_tool" not in opened and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "in_tool" in opened, "the run did not reach its tool call"
    return thread


def test_spec_server_1_4_c_a_run_on_a_is_stopped_through_b(processes: Callable[..., Process], tmp_path: Path) -> None:
    """spec server [S1.4-c]: the stop posted to B ends A's run within the bound: aborted, its call answered, closing lines, valid."""
    a = processes("--gate", str(tmp_path / "never"))
    b = processes()
    opened: dict[str, Any] = {}
    body = bytearray()
    reader = _run_in_thread(a.base, opened, body)
    stopped = post(b.base, f"/agent/runs/{opened['run']}/stop", {})
    # the bound is B's own (10 s of retries, then 202 stopped: false): a 200 stopped: true is the
    # state that says A's run ended within it, on any machine
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["stopped"] is True
    assert stopped.json()["stop_reason"] == "aborted"
    assert stopped.json()["status"] == "idle"
    reader.join(30)
    assert not reader.is_alive()
    assert_valid(bytes(body))
    lines = data_lines(bytes(body))
    assert lines[-1] == b"[DONE]"
    assert meta(lines, "meta_final")["stop_reason"] == "aborted"
    text = b"".join(lines)
    assert b"cancelled: the run was aborted" in text  # the calculator call has its result (no orphan)
    # B replays the same response from the shared journal, and a second stop is a 409 with the state.
    replay = get(b.base, f"/agent/runs/{opened['run']}/stream?response=0")
    assert_valid(replay.content)
    assert data_lines(replay.content) == lines
    again = post(b.base, f"/agent/runs/{opened['run']}/stop", {})
    assert again.status_code == 409
    error = again.json()["error"]
    assert error["type"] == "run_finished"
    assert error["stop_reason"] == "aborted"
    assert error["agent_status"] == "idle"


def test_spec_server_1_4_b_a_paused_run_on_a_is_abandoned_through_b(processes: Callable[..., Process]) -> None:
    """Stopping a paused run abandons it: a closing response, journaled and valid, stop reason ``abandoned``."""
    a, b = processes(), processes()
    first = post(a.base, "/agent/run", {"prompt": CONFIRM})
    assert first.status_code == 200
    run_id = first.headers["x-run-id"]
    stopped = post(b.base, f"/agent/runs/{run_id}/stop", {})
    assert stopped.status_code == 200, stopped.text
    assert stopped.json()["stop_reason"] == "abandoned"
    closing = get(a.base, f"/agent/runs/{run_id}/stream?response=1")
    assert closing.status_code == 200
    assert_valid(closing.content)
    lines = data_lines(closing.content)
    assert meta(lines, "meta_final")["stop_reason"] == "abandoned"
    assert b"abandoned: stopped by the user" in b"".join(lines)
    assert post(a.base, f"/agent/runs/{run_id}/stop", {}).status_code == 409
