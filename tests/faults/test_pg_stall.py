"""PostgreSQL SIGSTOPped under a live stream, then SIGCONTed (issue 38 case 3).

[D3.6-a] [D3.6-b] [D4.2-a] [D4.3-a] [P1.4-c]. One app in this process has a page, a
``Delivery`` on a ``PostgresJournal`` and another on a ``FileJournal``. Every process of
the fault suite's PostgreSQL server is stopped with SIGSTOP (the kernel still accepts
and acknowledges on loopback, so no timeout of the database's own fires) while a
PostgreSQL-journaled run streams. Asserted as orderings, each before SIGCONT: the page
answers, the other backend's stream runs to its end, the stalled run's client gets its
closing lines and ``[DONE]``, a resume on the stalled journal is a 503. After SIGCONT the
app serves PostgreSQL streams again by itself, and the cut response is closed in the
journal. SIGCONT is always sent in ``finally``; every stream is validated strictly.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import httpx2
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from envelope.delivery import DONE_LINE, FileJournal
from envelope.delivery.asgi import Delivery
from envelope.delivery.postgres import PostgresJournal
from fault_support import Reader
from server_support import data_lines, running
from streams import text_response
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from starlette.requests import Request
    from starlette.responses import Response

    from pg_support import Cluster


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
def _stopped(cluster: Cluster) -> Iterator[list[int]]:
    pids = _server_pids(cluster)
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


class _App:
    def __init__(self, url: str, directory: Path) -> None:
        self.pg = PostgresJournal(url)  # call_timeout 5 s, the default
        self.go = threading.Event()  # the held PostgreSQL run goes on
        self.held = text_response("held", 12)
        self.pg_delivery = Delivery(self.pg, keepalive_seconds=30)
        self.file_delivery = Delivery(FileJournal(directory), keepalive_seconds=30)

        async def page(_: Request) -> Response:
            return PlainTextResponse("the page")

        async def pg_chat(request: Request) -> Response:
            run_id = request.path_params["run_id"]
            lines = self.held if run_id == "held" else text_response("pg", 4)
            return self.pg_delivery.stream(run_id, self._held(lines) if run_id == "held" else _plain(lines))

        async def file_chat(request: Request) -> Response:
            return self.file_delivery.stream(
                request.path_params["run_id"], _plain(text_response("file", 20), pause=0.01)
            )

        self.app = Starlette(
            routes=[
                Route("/", page),
                Mount("/pg", routes=[Route("/chat/{run_id}", pg_chat), self.pg_delivery.route()]),
                Mount("/file", routes=[Route("/chat/{run_id}", file_chat), self.file_delivery.route()]),
            ]
        )

    async def _held(self, lines: list[bytes]) -> AsyncIterator[bytes]:
        for n, line in enumerate(lines):
            if n == 4:
                while not self.go.is_set():
                    await asyncio.sleep(0.01)
            yield line


async def _plain(lines: list[bytes], pause: float = 0.0) -> AsyncIterator[bytes]:
    for line in lines:
        await asyncio.sleep(pause)
        yield line


def test_spec_delivery_3_6_a_a_stopped_database_freezes_nothing_else(
    pg_cluster: Cluster, pg_cluster_url: str, tmp_path: Path
) -> None:
    """[D3.6-a] [D3.6-b] [D4.2-a] [P1.4-c]: while PostgreSQL is SIGSTOPped, the page, the file backend's stream and
    a 503 answer; the stalled run ends validly; after SIGCONT PostgreSQL streams work and the cut one is closed."""
    made = _App(pg_cluster_url, tmp_path / "files")
    try:
        with running(made.app) as base, httpx2.Client(timeout=30) as client:
            held = Reader("GET", base + "/pg/chat/held")
            held.wait_for(b"held:0:3")  # four lines journaled in PostgreSQL and sent
            with _stopped(pg_cluster):
                made.go.set()  # its next line meets the stopped database
                page = client.get(base + "/")
                assert (page.status_code, page.text) == (200, "the page")
                other = client.get(base + "/file/chat/other")  # another backend's stream, start to end
                assert data_lines(other.content) == text_response("file", 20)
                assert_valid(other.content)
                ended = held.finish(20)  # the stalled run's client: closing lines and [DONE], bounded
                refused = client.get(base + "/pg/streams/held", headers={"Last-Event-ID": "held:0:3"})
                assert refused.status_code == 503
                assert int(refused.headers["retry-after"]) >= 1
                assert "127.0.0.1" not in refused.text
                page_again = client.get(base + "/")  # still answering, still before SIGCONT
                assert page_again.status_code == 200
            seen = data_lines(ended)
            assert seen[:4] == made.held[:4]
            assert seen[-1] == DONE_LINE
            assert b"server_unavailable" in ended
            assert_valid(ended)

            deadline = time.monotonic() + 60  # SIGCONT sent: the journal answers again by itself
            while True:
                fresh = client.get(base + "/pg/chat/fresh" + str(int(time.monotonic() * 1000)))
                if data_lines(fresh.content) == text_response("pg", 4):
                    break
                assert time.monotonic() < deadline, "PostgreSQL streams did not come back within 60 s"
                time.sleep(0.2)
            assert_valid(fresh.content)
            while True:
                replay = client.get(base + "/pg/streams/held")
                if replay.status_code == 200:
                    break
                assert replay.status_code == 503
                assert time.monotonic() < deadline, "the cut response was not closed within 60 s"
                time.sleep(0.2)
        lines = data_lines(replay.content)
        assert lines[:4] == made.held[:4]
        assert lines[-1] == DONE_LINE
        assert_valid(replay.content)
        assert made.pg.read("held", 0) == lines  # closed in the journal, not only on the wire
    finally:
        made.pg.close()
