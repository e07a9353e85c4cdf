"""Server processes for the two-process tests: ``tests/scaleout/serve_pg.py`` run as a subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx2

HERE = Path(__file__).resolve().parent / "scaleout"
SRC = HERE.parents[1] / "src"


class Process:
    """One server process (``serve_pg.py``) and its base URL."""

    def __init__(self, url: str, *args: str) -> None:
        """Start it and wait (at most 60 s) for the URL it prints."""
        self.log = ""
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "serve_pg.py"), url, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline() if self.proc.stdout else ""))
        reader.start()
        reader.join(60)
        if not line or not line[0].startswith("http://"):
            err = self.stop()
            raise RuntimeError(f"the server process did not start: {err[-2000:]}")
        self.base = line[0].strip().rstrip("/")
        # The URL is printed once the port is bound; it answers once the lifespan
        # (which recovers what dead processes left open) has run.
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx2.get(self.base + "/", timeout=5)
                break
            except httpx2.TransportError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("the server process never answered") from None
                time.sleep(0.05)

    def kill(self) -> None:
        """``kill -9``: no shutdown, no cleanup."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> str:
        """Stop it (SIGTERM, then SIGKILL after 20 s); return what it wrote on stderr (its log)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.log += self.proc.stderr.read()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return self.log
