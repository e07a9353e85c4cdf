"""A process that claims a paused agent's resume and then stops answering, for the kill -9 tests of [R10.2-c].

``python dead_owner_process.py STORE AGENT RESULTS READY`` loads the agent from ``STORE``
(a SQLite path or a ``postgresql://`` URL), resumes it with the JSON ``RESULTS``, and, at
the first line of the resume (the claim is stored by then), touches ``READY`` and blocks
for up to a minute: the test kills it with SIGKILL meanwhile, leaving the claim and a
lease of 30 s that nobody renews.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from agent_ref import Agent, ScriptedModel, SQLiteStore
from agent_ref.tools.demo import default_tools

if TYPE_CHECKING:
    from agent_ref.store.core import Store

#: Bound on the hold (seconds): the test kills the process long before.
HOLD_FOR = 60.0


def _store(where: str) -> Store:
    if where.startswith("postgresql://"):
        from agent_ref.store.postgres import PostgresStore

        return PostgresStore(where)
    return SQLiteStore(where)


async def main(where: str, agent_uuid: str, results: str, ready: Path) -> None:
    agent = await Agent.load(agent_uuid, _store(where), ScriptedModel(), tools=default_tools())

    def sink(line: bytes) -> None:
        del line
        ready.touch()
        time.sleep(HOLD_FOR)  # blocks the loop: no heartbeat renews the lease

    await agent.continue_with_tool_results(json.loads(results), sink)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
