"""A run's inbox is bounded (issue 38 case 7; spec server [IB1-a]..[IB1-d]).

One server in this process, its run held in a gated calculator while messages are sent:
past a bound a message is ``429 inbox_full`` with ``Retry-After`` and the bound named
(``413 message_too_large`` for one message over its own bound), nothing of it queued; the
model's next turn holds exactly the accepted messages, in order. On the memory, SQLite and
PostgreSQL stores (the bound checked in the store's transaction), and on a user's store
that keeps no inbox (the agent's own queue). Every stream is validated strictly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from agent_ref import MemoryStore, ScriptedModel, SQLiteStore
from agent_ref.server.app import ServerConfig, create_app
from agent_ref.store.postgres import PostgresStore
from agent_ref.store.sessions import InboxBounds, InboxReceipt, InboxStore
from agent_ref_support import user_texts
from envelope.delivery import DEFAULT_CALL_TIMEOUT
from fault_support import wait_until
from server_support import Gate, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from agent_ref.store.core import Store
    from agent_ref.store.state import RunRecord

ARITHMETIC = "What is 5 + (10 * 2)?"


class _NoInboxStore(MemoryStore):
    """A user's store that keeps no inbox: ``InboxStore`` does not match it, the agent queues in memory."""

    inbox_put = None  # type: ignore[assignment]  # a protocol member set to None is not implemented


