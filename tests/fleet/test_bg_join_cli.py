"""``agent-ref tasks`` on an SQLite store, and its refusals (spec agent-ref [BJ1-a]).

An agent with the demo subagents runs a background task in this process and is stored in
an SQLite file; the command (its ``main``, as the installed script runs it) prints the
task as one JSON line, ended, with its result; ``--wait`` has no queue to wait on and
answers at once. A missing agent, a missing file and a bad ``--timeout`` are one-line
errors, exit 2. The parent's stream is checked by the strict validator. The PostgreSQL,
two-process join is ``tests/scaleout/test_bg_join_two_processes.py``.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref.cli.commands import main
from agent_ref.run.subagents import demo_subagents
from agent_ref.store.core import SQLiteStore
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path


def _stored(db: Path) -> str:
    async def go() -> str:
        agent = Agent(ScriptedModel(), tools=default_tools(), subagents=demo_subagents(), store=SQLiteStore(db))
        lines: list[bytes] = []
        await agent.run("Research tides in the background", lines.append)
        assert_valid(lines)
        return agent.agent_uuid

    return asyncio.run(go())


@pytest.mark.parametrize("wait", [(), ("--wait", "--timeout", "5")])
def test_bj1_a_tasks_prints_one_json_line_per_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wait: tuple[str, ...]
) -> None:
    """The stored in-process task: ended, its result, not on a queue; --wait without a queue returns [BJ1-a]."""
    db = tmp_path / "agents.db"
    agent = _stored(db)
    assert main(["tasks", agent, "--db", str(db), *wait]) == 0
    out = capsys.readouterr().out.splitlines()
    (task,) = [json.loads(line) for line in out]
    assert sorted(task) == ["agent", "queue", "result", "status", "subagent", "task_id"]
    assert (task["status"], task["queue"], task["subagent"]) == ("completed", False, "researcher")
    assert task["result"].startswith("Findings on tides")


def test_bj1_a_refusals_are_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No such agent, no such file, a timeout that is not positive: one line each, exit 2 [BJ1-a]."""
    db = tmp_path / "agents.db"
    _stored(db)
    cases = [
        (["tasks", "nobody", "--db", str(db)], f"agent nobody: error: not in {db}"),
        (["tasks", "nobody", "--db", str(tmp_path / "none.db")], "error: no such database"),
        (["tasks", "nobody", "--db", str(db), "--wait", "--timeout", "0"], "--timeout: error: 0 is not a positive"),
        (["tasks", "nobody", "--db", str(db), "--timeout", "inf"], "--timeout: error: inf is not a positive"),
    ]
    for argv, says in cases:
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert len(captured.err.splitlines()) == 1
        assert says in captured.err
