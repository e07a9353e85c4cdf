"""Nothing is taken before it is kept (spec server [S3.5-a], issue 38 case 1).

[S3.5-a] [S3.5-b] [S3.5-c] [R5.5-e]

A request whose first line the journal refuses is answered ``503`` and leaves the agent
as it was: a resume's answer is not in the history, the run is still paused, and the
same request succeeds once the journal answers. The journal and store here are the
in-memory ones with a switch (``fault_support``); the same fault on a real read-only
or full filesystem under a ``FileJournal`` is in ``tests/faults/test_journal_disk_faults.py``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx2

from agent_ref import ScriptedModel
from agent_ref.server.app import create_app
from agent_ref.server.streams import MemoryJournal
from agent_ref_support import meta
from fault_support import SECRET, FlakyJournal, FlakyStore
from server_support import data_lines, post, running
from validating import assert_valid

CONFIRM = "Please confirm: delete the temp files"


def _assert_503(answer: Any) -> None:
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["retry-after"]) >= 1
    assert SECRET not in answer.text
    assert "db.internal" not in answer.text


class _WritesFail(MemoryJournal):
    """A journal whose appends fail while ``down`` (a full disk: it still reads)."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def append(self, run_id: str, response: int, line: bytes) -> None:
        if self.down:
            raise OSError(28, "No space left on device")
        super().append(run_id, response, line)


def _pending_id(body: bytes) -> str:
    """The one pending call's id of a paused response."""
    awaiting: Any = meta(data_lines(body), "awaiting_frontend_tools")  # a list for this block
    (pending,) = awaiting
    return str(pending["tool_use_id"])


def _wait_settled(app: Any) -> None:
    """The server's debts (responses and agents it owes a recovery) are paid: bounded."""
    deadline = time.monotonic() + 10
    while app.state.manager.owed:
        assert time.monotonic() < deadline, f"still owed: {app.state.manager.owed}"
        time.sleep(0.02)


def test_spec_server_3_5_a_a_resume_the_journal_refuses_keeps_the_pause_and_a_retry_succeeds() -> None:
    """[S3.5-a]: 503, the answer not taken (still paused, no tool_result), the same answer later streams."""
    store, journal = FlakyStore(), FlakyJournal()
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal)
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        assert_valid(first.content)
        agent_uuid = first.headers["x-agent-uuid"]
        pending = _pending_id(first.content)
        answer = {"agent_uuid": agent_uuid, "tool_results": [{"tool_use_id": pending, "content": "yes"}]}
        before = asyncio.run(store.load(agent_uuid))
        assert before is not None

        journal.down = True
        _assert_503(post(base, "/agent/tool_results", answer))
        journal.down = False
        _wait_settled(app)

        state = asyncio.run(store.load(agent_uuid))
        assert state is not None
        assert state.status == "awaiting_frontend_tools"
        assert state.messages == before.messages  # the answer is not in the history
        assert [p.tool_use_id for p in state.pending_frontend] == [pending]
        assert asyncio.run(store.runs(agent_uuid)) == []  # no run was recorded as aborted

        again = post(base, "/agent/tool_results", answer)
        assert again.status_code == 200, again.text
        assert_valid(again.content)
        lines = data_lines(again.content)
        assert meta(lines, "meta_final")["stop_reason"] == "end_turn"
        assert again.headers["x-response-index"] == "1"


def test_spec_server_3_5_a_a_resume_whose_rollback_the_store_refuses_is_put_back_once_it_answers() -> None:
    """[S3.5-b]: journal and store down at the first line: 503; once back, the pause is restored and the retry works."""
    store, journal = FlakyStore(), FlakyJournal()
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal)
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        agent_uuid = first.headers["x-agent-uuid"]
        pending = _pending_id(first.content)
        answer = {"agent_uuid": agent_uuid, "tool_results": [{"tool_use_id": pending, "content": "yes"}]}
        journal.down = True
        real_save = store.save

        async def claim_then_fail(state: Any, **kwargs: Any) -> None:
            await real_save(state, **kwargs)  # the claim is stored ...
            store.down = True  # ... and from now on the store fails too

        store.save = claim_then_fail  # type: ignore[method-assign]  # the next save only
        try:
            _assert_503(post(base, "/agent/tool_results", answer))
        finally:
            store.save = real_save  # type: ignore[method-assign]
        stuck = store.down
        store.down = journal.down = False
        assert stuck, "the store was not reached after the claim"
        _wait_settled(app)
        again = post(base, "/agent/tool_results", answer)
        assert again.status_code == 200, again.text
        assert_valid(again.content)
        assert meta(data_lines(again.content), "meta_final")["stop_reason"] == "end_turn"


def test_spec_server_3_5_a_a_run_the_journal_refuses_leaves_no_trace_of_its_prompt() -> None:
    """[S3.5-a]: a new prompt of a stored agent refused at its first line is not in the agent's context."""
    store, journal = FlakyStore(), FlakyJournal()
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal)
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": "hello"})
        agent_uuid = first.headers["x-agent-uuid"]
        before = asyncio.run(store.load(agent_uuid))
        assert before is not None
        journal.down = True
        _assert_503(post(base, "/agent/run", {"prompt": "a prompt never sent", "agent_uuid": agent_uuid}))
        journal.down = False
        _wait_settled(app)
        state = asyncio.run(store.load(agent_uuid))
        assert state is not None
        assert state.status == "idle"
        assert state.messages == before.messages
        assert [r.stop_reason for r in asyncio.run(store.runs(agent_uuid))] == ["end_turn"]
        again = post(base, "/agent/run", {"prompt": "hello", "agent_uuid": agent_uuid})
        assert again.status_code == 200
        assert_valid(again.content)


def test_spec_server_3_5_c_a_stop_the_journal_refuses_is_kept_and_answered_as_kept() -> None:
    """[S3.5-c]: a paused run stopped while the journal refuses writes: 200 stopped (it is stored), replayed from the store."""
    store, journal = FlakyStore(), _WritesFail()
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal)
    with running(app) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        run_id, agent_uuid = first.headers["x-run-id"], first.headers["x-agent-uuid"]
        journal.down = True
        try:
            stopped = post(base, f"/agent/runs/{run_id}/stop", None)
        finally:
            journal.down = False
        assert stopped.status_code == 200, stopped.text
        assert stopped.json()["stop_reason"] == "abandoned"
        state = asyncio.run(store.load(agent_uuid))
        assert state is not None
        assert state.status == "idle"
        again = post(base, f"/agent/runs/{run_id}/stop", None)  # the same request: the run has ended (S1.4-b)
        assert again.status_code == 409
        assert again.json()["error"]["stop_reason"] == "abandoned"
        with httpx2.Client(timeout=30) as client:
            replay = client.get(f"{base}/agent/runs/{run_id}/stream", params={"response": "1"})
        assert replay.status_code == 200, replay.text
        assert_valid(replay.content)
        assert meta(data_lines(replay.content), "meta_final")["stop_reason"] == "abandoned"
