"""A run paused through a child, resumed by another process on SQLite (spec/agent-ref.md §13.5-c).

Each step runs in a process of its own (``python -c``), so nothing survives in memory:
what the resume knows, it read from the database. The streams each process wrote are
validated strictly, and so is the stored recording.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agent_ref_support import sse_lines
from validating import assert_valid

SCRIPT = Path(sys.executable).parent / "agent-ref"

#: One process: run (or resume) the agent on the SQLite file, frame each line to stdout,
#: and print the result as JSON on stderr.
_PROCESS = """
import asyncio, json, sys
from agent_ref import Agent, ScriptedModel, SQLiteStore, default_tools
from agent_ref.run.subagents import demo_subagents
from envelope import frame

def sink(line):
    sys.stdout.buffer.write(frame(line))

async def main(db, what, arg):
    store = SQLiteStore(db)
    config = {"tools": default_tools(), "subagents": demo_subagents()}
    if what == "run":
        result = await Agent(ScriptedModel(), store=store, **config).run(arg, sink)
    else:
        uuid, results = arg.split(" ", 1)
        agent = await Agent.load(uuid, store, ScriptedModel(), **config)
        result = await agent.continue_with_tool_results(json.loads(results), sink)
    pending = [p.element() for p in result.pending_frontend_tools]
    print(json.dumps({"agent": result.agent_uuid, "run": result.run_id, "stop": result.stop_reason,
                      "text": result.final_text, "pending": pending}), file=sys.stderr)

asyncio.run(main(*sys.argv[1:]))
"""

PROMPT = "Research tides and volcanoes (confirm first) in parallel, then confirm"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}


def _process(*args: str, cwd: Path) -> tuple[list[bytes], dict[str, object]]:
    done = subprocess.run(
        [sys.executable, "-c", _PROCESS, *args], capture_output=True, cwd=cwd, env=_env(), timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr.decode()
    return sse_lines(done.stdout.decode()), json.loads(done.stderr.decode().strip().splitlines()[-1])


def test_spec_13_5_c_pause_in_one_process_resume_in_another(tmp_path: Path) -> None:
    """Run pauses on its own and a child's confirm; a second process resumes both from SQLite [R13.5-c]."""
    db = str(tmp_path / "agents.db")
    first, paused = _process(db, "run", PROMPT, cwd=tmp_path)
    assert_valid(first)
    assert paused["stop"] == "awaiting_frontend_tools"
    pending = paused["pending"]
    assert isinstance(pending, list)
    assert [("agent" in p) for p in pending] == [False, True]
    answers = json.dumps([{"tool_use_id": p["tool_use_id"], "content": "yes"} for p in pending])
    second, done = _process(db, "resume", f"{paused['agent']} {answers}", cwd=tmp_path)
    assert_valid(second)
    assert done["stop"] == "end_turn"
    assert str(done["text"]).startswith("You confirmed.")
    assert "You confirmed, so I went ahead" in str(done["text"])
    child = pending[1]["agent"]
    assert any(json.loads(line)["agent"] == child for line in second if line != b"[DONE]")
    log = subprocess.run(
        [str(SCRIPT), "log", str(paused["run"]), "--db", db], capture_output=True, text=True, env=_env(), check=False
    )
    assert log.returncode == 0, log.stderr
    assert_valid(sse_lines(log.stdout))
    assert sse_lines(log.stdout) == first + second


def test_spec_13_5_c_agent_ref_run_then_resume_through_a_child(tmp_path: Path) -> None:
    """`agent-ref run` pauses through a child; `agent-ref resume` in another process finishes it [R13.5-c]."""
    run = subprocess.run(
        [str(SCRIPT), "run", PROMPT], capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr
    first = sse_lines(run.stdout)
    assert_valid(first)
    (pause,) = [json.loads(x) for x in first if x != b"[DONE]" and json.loads(x)["type"] == "awaiting_frontend_tools"]
    pending = json.loads(pause["delta"])
    assert [("agent" in p) for p in pending] == [False, True]
    answers = json.dumps([{"tool_use_id": p["tool_use_id"], "content": "yes"} for p in pending])
    resume = subprocess.run(
        [str(SCRIPT), "resume", pause["agent"], "--results", "-"],
        input=answers,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=120,
        check=False,
    )
    assert resume.returncode == 0, resume.stderr
    second = sse_lines(resume.stdout)
    assert_valid(second)
    finals = [json.loads(x) for x in second if x != b"[DONE]" and json.loads(x)["type"] == "meta_final"]
    assert [json.loads(f["delta"])["stop_reason"] for f in finals] == ["end_turn", "end_turn"]
