"""A server process on PostgreSQL: ``python serve_pg.py URL [--gate FILE] [--lease SECONDS]``.

Serves ``create_app`` on 127.0.0.1 port 0 with a ``PostgresStore`` and a
``PostgresJournal`` on URL, as ``agent-ref serve --db postgresql://...`` is to, and
prints its URL on stdout. With ``--gate``, the ``calculator`` tool waits until FILE
exists (at most 60 s), so a test can kill the process in the middle of a run. The rest is
shared with ``tests/server/serve_for_test.py`` in ``tests/serve_launcher.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for serve_launcher

from agent_ref.store.postgres import PostgresJournal, PostgresStore
from serve_launcher import launch, parser


def main() -> None:
    """Parse the arguments and serve until stopped."""
    arguments = parser("url", "serve the scripted agent on PostgreSQL")
    arguments.add_argument("--lease", type=float, default=30.0, help="the lease of a running agent (seconds)")
    args = arguments.parse_args()
    launch(
        store=PostgresStore(args.url),
        journal=PostgresJournal(args.url),
        gate=args.gate,
        agent_config={"lease_seconds": args.lease},
    )


if __name__ == "__main__":
    main()
