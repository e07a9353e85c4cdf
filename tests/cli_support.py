"""Running the installed ``agent-ref`` script in tests: `serve` started and stopped, a refusal, a collector.

Owns: the script's path, the environment the tests give it (no API key, no server token),
starting ``agent-ref serve`` on a free loopback port (waiting for its "serving on" line),
stopping it with Ctrl-C, running a ``serve`` that must refuse its options, and an OTLP/HTTP
collector stand-in on the loopback.
Does not own: what the tests assert of a served stream (each validates its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref_support import sse_lines
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator

#: The installed ``agent-ref`` console script of this environment.
SCRIPT = Path(sys.executable).parent / "agent-ref"


def clean_env() -> dict[str, str]:
    """This process's environment without ``ANTHROPIC_API_KEY`` and ``AGENT_REF_TOKEN``."""
    return {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "AGENT_REF_TOKEN")}


def start_serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], str, int]:
    """``agent-ref serve --port 0`` with a database in ``tmp_path`` and ``args``: the process, its host and port.

    Fails the test when no "serving on" line comes within 60 s (the process is stopped first).
    """
    proc = subprocess.Popen(
        [str(SCRIPT), "serve", "--port", "0", "--db", str(tmp_path / "agents.db"), *args],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if "serving on " in line:
            url = line.split("serving on ", 1)[1].split()[0]
            host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
            return proc, host, int(port)
    stop_serve(proc)
    pytest.fail(f"agent-ref serve did not start (exit {proc.poll()})")


def stop_serve(proc: subprocess.Popen[str], timeout: float = 20) -> None:
    """Ctrl-C (SIGINT) the server, killed if it has not stopped within ``timeout`` seconds."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    if proc.stderr is not None:
        proc.stderr.close()


def serve_refusal(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``agent-ref serve --port 0 --db a.db ARGS`` in ``tmp_path``, which must refuse ARGS before listening.

    Asserted here: exit 2, one line on stderr, nothing served. The caller checks the line.
    """
    done = subprocess.run(
        [str(SCRIPT), "serve", "--port", "0", "--db", "a.db", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "serving on" not in done.stderr
    return done


@dataclass
class OtlpCollector:
    """An OTLP/HTTP collector stand-in on the loopback: ``url`` (no path), and each POST it received."""

    url: str = ""
    #: ``(path, content type, body)`` of each request, in order.
    received: list[tuple[str, str, bytes]] = field(default_factory=list)


@contextlib.contextmanager
def otlp_collector() -> Iterator[OtlpCollector]:
    """A collector answering every POST with 200, for the block's length."""
    collected = OtlpCollector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            collected.received.append((self.path, self.headers.get("Content-Type", ""), self.rfile.read(length)))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            """Quiet: the test reads what was received."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    collected.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield collected
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def strict_envelopes(body: bytes, tmp_path: Path) -> list[dict[str, Any]]:
    """A served response's envelopes, once it passed the strict validator in process and ``envelope validate --strict``."""
    assert_valid(body)
    path = tmp_path / "response.sse"
    path.write_bytes(body)
    done = subprocess.run(
        [str(SCRIPT.parent / "envelope"), "validate", "--strict", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in sse_lines(body) if line != b"[DONE]"]


#: The checkout's ``src``, put first on the ``PYTHONPATH`` of ``python -m agent_ref``.
SRC = Path(__file__).resolve().parents[1] / "src"


def module_cli(
    *args: str, cwd: Path, stdin: str | None = None, key: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m agent_ref ARGS`` from the checkout's ``src``, in ``cwd``: no API key unless ``key`` (at most 120 s)."""
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    if key is not None:
        env["ANTHROPIC_API_KEY"] = key
    env["PYTHONPATH"] = str(SRC)
    return subprocess.run(
        [sys.executable, "-m", "agent_ref", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )
