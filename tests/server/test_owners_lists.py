"""The lists answer in a bounded number of store queries, not one per agent (spec server [OW3-a]),
and ``GET /agent/runs`` says when each run was and what it asked, newest first ([OW2-b]).

A wrapper over the real store (SQLite, PostgreSQL) counts every store call a request makes;
the count with six agents is the count with two. Every stream a run answered is validated.
"""

from __future__ import annotations

import collections
import inspect
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import create_app
from agent_ref.server.owners import QUERY_SHOWN, listed_query
from agent_ref.store.postgres import PostgresStore
from server_support import get, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path


class Counting:
    """A store that counts each coroutine method called on it, by name, and passes the call on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: collections.Counter[str] = collections.Counter()

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if not inspect.iscoroutinefunction(value):
            return value

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await value(*args, **kwargs)

        return counted


#: A prompt that pauses the scripted model on a ``confirm`` question (a run left in flight).
CONFIRM = "Please confirm: delete the temp files"


#: The times each run of ``GET /agent/runs`` carries (spec server [OW2-b]).
TIMES = ("started_at", "finished_at", "updated_at")


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if kind == "postgres":
        return PostgresStore(request.getfixturevalue("pg_schema_url"))
    return SQLiteStore(tmp_path / "a.db")


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_spec_ow3_a_the_lists_cost_the_same_queries_for_two_agents_and_six(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``GET /agent/runs`` and ``GET /agents``: one ``agents`` and one ``runs_of``, never a ``runs`` per agent [OW3-a]."""
    store = Counting(_store(kind, tmp_path, request))
    app = create_app(store=store, model_factory=ScriptedModel)
    counts: dict[int, tuple[collections.Counter[str], collections.Counter[str]]] = {}
    listed: dict[int, list[str]] = {}
    with running(app) as base:

        def measured(path: str) -> tuple[collections.Counter[str], Any]:
            store.calls.clear()
            answer = get(base, path)
            assert answer.status_code == 200, answer.text
            return collections.Counter(store.calls), answer.json()

        started: list[str] = []
        for total in (2, 6):
            while len(started) < total:
                answer = post(base, "/agent/run", {"prompt": f"What is {len(started)} + 1?"})
                assert answer.status_code == 200, answer.text
                assert_valid(answer.content)
                started.append(answer.headers["x-run-id"])
            runs_calls, runs = measured("/agent/runs")
            agents_calls, agents = measured("/agents")
            counts[total] = (runs_calls, agents_calls)
            listed[total] = sorted(r["run_id"] for r in runs["runs"])
            assert len(agents["agents"]) == total
    for total in (2, 6):
        runs_calls, agents_calls = counts[total]
        assert runs_calls == {"agents": 1, "runs_of": 1}, runs_calls
        assert agents_calls == {"agents": 1}, agents_calls
    assert listed[6] == sorted(started)  # every run listed, each once


def test_spec_ow3_a_a_store_without_runs_of_still_lists(tmp_path: Path) -> None:
    """A ``Store`` of the protocol that has no ``runs_of`` lists at one ``runs`` an agent [OW3-a]."""

    class Plain(Counting):
        def __getattr__(self, name: str) -> Any:
            if name == "runs_of":
                raise AttributeError(name)
            return super().__getattr__(name)

    store = Plain(SQLiteStore(tmp_path / "a.db"))
    app = create_app(store=store, model_factory=ScriptedModel)
    with running(app) as base:
        made = [post(base, "/agent/run", {"prompt": f"What is {n} + 2?"}) for n in range(2)]
        store.calls.clear()
        runs = get(base, "/agent/runs").json()["runs"]
    for answer in made:
        assert_valid(answer.content)
    assert sorted(r["run_id"] for r in runs) == sorted(a.headers["x-run-id"] for a in made)
    assert store.calls["runs"] == 2


def test_spec_ow2_b_a_query_is_cut_at_its_bound_and_says_so() -> None:
    """[OW2-b]: up to ``QUERY_SHOWN`` characters whole; one more and it is cut to the bound, ending in an ellipsis."""
    whole = "q" * QUERY_SHOWN
    assert listed_query(whole) == whole
    assert listed_query("") == ""
    cut = listed_query(whole + "é")
    assert cut == "q" * (QUERY_SHOWN - 1) + "\u2026"
    assert len(cut) == QUERY_SHOWN


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_spec_ow2_b_the_runs_list_says_when_and_what_newest_first_across_agents(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """[OW2-b]: times and queries on every run, the paused one's from its agent's row; newest first across agents.

    The runs go A, B, A again, then C paused: newest first is C, A's second, B, A's first
    (the agents' order would put A's two together). Still one ``agents`` and one ``runs_of`` [OW3-a].
    """
    store = Counting(_store(kind, tmp_path, request))
    app = create_app(store=store, model_factory=ScriptedModel)
    long_prompt = "What is 1 + 1? " + "and then some more words " * 12
    with running(app) as base:

        def run(prompt: str, agent_uuid: str | None = None) -> tuple[str, str]:
            answer = post(base, "/agent/run", {"prompt": prompt} | ({"agent_uuid": agent_uuid} if agent_uuid else {}))
            assert answer.status_code == 200, answer.text
            assert_valid(answer.content)
            return answer.headers["x-run-id"], answer.headers["x-agent-uuid"]

        a1, agent_a = run(long_prompt)
        b1, _ = run("What is 2 + 2?")
        a2, _ = run("and 3 + 3?", agent_a)
        c1, _ = run(CONFIRM)
        store.calls.clear()
        answer = get(base, "/agent/runs")
        calls = collections.Counter(store.calls)
    assert calls == {"agents": 1, "runs_of": 1}, calls
    runs = {r["run_id"]: r for r in answer.json()["runs"]}
    assert list(runs) == [c1, a2, b1, a1]
    assert [runs[r]["user_query"] for r in (a2, b1, c1)] == ["and 3 + 3?", "What is 2 + 2?", CONFIRM]
    assert runs[a1]["user_query"] == long_prompt[: QUERY_SHOWN - 1] + "\u2026"
    for run_id in (a1, b1, a2):
        listed = runs[run_id]
        assert set(listed) == {"run_id", "agent_uuid", "status", "stop_reason", *TIMES, "user_query"}
        assert (listed["status"], listed["stop_reason"]) == ("finished", "end_turn")
        assert 0 < listed["started_at"] <= listed["finished_at"] == listed["updated_at"]
    paused = runs[c1]
    assert (paused["status"], paused["stop_reason"]) == ("awaiting_frontend_tools", None)
    assert (paused["started_at"], paused["finished_at"]) == (None, None)
    times = [r["updated_at"] for r in runs.values()]
    assert times == sorted(times, reverse=True)
