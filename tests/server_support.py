"""Helpers for the server and browser tests: a real uvicorn on 127.0.0.1 port 0, SSE reading, gated tools.

The server runs in a thread of the test process with its own event loop, so a test
talks to it over real loopback HTTP (streaming, disconnects and keep-alives are the
real ones), and stops it at the end of the ``with`` block, bounded in time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2
import uvicorn

from agent_ref import Tool, tool
from agent_ref.tools.demo import confirm, evaluate
from envelope import SSEEvent, SSEReader

if TYPE_CHECKING:
    from collections.abc import Iterator


@dataclass
class Gate:
    """A backend ``calculator`` that waits until the test opens the gate (bounded: 30 s).

    Attributes:
        entered: set when the tool starts (the model is then silent, the stream open).
        opened: the test sets it to let the tool finish.
        left: set when the tool returns or raises (so a test can order an answer before it).
    """

    entered: threading.Event = field(default_factory=threading.Event)
    opened: threading.Event = field(default_factory=threading.Event)
    left: threading.Event = field(default_factory=threading.Event)

    def tools(self) -> list[Tool]:
        """``calculator`` (gated) and the frontend ``confirm``."""
        gate = self

        @tool(name="calculator")
        def gated_calculator(expression: str) -> str:
            """Evaluate an arithmetic expression, after the test opens the gate.

            Args:
                expression: The expression.
            """
            gate.entered.set()
            try:
                if not gate.opened.wait(30):
                    raise TimeoutError("the test never opened the gate")
                return str(evaluate(expression))
            finally:
                gate.left.set()

        return [gated_calculator, confirm]


@contextlib.contextmanager
def running(app: Any, *, log_level: str = "warning") -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1, a free port; yield its base URL (``http://127.0.0.1:N``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=3))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()
        assert not thread.is_alive(), "the test server did not stop"


def read_events(raw: bytes) -> list[SSEEvent]:
    """The SSE events of a whole response body (comments left out, as a browser does)."""
    reader = SSEReader()
    events = reader.feed(raw)
    events += reader.close()
    return events


def data_lines(raw: bytes) -> list[bytes]:
    """The envelope lines (``[DONE]`` included) of a response body."""
    return [e.data.encode() for e in read_events(raw)]


def post(base: str, path: str, body: Any, **kwargs: Any) -> httpx2.Response:
    """POST JSON and read the whole (streamed) answer."""
    with httpx2.Client(timeout=30) as client:
        return client.post(base + path, json=body, **kwargs)


def get(base: str, path: str, **kwargs: Any) -> httpx2.Response:
    """GET and read the whole answer."""
    with httpx2.Client(timeout=30) as client:
        return client.get(base + path, **kwargs)


#: The server process the fault and fleet tests start (``tests/server/serve_for_test.py``).
SERVE_FOR_TEST = Path(__file__).resolve().parent / "server" / "serve_for_test.py"


def start_server_process(db: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``serve_for_test.py`` on ``db`` in a process of its own; the process and its base URL."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SERVE_FOR_TEST.parent.parent), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen(
        [sys.executable, str(SERVE_FOR_TEST), str(db), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else url
    return proc, url.rstrip("/")


def stop_server_process(proc: subprocess.Popen[str]) -> None:
    """Stop a server process a test started (SIGTERM, then SIGKILL after 20 s) and close its pipes."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate(timeout=10)
