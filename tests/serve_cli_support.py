"""``agent-ref serve`` started as a user starts it, for the link and proxy tests: its own process, port 0.

The URL is read from the line the command prints once it listens
(``agent-ref: serving on URL ...``); stopping is SIGTERM, then SIGKILL, bounded.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

_SERVING = re.compile(r"serving on (http://127\.0\.0\.1:\d+)/")


@contextlib.contextmanager
def agent_ref_serve(*flags: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``python -m agent_ref.cli.serve --port 0 FLAGS...`` until the block ends; yields its base URL."""
    environ = {k: v for k, v in os.environ.items() if k not in ("AGENT_REF_TOKEN", "ANTHROPIC_API_KEY")}
    environ.update(env or {})
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_ref.cli.serve", "--port", "0", *flags],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    assert proc.stderr is not None
    try:
        seen = []
        for line in proc.stderr:  # ends when the process does: a failed start is its stderr, not a hang
            seen.append(line)
            found = _SERVING.search(line)
            if found:
                break
        else:
            raise AssertionError(f"agent-ref serve did not start: {''.join(seen)[-2000:]}")
        yield found.group(1)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=10)
