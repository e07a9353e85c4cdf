"""ToolContext and progress through a real agent run, the run log and the pretty view (spec §2.6).

Every response these tests make is validated strictly by the autouse tee
(tests/agent_ref_validating.py).
"""

from __future__ import annotations

import asyncio
import io
import json
from typing import TYPE_CHECKING, Any

import agent_ref
from agent_ref import Agent, ScriptedModel, SQLiteStore, ToolContext, tool
from agent_ref.cli.commands import PrettyPrinter, main
from agent_ref.tools.context import progress_note
from agent_ref_support import drop, envelopes, fast_retry, run

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

PROMPT = "What is 6 * 7?"
seen: list[tuple[str, str, str | None]] = []


@tool
async def calculator(expression: str, ctx: ToolContext) -> str:
    """Evaluate an arithmetic expression, reporting progress.

    Args:
        expression: The expression.
        ctx: Never in the schema.
    """
    seen.append((ctx.agent_uuid, ctx.run_id, type(ctx.store).__name__))
    ctx.progress("parsing", 0.25)
    await asyncio.sleep(0.3)  # past the progress interval, so the second report is its own line
    ctx.progress("evaluating", 0.75)
    await asyncio.sleep(0.01)
    return "42" if expression else "nothing to evaluate"


def _progress(lines: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for env in envelopes(lines):
        if env["type"] == "meta_status":
            data = json.loads(env["delta"]) if env.get("delta") else None
            if isinstance(data, dict) and data.get("kind") == "tool_progress":
                out.append(data)
    return out


def test_r2_6_b_a_real_runs_tool_gets_its_context_and_its_progress_is_streamed(tmp_path: Path) -> None:
    """The tool step gives the tool the agent, run and store; progress lines are in the stream [R2.6-a] [R2.6-b]."""
    seen.clear()
    store = SQLiteStore(tmp_path / "agent-ref.db")
    agent = Agent(ScriptedModel(), tools=[calculator], store=store, retry=fast_retry())
    lines: list[bytes] = []
    result = run(agent.run(PROMPT, lines.append))
    assert result.stop_reason == "end_turn"
    assert seen == [(agent.agent_uuid, result.run_id, "SQLiteStore")]
    found = _progress(lines)
    assert [(p["name"], p["message"], p["fraction"]) for p in found] == [
        ("calculator", "parsing", 0.25),
        ("calculator", "evaluating", 0.75),
    ]
    pretty = io.StringIO()
    printer = PrettyPrinter(pretty, color=False)
    for line in lines:
        printer(line)
    assert "… calculator: parsing (25%)" in pretty.getvalue()
    assert "error: tool_progress" not in pretty.getvalue()


def test_r2_6_b_agent_ref_log_pretty_shows_progress_as_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``agent-ref log --pretty`` reads the run back and shows progress as a note, not an error [R2.6-b]."""
    db = tmp_path / "agent-ref.db"
    agent = Agent(ScriptedModel(), tools=[calculator], store=SQLiteStore(db), retry=fast_retry())
    result = run(agent.run(PROMPT, drop))
    assert main(["log", result.run_id, "--db", str(db), "--pretty"]) == 0
    out = capsys.readouterr().out
    assert "… calculator: evaluating (75%)" in out
    assert "error:" not in out


def test_progress_note_and_exports() -> None:
    """The note's shape; the new names are public [R2.6-b]."""
    assert progress_note({"name": "fetch", "message": "reading"}) == "fetch: reading"
    assert progress_note({"name": "fetch", "message": "reading", "fraction": 0.5}) == "fetch: reading (50%)"
    for name in ("ToolContext", "ToolContextBase", "ToolProgress", "HookMatcher"):
        assert name in agent_ref.__all__
        assert getattr(agent_ref, name).__name__ == name
