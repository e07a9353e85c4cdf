"""The lists answer in a bounded number of store queries, not one per agent (spec server [OW3-a]).

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
