"""Two stores that open the same new SQLite file at once: one save wins, the other conflicts.

Switching a new file to WAL needs it to itself, and SQLite answers "database is locked"
at once (no busy timeout) while another connection is preparing it: two stores starting
together on a fresh database met that as a foreign ``sqlite3.OperationalError`` instead of
the ``ConflictError`` of [P1.2-a] (seen in CI; about 1 run in 11 on this machine).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING

from agent_ref.store.core import SQLiteStore
from agent_ref.store.state import AgentState

if TYPE_CHECKING:
    from pathlib import Path


def test_spec_scaleout_1_2_a_two_stores_preparing_one_new_file_never_see_a_lock(tmp_path: Path) -> None:
    outcomes: Counter[str] = Counter()

    async def race(path: Path) -> None:
        a, b = SQLiteStore(path), SQLiteStore(path)
        first, second = (AgentState(agent_uuid="agent-1", model="scripted") for _ in range(2))
        both = await asyncio.gather(a.save(first), b.save(second), return_exceptions=True)
        outcomes.update(type(o).__name__ for o in both)

    for attempt in range(120):  # one fresh file each: the race is in preparing it
        asyncio.run(race(tmp_path / f"agents-{attempt}.db"))
    assert outcomes == Counter({"NoneType": 120, "ConflictError": 120})
