"""``Agent.rewind`` after a compaction: the files of runs folded into it are placed, kept or refused (spec [HY3-a]).

"remember that X" is a ``view`` (step 1), a ``create`` or ``str_replace`` of
``/memories/notes.md`` (step 2, the run's one file-changing step), then the answer.
Every response is validated strictly by the autouse tee (tests/agent_ref_validating.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_ref import Agent, MemoryStore, ScriptedModel, SQLiteStore, StateError, ToolResultTrimmer
from agent_ref.store import sessions
from agent_ref.store.sessions import position
from agent_ref.store.state import AgentState, RunMark, encode_state
from agent_ref.tools.memory import memory_tool
from agent_ref_support import assert_valid_responses, fast_retry

if TYPE_CHECKING:
    from pathlib import Path

    from agent_ref.run.compaction import CompactionRequest

A, B = "tea is green", "the sky is blue"


def _notes(root: Path) -> str:
    path = root / "notes.md"
    return path.read_text() if path.exists() else ""


def _remember(agent: Agent, fact: str) -> str:
    lines: list[bytes] = []
    result = asyncio.run(agent.run(f"Please remember that {fact}.", lines.append))
    assert_valid_responses(lines)
    assert result.stop_reason == "end_turn", result.stop_reason
    return result.run_id


@dataclass
class KeepLast:
    """A compactor that, at its ``at``-th call, keeps the context's last ``keep`` messages after a summary turn.

    ``keep`` odd: the kept part starts with an assistant turn, after the summary's user turn.
    With ``acknowledge``, the summary is a user turn and an assistant turn, then the last message;
    ``prompt`` is added to the summary's turn (the run's question, which the scripted model reads).
    """

    at: int
    keep: int = 1
    acknowledge: bool = False
    prompt: str = ""
    threshold: int = 0
    strategy: str = "keep_last"
    calls: list[int] = field(default_factory=list)

    async def compact(self, request: CompactionRequest) -> list[dict[str, Any]] | None:
        self.calls.append(len(request.messages))
        if len(self.calls) != self.at:
            return None
        texts = ["Summary: earlier.", *([self.prompt] if self.prompt else [])]
        summary: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": t} for t in texts]}]
        if self.acknowledge:
            summary.append({"role": "assistant", "content": [{"type": "text", "text": "Noted."}]})
        return summary + [dict(m) for m in request.messages[-self.keep :]]


@pytest.mark.parametrize("which", ["memory", "sqlite"])
def test_hy3_a_a_run_summarised_away_keeps_its_files(tmp_path: Path, which: str) -> None:
    """Run 1 writes A; a summary replaces it; run 2 writes B. Rewind to step 0: A stays (the summary says it), B goes [HY3-a]."""
    root = tmp_path / "mem"
    store = MemoryStore() if which == "memory" else SQLiteStore(tmp_path / "a.db")
    agent = Agent(ScriptedModel(), tools=[memory_tool(root)], store=store, retry=fast_retry())
    _remember(agent, A)
    agent.compact()  # the summary replaces run 1 before run 2's first call
    _remember(agent, B)
    assert A in _notes(root)
    assert B in _notes(root)
    done = asyncio.run(agent.rewind(step=0))
    assert done.files is not None
    assert done.files.to_step == 1
    assert done.files.undone_steps == (2,)
    assert A in _notes(root)
    assert B not in _notes(root)


def test_hy3_a_a_compaction_inside_a_run_places_its_later_steps(tmp_path: Path) -> None:
    """A compaction before run 2's step 2 (its create): step 1 after it is run 2's step 2; run 1 stays [HY3-a]."""
    root = tmp_path / "mem"
    compactor = KeepLast(
        at=5, keep=2, prompt=f"Please remember that {B}."
    )  # calls: run 1's three, then run 2's view, then its create
    agent = Agent(ScriptedModel(), tools=[memory_tool(root)], retry=fast_retry(), compactor=compactor)
    _remember(agent, A)
    _remember(agent, B)
    assert len(compactor.calls) >= 5
    marks = [(m.compaction_step, m.messages) for m in agent.state.run_marks if m.compaction_step]
    assert marks == [(2, 3)]  # summary, run 2's view and its result
    done = asyncio.run(agent.rewind(step=1))  # keeps run 2's view: its create is undone, run 1's stays
    assert done.files is not None
    assert done.files.undone_steps == (2,)
    assert A in _notes(root)
    assert B not in _notes(root)


def test_hy3_a_a_cut_inside_the_compacted_context_is_refused_when_files_depend_on_it(tmp_path: Path) -> None:
    """A compacted context with an assistant turn of its own: a cut there refuses, naming the step to use [HY3-a]."""
    root = tmp_path / "mem"
    store = SQLiteStore(tmp_path / "a.db")
    compactor = KeepLast(at=4, keep=1, acknowledge=True)  # before run 2's first call
    agent = Agent(ScriptedModel(), tools=[memory_tool(root)], store=store, retry=fast_retry(), compactor=compactor)
    _remember(agent, A)
    _remember(agent, B)
    state = asyncio.run(store.load(agent.agent_uuid))
    assert state is not None
    stored = encode_state(state)
    notes = _notes(root)
    with pytest.raises(StateError, match=r"cuts into the context a compaction wrote .* rewind to step 1 or later"):
        asyncio.run(agent.rewind(step=0))
    after = asyncio.run(store.load(agent.agent_uuid))
    assert after is not None
    assert encode_state(after) == stored
    assert _notes(root) == notes
    done = asyncio.run(agent.rewind(step=1))  # the whole compacted context kept: run 2's steps undone
    assert done.files is not None
    assert done.files.to_step == 1
    assert A in _notes(root)
    assert B not in _notes(root)


def test_hy3_a_rewinding_to_before_the_first_run_reverts_the_compacted_files_too(tmp_path: Path) -> None:
    """Rewind to before run 1 (an empty context): every file change goes, the compacted ones included [HY3-a]."""
    root = tmp_path / "mem"
    agent = Agent(ScriptedModel(), tools=[memory_tool(root)], retry=fast_retry())
    first = _remember(agent, A)
    agent.compact()
    _remember(agent, B)
    done = asyncio.run(agent.rewind(run=first))
    assert done.kept_messages == 0
    assert done.files is not None
    assert done.files.to_step == 0
    assert _notes(root) == ""


def test_hy3_a_a_trimmer_moves_nothing_and_adds_no_mark(tmp_path: Path) -> None:
    """Trimmed tool results leave every turn in place: no compaction mark, steps placed as before [HY3-a]."""
    root = tmp_path / "mem"
    agent = Agent(ScriptedModel(), tools=[memory_tool(root)], retry=fast_retry())
    _remember(agent, A)
    agent.compact(ToolResultTrimmer(keep_recent=0))
    _remember(agent, B)
    assert not [m for m in agent.state.run_marks if m.compaction_step]
    done = asyncio.run(agent.rewind(step=1))  # run 1's view only: both creates undone
    assert done.files is not None
    assert done.files.to_step == 0
    assert _notes(root) == ""


def _files_step_before(state: AgentState, kept: int, points: list[tuple[int, str, int]]) -> int:
    """``sessions.files_step`` as it was before [HY3-a] (the reference when no compaction moved the context)."""
    messages = state.messages
    marks = sorted(state.run_marks, key=lambda m: position(m.messages, m.tail))
    kept_steps: dict[str, int] = {}
    for i, mark in enumerate(marks):
        end = marks[i + 1].messages if i + 1 < len(marks) else len(messages)
        turns = [j for j in range(mark.messages, min(end, len(messages))) if messages[j].get("role") == "assistant"]
        kept_steps[mark.run_id] = sum(1 for j in turns if j < kept)
    last = 0
    for step, run_id, run_step in points:
        if run_id in kept_steps and run_step > kept_steps[run_id]:
            return min(last, step - 1)
        last = step
    return last


@st.composite
def _histories(draw: st.DrawFn) -> tuple[AgentState, int, list[tuple[int, str, int]]]:
    """Runs of 1-4 steps each (a prompt, then assistant and user turns), records of any of their steps, a cut."""
    state = AgentState(agent_uuid="a", model="m")
    runs = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    for r, steps in enumerate(runs):
        run_id = f"run-{r}"
        sessions.mark_run(state, run_id)
        state.messages.append({"role": "user", "content": [{"type": "text", "text": f"prompt {r}"}]})
        for s in range(steps):
            state.messages.append({"role": "assistant", "content": [{"type": "text", "text": f"{r}.{s}"}]})
            if s < steps - 1:
                state.messages.append({"role": "user", "content": [{"type": "text", "text": "go on"}]})
    if draw(st.booleans()):
        state.run_marks.insert(0, RunMark(run_id="legacy", messages=0))
    candidates = [(f"run-{r}", s) for r, steps in enumerate(runs) for s in range(1, steps + 2)]  # +1: a lost step
    chosen = draw(st.lists(st.sampled_from([*candidates, ("unmarked", 1)]), max_size=6))
    points = [(i + 1, run_id, s) for i, (run_id, s) in enumerate(chosen)]
    kept = draw(st.integers(0, len(state.messages)))
    return state, kept, points


@given(_histories())
def test_hy3_a_without_a_compaction_placement_is_unchanged(
    case: tuple[AgentState, int, list[tuple[int, str, int]]],
) -> None:
    """No compaction mark: ``files_step`` answers what it answered before [HY3-a] (any runs, records, cut)."""
    state, kept, points = case
    assert sessions.files_step(state, kept, points) == _files_step_before(state, kept, points)


@given(st.integers(1, 3), st.integers(0, 3), st.integers(1, 4), st.data())
def test_hy3_a_after_a_summary_every_step_cut_keeps_the_summarised_records(
    before: int, done: int, after: int, data: st.DataObject
) -> None:
    """A summary replaces ``before`` steps of records (and ``done`` steps of the current run): any ``step=N`` keeps them [HY3-a].

    After it, ``after`` more steps of the run each record a change; a cut at step ``N`` keeps
    exactly the first ``N`` of those, never raises, and keeps every record made before the summary.
    """
    state = AgentState(agent_uuid="a", model="m")
    sessions.mark_run(state, "old")
    state.messages = [{"role": "user", "content": [{"type": "text", "text": "old"}]}]
    points = [(i + 1, "old", i + 1) for i in range(before)]
    sessions.mark_run(state, "now")
    state.messages.append({"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    replaced = list(state.messages)
    state.messages = [{"role": "user", "content": [{"type": "text", "text": "summary"}]}]
    points += [(before + i + 1, "now", i + 1) for i in range(done)]
    sessions.mark_compaction(state, "now", done + 1, replaced)
    for k in range(after):
        state.messages.append({"role": "assistant", "content": [{"type": "text", "text": f"step {done + 1 + k}"}]})
        state.messages.append({"role": "user", "content": [{"type": "text", "text": "go on"}]})
        points.append((len(points) + 1, "now", done + 1 + k))
    n = data.draw(st.integers(0, after))
    kept, _ = sessions.rewind_cut(state, step=n)
    assert sessions.files_step(state, kept, points) == before + done + n
