"""What the two test server launchers share: ``tests/server/serve_for_test.py`` (SQLite) and
``tests/scaleout/serve_pg.py`` (PostgreSQL) differ only in their store, journal and lease.

Owns: the launchers' arguments (the database, ``--gate``), the gated ``calculator`` tool,
and serving ``create_app`` on 127.0.0.1 port 0 with the URL printed on stdout once bound.
Does not own: the store or journal (each launcher makes its own), nor starting or stopping
the process (the tests that run it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_ref import ScriptedModel, tool
from agent_ref.server.app import create_app, serve
from agent_ref.tools.demo import confirm, evaluate

if TYPE_CHECKING:
    from agent_ref import Store, Tool
    from agent_ref.server.streams import Journal

#: How long a gated calculator waits for its gate file at most (seconds).
GATE_WAIT = 60


def parser(database: str, description: str) -> argparse.ArgumentParser:
    """The arguments every launcher takes: the database (``database`` names it) and ``--gate FILE``."""
    made = argparse.ArgumentParser(description=description)
    made.add_argument(database)
    made.add_argument("--gate", default=None, help="the calculator waits until FILE exists")
    return made


def gated_calculator(gate: Path | None) -> Tool:
    """A ``calculator`` that waits until ``gate`` exists (at most ``GATE_WAIT`` s), so a test can
    kill the process while a run is in the middle of a step; ``None``: no wait."""

    @tool(name="calculator")
    def calculator(expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: The expression.
        """
        deadline = time.monotonic() + GATE_WAIT
        while gate is not None and not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return str(evaluate(expression))

    return calculator


def launch(*, store: Store, journal: Journal, gate: str | None, agent_config: dict[str, Any] | None = None) -> None:
    """Serve the scripted agent with ``store`` and ``journal`` until the process is stopped."""
    app = create_app(
        store=store,
        model_factory=ScriptedModel,
        tools=[gated_calculator(Path(gate) if gate else None), confirm],
        journal=journal,
        agent_config=agent_config,
    )

    def ready(url: str) -> None:
        sys.stdout.write(url + "\n")
        sys.stdout.flush()

    serve(app, "127.0.0.1", 0, ready=ready)
