"""kill -9 of one of two PostgreSQL-backed server processes while a client follows through the other (issue 24 case 4).

[P2.2-b] [P4-b]

Both processes are ``tests/scaleout/serve_pg.py`` on one schema. A follows nothing; B
serves the follower. Every stream is validated strictly; every wait is bounded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_ref_support import meta
from fault_support import Reader, wait_until
from server_support import data_lines, get, post
from validating import assert_valid, violations

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import httpx2

    from scaleout_support import Process

ARITHMETIC = "What is 5 + (10 * 2)?"


def test_spec_scaleout_2_2_b_follower_on_the_survivor_gets_the_end(
    pg_schema_url: str, pg_processes: Callable[..., Process], tmp_path: Path
) -> None:
    """A dies mid-run; B, serving a follower of A's response, closes it then: the follower gets the end.

    Before: B's follower got 200, no event and end of stream, again and again, until a
    process started after the death closed the response.
    """
    a = pg_processes(pg_schema_url, "--gate", str(tmp_path / "never"), "--lease", "2")
    b = pg_processes(pg_schema_url, "--lease", "2")
    writer = Reader("POST", a.base + "/agent/run", json={"prompt": ARITHMETIC})
    writer.wait_open()
    writer.wait_for(b'"calculator"')  # A waits in the gated tool, its response open
    run_id, agent = writer.headers["x-run-id"], writer.headers["x-agent-uuid"]

    follower = Reader("GET", f"{b.base}/agent/runs/{run_id}/stream?response=0")
    follower.wait_open()
    assert follower.status == 200
    follower.wait_for(b'"calculator"')  # B replayed what A journaled and follows the rest
    a.kill()
    body = follower.finish(timeout=20)  # the lease (2 s) runs out, then B closes the response
    assert follower.error is None, follower.error
    lines = data_lines(body)
    assert lines[-1] == b"[DONE]"
    assert [v.code for v in violations(body) if v.code != "E140"] == []  # spec server §3.3-a
    assert meta(lines, "error")["type"] == "server_restarted"
    assert meta(lines, "meta_final")["stop_reason"] == "error"
    assert data_lines(bytes(writer.body)) == lines[: len(data_lines(bytes(writer.body)))]

    # A reconnecting client (any process) now gets the whole response, ended.
    again = get(b.base, f"/agent/runs/{run_id}/stream?response=0")
    assert again.status_code == 200
    assert data_lines(again.content) == lines
    # The agent was recovered by its own path (spec agent-ref §10.2-b): the next run works at once.
    answers: list[httpx2.Response] = []

    def ran() -> bool:
        answers.append(post(b.base, "/agent/run", {"prompt": ARITHMETIC, "agent_uuid": agent}))
        return answers[-1].status_code == 200

    wait_until(ran, "the next run of the recovered agent", timeout=30, every=0.2)
    answer = answers[-1]
    assert_valid(answer.content)
