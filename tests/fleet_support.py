"""Worker processes for the fleet tests, and the handler they run.

A worker process is ``python -m agent_ref.fleet.worker --db URL --handlers fleet_support:HANDLERS``:
``agent-ref worker``'s own ``main``, with the ``record`` kind added. ``record`` writes one
row per run into ``fleet_runs`` (task, attempt, worker, when) *before* its work, sleeps
``payload["seconds"]``, and returns ``{"attempt", "worker"}``: so a test sees every run of
every task, including runs of a worker killed before it could complete, and can tell
which run's result the queue kept. The handler's database is ``$FLEET_RECORD_URL``.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg

from agent_ref import Agent, ScriptedModel
from agent_ref.run.retry import RetryPolicy
from agent_ref.run.subagents import AgentSpec

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agent_ref.fleet.worker import Handler, TaskContext

HERE = Path(__file__).resolve().parent  # tests/
SRC = HERE.parent / "src"
RECORD_ENV = "FLEET_RECORD_URL"
RUNS_TABLE = (
    "CREATE TABLE IF NOT EXISTS fleet_runs (task_id TEXT NOT NULL, attempt INTEGER NOT NULL, worker TEXT NOT NULL,"
    " at DOUBLE PRECISION NOT NULL DEFAULT extract(epoch FROM clock_timestamp()))"
)
#: A worker's log line for a completion the queue accepted (``worker.Worker._end`` at INFO).
COMPLETED = re.compile(r"worker (\S+): task (\S+) completed \(attempt (\d+)\)")


async def record(context: TaskContext) -> Any:
    """Record this run, sleep ``payload["seconds"]``, return who ran it and at which attempt."""
    async with await psycopg.AsyncConnection.connect(os.environ[RECORD_ENV], autocommit=True) as conn:
        await conn.execute(
            "INSERT INTO fleet_runs (task_id, attempt, worker) VALUES (%s, %s, %s)",
            (context.task.task_id, context.attempt, context.worker),
        )
    await asyncio.sleep(float(context.payload.get("seconds", 0)))
    return {"attempt": context.attempt, "worker": context.worker}


HANDLERS: dict[str, Handler] = {"record": record}

#: Seconds the worker's model waits before each call (a child slow enough to kill mid-task).
CHILD_SECONDS_ENV = "FLEET_CHILD_SECONDS"
#: A file the worker's model waits for before each call (a child held running until the test lets it go).
CHILD_GATE_ENV = "FLEET_CHILD_GATE"
#: The background subagents of the fleet agent (parent and worker build the same ones).
SUBAGENTS = {"researcher": AgentSpec(description="researches one topic")}


class SlowModel:
    """A ``ScriptedModel`` that waits ``seconds`` before each call (so a test can kill its worker mid-run)."""

    def __init__(self, seconds: float, gate: str | None = None) -> None:
        """Wrap a fresh ``ScriptedModel``; with ``gate``, each call first waits (at most 120 s) for that file."""
        self.inner = ScriptedModel()
        self.name = self.inner.name
        self.seconds = seconds
        self.gate = gate

    async def stream(self, params: dict[str, Any]) -> AsyncIterator[Any]:
        """Sleep (and wait for the gate file), then the scripted model's events."""
        await asyncio.sleep(self.seconds)
        if self.gate is not None:
            for _ in range(1200):  # a hang guard, not a synchronisation: the test creates the file
                if os.path.exists(self.gate):
                    break
                await asyncio.sleep(0.1)
        async for event in self.inner.stream(params):
            yield event


def fleet_agent() -> Agent:
    """The parent agent as a worker knows it (``agent-ref worker --agent fleet_support:fleet_agent``)."""
    model = SlowModel(float(os.environ.get(CHILD_SECONDS_ENV, "0")), os.environ.get(CHILD_GATE_ENV))
    return Agent(model, subagents=SUBAGENTS, retry=RetryPolicy(max_attempts=1))


def create_runs_table(url: str) -> None:
    """Create ``fleet_runs`` in the schema ``url`` names."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RUNS_TABLE)


def runs(url: str) -> list[tuple[str, int, str]]:
    """Every run recorded: ``(task_id, attempt, worker)`` in order."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT task_id, attempt, worker FROM fleet_runs ORDER BY at").fetchall()
    return [(str(r[0]), int(r[1]), str(r[2])) for r in rows]


class WorkerProcess:
    """One ``agent-ref worker`` process named ``name``, its log (stderr) in ``log``; ``kill()`` is SIGKILL by pid."""

    def __init__(self, url: str, name: str, log: Path, *args: str, env: dict[str, str] | None = None) -> None:
        """Start it (the worker connects on its own; nothing is awaited here); ``env`` adds variables."""
        self.name = name
        self.log = log
        env = {
            **os.environ,
            **(env or {}),
            RECORD_ENV: url,
            "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        command = [sys.executable, "-m", "agent_ref.fleet.worker", "--db", url, "--name", name, "-v"]
        command += ["--handlers", "fleet_support:HANDLERS", *args]
        with log.open("w") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)

    def text(self) -> str:
        """What it logged so far."""
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL (our own child, by its pid), and reap it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self, timeout: float = 20.0) -> int:
        """SIGTERM, then wait (bounded) for it to exit; its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def completions(self) -> list[tuple[str, int]]:
        """The completions the queue accepted from this worker: ``(task_id, attempt)``."""
        return [(m[2], int(m[3])) for m in COMPLETED.finditer(self.text())]

    def logged_completions(self, count: int = 1, timeout: float = 30.0) -> list[tuple[str, int]]:
        """``completions()`` once ``count`` of them are logged (bounded).

        The worker logs a completion just after the queue accepted it, so a test that saw
        the task done in the database may read the log a moment before the line is there.
        """

        def logged() -> list[tuple[str, int]] | None:
            done = self.completions()
            return done if len(done) >= count else None

        found: list[tuple[str, int]] = wait_until(logged, timeout, f"{count} completion(s) in worker {self.name}'s log")
        return found


def wait_until(check: Any, timeout: float, what: str, every: float = 0.05) -> Any:
    """Call ``check()`` until it returns something true (returned), or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)
