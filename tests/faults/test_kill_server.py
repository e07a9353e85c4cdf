"""kill -9 of a SQLite-backed server, then a restart on the same database (issue 24; spec/server.md §8).

Three places to die: in a first run's model call, in a backend tool, in a resumed model
call (paused on ``confirm``, answer posted). Each test checks what a user would meet:

- the client's open stream ends when the process dies (no hang);
- after the restart, reconnecting with the last ``Last-Event-ID`` gives the closing lines
  and ``[DONE]``, exactly once, and the whole response validates strictly (E140 aside,
  spec server §3.3-a);
- the user's answer is accepted after the restart (the dead resume's own answer, sent
  again; after a dead run, the answer of the next run's pause);
- the stored history has no ``tool_use`` without its ``tool_result`` and no stale
  pending list, and the next run on the same agent works.

Loopback only, every wait bounded, each test well under 30 s.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from faults.kill_support import (
    HOLD,
    OpenStream,
    Server,
    assert_closed_and_valid,
    assert_no_orphans,
    client,
    envelopes,
    stored,
)
from server_support import data_lines, read_events

if TYPE_CHECKING:
    from pathlib import Path

CONFIRM = "Please confirm: delete the temp files"


def _reconnect(base: str, seen: bytes) -> tuple[bytes, bytes]:
    """After the restart: the rest from the last event seen, and the whole response again."""
    last = read_events(seen)[-1].id
    run_id, response, _ = last.split(":")
    with client() as http:
        rest = http.get(f"{base}/agent/runs/{run_id}/stream", headers={"Last-Event-ID": last})
        whole = http.get(f"{base}/agent/runs/{run_id}/stream", params={"response": response})
    assert rest.status_code == 200, rest.text
    assert whole.status_code == 200, whole.text
    assert data_lines(seen) + data_lines(rest.content) == data_lines(whole.content)  # exactly once
    assert_closed_and_valid(whole.content)
    return rest.content, whole.content


def _post(base: str, path: str, body: dict[str, Any]) -> Any:
    with client() as http:
        return http.post(base + path, json=body)


def _confirm_round(base: str, agent: str) -> None:
    """The next run on the agent pauses on ``confirm``; its answer is accepted; both responses validate."""
    first = _post(base, "/agent/run", {"prompt": CONFIRM, "agent_uuid": agent})
    assert first.status_code == 200, first.text
    assert_closed_and_valid(first.content)
    (pending,) = envelopes(data_lines(first.content), "awaiting_frontend_tools")[0]
    answer = {"agent_uuid": agent, "tool_results": [{"tool_use_id": pending["tool_use_id"], "content": "yes"}]}
    second = _post(base, "/agent/tool_results", answer)
    assert second.status_code == 200, second.text
    assert_closed_and_valid(second.content)
    assert envelopes(data_lines(second.content), "meta_final")[0]["stop_reason"] == "end_turn"


def _settled(db: Path, agent: str) -> None:
    state = stored(db, agent)
    assert state is not None
    assert state.status == "idle"
    assert not state.pending_frontend
    assert not state.pending_backend_results
    assert not state.pending_order
    assert_no_orphans(state.messages)


def _kill_mid_first_run(tmp_path: Path, prompt: str, needle: bytes, held: bool) -> None:
    db, gate, entered = tmp_path / "agents.db", tmp_path / "gate", tmp_path / "entered"
    with Server(db, gate, entered) as server:
        stream = OpenStream(server.base, "/agent/run", {"prompt": prompt})
        try:
            stream.read_until(needle, also=entered if held else None)
            server.kill()
            stream.read_to_end()  # the client's stream ends with the process
        finally:
            stream.close()
    seen = stream.whole_events()
    agent = stream.headers["x-agent-uuid"]
    assert data_lines(seen)[-1] != b"[DONE]"
    gate.touch()
    with Server(db, gate) as again:
        rest, _ = _reconnect(again.base, seen)
        assert [e["type"] for e in envelopes(data_lines(rest), "error")] == ["server_restarted"]
        state = stored(db, agent)
        assert state is not None
        assert state.status == "idle"
        assert state.messages == []  # the dead run's prompt was taken back out
        _confirm_round(again.base, agent)  # the next run works, and its answer is accepted
    _settled(db, agent)


def test_kill_9_during_a_first_runs_model_call(tmp_path: Path) -> None:
    """[S8.1-a]: killed while the model streams its answer; restart; replay closes; the agent runs on."""
    _kill_mid_first_run(tmp_path, f"Hello there {HOLD}", b'"type":"meta_init"', held=True)


def test_kill_9_during_a_backend_tool(tmp_path: Path) -> None:
    """[S8.1-a]: killed while the calculator runs (a tool_use not yet answered); restart; no orphan left."""
    _kill_mid_first_run(tmp_path, "What is 5 + (10 * 2)?", b'"type":"tool_call"', held=False)


def test_kill_9_during_a_resume_keeps_the_users_answer(tmp_path: Path) -> None:
    """[S8.1-b]: paused on confirm, answer posted, killed in the resumed model call: after the restart the
    response ends as the same pause, the same answer is accepted, the history has no orphan, the agent runs on."""
    db, gate, entered = tmp_path / "agents.db", tmp_path / "gate", tmp_path / "entered"
    with Server(db, gate, entered) as server:
        first = _post(server.base, "/agent/run", {"prompt": CONFIRM})
        assert_closed_and_valid(first.content)
        agent = first.headers["x-agent-uuid"]
        (pending,) = envelopes(data_lines(first.content), "awaiting_frontend_tools")[0]
        answer = {
            "agent_uuid": agent,
            "tool_results": [{"tool_use_id": pending["tool_use_id"], "content": f"yes {HOLD}"}],
        }
        stream = OpenStream(server.base, "/agent/tool_results", answer)
        try:
            stream.read_until(b'"type":"tool_result"', also=entered)
            server.kill()
            stream.read_to_end()
        finally:
            stream.close()
    seen = stream.whole_events()
    assert stream.headers["x-response-index"] == "1"
    gate.touch()
    with Server(db, gate) as again:
        rest, whole = _reconnect(again.base, seen)
        closing = data_lines(rest)
        assert [e["type"] for e in envelopes(closing, "error")] == ["server_restarted"]
        assert envelopes(closing, "awaiting_frontend_tools") == [[pending]]  # asks for the same answer
        state = stored(db, agent)
        assert state is not None
        assert state.status == "awaiting_frontend_tools"
        assert [p.tool_use_id for p in state.pending_frontend] == [pending["tool_use_id"]]
        resent = _post(again.base, "/agent/tool_results", answer)
        assert resent.status_code == 200, resent.text
        assert resent.headers["x-response-index"] == "2"
        assert_closed_and_valid(resent.content)
        final = envelopes(data_lines(resent.content), "meta_final")[0]
        assert final["stop_reason"] == "end_turn"
        _settled(db, agent)
        texts = [json.dumps(m["content"]) for m in stored(db, agent).messages if m["role"] == "user"]
        assert sum(HOLD in t for t in texts) == 1  # the answer is in the history once
        _confirm_round(again.base, agent)  # the next run on the same agent works
        assert whole
    _settled(db, agent)
