"""Snapshots through the agent, `@tool(writes=...)` and `agent-ref undo` (spec agent-ref §22, cli RCU1)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore, default_tools
from agent_ref.cli.commands import main
from agent_ref.errors import ToolDefinitionError
from agent_ref.store.core import MemoryStore
from agent_ref.tools.core import ToolCallRequest, ToolContextBase, run_tools, tool
from agent_ref.tools.memory import memory_tool
from agent_ref.tools.snapshots import restore_files
from envelope import Emitter
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable

    from validating import ValidatedSink


def test_spec_RU1_b_agent_steps_recorded_and_undone_by_the_cli(
    tmp_path: Path, validated_sink: Callable[..., ValidatedSink], capsys: pytest.CaptureFixture[str]
) -> None:
    """[RU1-b] [RU1-d] [RCU1-a] Two runs change the memory; `agent-ref undo` goes back one run, then to 0."""
    db = tmp_path / "agents.db"
    store = SQLiteStore(db)
    notes = tmp_path / "mem" / "notes.md"
    agent = Agent(ScriptedModel(), tools=[*default_tools(), memory_tool(tmp_path / "mem")], store=store)
    first = validated_sink()
    asyncio.run(agent.run("Remember that I prefer tea.", first.append))
    after_first = notes.read_text()
    second = validated_sink()
    asyncio.run(agent.run("Please remember that my cat is Tom!", second.append))
    assert notes.read_text() == "# Notes\n- my cat is Tom\n- I prefer tea\n"
    assert [s for s, _ in asyncio.run(store.snapshots(agent.agent_uuid, 0))] == [1, 2]

    assert main(["undo", agent.agent_uuid, "--to-step", "1", "--db", str(db)]) == 0
    assert notes.read_text() == after_first
    err = capsys.readouterr().err
    assert (
        err == f"agent-ref: agent {agent.agent_uuid} files are as of step 1 (steps undone: 2; 1 restored, 0 removed)\n"
    )

    notes.write_text("mine now\n")  # someone edits the file: undo refuses, in one line, and writes nothing
    assert main(["undo", agent.agent_uuid, "--to-step", "0", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("agent-ref undo: error: ")
    assert "notes.md: changed since it was recorded" in err
    assert notes.read_text() == "mine now\n"
    notes.write_text(after_first)
    assert main(["undo", agent.agent_uuid, "--to-step", "0", "--db", str(db)]) == 0
    assert not notes.exists()

    assert main(["undo", agent.agent_uuid, "--to-step", "-1", "--db", str(db)]) == 2
    assert "to_step must be an integer from 0" in capsys.readouterr().err
    assert main(["undo", agent.agent_uuid, "--to-step", "0", "--db", str(tmp_path / "none.db")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_spec_RU1_f_a_tool_declaring_writes_is_recorded(tmp_path: Path) -> None:
    """[RU1-f] `@tool(writes=("path",))`: what the call wrote is recorded under the step, and undone."""

    @tool(writes=("path",))
    def save(path: str, text: str) -> str:
        """Write a file."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
        return "saved"

    target = tmp_path / "out" / "a.txt"
    store = MemoryStore()
    lines: list[bytes] = []

    async def send(group: list[bytes]) -> None:
        lines.extend(group)

    async def go() -> None:
        emitter = Emitter("agent-1")
        init = {"format": "json", "user_query": "q", "agent_uuid": "agent-1", "model": "m"}
        lines.extend(emitter.buffered("meta_init", json.dumps(init)))
        for step, text in enumerate(["one", "two"], start=1):
            call = ToolCallRequest(id=f"toolu_{step}", name="save", input={"path": str(target), "text": text})
            lines.extend(emitter.buffered("tool_call", json.dumps(call.input), id=call.id, name=call.name))
            base = ToolContextBase("agent-1", "run-1", store, step=step)
            done = await run_tools([call], {"save": save}, emitter, send, context=base)
            assert not done[0].is_error
        final = {"stop_reason": "end_turn", "total_steps": 2, "cumulative_usage": {}}
        lines.extend(emitter.buffered("meta_final", json.dumps(final)))
        assert_valid([*lines, b"[DONE]"])
        assert [s for s, _ in await store.snapshots("agent-1", 0)] == [1, 2]
        await restore_files(store, "agent-1", to_step=1)
        assert target.read_text() == "one"
        await restore_files(store, "agent-1", to_step=0)
        assert not (tmp_path / "out").exists()

    asyncio.run(go())
    with pytest.raises(ToolDefinitionError, match="writes names 'nope', not a parameter"):
        tool(writes=("nope",))(save.fn)  # type: ignore[arg-type]
