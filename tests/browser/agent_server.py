"""A real ``agent-ref serve`` process for the browser tests: started, its URL read, stopped.

Owns: the command (``agent-ref serve``), starting it on a port (0: a free one) with a SQLite
database, reading the "serving on URL" line it prints on stderr (bounded), and stopping
it (SIGTERM, then SIGKILL) by its own pid. Does not own: what the server does.
"""

from __future__ import annotations

import contextlib
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

HERE = Path(__file__).resolve().parent
#: The real command: ``agent-ref serve`` (``python -m agent_ref`` is the same program).
CLI = [sys.executable, "-m", "agent_ref", "serve"]
#: How long a server may take to print its URL (seconds): a loaded CI machine imports slowly.
START_TIMEOUT = 60
_URL = re.compile(r"serving on (http://127\.0\.0\.1:\d+)/")


@contextlib.contextmanager
def agent_serve(db: Path, *extra: str, port: int = 0) -> Iterator[str]:
    """Run ``agent-ref serve --db DB --port PORT --subagents demo EXTRA...``; yield its base URL."""
    command = [
        *CLI,
        "--db",
        str(db),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--subagents",
        "demo",
        *extra,
    ]
    proc = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str | None] = queue.Queue()
    said: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        url = None
        while url is None:
            try:
                line = lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"agent-ref serve printed no URL in {START_TIMEOUT} s: {''.join(said)}") from None
            if line is None:
                raise AssertionError(f"agent-ref serve exited ({proc.wait(10)}): {''.join(said)}")
            said.append(line)
            match = _URL.search(line)
            url = match.group(1) if match else None
        yield url
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        reader.join(10)  # the pipe is at its end once the process is gone
        assert proc.stderr is not None
        proc.stderr.close()