def _stores(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[Store, Callable[[str], list[RunRecord]]]:
    """The server's store and how the test reads an agent's run records afterwards."""
    if kind == "postgres":
        url: str = request.getfixturevalue("pg_schema_url")

        def pg_runs(agent_uuid: str) -> list[RunRecord]:
            async def body() -> list[RunRecord]:
                reader = PostgresStore(url)  # a pool of this loop, not the server's
                try:
                    return await reader.runs(agent_uuid)
                finally:
                    await reader.aclose()

            return asyncio.run(body())

        return PostgresStore(url), pg_runs
    store: Store = (
        SQLiteStore(tmp_path / "a.db") if kind == "sqlite" else _NoInboxStore() if kind == "no_inbox" else MemoryStore()
    )
    return store, lambda agent_uuid: asyncio.run(store.runs(agent_uuid))


@contextlib.contextmanager
def _held_run(
    store: Store, bounds: InboxBounds, *, storage_timeout: float = DEFAULT_CALL_TIMEOUT
) -> Iterator[tuple[str, str, Gate, bytearray]]:
    """A server with ``bounds`` and a run held at its tool: (base URL, run id, gate, the stream's bytes)."""
    gate = Gate()
    config = ServerConfig(inbox_bounds=bounds, storage_timeout=storage_timeout)
    app = create_app(store=store, model_factory=ScriptedModel, tools=gate.tools(), config=config)
    body = bytearray()
    opened: dict[str, str] = {}
    with running(app) as base:

        def read() -> None:
            with (
                httpx2.Client(timeout=60) as client,
                client.stream("POST", base + "/agent/run", json={"prompt": ARITHMETIC}) as r,
            ):
                opened["run"] = r.headers["x-run-id"]
                for chunk in r.iter_bytes():
                    body.extend(chunk)

        reader = threading.Thread(target=read)
        reader.start()
        try:
            assert gate.entered.wait(30), "the run never reached its tool"
            # The tool may start before the reader thread has taken the response's headers.
            wait_until(lambda: "run" in opened, "the run's x-run-id header read")
            yield base, opened["run"], gate, body
        finally:
            gate.opened.set()
            reader.join(60)
        assert not reader.is_alive()


def _agent(body: bytes) -> str:
    first = next(line for line in body.split(b"\n") if line.startswith(b"data: {"))
    return str(json.loads(first[6:])["agent"])


def _refusal(answer: httpx2.Response) -> dict[str, Any]:
    error: dict[str, Any] = answer.json()["error"]
    return error


STORES = ["memory", "sqlite", "postgres", "no_inbox"]


@pytest.mark.parametrize("kind", STORES)
def test_spec_server_ib1_a_past_the_message_bound_429_and_the_turn_reads_what_was_accepted(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """[IB1-a] [IB1-b] [IB1-d]: 3 waiting at most: the 4th and 5th are 429 (bound named, Retry-After);
    the model's next turn holds the 3 accepted, in order, and nothing else."""
    store, runs = _stores(kind, tmp_path, request)
    if kind == "no_inbox":
        assert not isinstance(store, InboxStore)
    with _held_run(store, InboxBounds(max_messages=3, max_bytes=10_000, max_message_bytes=1000)) as (
        base,
        run,
        _,
        body,
    ):
        answers = [post(base, f"/agent/runs/{run}/messages", {"text": f"note {n}"}) for n in range(5)]
    assert [a.status_code for a in answers] == [202, 202, 202, 429, 429], [a.text for a in answers]
    assert [a.json()["queued"] for a in answers[:3]] == [1, 2, 3]
    for refused in answers[3:]:
        assert refused.headers["retry-after"] == "2"
        error = _refusal(refused)
        assert (error["type"], error["bound"], error["limit"], error["waiting"]) == (
            "inbox_full",
            "inbox_messages",
            3,
            3,
        )
        assert "--inbox-messages 3" in error["message"]
        assert error["run_id"] == run
    assert_valid(bytes(body))
    (record,) = runs(_agent(bytes(body)))
    texts = user_texts(record.messages)
    assert texts == [ARITHMETIC, "note 0", "note 1", "note 2"]  # at most what was accepted, once each


@pytest.mark.parametrize("kind", STORES)
def test_spec_server_ib1_c_bytes_in_all_429_and_one_message_over_its_bound_413(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """[IB1-b] [IB1-c]: 100 bytes waiting at most, 60 per message (UTF-8 bytes, not characters)."""
    store, runs = _stores(kind, tmp_path, request)
    bounds = InboxBounds(max_messages=10, max_bytes=100, max_message_bytes=60)
    texts = ["a" * 60, "b" * 41, "c" * 40, "d" * 61, "é" * 31, "e"]
    with _held_run(store, bounds) as (base, run, _, body):
        answers = [post(base, f"/agent/runs/{run}/messages", {"text": t}) for t in texts]
    assert [a.status_code for a in answers] == [202, 429, 202, 413, 413, 429], [a.text for a in answers]
    full = _refusal(answers[1])
    assert (full["bound"], full["limit"], full["waiting"]) == ("inbox_bytes", 100, 1)
    if kind != "no_inbox":
        assert full["waiting_bytes"] == 60
    assert "--inbox-bytes 100" in full["message"]
    for too_long, size in ((answers[3], 61), (answers[4], 62)):  # "é" is two bytes
        error = _refusal(too_long)
        assert (error["type"], error["bound"], error["limit"]) == ("message_too_large", "inbox_message_bytes", 60)
        assert f"has {size} bytes" in error["message"]
        assert "retry-after" not in too_long.headers  # no retry fits it
    assert _refusal(answers[5])["bound"] == "inbox_bytes"  # 100 bytes wait: even one more byte is past it
    assert_valid(bytes(body))
    (record,) = runs(_agent(bytes(body)))
    assert user_texts(record.messages) == [ARITHMETIC, "a" * 60, "c" * 40]


class _StalledInbox(SQLiteStore):
    """A SQLite store whose ``inbox_put`` waits for ``release``, as on a database that stopped answering."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered, self.release, self.committed = threading.Event(), threading.Event(), threading.Event()

    def inbox_put(self, run_id: str, text: str, *, bounds: InboxBounds | None = None) -> InboxReceipt:
        self.entered.set()
        assert self.release.wait(60), "the test never released the stalled write"
        receipt = super().inbox_put(run_id, text, bounds=bounds)
        self.committed.set()
        return receipt


def test_spec_server_sl1_c_a_stalled_inbox_write_is_503_and_what_it_commits_later_is_read(tmp_path: Path) -> None:
    """[SL1-c] The store's write does not answer within storage_timeout: 503 with Retry-After, naming
    nothing; when the store answers, the message it committed is read by the run's next turn, once."""
    store = _StalledInbox(tmp_path / "a.db")
    bounds = InboxBounds(max_messages=4, max_bytes=10_000, max_message_bytes=1000)
    with _held_run(store, bounds, storage_timeout=0.3) as (base, run, _, body):
        answer = post(base, f"/agent/runs/{run}/messages", {"text": "late note"})
        assert store.entered.is_set()
        assert not store.committed.is_set()  # answered while the write still hung
        store.release.set()
        assert store.committed.wait(30)
    assert answer.status_code == 503, answer.text
    assert answer.headers["retry-after"] == "1"
    assert str(tmp_path) not in answer.text
    assert_valid(bytes(body))
    (record,) = asyncio.run(store.runs(_agent(bytes(body))))
    assert user_texts(record.messages) == [ARITHMETIC, "late note"]  # committed late: delivered, once
