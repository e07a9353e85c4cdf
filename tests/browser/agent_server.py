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
def serving(
    command: list[str],
    *,
    url_on: str = "stderr",
    url: re.Pattern[str] = _URL,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """Run a server process (in ``cwd``, with ``env``); yield the base URL it prints on ``url_on``; stop it by its pid.

    ``url``'s first group is the URL (default: ``agent-ref serve``'s "serving on URL/" line).
    Everything is bounded: the wait for the URL, the stop (SIGTERM, then SIGKILL).
    """
    proc = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if url_on == "stdout" else subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env=env,
    )
    stream = proc.stdout if url_on == "stdout" else proc.stderr
    assert stream is not None
    lines: queue.Queue[str | None] = queue.Queue()
    said: list[str] = []

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        base = None
        while base is None:
            try:
                line = lines.get(timeout=START_TIMEOUT)
            except queue.Empty:
                raise AssertionError(f"{command[0]} printed no URL in {START_TIMEOUT} s: {''.join(said)}") from None
            if line is None:
                raise AssertionError(f"the server exited ({proc.wait(10)}): {''.join(said)}")
            said.append(line)
            match = url.search(line)
            base = match.group(1) if match else None
        yield base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        reader.join(10)  # the pipe is at its end once the process is gone
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def agent_serve(db: Path, *extra: str, port: int = 0) -> contextlib.AbstractContextManager[str]:
    """Run ``agent-ref serve --db DB --port PORT --subagents demo EXTRA...``; yield its base URL."""
    command = [*CLI, "--db", str(db), "--host", "127.0.0.1", "--port", str(port), "--subagents", "demo", *extra]
    return serving(command)
