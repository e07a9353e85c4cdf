"""PostgreSQL SIGSTOPped under ``agent-ref serve`` while a run streams, then SIGCONTed (issue 38 case 3).

[SL1-a] [SL1-b] [SL1-d] [S3.3-d] [S3.4-a]. The server is started as a user starts it:
``agent-ref serve --db postgresql://... --pace 0.5 --storage-timeout 2`` (the offline model,
one event each half second, so the run is mid-answer when the database stops). Every process of
the fault suite's PostgreSQL server is stopped with SIGSTOP (the kernel still accepts and
acknowledges on loopback, so none of the database's or TCP's timeouts fires). Asserted as
orderings, each before SIGCONT: the page and its JavaScript answer; a second client
following the live run from the process's memory reads what it missed; a new run and a
run of a stored agent, which need the database, are each a ``503`` with
``Retry-After``; the streaming run ends for both its clients with its closing lines
(``server_unavailable``) and ``[DONE]``. After SIGCONT the server serves new runs by
itself, the cut response is closed in the journal (a replay from its start ends with
``[DONE]``), and the process holds no more descriptors than before the stall
(``/proc/PID/fd``). SIGCONT is always sent in ``finally``; every stream is validated
strictly.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import httpx2

from cli_support import start_serve, stop_serve
from fault_support import Reader, wait_until
from server_support import data_lines, read_events
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pg_support import Cluster

PROMPT = "Tell me about the weather and the sea."


def _server_pids(cluster: Cluster) -> list[int]:
    """The postmaster and every process it forked."""
    postmaster = int((cluster.directory / "data" / "postmaster.pid").read_text().split("\n", 1)[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == postmaster:
                    pids.append(int(entry.name))
    return pids


@contextlib.contextmanager
def _stopped(cluster: Cluster) -> Iterator[None]:
    pids = _server_pids(cluster)
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


#: What the server may hold to the database at most: the store's pool (``PostgresStore.max_size``), the
#: journal's writer, and the stop-request listener; a follower of another process's response holds one
#: more while it follows, and none is following when the descriptors are counted.
DATABASE_CONNECTIONS = 8 + 1 + 1


def _descriptors(pid: int, db_port: int) -> tuple[list[str], int]:
    """The process's descriptors that are not connections to the database, and how many are."""
    to_db = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as rows:
            for row in list(rows)[1:]:
                fields = row.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == db_port:
                    to_db.add(f"socket:[{fields[9]}]")
    others, database = [], 0
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target in to_db:
                database += 1
            else:
                others.append(f"{fd}->{target}")
    return others, database


def _drain(stream: object) -> threading.Thread:
    """Read the server's log as it comes (a full pipe would block the server)."""
    lines: list[str] = []

    def read() -> None:
        for line in stream:  # type: ignore[attr-defined]  # the process's text stderr
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def _run_ok(client: httpx2.Client, base: str) -> bytes | None:
    """A whole run's answer if ``POST /agent/run`` answered 200 and ended with ``[DONE]``; else ``None``."""
    answer = client.post(base + "/agent/run", json={"prompt": "What is 2 + 2?"})
    if answer.status_code != 200 or not data_lines(answer.content) or data_lines(answer.content)[-1] != b"[DONE]":
        return None
    return answer.content


def test_spec_server_sl1_d_a_stopped_database_costs_its_requests_a_bounded_503_only(
    pg_cluster: Cluster, pg_cluster_url: str, tmp_path: Path
) -> None:
    """[SL1-a] [SL1-b] [SL1-d]: while PostgreSQL is SIGSTOPped under ``agent-ref serve``, the page, the static
    decoder and a follower served from memory answer; database requests are 503; the run ends validly; after
    SIGCONT the server serves again by itself, the cut response is closed in the journal, and no fd is left."""
    proc, host, port = start_serve(
        tmp_path, "--db", pg_cluster_url, "--pace", "0.5", "--storage-timeout", "2", "--keepalive", "30"
    )
    _drain(proc.stderr)
    base = f"http://{host}:{port}"
    db_port = urlsplit(pg_cluster_url).port or 5432
    try:
        with httpx2.Client(timeout=60) as client:
            warm = _run_ok(client, base)  # the pools and the listeners open: the baseline of descriptors
            assert warm is not None
            assert_valid(warm)
            warm_agent = read_events(warm)[0].data and json.loads(read_events(warm)[0].data)["agent"]
            before, _ = _descriptors(proc.pid, db_port)
            held = Reader("POST", base + "/agent/run", json={"prompt": PROMPT})
            held.wait_for(b'"type":"text"')  # the answer has started: one event each half second from here
            run_id = read_events(bytes(held.body))[0].id.split(":")[0]
            with _stopped(pg_cluster):
                page = client.get(base + "/")
                assert page.status_code == 200
                assert "<html" in page.text.lower()
                decoder = client.get(base + "/static/app.js")
                assert decoder.status_code == 200
                follower = Reader(
                    "GET", base + f"/agent/runs/{run_id}/stream", headers={"Last-Event-ID": f"{run_id}:0:0"}
                )  # the live run, from this process's memory
                follower.wait_open()
                assert follower.status == 200
                fresh = client.post(base + "/agent/run", json={"prompt": "What is 3 + 3?"})  # needs the store
                assert fresh.status_code == 503, fresh.text
                assert int(fresh.headers["retry-after"]) >= 1
                assert fresh.json()["error"]["type"] == "database_unavailable"
                assert "127.0.0.1" not in fresh.text
                ended = held.finish(60)  # its next line met the stopped database: closing lines, [DONE]
                followed = follower.finish(60)
                resumed = client.post(base + "/agent/run", json={"prompt": "And 4 + 4?", "agent_uuid": warm_agent})
                assert resumed.status_code == 503, resumed.text  # the stored agent must be loaded: 503 too
                assert resumed.json()["error"]["type"] == "database_unavailable"
                stop = client.post(base + f"/agent/runs/{run_id}/stop")  # its owner: the journal, then the store
                assert stop.status_code == 503, stop.text
                assert client.get(base + "/").status_code == 200  # still answering, still before SIGCONT
            assert data_lines(ended)[-1] == b"[DONE]"
            assert b"server_unavailable" in ended
            assert_valid(ended)
            assert data_lines(followed) == data_lines(ended)[1:]  # after line 0: every later line, once
            assert_valid(ended[: ended.index(b"\n\n") + 2] + followed)  # line 0, then what the follower read

            wait_until(lambda: _run_ok(client, base) is not None, "a new run after SIGCONT", timeout=60)
            again = _run_ok(client, base)
            assert again is not None
            assert_valid(again)

            def closed() -> bool:
                answer = client.get(base + f"/agent/runs/{run_id}/stream")  # from the journal, from its start
                return answer.status_code == 200 and data_lines(answer.content)[-1:] == [b"[DONE]"]

            wait_until(closed, "the cut response closed in the journal", timeout=60)
            whole = client.get(base + f"/agent/runs/{run_id}/stream")
            assert_valid(whole.content)
            assert b"server_unavailable" in whole.content
            assert data_lines(whole.content)[0] == data_lines(ended)[0]
        # Nothing but its database connections is left over (a client's socket, a file, a pipe), and those
        # are within what its pools may hold (the store's pool grows under load and was renewed meanwhile).
        wait_until(
            lambda: len(_descriptors(proc.pid, db_port)[0]) <= len(before),
            f"the server's descriptors other than its database connections back to {before}",
        )
        others, database = _descriptors(proc.pid, db_port)
        assert database <= DATABASE_CONNECTIONS, (database, others)
    finally:
        stop_serve(proc)
