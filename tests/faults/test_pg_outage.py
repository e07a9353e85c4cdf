"""PostgreSQL stopped and started for real under a server process (issue 24 case 1).

[S3.4-a] [S3.3-d] [P1.4-a] [P2.3-a] [P4-b]

The tests share a PostgreSQL server of the fault suite's own (``pg_cluster``; each test
has a schema of its own on it, ``pg_cluster_url``), stopped with
``pg_ctl stop -m fast`` (every session cut, as an operator's restart does) and started
again on the same port. The server is ``tests/scaleout/serve_pg.py`` (a ``PostgresStore``
and a ``PostgresJournal``, as ``agent-ref serve --db postgresql://...`` has). Every
stream is validated strictly; every wait is bounded; loopback only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_ref_support import meta
from fault_support import Reader, wait_until
from server_support import data_lines, get, post
from validating import assert_valid, violations

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    import httpx2

    from pg_support import Cluster
    from scaleout_support import Process

ARITHMETIC = "What is 5 + (10 * 2)?"


def _assert_refused_unavailable(answer: httpx2.Response, cluster: Cluster) -> None:
    """A 503 in JSON with ``Retry-After``, naming neither the database nor the driver (spec server §3.4-a).

    Refused because the database is *down*, not after a wait for a free connection of the
    pool (``timeout``, seconds: what "the server's database is busy" says): the quick
    refusal, checked by its cause rather than by a clock.
    """
    assert answer.status_code == 503, answer.text[:400]
    assert answer.headers["content-type"].startswith("application/json")
    assert int(answer.headers["retry-after"]) >= 1
    error = answer.json()["error"]
    assert error["type"] == "database_unavailable"
    assert error["message"].startswith("the server's database is unavailable;"), error["message"]
    port = cluster.url.rsplit(":", 1)[1].split("/")[0]
    for secret in ("127.0.0.1", port, "postgres", "psycopg", "connection", "5432", "server closed"):
        assert secret not in answer.text, f"{secret!r} reached the client: {answer.text}"


def _run(base: str, body: dict[str, Any]) -> httpx2.Response:
    answer = post(base, "/agent/run", body)
    assert answer.status_code == 200, answer.text[:400]
    assert_valid(answer.content)
    assert meta(data_lines(answer.content), "meta_final")["stop_reason"] == "end_turn"
    return answer


def test_spec_server_3_4_a_database_restarted_while_idle(
    pg_cluster: Cluster, pg_cluster_url: str, pg_processes: Callable[..., Process]
) -> None:
    """While the database is down every request is a quick 503 with Retry-After; once it is back, they work."""
    server = pg_processes(pg_cluster_url)
    first = _run(server.base, {"prompt": ARITHMETIC})
    agent, run_id = first.headers["x-agent-uuid"], first.headers["x-run-id"]

    pg_cluster.stop()
    for _ in range(2):  # the first meets the dead connections, the second a store known to be down
        _assert_refused_unavailable(post(server.base, "/agent/run", {"prompt": ARITHMETIC}), pg_cluster)
        _assert_refused_unavailable(
            post(server.base, "/agent/run", {"prompt": ARITHMETIC, "agent_uuid": agent}), pg_cluster
        )
        _assert_refused_unavailable(get(server.base, f"/agent/runs/{run_id}/stream?response=0"), pg_cluster)

    pg_cluster.start()
    _run(server.base, {"prompt": ARITHMETIC, "agent_uuid": agent})  # the very next request works
    _run(server.base, {"prompt": ARITHMETIC})
    replay = get(server.base, f"/agent/runs/{run_id}/stream?response=0")
    assert replay.status_code == 200
    assert data_lines(replay.content) == data_lines(first.content)
    assert "never retrieved" not in server.stop()


def test_spec_server_3_3_d_database_stopped_while_a_run_streams(
    pg_cluster: Cluster, pg_cluster_url: str, pg_processes: Callable[..., Process], tmp_path: Path
) -> None:
    """A run whose next line cannot be journaled ends at once for its client, closed as §3.3-a says.

    The run waits in its gated tool; the database stops; the gate opens. The client's
    stream ends with the closing lines and ``[DONE]`` within seconds (not keep-alives
    for ever); once the database is back the journal holds the same end, and the next
    run of the same agent works.
    """
    gate = tmp_path / "gate"
    server = pg_processes(pg_cluster_url, "--gate", str(gate))
    reader = Reader("POST", server.base + "/agent/run", json={"prompt": ARITHMETIC})
    reader.wait_open()
    assert reader.status == 200
    reader.wait_for(b'"calculator"')  # the tool call is out; the tool waits for the gate
    agent, run_id = reader.headers["x-agent-uuid"], reader.headers["x-run-id"]

    pg_cluster.stop()
    gate.touch()
    body = reader.finish(timeout=15)
    assert reader.error is None, reader.error
    lines = data_lines(body)
    assert lines[-1] == b"[DONE]"
    assert [v.code for v in violations(body) if v.code != "E140"] == []  # spec server §3.3-a: E140 aside
    final = meta(lines, "meta_final")
    assert final["stop_reason"] == "error"
    assert meta(lines, "error")["type"] == "server_unavailable"

    pg_cluster.start()
    replays: list[httpx2.Response] = []

    def closed() -> bool:  # the journal is closed by a background task once the database answers
        replays.append(get(server.base, f"/agent/runs/{run_id}/stream?response=0"))
        return replays[-1].status_code == 200 and data_lines(replays[-1].content)[-1:] == [b"[DONE]"]

    wait_until(closed, "the journal to be closed once the database is back", timeout=30, every=0.2)
    replay = replays[-1]
    assert data_lines(replay.content) == lines  # what the client got is what a replay gives
    _run(server.base, {"prompt": ARITHMETIC, "agent_uuid": agent})
    assert "never retrieved" not in server.stop()  # no run task ended with an exception nobody read
