"""A process that runs (or continues) one checkpointed agent run, for the kill -9 tests (spec/agent-ref.md §CK1).

``python checkpoint_process.py run STORE AGENT PROMPT --calls FILE --entered FILE --hold tool|model``
runs ``PROMPT`` with checkpoints on, a 1-second lease, and a ``note`` tool that appends its
``text`` to ``--calls`` (one line per call, the side effect the tests count). It *holds*,
touching ``--entered`` first, either in the ``note`` call whose text is ``hold`` (``--hold
tool``) or in the model call after the tools' results (``--hold model``: between steps), for
up to a minute: the test kills it with SIGKILL meanwhile.

``python checkpoint_process.py recover STORE AGENT --calls FILE`` waits (bounded) for the
dead owner's lease to run out, then ``Agent.recover`` continues the run; the continuation's
lines go to stdout, one per line. ``STORE`` is a SQLite path or a ``postgresql://`` URL.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_ref import Agent, ScriptedModel, SQLiteStore
from agent_ref.tools.core import Tool, tool

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agent_ref.store.core import Store

#: Bound on every wait of this process (seconds).
HOLD_FOR = 60.0
LEASE = 1.0


def note_tools(calls: Path, entered: Path | None, hold: str | None) -> list[Tool]:
    async def note(text: str) -> str:
        """Write a note.

        Args:
            text: the note.
        """
        with calls.open("a", encoding="utf-8") as out:
            out.write(text + "\n")
            out.flush()
            os.fsync(out.fileno())
        if hold == "tool" and text == "hold" and entered is not None:
            entered.touch()
            await asyncio.sleep(HOLD_FOR)
        return f"noted {text}"

    return [tool(note)]


class Holding(ScriptedModel):
    """The scripted model, holding the call made after tool results (the next step) when asked."""

    def __init__(self, entered: Path | None, hold: str | None) -> None:
        super().__init__()
        self.entered = entered
        self.hold = hold

    async def stream(self, params: dict[str, Any]) -> AsyncIterator[Any]:
        messages = params.get("messages", [])
        last = json.dumps(messages[-1].get("content")) if messages else ""
        if self.hold == "model" and "tool_result" in last and self.entered is not None:
            self.entered.touch()
            await asyncio.sleep(HOLD_FOR)
        async for event in super().stream(params):
            yield event


def _store(where: str) -> Store:
    if where.startswith("postgresql://"):
        from agent_ref.store.postgres import PostgresStore

        return PostgresStore(where)
    return SQLiteStore(where)


def _write(line: bytes) -> None:
    sys.stdout.buffer.write(line + b"\n")
    sys.stdout.buffer.flush()


async def _main(args: argparse.Namespace) -> int:
    store = _store(args.store)
    hold = getattr(args, "hold", None)
    entered = getattr(args, "entered", None)
    tools = note_tools(args.calls, entered, hold)
    try:
        if args.command == "run":
            agent = Agent(
                Holding(entered, hold),
                tools=tools,
                store=store,
                agent_uuid=args.agent,
                checkpoints=True,
                lease_seconds=LEASE,
            )
            await agent.run(args.prompt, _write)
            return 0
        agent = await Agent.load(args.agent, store, ScriptedModel(), tools=tools, checkpoints=True)
        deadline = time.monotonic() + HOLD_FOR
        while agent.lease_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            await agent.reload()
        result = await agent.recover(_write)
        sys.stderr.write(f"recovered: {result.stop_reason if result is not None else None}\n")
        return 0
    finally:
        close = getattr(store, "aclose", None)
        if close is not None:
            await close()


def main() -> int:
    """See the module docstring."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("store")
    run.add_argument("agent")
    run.add_argument("prompt")
    run.add_argument("--calls", type=Path, required=True)
    run.add_argument("--entered", type=Path, required=True)
    run.add_argument("--hold", choices=("tool", "model"), required=True)
    recover = sub.add_parser("recover")
    recover.add_argument("store")
    recover.add_argument("agent")
    recover.add_argument("--calls", type=Path, required=True)
    return asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
