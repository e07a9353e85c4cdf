"""A server process in checkpoint mode, for the kill -9 tests of a server continuing a dead run (spec server §CN).

``python checkpoint_serve_process.py DB --calls FILE [--entered FILE --hold tool|model] [--gate FILE] [--lease S]``
serves ``create_app`` on 127.0.0.1 port 0 with checkpoints on (as ``agent-ref serve
--checkpoints``: ``agent_config={"checkpoints": True}``), the store and journal ``serve``
uses for ``DB`` (a SQLite file and the file journal beside it, or PostgreSQL for both), a
lease of ``--lease`` seconds, and ``checkpoint_process.py``'s ``note`` tool (it appends
its text to ``--calls``: the side effect the tests count). Its URL goes to stdout once bound.

- ``--hold tool|model``: the process that will be killed holds (touching ``--entered``)
  in the ``note`` call whose text is ``hold``, or in the model call after tool results
  (between steps), as ``checkpoint_process.py`` does.
- ``--gate FILE``: the surviving process's model waits (at most a minute) until FILE
  exists before each call, so a test can watch the continuation while it is live.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the faults package

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import create_app, serve
from agent_ref.server.streams import FileJournal
from faults.checkpoint_process import HOLD_FOR, Holding, note_tools

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from agent_ref.models.core import Model
    from agent_ref.server.streams import Journal
    from agent_ref.store.core import Store


class Gated(ScriptedModel):
    """The scripted model, each call waiting (bounded) until ``gate`` exists."""

    def __init__(self, gate: Path) -> None:
        """See the class docstring."""
        super().__init__()
        self.gate = gate

    async def stream(self, params: dict[str, Any]) -> AsyncIterator[Any]:
        """See ``Model.stream``."""
        deadline = time.monotonic() + HOLD_FOR
        while not self.gate.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        async for event in super().stream(params):
            yield event


def _storage(db: str) -> tuple[Store, Journal]:
    if db.startswith("postgresql://"):
        from agent_ref.store.postgres import PostgresJournal, PostgresStore

        return PostgresStore(db), PostgresJournal(db)
    return SQLiteStore(db), FileJournal(f"{db}.streams")


def main() -> None:
    """Serve until killed or stopped."""
    parser = argparse.ArgumentParser(description="serve a checkpointed scripted agent")
    parser.add_argument("db")
    parser.add_argument("--calls", type=Path, required=True)
    parser.add_argument("--entered", type=Path, default=None)
    parser.add_argument("--hold", choices=("tool", "model"), default=None)
    parser.add_argument("--gate", type=Path, default=None)
    parser.add_argument("--lease", type=float, default=2.0)
    args = parser.parse_args()
    store, journal = _storage(args.db)

    def model() -> Model:
        if args.gate is not None:
            return Gated(args.gate)
        return Holding(args.entered, args.hold)

    app = create_app(
        store=store,
        model_factory=model,
        tools=note_tools(args.calls, args.entered, args.hold),
        journal=journal,
        agent_config={"checkpoints": True, "lease_seconds": args.lease},
    )

    def ready(url: str) -> None:
        sys.stdout.write(url + "\n")
        sys.stdout.flush()

    serve(app, "127.0.0.1", 0, ready=ready)


if __name__ == "__main__":
    main()
