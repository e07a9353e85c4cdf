"""``Delivery(authorize=...)`` and resume links on a real uvicorn (spec delivery §6.2, [D7.2-a]).

The hook runs before anything of the run is read; a refusal is 404 exactly as an unknown
run (or the 401/403 the hook chose); a hook that fails is a 500 in our words; and
``query_token`` lets a resume link's ``?token=`` through for its own run only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import httpx2
import pytest
from starlette.applications import Starlette

from envelope import Emitter
from envelope.delivery import DONE_LINE, MemoryJournal, ResumeDenied, mint, query_token
from envelope.delivery.asgi import AUTHORIZE_FAILED, Delivery
from server_support import data_lines, read_events, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from starlette.requests import Request

KEY = b"a resume-link key of 32 bytes .."


def _lines(agent: str = "agent-1") -> list[bytes]:
    emitter = Emitter(agent, 2048)
    init = f'{{"format":"json","user_query":"q","agent_uuid":"{agent}","model":"fake"}}'
    out = [*emitter.buffered("meta_init", init), *emitter.streamed("text", "hello "), emitter.end("text")]
    out += emitter.buffered("meta_final", '{"stop_reason":"end_turn","total_steps":1,"cumulative_usage":{}}')
    return [*out, DONE_LINE]


class _Counting(MemoryJournal):
    """A memory journal that records every call made to it."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def append(self, run_id: str, response: int, line: bytes) -> None:
        self.calls.append("append")
        super().append(run_id, response, line)

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        self.calls.append("read")
        return super().read(run_id, response)

    def responses(self, run_id: str) -> int:
        self.calls.append("responses")
        return super().responses(run_id)

    def unfinished(self) -> list[tuple[str, int]]:
        self.calls.append("unfinished")
        return super().unfinished()


def _journal_with_run() -> _Counting:
    journal = _Counting()
    for line in _lines():
        MemoryJournal.append(journal, "run-1", 0, line)
    return journal


@pytest.fixture
def serve() -> Iterator[Callable[[Delivery], str]]:
    """Serve a ``Delivery``'s resume route; yield a function giving its base URL."""
    stack: list[object] = []

    def start(delivery: Delivery) -> str:
        ctx = running(Starlette(routes=[delivery.route()]))
        stack.append(ctx)
        return ctx.__enter__()

    yield start
    for ctx in reversed(stack):
        ctx.__exit__(None, None, None)  # type: ignore[attr-defined]  # a context manager


def _same_answer(a: httpx2.Response, b: httpx2.Response) -> None:
    """Two answers a client cannot tell apart: status, body and headers (but the date)."""
    assert (a.status_code, a.content) == (b.status_code, b.content)
    drop = {"date"}
    assert {k: v for k, v in a.headers.items() if k not in drop} == {
        k: v for k, v in b.headers.items() if k not in drop
    }


def test_spec_delivery_6_2_a_the_hook_runs_before_anything_is_read(serve: Callable[[Delivery], str]) -> None:
    """[D6.2-a]: an async hook held open sees no journal call yet; allowed, the run is replayed whole and valid."""
    journal = _journal_with_run()
    seen: list[tuple[str, list[str]]] = []

    async def authorize(_request: Request, run_id: str) -> None:
        seen.append((run_id, list(journal.calls)))
        await asyncio.sleep(0)  # an async check (a database) may await here

    base = serve(Delivery(journal, authorize=authorize))
    answer = httpx2.get(base + "/streams/run-1", timeout=30)
    assert answer.status_code == 200
    assert seen == [("run-1", [])]  # no recovery, no read, nothing, before the hook returned
    assert "read" in journal.calls
    assert data_lines(answer.content) == _lines()
    assert_valid(answer.content)


@pytest.mark.parametrize("refusal", ["raise", "false", "async-false"])
def test_spec_delivery_6_2_b_a_refusal_is_an_unknown_run(serve: Callable[[Delivery], str], refusal: str) -> None:
    """[D6.2-b]: ResumeDenied() or False is the unknown run's very answer; the journal is never called."""
    journal = _journal_with_run()

    def deny(_request: Request, _run_id: str) -> bool:
        if refusal == "raise":
            raise ResumeDenied(404, "not_yours", "this run is alice's")
        return False

    async def deny_async(_request: Request, _run_id: str) -> bool:
        return False

    base = serve(Delivery(journal, authorize=deny_async if refusal == "async-false" else deny))
    plain = serve(Delivery(MemoryJournal()))
    with httpx2.Client(timeout=30) as client:
        refused = client.get(base + "/streams/run-1", headers={"Last-Event-ID": "run-1:0:1"})
        unknown = client.get(plain + "/streams/run-1", headers={"Last-Event-ID": "run-1:0:1"})
    assert refused.status_code == 404
    _same_answer(refused, unknown)
    assert b"alice" not in refused.content
    assert journal.calls == []


