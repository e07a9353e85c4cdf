"""``agent-ref tasks AGENT``: an agent's background tasks, polled or joined from outside (spec agent-ref [BJ1-a]).

Owns: the ``tasks`` subcommand (``add_tasks_command``, ``tasks_main``): one JSON line per
task of the stored agent (``fleet.joining.agent_tasks``); ``--wait`` blocks until every task
on the queue has ended, at most ``--timeout`` seconds, past which the tasks are printed as
they stand and the command fails saying which still run. Does not own: reading the tasks
(``fleet/joining.py``), the store (``--db`` is opened as every command opens it).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import msgspec

from .flags import CliError, add_store_options, check_db, formatter

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from ..store.core import Store

__all__ = ["DEFAULT_TIMEOUT", "add_tasks_command", "tasks_main"]

#: How long ``--wait`` waits unless ``--timeout`` says otherwise (seconds).
DEFAULT_TIMEOUT = 300.0


def add_tasks_command(sub: Any) -> None:
    """Register ``agent-ref tasks`` on the subcommands ``sub``."""
    p: argparse.ArgumentParser = sub.add_parser(
        "tasks",
        formatter_class=formatter,
        help="list an agent's background tasks as JSON lines, or wait for them",
        description=(
            "Print each background task of a stored agent as one JSON line: task_id, subagent, agent\n"
            "(the child's id), status, queue (runs on the task queue), and result once it has ended.\n"
            "--wait blocks until every task on the queue has ended (a PostgreSQL --db), at most --timeout."
        ),
        epilog=(
            "examples:\n"
            "  agent-ref tasks AGENT_UUID --db postgresql://agent@db/agents\n"
            "  agent-ref tasks AGENT_UUID --db postgresql://agent@db/agents --wait --timeout 60"
        ),
    )
    p.add_argument("agent", metavar="AGENT", help="the parent agent's uuid")
    p.add_argument("--wait", action="store_true", help="wait until every task on the queue has ended")
    p.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"the longest --wait waits (default: {DEFAULT_TIMEOUT:g})",
    )
    add_store_options(p)


def _open(db: str | Path) -> Store:
    """The store ``--db`` names, as every command opens it: a ``postgresql://`` URL or an SQLite file."""
    if isinstance(db, str) and db.startswith(("postgresql://", "postgres://")):
        from ..store.postgres import PostgresStore

        return PostgresStore(db)
    from ..store.core import SQLiteStore

    return SQLiteStore(db)


async def tasks_main(args: argparse.Namespace) -> int:
    """Run ``agent-ref tasks``; the exit status (0 listed or all ended, 1 ``--wait`` timed out).

    Raises:
        CliError: a ``--timeout`` that is not a positive number, an agent the store does not have.
    """
    from ..fleet.joining import ENDED, agent_tasks, join_tasks, queue_for

    if not args.timeout > 0 or args.timeout == float("inf"):
        raise CliError("--timeout", f"{args.timeout:g} is not a positive number of seconds", "pass e.g. --timeout 60")
    check_db(str(args.db), must_exist=True)
    store = _open(args.db)
    queue = queue_for(store)
    try:
        if args.wait:
            items = await join_tasks(store, args.agent, queue, args.timeout)
        else:
            items = await agent_tasks(store, args.agent, queue)
    finally:
        if queue is not None:
            await queue.aclose()
        closing = getattr(store, "aclose", None)
        if closing is not None:
            await closing()
    if items is None:
        raise CliError(f"agent {args.agent}", f"not in {args.db}", f"`agent-ref runs --db {args.db}` lists them")
    for item in items:
        sys.stdout.write(msgspec.json.encode(item).decode() + "\n")
    sys.stdout.flush()
    going = [i for i in items if i["queue"] and i["status"] not in ENDED]
    if args.wait and going:
        names = ", ".join(f"{i['task_id']} ({i['subagent']}, {i['status']})" for i in going)
        sys.stderr.write(
            f"agent-ref tasks: error: timed out after {args.timeout:g} s waiting for {names}; the tasks as they"
            " stand are on stdout; wait longer with --timeout\n"
        )
        return 1
    return 0
