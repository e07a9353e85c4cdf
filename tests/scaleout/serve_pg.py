"""A server process on PostgreSQL: ``python serve_pg.py URL [--gate FILE] [--lease SECONDS]``.

Serves ``create_app`` on 127.0.0.1 port 0 with a ``PostgresStore`` and a
``PostgresJournal`` on URL, as ``agent-ref serve --db postgresql://...`` is to, and
prints its URL on stdout. With ``--gate``, the ``calculator`` tool waits until FILE
exists (at most 60 s), so a test can kill the process in the middle of a run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from agent_ref import ScriptedModel, tool
from agent_ref.demo_tools import confirm, evaluate
from agent_ref.server import create_app, serve
from agent_ref.store_pg import PostgresJournal, PostgresStore


def main() -> None:
    """Parse the arguments and serve until stopped."""
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--gate", default=None)
    parser.add_argument("--lease", type=float, default=30.0)
    args = parser.parse_args()
    gate = Path(args.gate) if args.gate else None

    @tool(name="calculator")
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: The expression.
        """
        deadline = time.monotonic() + 60
        while gate is not None and not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return str(evaluate(expression))

    app = create_app(
        store=PostgresStore(args.url),
        model_factory=ScriptedModel,
        tools=[calculator, confirm],
        agent_config={"lease_seconds": args.lease},
        journal=PostgresJournal(args.url),
    )

    def ready(url: str) -> None:
        sys.stdout.write(url + "\n")
        sys.stdout.flush()

    serve(app, "127.0.0.1", 0, ready=ready)


if __name__ == "__main__":
    main()
