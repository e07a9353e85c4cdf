"""A server process for the kill-and-restart test: ``python serve_for_test.py DB [--gate FILE]``.

Serves ``create_app`` on 127.0.0.1 port 0 with a SQLite store and a file journal beside
it, exactly as ``agent-ref serve`` does, and prints its URL on stdout. With ``--gate``,
the ``calculator`` tool waits until FILE exists (at most 60 s), so the test can kill the
process while a run is in the middle of a step.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from agent_ref import ScriptedModel, SQLiteStore, tool
from agent_ref.demo_tools import confirm, evaluate
from agent_ref.server import create_app, serve
from agent_ref.server_streams import FileJournal


def main() -> None:
    """Parse the arguments and serve until killed."""
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("--gate", default=None)
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
        store=SQLiteStore(args.db),
        model_factory=ScriptedModel,
        tools=[calculator, confirm],
        journal=FileJournal(f"{args.db}.streams"),
    )

    def ready(url: str) -> None:
        sys.stdout.write(url + "\n")
        sys.stdout.flush()

    serve(app, "127.0.0.1", 0, ready=ready)


if __name__ == "__main__":
    main()
