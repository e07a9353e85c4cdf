"""Frontend-tool pause and stateless resume (spec/agent-ref.md §3, §4)."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import (
    Agent,
    ConflictError,
    MemoryStore,
    ScriptedModel,
    SQLiteStore,
    StateError,
    ToolResultsError,
    default_tools,
)
from agent_ref_support import assert_valid_responses, blocks, drop, fast_retry, meta, run, types
from cli_support import module_cli as _cli
from envelope import SSEReader, reconstruct
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

PROMPT = "Please confirm, then tell me what is 6 * 7"


def _agent(store: Any, **kw: Any) -> Agent:
    return Agent(ScriptedModel(), tools=default_tools(), store=store, retry=fast_retry(), **kw)


def test_spec_3_1_pause_saves_state_before_awaiting_is_sent() -> None:
    """State is stored before awaiting_frontend_tools is sent [R3.1-a] [R3.1-b] [R4.4-a] [R7.1-a]."""
    store = MemoryStore()
    seen: list[str] = []
    lines: list[bytes] = []
    agent = _agent(store)

    async def scenario() -> Any:
        async def sink(line: bytes) -> None:
            lines.append(line)
            if b'"awaiting_frontend_tools"' in line:
                stored = await store.load(agent.agent_uuid)
                assert stored is not None
                seen.append(stored.status)
                assert [p.tool_use_id for p in stored.pending_frontend] == [
                    json.loads(json.loads(line)["delta"])[0]["tool_use_id"]
                ]
                assert len(stored.pending_backend_results) == 1  # the calculator ran first (spec §3.1-b)

        return await agent.run(PROMPT, sink)

    result = asyncio.run(scenario())
    assert seen == ["awaiting_frontend_tools"]
    assert result.stop_reason == "awaiting_frontend_tools"
    # the step finishes before the pause (envelope-v1 [4.16-d])
    assert types(lines)[-4:] == ["tool_call", "tool_result", "meta_status", "awaiting_frontend_tools"]
    assert lines[-1] == b"[DONE]"  # spec §7.1-a: a paused response ends with [DONE] too
    assert "meta_final" not in types(lines)
    pending = meta(lines, "awaiting_frontend_tools")
    assert [p["name"] for p in pending] == ["confirm"]  # type: ignore[index]
    assert [p.name for p in result.pending_frontend_tools] == ["confirm"]


def test_spec_3_3_resume_in_a_fresh_agent_continues_at_the_saved_step() -> None:
    """Resume from the store alone [R3.2-a] [R3.3-a] [R7.2-a] [R4.1-a]."""
    store = MemoryStore()
    first: list[bytes] = []
    paused = run(_agent(store).run(PROMPT, first.append))
    (call,) = paused.pending_frontend_tools

    async def resume() -> Any:
        agent = await Agent.load(paused.agent_uuid, store, ScriptedModel(), tools=default_tools())
        return agent, await agent.continue_with_tool_results(
            [{"tool_use_id": call.tool_use_id, "content": "yes"}], second.append
        )

    second: list[bytes] = []
    agent, result = asyncio.run(resume())
    assert result.stop_reason == "end_turn"
    assert result.run_id == paused.run_id
    init = meta(second, "meta_init")
    assert init["resume"] == {"step": 2, "response": 1, "tool_use_ids": [call.tool_use_id]}  # spec §7.2
    assert init["agent_uuid"] == paused.agent_uuid
    assert types(second)[:2] == ["meta_init", "tool_result"]
    assert second[-1] == b"[DONE]"
    assert "42" in result.final_text
    assert "You confirmed" in result.final_text
    assert meta(second, "meta_final")["total_steps"] == 2
    # the API context: user, assistant(2 tool_use), user(2 results in tool_use order), assistant
    messages = agent.state.messages
    uses = [b["id"] for b in messages[1]["content"] if b["type"] == "tool_use"]
    assert [b["tool_use_id"] for b in messages[2]["content"]] == uses
    # the run log holds both responses, in order, and each reconstructs
    log = asyncio.run(store.run_log(paused.run_id))
    assert log == first + second
    assert asyncio.run(store.run_responses(paused.run_id)) == [first, second]
    assert assert_valid_responses(log) == [first, second]
    runs = asyncio.run(store.runs(paused.agent_uuid))
    assert [r.stop_reason for r in runs] == ["end_turn"]


@pytest.mark.parametrize(
    ("results", "match"),
    [
        ([], "missing results"),
        ([{"tool_use_id": "nope", "content": "x"}], "not pending"),
        ("DUP", "more than once"),
        ("EXTRA", "not pending"),
        ([{"content": "x"}], "tool_use_id"),
        ("BADFLAG", "is_error"),
    ],
)
def test_spec_3_3_a_ids_must_be_exactly_the_pending_set(results: Any, match: str) -> None:
    """Exactly the pending ids, else an error and no change [R3.3-a]."""
    store = MemoryStore()
    paused = run(_agent(store).run(PROMPT, drop))
    tid = paused.pending_frontend_tools[0].tool_use_id
    if results == "DUP":
        results = [{"tool_use_id": tid, "content": "a"}, {"tool_use_id": tid, "content": "b"}]
    elif results == "EXTRA":
        results = [{"tool_use_id": tid, "content": "a"}, {"tool_use_id": "other", "content": "b"}]
    elif results == "BADFLAG":
        results = [{"tool_use_id": tid, "content": "a", "is_error": "yes"}]
    before = asyncio.run(store.load(paused.agent_uuid))

    async def attempt() -> None:
        agent = await Agent.load(paused.agent_uuid, store, ScriptedModel(), tools=default_tools())
        await agent.continue_with_tool_results(results, sent.append)

    sent: list[bytes] = []
    with pytest.raises(ToolResultsError, match=match):
        asyncio.run(attempt())
    assert sent == []
    assert asyncio.run(store.load(paused.agent_uuid)) == before  # nothing changed


def test_spec_3_3_run_while_paused_and_resume_when_not_paused_are_refused() -> None:
    """Misuse is refused [R3.3-a]."""
    store = MemoryStore()
    agent = _agent(store)
    run(agent.run(PROMPT, drop))
    with pytest.raises(StateError, match="waiting for frontend tool results"):
        run(agent.run("hello", drop))
    done = _agent(MemoryStore())
    run(done.run("hello", drop))
    with pytest.raises(StateError, match="not waiting"):
        run(done.continue_with_tool_results([], drop))


def test_spec_4_3_concurrent_resume_exactly_one_wins(tmp_path: Path) -> None:
    """Two concurrent resumes on one SQLite file: one wins [R4.3-a] [R4.2-a]."""
    db = tmp_path / "agents.db"
    paused = run(_agent(SQLiteStore(db)).run(PROMPT, drop))
    tid = paused.pending_frontend_tools[0].tool_use_id
    outputs: list[list[bytes]] = [[], []]

    async def both() -> list[Any]:
        # Both load the paused state first (as two server processes would), then both resume;
        # loading inside the race let a fast winner finish before the other loaded.
        agents = [
            await Agent.load(paused.agent_uuid, SQLiteStore(db), ScriptedModel(), tools=default_tools())
            for _ in range(2)
        ]
        return await asyncio.gather(
            *(
                a.continue_with_tool_results([{"tool_use_id": tid, "content": "yes"}], outputs[i].append)
                for i, a in enumerate(agents)
            ),
            return_exceptions=True,
        )

    results = asyncio.run(both())
    conflicts = [r for r in results if isinstance(r, ConflictError)]
    wins = [r for r in results if not isinstance(r, BaseException)]
    assert len(conflicts) == 1, results
    assert len(wins) == 1, results
    assert "another process" in str(conflicts[0])
    loser = results.index(conflicts[0])
    assert outputs[loser] == []  # the loser sent nothing
    runs = asyncio.run(SQLiteStore(db).runs(paused.agent_uuid))
    assert len(runs) == 1  # applied once
    stored = asyncio.run(SQLiteStore(db).load(paused.agent_uuid))
    assert stored is not None
    assert stored.status == "idle"
    results_in_history = [
        b for m in stored.messages if m["role"] == "user" for b in m["content"] if b.get("tool_use_id") == tid
    ]
    assert len(results_in_history) == 1


def _sse_lines(stdout: str) -> list[bytes]:
    reader = SSEReader()
    events = reader.feed(stdout.encode())
    reader.close()
    return [e.data.encode() for e in events]


def test_spec_3_2_pause_in_one_process_resume_in_another(tmp_path: Path) -> None:
    """Pause and resume in separate processes via the CLI; log per response [R3.2-a] [R9.1-a] [R9.1-b] [R9.2-a] [R4.1-a]."""
    db = tmp_path / "shared.db"
    first = _cli("run", PROMPT, "--db", str(db), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    lines = _sse_lines(first.stdout)
    assert_valid(lines)
    # spec §9.1-b: the run id and the agent are on stderr from the start
    init = meta(lines, "meta_init")
    assert first.stderr.startswith(f"agent-ref: started run {init['run_id']} (agent {init['agent_uuid']})\n")
    assert lines[-1] == b"[DONE]"
    pending = meta(lines, "awaiting_frontend_tools")
    agent_uuid = meta(lines, "meta_init")["agent_uuid"]
    assert f"-m agent_ref resume {agent_uuid}" in first.stderr  # RC11-d: run as python -m agent_ref
    assert "Traceback" not in first.stderr
    results = json.dumps([{"tool_use_id": pending[0]["tool_use_id"], "content": "no"}])  # type: ignore[index]
    second = _cli("resume", agent_uuid, "--db", str(db), "--results", "-", stdin=results, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    lines2 = _sse_lines(second.stdout)
    assert_valid(lines2)
    assert meta(lines2, "meta_init")["resume"]["step"] == 2
    rebuilt = blocks(lines2)
    assert rebuilt[1]["type"] == "tool_result"
    assert rebuilt[1]["content"] == "no"
    assert "You declined" in [b for b in rebuilt if b["type"] == "text"][-1]["content"]
    assert meta(lines2, "meta_final")["stop_reason"] == "end_turn"
    # a second resume is refused: exit 2, one line, no traceback
    again = _cli("resume", agent_uuid, "--db", str(db), "--results", "-", stdin=results, cwd=tmp_path)
    assert again.returncode == 2
    assert "not waiting" in again.stderr
    assert "Traceback" not in again.stderr
    assert again.stdout == ""
    # spec §9.2-a: the log command prints the whole run, its responses back to back, each a
    # complete stream ending with [DONE]; --response N (the wire's index, 0 the first) prints one.
    run_id = meta(lines, "meta_init")["run_id"]
    log = _cli("log", run_id, "--db", str(db), cwd=tmp_path)
    assert log.returncode == 0, log.stderr
    assert assert_valid_responses(_sse_lines(log.stdout)) == [lines, lines2]
    for n, expected in ((0, lines), (1, lines2)):
        one = _cli("log", run_id, "--db", str(db), "--response", str(n), cwd=tmp_path)
        assert one.returncode == 0, one.stderr
        assert_valid(_sse_lines(one.stdout))
        assert _sse_lines(one.stdout) == expected
    beyond = _cli("log", run_id, "--db", str(db), "--response", "2", cwd=tmp_path)
    assert beyond.returncode == 2
    assert "it has 2 responses" in beyond.stderr
    assert beyond.stdout == ""
    assert reconstruct(lines2).done


def test_spec_7_3_a_every_meta_init_carries_the_run_id() -> None:
    """run_id in meta_init: the first response, the resumed one, an abandon's; equal to meta_final's [R7.3-a]."""
    store = MemoryStore()
    first: list[bytes] = []
    paused = run(_agent(store).run(PROMPT, first.append))
    assert meta(first, "meta_init")["run_id"] == paused.run_id
    (call,) = paused.pending_frontend_tools
    second: list[bytes] = []

    async def resume() -> Any:
        agent = await Agent.load(paused.agent_uuid, store, ScriptedModel(), tools=default_tools())
        return await agent.continue_with_tool_results(
            [{"tool_use_id": call.tool_use_id, "content": "yes"}], second.append
        )

    done = asyncio.run(resume())
    assert meta(second, "meta_init")["run_id"] == paused.run_id == done.run_id
    assert meta(second, "meta_final")["run_id"] == paused.run_id
    again = run(_agent(store).run(PROMPT, drop))
    closing: list[bytes] = []

    async def abandon() -> Any:
        agent = await Agent.load(again.agent_uuid, store, ScriptedModel(), tools=default_tools())
        return await agent.abandon(closing.append)

    asyncio.run(abandon())
    assert meta(closing, "meta_init")["run_id"] == again.run_id != paused.run_id
