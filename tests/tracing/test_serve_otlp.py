"""`agent-ref serve --otlp URL` and `--memory-store DIR` (spec ``spec/cli-agent-ref.md`` RC12), the installed script.

A collector stand-in on the loopback receives the OTLP/HTTP export of a served run; the
run's stream goes through the strict validator.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from agent_ref.memory_store import FileMemory
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator

SCRIPT = Path(sys.executable).parent / "agent-ref"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "AGENT_REF_TOKEN")}


class _Collector(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[str, bytes]]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.received.append((self.path, self.rfile.read(length)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: object) -> None:
        """Quiet."""


@pytest.fixture
def collector() -> Iterator[str]:
    """An OTLP/HTTP collector stand-in on the loopback; its URL (no path)."""
    _Collector.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def _serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str, int]:
    proc = subprocess.Popen(
        [str(SCRIPT), "serve", "--port", "0", "--db", str(tmp_path / "agents.db"), *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        env=_env(),
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if "serving on " in line:
            host, port = line.split("serving on ", 1)[1].split()[0].removeprefix("http://").rstrip("/").rsplit(":", 1)
            return proc, host, int(port)
    proc.kill()
    proc.wait(10)
    pytest.fail(f"agent-ref serve did not start (exit {proc.poll()})")


def _post(host: str, port: int, body: object) -> bytes:
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        conn.request("POST", "/agent/run", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        return response.read()
    finally:
        conn.close()


def test_serve_otlp_exports_the_runs_spans_and_memory_store_remembers_RC12_b(collector: str, tmp_path: Path) -> None:
    """A served run's spans reach the collector when the server stops [RC12-b]; its memory is kept [RC12-a]."""
    proc, host, port = _serve(tmp_path, "--otlp", collector, "--memory-store", str(tmp_path / "notes"))
    try:
        body = _post(host, port, {"prompt": "Please remember that the build runs at noon."})
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
        assert proc.stderr is not None
        proc.stderr.close()
    assert_valid(body)
    names = set()
    for path, data in _Collector.received:
        assert path == "/v1/traces"
        for resource_spans in ExportTraceServiceRequest.FromString(data).resource_spans:
            for scope_spans in resource_spans.scope_spans:
                names |= {span.name for span in scope_spans.spans}
    assert "invoke_agent" in names
    assert any(name.startswith("chat ") for name in names)
    files = list((tmp_path / "notes").glob("*.json"))
    assert len(files) == 1
    memory = FileMemory(tmp_path / "notes")
    agent_id = files[0].stem  # an uuid is its own encoding
    assert memory.entries(agent_id) == ["the build runs at noon"]


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (("--otlp", "ftp://collector"), "--otlp: error: 'ftp://collector' is not an http:// or https:// URL"),
        (("--memory-store", "file.txt"), "file.txt: error: is not a directory"),
    ],
)
def test_serve_refuses_a_bad_otlp_or_memory_store_in_one_line_RC12_a(
    args: tuple[str, ...], start: str, tmp_path: Path
) -> None:
    """A bad --otlp URL or --memory-store is one line, exit 2, before anything listens [RC12-a] [RC12-b]."""
    (tmp_path / "file.txt").write_text("not a directory\n", encoding="utf-8")
    done = subprocess.run(
        [str(SCRIPT), "serve", "--port", "0", "--db", "a.db", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(start), done.stderr
    assert done.stderr.count("\n") == 1
    assert "serving on" not in done.stderr


def test_run_memory_store_keeps_what_the_user_asked_to_remember_RC12_a(tmp_path: Path) -> None:
    """`agent-ref run --memory-store DIR`: the run's "remember that ..." is a note in DIR, for the agent [RC12-a]."""
    notes = tmp_path / "notes"

    def run(prompt: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), "run", prompt, "--db", str(tmp_path / "a.db"), "--memory-store", str(notes)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=_env(),
            timeout=120,
            check=False,
        )

    first = run("Please remember that the build runs at noon.")
    assert first.returncode == 0, first.stderr
    assert_valid(first.stdout.encode())
    (path,) = notes.glob("*.json")
    assert FileMemory(notes).entries(path.stem) == ["the build runs at noon"]
