"""The memory tool in a run (spec/agent-ref.md §18.5, spec/cli-agent-ref.md RC7).

The scripted model is taught to use it: "remember that X" views ``/memories`` then creates
or edits ``/memories/notes.md``; "what do you remember" reads it back. Every stream is
validated strictly (the ``validated_sink`` fixture, ``assert_valid`` for the CLI's).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_ref import Agent, ScriptedModel, SQLiteStore, default_tools
from agent_ref.tools.memory import memory_tool
from agent_ref_support import blocks, run, sse_lines
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable

    from validating import ValidatedSink

SCRIPT = Path(sys.executable).parent / "agent-ref"


def calls(lines: list[bytes]) -> list[dict[str, Any]]:
    return [b["input"] for b in blocks(lines) if b["type"] == "tool_call" and b["name"] == "memory"]


def final_text(lines: list[bytes]) -> str:
    return str([b for b in blocks(lines) if b["type"] == "text"][-1]["content"])


def test_spec_R18_5_a_the_scripted_model_remembers_and_recalls(
    tmp_path: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[R18.5-a] Remember (create, then str_replace), recall (view), across agents sharing one directory."""
    root = tmp_path / "memories"
    tools = [*default_tools(), memory_tool(root)]
    first = validated_sink()
    result = run(Agent(ScriptedModel(), tools=tools).run("Remember that I prefer tea.", first.append))
    assert result.stop_reason == "end_turn"
    assert calls(first) == [
        {"command": "view", "path": "/memories"},
        {"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\n- I prefer tea\n"},
    ]
    assert final_text(first) == "Noted. I will remember that I prefer tea."

    second = validated_sink()
    run(Agent(ScriptedModel(), tools=tools).run("Please remember that my cat is Tom!", second.append))
    assert [c["command"] for c in calls(second)] == ["view", "str_replace"]
    assert (root / "notes.md").read_text() == "# Notes\n- my cat is Tom\n- I prefer tea\n"

    third = validated_sink()
    run(Agent(ScriptedModel(), tools=tools).run("What do you remember?", third.append))
    assert calls(third) == [{"command": "view", "path": "/memories/notes.md"}]
    assert final_text(third) == "Here is what I remember: my cat is Tom; I prefer tea."


def test_spec_R18_5_a_recall_with_no_memories_and_a_failed_save(
    tmp_path: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[R18.5-a] Nothing remembered yet, and a save the tool refuses: both are answers, not crashes."""
    root = tmp_path / "memories"
    tools = [memory_tool(root)]
    sink = validated_sink()
    run(Agent(ScriptedModel(), tools=tools).run("What do you remember?", sink.append))
    assert final_text(sink).startswith("I do not remember anything yet (")
    assert "/memories/notes.md: no such file" in final_text(sink)
    (root / "notes.md").write_text("no heading here\n")
    sink = validated_sink()
    model = ScriptedModel()
    result = run(Agent(model, tools=tools).run("Remember that the sky is blue.", sink.append))
    assert result.stop_reason == "end_turn"
    answered = [
        block
        for message in model.requests[-1]["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [b.get("is_error", False) for b in answered] == [False, True]  # the model is told it failed
    results = [b for b in blocks(sink) if b["type"] == "tool_result"]
    assert results[-1]["content"].startswith("MemoryToolError: /memories/notes.md: old_str does not occur")
    assert final_text(sink).startswith("I could not save that: ")
    assert "old_str does not occur" in final_text(sink)
    assert (root / "notes.md").read_text() == "no heading here\n"


def test_spec_R18_5_a_without_the_tool_the_model_does_not_call_it(
    validated_sink: Callable[..., ValidatedSink],
) -> None:
    """[R18.5-a] Without a memory tool, "remember that" is an ordinary prompt (a greeting)."""
    sink = validated_sink()
    run(Agent(ScriptedModel(), tools=default_tools()).run("Remember that I prefer tea.", sink.append))
    assert calls(sink) == []
    assert final_text(sink).startswith("Hello!")


def test_spec_R18_5_a_memory_survives_a_pause_and_resume(
    tmp_path: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[R18.5-a] A stored agent loaded with the tool again reads what the first run wrote."""
    store = SQLiteStore(tmp_path / "db.sqlite")
    tools = [*default_tools(), memory_tool(tmp_path / "m")]
    sink = validated_sink()
    agent = Agent(ScriptedModel(), tools=tools, store=store)
    run(agent.run("Remember that the meeting is on Friday.", sink.append))
    again = validated_sink()
    loaded = run_load(agent.agent_uuid, store, tools)
    run(loaded.run("What do you remember?", again.append))
    assert final_text(again) == "Here is what I remember: the meeting is on Friday."


def run_load(uuid: str, store: SQLiteStore, tools: list[Any]) -> Agent:
    return asyncio.run(Agent.load(uuid, store, ScriptedModel(), tools=tools))


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
    )


def test_spec_RC7_a_agent_ref_run_memory_dir(tmp_path: Path) -> None:
    """[RC7-a] `agent-ref run --memory DIR` gives the model the memory tool over DIR (made when missing)."""
    saved = _cli("run", "--memory", "mem", "Remember that I prefer tea.", cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    assert_valid(sse_lines(saved.stdout))
    assert (tmp_path / "mem" / "notes.md").read_text() == "# Notes\n- I prefer tea\n"
    recalled = _cli("run", "--memory", "mem", "--pretty", "What do you remember?", cwd=tmp_path)
    assert recalled.returncode == 0, recalled.stderr
    assert "Here is what I remember: I prefer tea." in recalled.stdout
    without = _cli("run", "What do you remember?", cwd=tmp_path)
    assert without.returncode == 0
    assert '"name":"memory"' not in without.stdout


def test_spec_RC7_a_a_memory_path_that_is_a_file_is_exit_2(tmp_path: Path) -> None:
    """[RC7-a] --memory naming a file: one error line naming it, exit 2, no traceback."""
    (tmp_path / "afile").write_text("x")
    bad = _cli("run", "--memory", "afile", "hi", cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr == (
        "afile: error: is not a directory; the memory tool needs a directory; "
        "pass --memory a directory (it is made when missing)\n"
    )
    assert bad.stdout == ""
