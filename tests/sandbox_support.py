"""Helpers of the Bash sandbox tests: bubblewrap present or a loud skip (a failure under CI), process scans.

Without a working ``bwrap`` the sandbox tests skip with a reason that says so, except in CI
(``CI=true``), where ``scripts/system-deps`` installs bubblewrap and the tests must run.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agent_ref.tools.sandbox import sandbox_problem

if TYPE_CHECKING:
    from agent_ref.tools.sandbox import RunResult, Shell


def need_bwrap() -> None:
    """Skip (fail under CI) unless bubblewrap can make a sandbox here."""
    problem = sandbox_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{problem}; CI must run the sandbox tests (scripts/system-deps installs bubblewrap)")
    pytest.skip(f"SANDBOX TESTS DID NOT RUN: {problem}")


def run(shell: Shell, command: str, timeout_ms: int = 20_000) -> RunResult:
    """One command through ``shell``, its progress reports dropped."""
    return asyncio.run(shell.run(command, timeout_ms, lambda _: None))


def processes_with(marker: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line holds ``marker``, read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(int(entry.name))
    return found
