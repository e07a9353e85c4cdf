"""``agent-ref serve`` behind Debian's nginx, configured as ``docs/deployment.md`` says (issue 39 item 6).

nginx keeps its default buffering settings; the location block is the page's own
(``nginx_support.documented_location``). The server runs as its own process: the real
``agent-ref serve`` command, or, where a run must be held in the middle of a step, the
test launcher whose ``calculator`` waits for a file (``tests/server/serve_for_test.py``).
The first event arrives while the tool is still held (an ordering: the gate is opened
only after that event was read), a ``Last-Event-ID`` reconnect gets the rest once, a
resume link works through nginx and nothing else does with it, and the allowed-host
check still holds behind it. Every stream read passes the strict validator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import httpx2
import pytest

from proxy.nginx_support import Proxy, documented_location, nginx_binary, start_nginx, stop
from serve_cli_support import agent_ref_serve
from server_support import read_events, start_server_process, stop_server_process
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from envelope import SSEEvent

TOKEN = "proxy-bearer-token-1"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
ARITHMETIC = "What is 5 + (10 * 2)?"


@pytest.fixture
def behind(tmp_path: Path) -> Iterator[Proxy]:
    """``agent-ref serve --token`` (allowing ``chat.example.test``) and nginx in front; both stopped after."""
    nginx_binary()  # skip (or fail, in CI) before starting anything
    with agent_ref_serve("--db", str(tmp_path / "a.db"), "--token", TOKEN, "--allowed-host", "chat.example.test") as up:
        proxy = start_nginx(tmp_path / "nginx", up, documented_location())
        try:
            yield proxy
        finally:
            stop(proxy.proc)


def _whole_events(raw: bytes) -> list[SSEEvent]:
    end = raw.rfind(b"\n\n")
    return read_events(raw[: end + 2]) if end >= 0 else []


def _joined(events: list[SSEEvent]) -> bytes:
    return b"".join(f"id: {e.id}\ndata: {e.data}\n\n".encode() for e in events)


def test_the_first_event_arrives_while_the_tool_is_held(tmp_path: Path) -> None:
    """The calculator cannot return before the gate exists; the first events come through nginx before it is made."""
    nginx_binary()
    gate = tmp_path / "gate"
    proc, upstream = start_server_process(tmp_path / "a.db", "--gate", str(gate))
    proxy = start_nginx(tmp_path / "nginx", upstream, documented_location())
    try:
        got = b""
        with (
            httpx2.Client(timeout=30) as client,
            client.stream("POST", proxy.base + "/agent/run", json={"prompt": ARITHMETIC}) as answer,
        ):
            assert answer.status_code == 200
            chunks = answer.iter_bytes()
            while not any('"tool_call"' in e.data for e in _whole_events(got)):
                got += next(chunks)  # a buffering proxy would hold this until the end, which cannot come
            early = _whole_events(got)
            assert not gate.exists()
            assert all(e.data != "[DONE]" for e in early)
            assert any('"type":"text"' in e.data or '"type":"thinking"' in e.data for e in early)
            gate.touch()
            for chunk in chunks:
                got += chunk
    finally:
        stop(proxy.proc)
        stop_server_process(proc)
    assert_valid(got)
    assert read_events(got)[-1].data == "[DONE]"


def test_a_last_event_id_reconnect_through_nginx(behind: Proxy) -> None:
    """A run's first three events, then a reconnect through nginx with Last-Event-ID: the rest once; then 204."""
    with httpx2.Client(timeout=30) as client:
        whole = client.post(behind.base + "/agent/run", json={"prompt": ARITHMETIC}, headers=BEARER)
        assert whole.status_code == 200, whole.text
        events = read_events(whole.content)
        run_id = whole.headers["x-run-id"]
        rest = client.get(
            f"{behind.base}/agent/runs/{run_id}/stream", headers={**BEARER, "Last-Event-ID": events[2].id}
        )
        done = client.get(
            f"{behind.base}/agent/runs/{run_id}/stream", headers={**BEARER, "Last-Event-ID": events[-1].id}
        )
    assert_valid(whole.content)
    assert rest.status_code == 200, rest.text
    again = [*events[:3], *read_events(rest.content)]
    assert [(e.id, e.data) for e in again] == [(e.id, e.data) for e in events]
    assert_valid(_joined(again))
    assert done.status_code == 204


def test_a_resume_link_through_nginx(behind: Proxy) -> None:
    """[RL1-a] through nginx: the link's query string arrives intact; altered or on another endpoint, refused."""
    with httpx2.Client(timeout=30) as client:
        first = client.post(behind.base + "/agent/run", json={"prompt": "What is 2 + 2?"}, headers=BEARER)
        run_id, token = first.headers["x-run-id"], first.headers["x-resume-token"]
        by_link = client.get(f"{behind.base}/agent/runs/{run_id}/stream", params={"token": token})
        altered = token[:-1] + ("A" if token[-1] != "A" else "B")
        bad = client.get(f"{behind.base}/agent/runs/{run_id}/stream", params={"token": altered})
        elsewhere = client.post(
            f"{behind.base}/agent/runs/{run_id}/messages", params={"token": token}, json={"text": "hi"}
        )
        fresh = client.post(f"{behind.base}/agent/runs/{run_id}/link", headers=BEARER)
    assert_valid(first.content)
    assert by_link.status_code == 200, by_link.text
    assert by_link.content == first.content
    assert (bad.status_code, bad.json()["error"]["type"]) == (401, "token_bad_signature")
    assert elsewhere.status_code == 401
    assert fresh.status_code == 200
    assert fresh.json()["stream"].startswith(f"/agent/runs/{run_id}/stream?token=")  # relative: the proxy's host


def test_the_allowed_host_check_holds_behind_nginx(behind: Proxy) -> None:
    """``Host $http_host`` passes the client's name: an allowed one is served, any other is 421 [RC9-c]."""
    with httpx2.Client(timeout=30) as client:
        allowed = client.post(
            behind.base + "/agent/run",
            json={"prompt": "What is 2 + 2?"},
            headers={**BEARER, "Host": "chat.example.test:8443", "X-Forwarded-Proto": "https"},
        )
        other = client.post(
            behind.base + "/agent/run", json={"prompt": "hi"}, headers={**BEARER, "Host": "evil.example"}
        )
        page = client.get(behind.base + "/")
    assert allowed.status_code == 200, allowed.text
    assert_valid(allowed.content)
    assert other.status_code == 421
    assert page.status_code == 200  # the proxy's own address (loopback) as the Host
