"""``envelope.delivery.asgi`` on a real uvicorn: stream, drop the connection, resume (spec delivery §6)."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from envelope.delivery import DONE_LINE, MemoryJournal
from envelope.delivery.asgi import Delivery
from server_support import data_lines, read_events, running
from streams import text_response
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from starlette.requests import Request
    from starlette.responses import Response


class _App:
    """A tiny app: ``GET /chat/{run_id}`` streams a fake model's lines, held at ``hold_at`` until ``go`` is set."""

    def __init__(self, *, hold_at: int = 5, fail: bool = False, pause: float = 0.0) -> None:
        self.lines = text_response(words=12)
        self.hold_at = hold_at
        self.fail = fail
        self.pause = pause
        self.go = threading.Event()
        self.delivery = Delivery(MemoryJournal(), keepalive_seconds=0.2)
        self.app = Starlette(routes=[Route("/chat/{run_id}", self.chat), self.delivery.route()])

    async def model(self) -> AsyncIterator[bytes]:
        for n, line in enumerate(self.lines):
            if n == self.hold_at:
                while not self.go.is_set():
                    await asyncio.sleep(0.01)
                await asyncio.sleep(self.pause)
                if self.fail:
                    raise RuntimeError("the model broke (not for the client)")
            yield line

    async def chat(self, request: Request) -> Response:
        return self.delivery.stream(request.path_params["run_id"], self.model())


@pytest.fixture
def app() -> Iterator[tuple[_App, str]]:
    made = _App()
    with running(made.app) as base:
        yield made, base


def _read_some(base: str, path: str, count: int) -> tuple[bytes, dict[str, str]]:
    """Read ``count`` events of a stream, then drop the connection."""
    got = b""
    with httpx2.Client(timeout=30) as client, client.stream("GET", base + path) as answer:
        assert answer.status_code == 200
        headers = dict(answer.headers)
        for chunk in answer.iter_bytes():
            got += chunk
            if len(read_events(got)) >= count:
                break
    return got, headers


def test_spec_delivery_6_1_a_drop_and_resume_gives_every_line_once(app: tuple[_App, str]) -> None:
    """[D6.1-a] [D6.1-b] [D2.3-a]: a client dropped mid-stream resumes with Last-Event-ID; nothing lost or repeated."""
    made, base = app
    first, headers = _read_some(base, "/chat/run-1", 3)
    assert headers["x-accel-buffering"] == "no"
    assert headers["cache-control"] == "no-cache"
    events = read_events(first)[:3]
    last = events[-1].id
    assert last == "run-1:0:2"
    made.go.set()  # the model goes on with nobody reading
    with httpx2.Client(timeout=30) as client:
        rest = client.get(base + "/streams/run-1", headers={"Last-Event-ID": last})
    assert rest.status_code == 200
    got = [e.data.encode() for e in events] + data_lines(rest.content)
    assert got == made.lines
    whole = b"".join(
        f"id: {e.id}\n".encode() + b"data: " + e.data.encode() + b"\n\n" for e in [*events, *read_events(rest.content)]
    )
    assert_valid(whole)
    with httpx2.Client(timeout=30) as client:
        done_id = read_events(rest.content)[-1].id
        assert client.get(base + "/streams/run-1", headers={"Last-Event-ID": done_id}).status_code == 204
        by_query = client.get(base + "/streams/run-1", params={"last_event_id": "run-1:0:10"})
        assert data_lines(by_query.content) == made.lines[11:]
        whole_again = client.get(base + "/streams/run-1")
        assert data_lines(whole_again.content) == made.lines
        assert_valid(whole_again.content)


def test_spec_delivery_2_3_b_bad_ids_are_400_and_unknown_runs_404(app: tuple[_App, str]) -> None:
    """[D2.3-b]: another run's id, a foreign id or one past the end is 400 naming it; an unknown run is 404."""
    made, base = app
    made.go.set()
    with httpx2.Client(timeout=30) as client:
        assert data_lines(client.get(base + "/chat/run-2").content) == made.lines
        for bad in ("run-9:0:1", "nonsense", f"run-2:0:{len(made.lines)}"):
            answer = client.get(base + "/streams/run-2", headers={"Last-Event-ID": bad})
            assert answer.status_code == 400, bad
            assert answer.json()["error"]["type"] == "invalid_last_event_id"
        assert client.get(base + "/streams/run-2", headers={"Last-Event-ID": "run-2:5:0"}).status_code == 404
        assert client.get(base + "/streams/nobody").status_code == 404
        assert client.get(base + "/streams/a%2Fb").status_code == 404


def test_spec_delivery_6_1_c_keep_alives_and_a_failing_producer() -> None:
    """[D6.1-c]: silence brings keep-alive comments; a producer that raises ends the stream validly, no traceback."""
    made = _App(hold_at=4, fail=True, pause=0.7)
    made.go.set()
    with running(made.app) as base, httpx2.Client(timeout=30) as client:
        answer = client.get(base + "/chat/run-3")
    assert b": keep-alive" in answer.content
    assert_valid(answer.content)
    lines = data_lines(answer.content)
    assert lines[:4] == made.lines[:4]
    assert lines[-1] == DONE_LINE
    assert b"internal_error" in b"".join(lines)
    assert b"model broke" not in answer.content
