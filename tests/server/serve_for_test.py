"""A server process for the kill-and-restart test: ``python serve_for_test.py DB [--gate FILE]``.

Serves ``create_app`` on 127.0.0.1 port 0 with a SQLite store and a file journal beside
it, exactly as ``agent-ref serve`` does, and prints its URL on stdout. With ``--gate``,
the ``calculator`` tool waits until FILE exists (at most 60 s), so the test can kill the
process while a run is in the middle of a step. The rest is shared with
``tests/scaleout/serve_pg.py`` in ``tests/serve_launcher.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for serve_launcher

from agent_ref import SQLiteStore
from agent_ref.server.streams import FileJournal
from serve_launcher import launch, parser


def main() -> None:
    """Parse the arguments and serve until killed."""
    args = parser("db", "serve the scripted agent on SQLite").parse_args()
    launch(store=SQLiteStore(args.db), journal=FileJournal(f"{args.db}.streams"), gate=args.gate)


if __name__ == "__main__":
    main()
