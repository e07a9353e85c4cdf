"""A checkpointed run that kills itself with SIGKILL right after streaming its ``KILL_AT``-th line ([CK1.3-c]).

``python checkpoint_window_process.py DB AGENT PROMPT CALLS OUT KILL_AT`` runs ``PROMPT``
with checkpoints on and the ``note`` tool (not idempotent; it appends its text to
``CALLS``). Each line the run streams is written to ``OUT`` and flushed to the kernel
before the next; once line ``KILL_AT`` (1-based) is written the process kills itself, so
``OUT`` holds exactly what a client read. ``KILL_AT`` 0: never (the whole run).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from agent_ref import Agent, ScriptedModel, SQLiteStore
from faults.checkpoint_process import note_tools


async def main(db: str, agent_uuid: str, prompt: str, calls: Path, out: Path, kill_at: int) -> None:
    agent = Agent(
        ScriptedModel(),
        tools=note_tools(calls, None, None),
        store=SQLiteStore(db),
        agent_uuid=agent_uuid,
        checkpoints=True,
    )
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    sent = 0

    def sink(line: bytes) -> None:
        nonlocal sent
        os.write(fd, line + b"\n")
        sent += 1
        if sent == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    await agent.run(prompt, sink)


if __name__ == "__main__":
    db_, agent_, prompt_, calls_, out_, kill_ = sys.argv[1:7]
    asyncio.run(main(db_, agent_, prompt_, Path(calls_), Path(out_), int(kill_)))