def test_spec_delivery_6_2_b_401_and_403_carry_the_hooks_words(serve: Callable[[Delivery], str]) -> None:
    """[D6.2-b]: a 401 or 403 the hook chose sends its kind, message and headers; nothing is read."""
    journal = _journal_with_run()

    def authorize(request: Request, _run_id: str) -> None:
        if "authorization" not in request.headers:
            raise ResumeDenied(401, "login_needed", "log in first", headers={"WWW-Authenticate": 'Bearer realm="s"'})
        raise ResumeDenied(403, "forbidden", "read-only users cannot follow streams")

    base = serve(Delivery(journal, authorize=authorize))
    with httpx2.Client(timeout=30) as client:
        anonymous = client.get(base + "/streams/run-1")
        reader = client.get(base + "/streams/run-1", headers={"Authorization": "Bearer x"})
    assert anonymous.status_code == 401
    assert anonymous.json() == {"error": {"type": "login_needed", "message": "log in first"}}
    assert anonymous.headers["www-authenticate"] == 'Bearer realm="s"'
    assert reader.status_code == 403
    assert reader.json()["error"]["type"] == "forbidden"
    assert journal.calls == []
    with pytest.raises(ValueError, match="401, 403 or 404, not 500"):
        ResumeDenied(500)


@pytest.mark.parametrize("failure", ["raises", "returns-junk"])
def test_spec_delivery_6_2_c_a_failing_hook_is_a_500_in_our_words(
    serve: Callable[[Delivery], str], failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    """[D6.2-c]: the hook's exception is logged, the client reads AUTHORIZE_FAILED only; nothing is read."""
    journal = _journal_with_run()

    def authorize(_request: Request, _run_id: str) -> object:
        if failure == "raises":
            raise RuntimeError("users.db at /srv/secret-customer failed")
        return "yes"

    base = serve(Delivery(journal, authorize=authorize))  # type: ignore[arg-type]  # a wrong hook, on purpose
    with caplog.at_level(logging.ERROR, logger="envelope.delivery.asgi"):
        answer = httpx2.get(base + "/streams/run-1", timeout=30)
    assert answer.status_code == 500
    assert answer.json() == {"error": AUTHORIZE_FAILED}
    assert b"secret" not in answer.content
    assert b"Traceback" not in answer.content
    assert journal.calls == []
    logged = [r for r in caplog.records if r.name == "envelope.delivery.asgi"]
    assert logged, "the hook's failure was not logged"
    if failure == "raises":
        assert logged[0].exc_info is not None
        assert "secret-customer" in str(logged[0].exc_info[1])


def test_spec_delivery_7_2_a_a_resume_link_grants_its_run_only(serve: Callable[[Delivery], str]) -> None:
    """[D7.2-a]: ?token= of run-1 replays run-1 (and its rest with Last-Event-ID); elsewhere or otherwise refused."""
    journal = _journal_with_run()
    for line in _lines("agent-2"):
        MemoryJournal.append(journal, "run-2", 0, line)
    base = serve(Delivery(journal, authorize=query_token([KEY])))
    plain = serve(Delivery(MemoryJournal()))
    link = mint(KEY, "run-1", ttl=60)
    with httpx2.Client(timeout=30) as client:
        whole = client.get(base + "/streams/run-1", params={"token": link})
        assert whole.status_code == 200
        assert_valid(whole.content)
        events = read_events(whole.content)
        rest = client.get(base + "/streams/run-1", params={"token": link}, headers={"Last-Event-ID": events[2].id})
        assert data_lines(rest.content) == _lines()[3:]
        unknown = client.get(plain + "/streams/run-2")
        other_run = client.get(base + "/streams/run-2", params={"token": link})
        _same_answer(other_run, unknown)
        other_scope = client.get(base + "/streams/run-1", params={"token": mint(KEY, "run-1", scope="events", ttl=60)})
        assert other_scope.status_code == 404
        refusals = {
            "token_missing": client.get(base + "/streams/run-1"),
            "token_missing ": client.get(base + "/streams/run-1", headers={"Authorization": f"Bearer {link}"}),
            "token_expired": client.get(
                base + "/streams/run-1", params={"token": mint(KEY, "run-1", ttl=1, now=time.time() - 3600)}
            ),
            "token_bad_signature": client.get(
                base + "/streams/run-1", params={"token": mint(b"another key, 32 bytes long ....", "run-1", ttl=60)}
            ),
            "token_malformed": client.get(base + "/streams/run-1", params={"token": "x" * 5000}),
        }
    for kind, answer in refusals.items():
        assert answer.status_code == 401, kind
        assert answer.json()["error"]["type"] == kind.strip()
        assert link not in answer.text
