"""The embedded journal is bounded (spec server §3.1-d, issue 24 case 6) [S3.1-d].

``create_app()`` without a journal used to keep every line of every response for ever
(6.5 MB per 200 runs, never shrinking). Finished responses are now kept for a time and
a count, then dropped, and replayed from the store's log. Memory is measured by what the
journal holds (responses counted), not by timing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import create_app
from agent_ref.server.streams import DONE_LINE, MemoryJournal
from server_support import data_lines, get, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path


def _held(journal: MemoryJournal, runs: list[str]) -> int:
    """How many responses of ``runs`` the journal still holds (through the ``Journal`` protocol only)."""
    return sum(journal.responses(run) for run in runs)


def test_spec_server_3_1_d_default_memory_journal_is_bounded() -> None:
    """A thousand finished responses in a default ``MemoryJournal``: it holds at most its bound."""
    journal = MemoryJournal()
    runs = [f"run-{i}" for i in range(1000)]
    for run in runs:
        journal.append(run, 0, b'{"x":1}')
        journal.append(run, 0, DONE_LINE)
    assert _held(journal, runs) <= 256
    assert journal.read(runs[-1], 0) == [b'{"x":1}', DONE_LINE]  # the newest are kept
    assert journal.read(runs[0], 0) is None  # the oldest went


def test_spec_server_3_1_d_finished_responses_expire_unfinished_stay() -> None:
    """Past ``keep_seconds`` a finished response is dropped; one still being written never is."""
    now = [0.0]
    journal = MemoryJournal(keep_finished=100, keep_seconds=60, clock=lambda: now[0])
    journal.append("done", 0, b"a")
    journal.append("done", 0, DONE_LINE)
    journal.append("open", 0, b"a")
    now[0] = 59.0
    assert journal.read("done", 0) == [b"a", DONE_LINE]
    now[0] = 61.0
    assert journal.read("done", 0) is None
    assert journal.responses("done") == 0
    assert journal.read("open", 0) == [b"a"]
    assert journal.unfinished() == [("open", 0)]


def test_spec_server_3_1_d_create_app_journal_stays_bounded_over_many_runs(tmp_path: Path) -> None:
    """24 runs through the server keep at most 6 responses in memory; a dropped one replays from the store."""
    journal = MemoryJournal(keep_finished=6)
    store = SQLiteStore(tmp_path / "agents.db")
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal)
    runs: list[tuple[str, bytes]] = []
    with running(app) as base:
        for i in range(24):
            answer = post(base, "/agent/run", {"prompt": f"Say hello number {i}"})
            assert answer.status_code == 200, answer.text
            runs.append((answer.headers["x-run-id"], answer.content))
            assert len(journal) <= 6
        assert _held(journal, [run for run, _ in runs]) <= 6
        first, body = runs[0]
        assert journal.read(first, 0) is None
        replay = get(base, f"/agent/runs/{first}/stream")  # from the store's log now
        assert replay.status_code == 200
        assert_valid(replay.content)
        assert data_lines(replay.content) == data_lines(body)
        resumed = get(base, f"/agent/runs/{first}/stream", headers={"Last-Event-ID": f"{first}:0:0"})
        assert resumed.status_code == 200
        assert data_lines(resumed.content) == data_lines(body)[1:]
