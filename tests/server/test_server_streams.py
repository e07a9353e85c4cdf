"""Event ids, the journal, closing lines and crash recovery (spec/server.md §2, §3)."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st

from agent_ref import Agent, MemoryStore, ScriptedModel, SQLiteStore, default_tools
from agent_ref.server.app import RunManager, create_app
from agent_ref.server.streams import (
    DONE_LINE,
    RUN_ID_PATTERN,
    FileJournal,
    MemoryJournal,
    closing_lines,
    event_id,
    parse_event_id,
)
from envelope import reconstruct
from server_support import data_lines, get, running
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

ERROR = {"type": "server_restarted", "message": "test"}


def _run_lines(
    prompt: str, store: MemoryStore | SQLiteStore | None = None, **config: object
) -> tuple[Agent, list[bytes]]:
    agent = Agent(ScriptedModel(), tools=default_tools(), store=store, **config)  # type: ignore[arg-type]  # test config
    lines: list[bytes] = []
    asyncio.run(agent.run(prompt, lines.append))
    return agent, lines


@given(st.from_regex(RUN_ID_PATTERN, fullmatch=True), st.integers(0, 10**9 - 1), st.integers(0, 10**12 - 1))
def test_spec_server_2_1_a_event_ids_round_trip(run_id: str, response: int, seq: int) -> None:
    """[S2.1-a]: ``parse_event_id`` inverts ``event_id`` for every run id the pattern admits."""
    assert parse_event_id(event_id(run_id, response, seq)) == (run_id, response, seq)


@pytest.mark.parametrize(
    "text", ["", "a:b", "a:1", "a:1:2:3", "a/b:1:2", "a:-1:2", "a:1:2.0", "a:\u0661:2", "a:1:" + "9" * 13]
)
def test_spec_server_2_1_b_foreign_ids_are_not_ours(text: str) -> None:
    """[S2.1-b]: anything else is refused (``None``), never guessed at."""
    assert parse_event_id(text) is None


PROMPTS = ["What is 5 + (10 * 2)?", "Please confirm: delete the temp files", "cite a source", "long"]


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("max_bytes", [2048, 400])
def test_spec_server_3_3_a_closing_any_prefix_gives_a_valid_response(prompt: str, max_bytes: int) -> None:
    """[S3.3-a]: a response cut after any line, plus ``closing_lines``, validates strictly.

    Cuts inside a multi-line buffered block of JSON (possible with a small bound) leave a
    payload that is not JSON; the validator's finding for it is the one expected.
    """
    _, lines = _run_lines(prompt, max_bytes=max_bytes)
    for cut in range(1, len(lines)):
        prefix = lines[:cut]
        tail = closing_lines(prefix, "run-1", ERROR, max_bytes=max_bytes)
        assert tail[-1] == DONE_LINE
        whole = prefix + tail
        open_json = _cut_inside_json_block(prefix)
        assert_valid(whole, max_bytes=max_bytes, expect=[open_json] if open_json else [])
        payloads = [json.loads(x) for x in tail if x != DONE_LINE]
        if any(b'"type":"meta_final"' in x for x in prefix):
            assert "error" not in [p["type"] for p in payloads]  # the agent was ending; its meta_final stands
        else:
            kinds = [p["type"] for p in payloads]
            assert [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k][-2:] == ["error", "meta_final"]
    assert closing_lines(lines, "run-1", ERROR) == []  # an ended response gets nothing


def _cut_inside_json_block(prefix: list[bytes]) -> str | None:
    """The code the validator gives a JSON-payload block cut mid-way, or None."""
    for blocks in reconstruct(prefix).agents.values():
        for block in blocks:
            if not block.complete and block.type not in ("text", "thinking", "tool_result"):
                return "E140"
    return None


def test_spec_server_3_1_b_file_journal_survives_a_cut_last_line(tmp_path: Path) -> None:
    """[S3.1-b]: a line cut mid-write by a kill is left out, and cut off before the next append."""
    journal = FileJournal(tmp_path)
    journal.append("r1", 0, b'{"a":1}')
    journal.close()
    with (tmp_path / "r1.0.log").open("ab") as f:
        f.write(b'{"half')
    assert journal.read("r1", 0) == [b'{"a":1}']
    assert journal.unfinished() == [("r1", 0)]
    journal.append("r1", 0, DONE_LINE)
    assert journal.read("r1", 0) == [b'{"a":1}', DONE_LINE]
    assert journal.unfinished() == []
    assert journal.responses("r1") == 1
    assert journal.read("r2", 0) is None
    with pytest.raises(ValueError, match="not a run id"):
        journal.append("../x", 0, b"{}")


def test_spec_server_3_3_b_recovery_closes_and_releases_a_killed_run(tmp_path: Path) -> None:
    """[S3.3-b]: at start, a journaled response without [DONE] is closed, the agent released, the log stored."""
    store = SQLiteStore(tmp_path / "a.db")
    journal = FileJournal(tmp_path / "streams")
    agent, lines = _run_lines("What is 5 + (10 * 2)?")
    run_id = json.loads(json.loads(lines[0])["delta"])["run_id"]
    # what a killed process leaves: the journal up to the kill, the agent claimed ("running")
    for line in lines[:7]:
        journal.append(run_id, 0, line)
    journal.close()
    state = agent.state
    state.status = "running"
    state.version = 0
    from agent_ref.store.state import RunState

    state.run = RunState(run_id=run_id, user_query="q", started_at=0.0, responses=0)
    asyncio.run(store.save(state))
    manager = RunManager(store, journal)
    assert asyncio.run(manager.recover()) == [(run_id, 0)]
    replay = journal.read(run_id, 0)
    assert replay is not None
    assert replay[:7] == lines[:7]
    assert_valid(replay)
    stored = asyncio.run(store.load(agent.agent_uuid))
    assert stored is not None
    assert stored.status == "idle"
    assert asyncio.run(store.run_log(run_id)) == replay
    assert asyncio.run(manager.recover()) == []  # nothing left to close
    # and a server started on that journal serves the replay
    app = create_app(store=store, model_factory=ScriptedModel, journal=journal)
    with running(app) as base:
        r = get(base, f"/agent/runs/{run_id}/stream")
    assert data_lines(r.content) == replay
    assert_valid(r.content)


def test_spec_server_3_1_c_memory_journal_reports_unfinished() -> None:
    """[S3.1-a]: the memory journal keeps responses apart and knows the unfinished ones."""
    journal = MemoryJournal()
    journal.append("r", 0, b"{}")
    journal.append("r", 0, DONE_LINE)
    journal.append("r", 1, b"{}")
    assert journal.responses("r") == 2
    assert journal.unfinished() == [("r", 1)]
    assert journal.read("r", 2) is None


@seed(15)
@settings(max_examples=30)
@given(st.data())
def test_spec_server_2_3_a_follow_from_any_id_yields_the_rest_once(data: st.DataObject) -> None:
    """[S2.3-a] property: a follower starting after any seq, while lines keep coming, sees each later line once, in order."""
    from agent_ref.server.streams import LiveStream

    _, lines = _run_lines("What is 5 + (10 * 2)?")
    after = data.draw(st.integers(-1, len(lines) - 2))
    split = data.draw(st.integers(0, len(lines)))

    async def scenario() -> list[bytes]:
        stream = LiveStream("r", 0, "a", MemoryJournal())
        for line in lines[:split]:
            stream.append(line)
        got: list[bytes] = []

        async def follower() -> None:
            async for event in stream.follow(after):
                got.append(event)

        task = asyncio.create_task(follower())
        for line in lines[split:]:
            await asyncio.sleep(0)
            stream.append(line)
        await asyncio.wait_for(task, 10)
        return got

    got = asyncio.run(scenario())
    assert data_lines(b"".join(got)) == lines[after + 1 :]


@pytest.mark.parametrize("fixed_seed", [1, 2, 3])
def test_spec_server_2_3_a_follow_property_under_fixed_seeds(fixed_seed: int) -> None:
    """[S2.3-a]: the follow property again, randomised under three fixed seeds (CI derandomises the main one)."""
    inner = test_spec_server_2_3_a_follow_from_any_id_yields_the_rest_once.hypothesis.inner_test  # type: ignore[attr-defined]  # hypothesis attaches it
    run = given(st.data())(inner)
    seed(fixed_seed)(settings(derandomize=False, max_examples=15)(run))()


_LINE = st.binary(min_size=1, max_size=60).filter(lambda b: b"\n" not in b)


@given(st.lists(_LINE, min_size=1, max_size=8), st.data())
@settings(max_examples=60)
def test_spec_server_3_1_b_a_kill_at_any_byte_leaves_a_readable_prefix(lines: list[bytes], data: st.DataObject) -> None:
    """[S3.1-b] property: whatever byte a kill stops the journal at, ``read`` gives the whole lines before it, and appending goes on cleanly."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        journal = FileJournal(tmp)
        for line in lines:
            journal.append("r", 0, line)
        journal.close()
        path = Path(tmp) / "r.0.log"
        raw = path.read_bytes()
        cut = data.draw(st.integers(0, len(raw)))
        path.write_bytes(raw[:cut])
        kept = raw[:cut].count(b"\n")
        assert journal.read("r", 0) == (lines[:kept] or None)  # [D3.3-b]: no whole line, no response
        journal.append("r", 0, DONE_LINE)
        assert journal.read("r", 0) == [*lines[:kept], DONE_LINE]
        journal.close()
