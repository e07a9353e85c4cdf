"""Recovery of a run whose process died (issue 24 case 2; spec/server.md §8, spec/agent-ref.md §10.2-b).

A dead process leaves two things: the store's copy of its *claim* (a run saves only when
it claims the agent and when its response ends, agent-ref §4.4) and the journal of the
response it was sending, cut anywhere. These tests make both exactly: the agent runs
against a store that records every save, the claim is taken from there and written to
the server's database, and the first lines the run sent are written to the journal. The
server then starts on them, as after ``kill -9`` (``tests/faults/test_kill_*.py`` does
it with real processes).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import msgspec

from agent_ref import Agent, MemoryStore, ScriptedModel, SQLiteStore
from agent_ref.server.app import create_app
from agent_ref.server.streams import FileJournal
from agent_ref.store.state import AgentState, decode_state, encode_state
from agent_ref.tools.demo import default_tools
from server_support import data_lines, get, post, read_events, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from pathlib import Path

    from agent_ref.agent import Sink
    from agent_ref.store.core import LogBatch
    from agent_ref.store.state import RunRecord

CONFIRM = "Please confirm: delete the temp files"


class _Recording(MemoryStore):
    """A memory store that keeps a copy of every state saved (the claim is among them)."""

    def __init__(self) -> None:
        super().__init__()
        self.saved: list[bytes] = []

    async def save(self, state: AgentState, *, log: LogBatch | None = None, run: RunRecord | None = None) -> None:
        self.saved.append(encode_state(state))
        await super().save(state, log=log, run=run)


def _die_after(
    db: SQLiteStore,
    journal: FileJournal,
    agent_uuid: str,
    act: Callable[[Agent, Sink], Coroutine[Any, Any, Any]],
    sent: int,
    *,
    lease_left: float = 30.0,
) -> tuple[AgentState, list[bytes]]:
    """Leave in ``db`` and ``journal`` what a process killed after sending ``sent`` lines of ``act`` leaves.

    Returns:
        The claim as stored, and every line the run would have sent.
    """
    stored = asyncio.run(db.load(agent_uuid))
    recording = _Recording()
    if stored is not None:
        asyncio.run(recording.save(msgspec.structs.replace(stored, version=0)))
    agent = (
        asyncio.run(Agent.load(agent_uuid, recording, ScriptedModel(), tools=default_tools()))
        if stored is not None
        else Agent(ScriptedModel(), tools=default_tools(), store=recording, agent_uuid=agent_uuid)
    )
    lines: list[bytes] = []
    asyncio.run(act(agent, lines.append))
    claim = decode_state(recording.saved[1 if stored is not None else 0])
    assert claim.status == "running"
    assert claim.run is not None
    claim.version = stored.version if stored is not None else 0
    claim.lease_expires_at = time.time() + lease_left  # a restart within the lease: the journal says it died
    asyncio.run(db.save(claim))
    for line in lines[:sent]:
        journal.append(claim.run.run_id, claim.run.responses, line)
    return claim, lines


def _envelopes(lines: list[bytes], kind: str) -> list[Any]:
    return [json.loads(json.loads(x)["delta"]) for x in lines if x != b"[DONE]" and json.loads(x)["type"] == kind]


def _no_orphans(messages: list[dict[str, Any]]) -> None:
    """Every ``tool_use`` is answered by a ``tool_result`` in the next message (what the API requires)."""
    for i, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        uses = {b["id"] for b in content if b.get("type") == "tool_use"}
        if not uses:
            continue
        assert i + 1 < len(messages), f"tool_use {uses} has no answer"
        answer = messages[i + 1].get("content")
        assert isinstance(answer, list)
        answered = {b.get("tool_use_id") for b in answer if b.get("type") == "tool_result"}
        assert uses <= answered, f"tool_use {uses - answered} has no tool_result"


def _user_texts(message: dict[str, Any]) -> list[str]:
    content = message["content"]
    if isinstance(content, str):
        return [content]
    return [b["text"] for b in content if b.get("type") == "text"]


def test_spec_server_8_1_b_a_dead_resume_is_put_back_to_its_pause_and_the_answer_succeeds(tmp_path: Path) -> None:
    """[S8.1-a] [S8.1-b]: killed during the resumed model call, restarted within the lease: the response
    ends as a pause, the same answer is accepted (a new response), the history has no orphan, the agent runs on."""
    db = SQLiteStore(tmp_path / "a.db")
    journal = FileJournal(tmp_path / "streams")
    with running(create_app(store=db, model_factory=ScriptedModel, journal=journal)) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
    assert_valid(first.content)
    agent_uuid, run_id = first.headers["x-agent-uuid"], first.headers["x-run-id"]
    (pending,) = _envelopes(data_lines(first.content), "awaiting_frontend_tools")[0]
    answer = [{"tool_use_id": pending["tool_use_id"], "content": "yes"}]
    claim, resumed = _die_after(
        db, journal, agent_uuid, lambda agent, sink: agent.continue_with_tool_results(answer, sink), 3
    )
    assert claim.run is not None
    assert claim.run.responses == 1
    journal.close()

    journal = FileJournal(tmp_path / "streams")
    with running(create_app(store=db, model_factory=ScriptedModel, journal=journal)) as base:
        rest = get(base, f"/agent/runs/{run_id}/stream", headers={"Last-Event-ID": f"{run_id}:1:2"})
        whole = get(base, f"/agent/runs/{run_id}/stream", params={"response": "1"})
        again = post(base, "/agent/tool_results", {"agent_uuid": agent_uuid, "tool_results": answer})
        stale = post(base, "/agent/tool_results", {"agent_uuid": agent_uuid, "tool_results": answer})
        nxt = post(base, "/agent/run", {"prompt": "What is 1 + 1?", "agent_uuid": agent_uuid})
    assert rest.status_code == 200
    assert data_lines(whole.content) == resumed[:3] + data_lines(rest.content)
    assert_valid(whole.content)
    closing = data_lines(rest.content)
    assert [e["type"] for e in _envelopes(closing, "error")] == ["server_restarted"]
    assert _envelopes(closing, "awaiting_frontend_tools") == [[pending]]  # the client asks again
    assert not _envelopes(closing, "meta_final")  # the run did not end
    assert again.status_code == 200, again.text
    assert again.headers["x-response-index"] == "2"
    assert_valid(again.content)
    assert _envelopes(data_lines(again.content), "meta_final")[0]["stop_reason"] == "end_turn"
    assert [e.id.split(":")[1] for e in read_events(again.content)] == ["2"] * len(read_events(again.content))
    assert stale.status_code == 409
    assert nxt.status_code == 200
    assert_valid(nxt.content)
    state = asyncio.run(db.load(agent_uuid))
    assert state is not None
    assert state.status == "idle"
    assert not state.pending_frontend
    assert not state.pending_order
    _no_orphans(state.messages)
    logged = asyncio.run(db.run_responses(run_id))
    assert [len(r) for r in logged] == [
        len(data_lines(first.content)),
        len(data_lines(whole.content)),
        len(data_lines(again.content)),
    ]
    for response in logged:
        assert_valid(response)


def test_spec_cn1_a_a_checkpoint_server_puts_a_dead_resume_back_to_its_pause(tmp_path: Path) -> None:
    """[CN1-a]: in checkpoint mode too, a resume that died before its first checkpoint is not continued:
    its response ends as the same pause (spec server §8.1-b) and the same answer is accepted."""
    db = SQLiteStore(tmp_path / "a.db")
    journal = FileJournal(tmp_path / "streams")
    with running(create_app(store=db, model_factory=ScriptedModel, journal=journal)) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
    agent_uuid, run_id = first.headers["x-agent-uuid"], first.headers["x-run-id"]
    (pending,) = _envelopes(data_lines(first.content), "awaiting_frontend_tools")[0]
    answer = [{"tool_use_id": pending["tool_use_id"], "content": "yes"}]
    _die_after(db, journal, agent_uuid, lambda agent, sink: agent.continue_with_tool_results(answer, sink), 3)
    journal.close()

    journal = FileJournal(tmp_path / "streams")
    app = create_app(store=db, model_factory=ScriptedModel, journal=journal, agent_config={"checkpoints": True})
    with running(app) as base:
        assert app.state.manager.continues
        whole = get(base, f"/agent/runs/{run_id}/stream", params={"response": "1"})
        again = post(base, "/agent/tool_results", {"agent_uuid": agent_uuid, "tool_results": answer})
    assert_valid(whole.content)
    closing = data_lines(whole.content)
    assert [e["type"] for e in _envelopes(closing, "error")] == ["server_restarted"]
    assert _envelopes(closing, "awaiting_frontend_tools") == [[pending]]
    assert journal.read(run_id, 2) is not None  # the answer's response, not a continuation's
    assert again.status_code == 200, again.text
    assert again.headers["x-response-index"] == "2"
    assert_valid(again.content)
    assert _envelopes(data_lines(again.content), "meta_final")[0]["stop_reason"] == "end_turn"


def test_spec_server_8_1_a_a_dead_first_run_is_lost_and_its_prompt_taken_back(tmp_path: Path) -> None:
    """[S8.1-a]: a first run killed mid-tool is closed as ``lost``; its prompt is not merged into the next one."""
    db = SQLiteStore(tmp_path / "a.db")
    journal = FileJournal(tmp_path / "streams")
    agent_uuid = "agent-killed-mid-tool"
    claim, lines = _die_after(db, journal, agent_uuid, lambda agent, sink: agent.run("What is 5 + (10 * 2)?", sink), 7)
    assert claim.run is not None
    assert _user_texts(claim.messages[-1]) == ["What is 5 + (10 * 2)?"]  # the claim holds the prompt
    journal.close()
    model = ScriptedModel()
    journal = FileJournal(tmp_path / "streams")
    with running(create_app(store=db, model_factory=lambda: model, journal=journal)) as base:
        replay = get(base, f"/agent/runs/{claim.run.run_id}/stream")
        nxt = post(base, "/agent/run", {"prompt": "What is 1 + 1?", "agent_uuid": agent_uuid})
    assert data_lines(replay.content)[:7] == lines[:7]
    assert_valid(replay.content)
    assert nxt.status_code == 200
    assert_valid(nxt.content)
    first_request = model.requests[0]["messages"]
    assert [_user_texts(m) for m in first_request] == [["What is 1 + 1?"]]  # not two questions at once
    (record,) = [r for r in asyncio.run(db.runs(agent_uuid)) if r.run_id == claim.run.run_id]
    assert record.stop_reason == "lost"
    state = asyncio.run(db.load(agent_uuid))
    assert state is not None
    _no_orphans(state.messages)


def test_spec_agent_ref_10_2_b_tool_results_recover_an_expired_lease() -> None:
    """[R10.2-b]: a resume whose process died (lease expired, no journal to say so) is recovered by the
    tool-results path itself: the same answer succeeds, at once; a live lease is still 409."""
    store = MemoryStore()
    with running(create_app(store=store, model_factory=ScriptedModel)) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        agent_uuid, run_id = first.headers["x-agent-uuid"], first.headers["x-run-id"]
        (pending,) = _envelopes(data_lines(first.content), "awaiting_frontend_tools")[0]
        answer = {"agent_uuid": agent_uuid, "tool_results": [{"tool_use_id": pending["tool_use_id"], "content": "yes"}]}

        def claim_by_a_dead_process(lease_left: float) -> None:
            state = asyncio.run(store.load(agent_uuid))
            assert state is not None
            state.status = "running"  # what continue_with_tool_results saves as its claim
            state.lease_owner = "elsewhere:1:dead"
            state.lease_expires_at = time.time() + lease_left
            asyncio.run(store.save(state))

        claim_by_a_dead_process(30.0)
        live = post(base, "/agent/tool_results", answer)
        assert live.status_code == 409
        assert "another process" in live.json()["error"]["message"]
        state = asyncio.run(store.load(agent_uuid))
        assert state is not None
        state.lease_expires_at = time.time() - 1  # the owner stopped renewing it
        asyncio.run(store.save(state))
        resumed = post(base, "/agent/tool_results", answer)
    assert resumed.status_code == 200, resumed.text
    assert_valid(resumed.content)
    assert resumed.headers["x-response-index"] == "2"  # response 1 is the dead resume's, closed in the log
    assert _envelopes(data_lines(resumed.content), "meta_final")[0]["stop_reason"] == "end_turn"
    logged = asyncio.run(store.run_responses(run_id))
    assert len(logged) == 3
    assert [e["type"] for e in _envelopes(logged[1], "error")] == ["lost"]
    assert _envelopes(logged[1], "awaiting_frontend_tools") == [[pending]]
    for response in logged:
        assert_valid(response)
    final = asyncio.run(store.load(agent_uuid))
    assert final is not None
    _no_orphans(final.messages)


def test_spec_server_8_1_c_a_response_stored_whole_is_completed_from_the_store(tmp_path: Path) -> None:
    """[S8.1-c]: killed after the run saved its end but before sending it: the journal gets the stored
    lines (the real end), not closing lines that would contradict the store."""
    from agent_ref.server.app import RunManager

    db = SQLiteStore(tmp_path / "a.db")
    journal = FileJournal(tmp_path / "streams")
    agent = Agent(ScriptedModel(), tools=default_tools(), store=db)
    lines: list[bytes] = []
    asyncio.run(agent.run("What is 5 + (10 * 2)?", lines.append))
    run_id = json.loads(json.loads(lines[0])["delta"])["run_id"]
    for line in lines[:-3]:  # the staged end (meta_final, [DONE]...) was saved, never sent
        journal.append(run_id, 0, line)
    assert asyncio.run(RunManager(db, journal).recover()) == [(run_id, 0)]
    assert journal.read(run_id, 0) == lines
    assert_valid(lines)
    assert asyncio.run(db.run_log(run_id)) == lines  # the store's log is left as it was


def test_spec_server_8_2_a_a_prompt_on_a_dead_resume_recovers_it_and_is_refused() -> None:
    """[S8.2-a]: POST /agent/run on a dead resume (lease expired) puts it back to its pause, then answers 409."""
    store = MemoryStore()
    with running(create_app(store=store, model_factory=ScriptedModel)) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        agent_uuid = first.headers["x-agent-uuid"]
        state = asyncio.run(store.load(agent_uuid))
        assert state is not None
        state.status = "running"  # a resume's claim, its process dead
        state.lease_owner = "elsewhere:1:dead"
        state.lease_expires_at = time.time() - 1
        asyncio.run(store.save(state))
        refused = post(base, "/agent/run", {"prompt": "hello", "agent_uuid": agent_uuid})
    assert refused.status_code == 409
    assert refused.json()["error"]["type"] == "agent_state"
    assert "waiting for frontend tool results" in refused.json()["error"]["message"]
    after = asyncio.run(store.load(agent_uuid))
    assert after is not None
    assert after.status == "awaiting_frontend_tools"
    assert [m["role"] for m in after.messages] == ["user", "assistant"]  # "hello" was not added


def test_spec_server_8_1_b_a_dead_resume_through_a_subagent_takes_the_child_back_too(tmp_path: Path) -> None:
    """[S8.1-b]: a resume killed while its paused child was resumed: both go back to their pause at the
    restart (the child's claim names the same dead process), and the same answers are accepted at once."""
    from agent_ref.run.subagents import demo_subagents

    db = SQLiteStore(tmp_path / "a.db")
    journal = FileJournal(tmp_path / "streams")
    config: dict[str, Any] = {"subagents": demo_subagents()}
    with running(create_app(store=db, model_factory=ScriptedModel, journal=journal, agent_config=config)) as base:
        first = post(
            base, "/agent/run", {"prompt": "Research tides and volcanoes (confirm first) in parallel, then confirm"}
        )
    assert_valid(first.content)
    parent, run_id = first.headers["x-agent-uuid"], first.headers["x-run-id"]
    pending = _envelopes(data_lines(first.content), "awaiting_frontend_tools")[0]
    child = next(p["agent"] for p in pending if "agent" in p)
    answer = [{"tool_use_id": p["tool_use_id"], "content": "yes"} for p in pending]
    # the resume, run against a recording copy of both agents: its claims are what a kill leaves
    recording = _Recording()
    for uuid in (parent, child):
        stored = asyncio.run(db.load(uuid))
        assert stored is not None
        asyncio.run(recording.save(msgspec.structs.replace(stored, version=0)))
    copy = asyncio.run(Agent.load(parent, recording, ScriptedModel(), tools=default_tools(), **config))
    resumed: list[bytes] = []
    asyncio.run(copy.continue_with_tool_results(answer, resumed.append))
    states = [decode_state(b) for b in recording.saved[2:]]
    claims = {
        uuid: next(s for s in states if s.agent_uuid == uuid and s.status == "running") for uuid in (parent, child)
    }
    for uuid, claim in claims.items():
        stored = asyncio.run(db.load(uuid))
        assert stored is not None
        claim.version = stored.version
        claim.lease_expires_at = time.time() + 30  # restarted well within the lease
        asyncio.run(db.save(claim))
    parent_run = claims[parent].run
    assert parent_run is not None
    response = parent_run.responses
    for line in resumed[:2]:
        journal.append(run_id, response, line)
    journal.close()

    journal = FileJournal(tmp_path / "streams")
    with running(create_app(store=db, model_factory=ScriptedModel, journal=journal, agent_config=config)) as base:
        closed = get(base, f"/agent/runs/{run_id}/stream", params={"response": str(response)})
        again = post(base, "/agent/tool_results", {"agent_uuid": parent, "tool_results": answer})
    assert_valid(closed.content)
    assert _envelopes(data_lines(closed.content), "awaiting_frontend_tools") == [pending]
    assert again.status_code == 200, again.text
    assert_valid(again.content)
    finals = {
        json.loads(x)["agent"]: json.loads(json.loads(x)["delta"])["stop_reason"]
        for x in data_lines(again.content)
        if x != b"[DONE]" and json.loads(x)["type"] == "meta_final"
    }
    assert finals == {parent: "end_turn", child: "end_turn"}
    for uuid in (parent, child):
        state = asyncio.run(db.load(uuid))
        assert state is not None
        assert state.status == "idle"
        _no_orphans(state.messages)
