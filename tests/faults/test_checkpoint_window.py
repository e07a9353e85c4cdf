"""A tool result is checkpointed before it is streamed: killed at any line, stream and checkpoint agree ([CK1.3-c]).

[CK1.3-c]

Issue 38 case 6. A checkpointed run (``checkpoint_window_process.py``, a real process)
kills itself with SIGKILL right after the line Hypothesis chooses. The run is then
recovered here (the dead owner is of this host, so at once, [R10.2-c]) and continued.
The property: every tool result the client had read before the kill is the result the
continued run's context holds, never "result unknown"; the continuation's stream is
strictly valid and the run ends. Before the fix a result was streamed while its save was
still on its way, and a kill right after its line lost it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent_ref import Agent, ScriptedModel, SQLiteStore
from agent_ref.run.checkpoints import UNKNOWN_RESULT
from faults.checkpoint_process import note_tools
from validating import assert_valid

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "checkpoint_window_process.py"
PROMPT = 'call note with {"text": "first"} and call note with {"text": "second"}'
#: Bound on one dying run (seconds).
WAIT = 60.0


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    return env


def _run(where: Path, kill_at: int) -> tuple[str, Path, list[bytes]]:
    """Run the process until it kills itself after line ``kill_at``; the agent, the database, the lines it sent."""
    where.mkdir(parents=True)
    agent, db, out = str(uuid.uuid4()), where / "agents.db", where / "sent.jsonl"
    args = [sys.executable, str(SCRIPT), str(db), agent, PROMPT, str(where / "calls.txt"), str(out), str(kill_at)]
    done = subprocess.run(args, env=_env(), capture_output=True, timeout=WAIT, check=False)
    assert done.returncode in (0, -9), done.stderr.decode()
    return agent, db, out.read_bytes().splitlines() if out.exists() else []


def _results_seen(lines: list[bytes]) -> dict[str, str]:
    """The tool results a client read whole: ``tool_use_id`` -> text (a result's lines end with ``final``)."""
    parts: dict[str, list[str]] = {}
    whole: dict[str, str] = {}
    for line in lines:
        if line == b"[DONE]":
            continue
        env = json.loads(line)
        if env.get("type") != "tool_result":
            continue
        key = env["id"]
        parts.setdefault(key, []).append(env.get("delta", ""))
        if env.get("final"):
            whole[key] = "".join(parts[key])
    return whole


def _context_results(state: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for message in state.messages:
        content = message.get("content")
        if message.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                text = block.get("content")
                if not isinstance(text, str):  # text blocks
                    text = "\n".join(str(b.get("text", "")) for b in text or [] if isinstance(b, dict))
                out[block["tool_use_id"]] = text
    return out


#: The whole run's lines, from one run that is not killed (the same for every example: the scripted model).
_WHOLE: list[list[bytes]] = []


def _whole(tmp: Path) -> list[bytes]:
    if not _WHOLE:
        _, _, lines = _run(tmp / "whole", 0)
        assert lines[-1] == b"[DONE]"
        _WHOLE.append(lines)
    return _WHOLE[0]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@example(data=None)  # the line of the first tool result: the window of issue 38 case 6
def test_spec_ck1_3_c_killed_at_any_line_the_stream_and_the_checkpoint_agree(tmp_path_factory: Any, data: Any) -> None:
    """[CK1.3-c]: after a kill at any line, every result the client read is the one the model continues with."""
    tmp = tmp_path_factory.mktemp("window")
    whole = _whole(tmp)
    if data is None:
        kill_at = next(i for i, line in enumerate(whole, 1) if b'"type":"tool_result"' in line)
    else:
        kill_at = data.draw(st.integers(min_value=1, max_value=len(whole) - 1), label="kill after line")
    agent_uuid, db, sent = _run(tmp / "killed", kill_at)
    assert len(sent) == kill_at, f"the process died after {len(sent)} lines, not {kill_at}"
    seen = _results_seen(sent)

    async def recover() -> tuple[Any, list[bytes]]:
        store = SQLiteStore(db)
        lines: list[bytes] = []
        agent = await Agent.load(
            agent_uuid, store, ScriptedModel(), tools=note_tools(tmp / "calls.txt", None, None), checkpoints=True
        )
        assert not agent.lease_alive()  # [R10.2-c]: its owner is a dead process of this host
        await agent.recover(lines.append)
        state = await store.load(agent_uuid)
        return state, lines

    state, continuation = asyncio.run(recover())
    assert state is not None
    if state.status == "running":
        raise AssertionError("the run was not recovered")
    context = _context_results(state)
    for tool_use_id, text in seen.items():
        assert context.get(tool_use_id) == text, (
            f"the client read {text!r} for {tool_use_id}; the model continues with {context.get(tool_use_id)!r}"
        )
        assert context[tool_use_id] != UNKNOWN_RESULT
    if continuation:
        assert_valid(continuation)
        assert continuation[-1] == b"[DONE]"
