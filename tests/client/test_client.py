"""``envelope.client`` against a real ``agent-ref serve`` app over loopback HTTP (spec/client.md).

The server is the reference app on the scripted model (``tests/server_support.running``).
Dropped connections are made on the client's side by a transport that breaks a body
after a chosen number of bytes, so the server sees a real disconnect and the client a
real ``ReadError``. Every stream a test obtains goes through the strict validator.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING, Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import create_app
from envelope import encode
from envelope.client import Backoff, HTTPError, ResumeError, Run, SyncRun, connect, connect_sync
from server_support import data_lines, get, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

    from envelope import Envelope

ARITHMETIC = "What is 5 + (10 * 2)?"
CONFIRM = "Please confirm: delete the temp files"


def kind(env: Envelope) -> str:
    """An envelope's wire ``type`` (the Structs carry it as their tag)."""
    return str(type(env).__struct_config__.tag)


FAST = Backoff(initial=0.0, factor=1.0, maximum=0.0, retries=5)


class _Cutting(httpx2.AsyncByteStream):
    def __init__(self, inner: Any, cut: int) -> None:
        self.inner = inner
        self.cut = cut

    async def __aiter__(self) -> AsyncIterator[bytes]:
        sent = 0
        async for chunk in self.inner:
            if sent + len(chunk) > self.cut:
                yield chunk[: self.cut - sent]
                raise httpx2.ReadError("cut by the test")
            sent += len(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


class CuttingTransport(httpx2.AsyncBaseTransport):
    """Breaks the body of the i-th streamed response after ``cuts[i]`` bytes; records the requests."""

    def __init__(self, cuts: list[int]) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.cuts = list(cuts)
        self.requests: list[httpx2.Request] = []

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        response = await self.inner.handle_async_request(request)
        if self.cuts and response.headers.get("content-type", "").startswith("text/event-stream"):
            stream = _Cutting(response.stream, self.cuts.pop(0))
            return httpx2.Response(response.status_code, headers=response.headers, stream=stream)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
def base() -> Iterator[str]:
    with running(create_app(store=MemoryStore(), model_factory=ScriptedModel)) as url:
        yield url


async def _read(url: str, prompt: str, cuts: list[int]) -> tuple[list[Envelope], Any, CuttingTransport]:
    transport = CuttingTransport(cuts)
    async with connect(url + "/agent/run", body={"prompt": prompt}, backoff=FAST, transport=transport) as run:
        envelopes = [env async for env in run]
        return envelopes, run, transport


def _undisturbed(url: str, run_id: str, response: int = 0) -> bytes:
    return get(url, f"/agent/runs/{run_id}/stream", params={"response": str(response)}).content


def test_a_run_is_read_whole(base: str) -> None:
    """[CL1-a] POST /agent/run: every envelope once, the transcript the server's replay gives."""
    envelopes, run, _ = asyncio.run(_read(base, ARITHMETIC, []))
    assert run.done
    assert run.run_id is not None
    lines = [encode(e) for e in envelopes]
    assert_valid([*lines, b"[DONE]"])
    replay = _undisturbed(base, run.run_id)
    assert_valid(replay)
    from envelope import reconstruct

    assert run.transcript.to_dict() == reconstruct(data_lines(replay)).to_dict()


def test_two_forced_disconnects_are_resumed_with_last_event_id(base: str) -> None:
    """[CL2-a] [CL2-b] two cut bodies: resumed with Last-Event-ID, every envelope once, in order."""
    from envelope import reconstruct

    envelopes, run, transport = asyncio.run(_read(base, ARITHMETIC, [900, 700]))
    resumes = [r for r in transport.requests if r.method == "GET"]
    assert len(resumes) == 2
    assert all(r.headers.get("last-event-id", "").startswith(run.run_id + ":0:") for r in resumes)
    assert run.transcript.to_dict() == reconstruct(data_lines(_undisturbed(base, run.run_id))).to_dict()
    assert_valid([*(encode(e) for e in envelopes), b"[DONE]"])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(1, 2000), max_size=4))
def test_any_set_of_dropped_connections_gives_the_undisturbed_transcript(base: str, cuts: list[int]) -> None:
    """[CL2-a] property: whatever bodies are cut where, the transcript is the server's replay of the run."""
    from envelope import reconstruct

    envelopes, run, _ = asyncio.run(_read(base, ARITHMETIC, cuts))
    assert run.run_id is not None
    assert run.transcript.to_dict() == reconstruct(data_lines(_undisturbed(base, run.run_id))).to_dict()
    assert_valid([*(encode(e) for e in envelopes), b"[DONE]"])


def test_the_frontend_tool_round_trip(base: str) -> None:
    """[CL3-a] the pause sets pending; answer() posts the results; the iteration goes on with the continuation."""

    async def go() -> tuple[list[str], Any]:
        kinds: list[str] = []
        async with connect(base + "/agent/run", body={"prompt": CONFIRM}, backoff=FAST) as run:
            async for env in run:
                kinds.append(kind(env))
                if run.pending is not None:
                    (tool,) = run.pending
                    await run.answer([{"tool_use_id": tool["tool_use_id"], "content": "yes"}])
            return kinds, run

    kinds, run = asyncio.run(go())
    assert "awaiting_frontend_tools" in kinds
    assert kinds.count("meta_init") == 2  # two responses, read as one recording
    assert kinds[-1] == "meta_final"
    final = run.transcript.to_dict()["agents"][run.agent_uuid]["blocks"][-1]
    assert final["data"]["stop_reason"] == "end_turn"
    assert run.done


def test_the_sync_twin_reads_and_answers(base: str) -> None:
    """[CL1-e] connect_sync: the same run, answered, without an event loop of the caller's."""
    with connect_sync(base + "/agent/run", body={"prompt": CONFIRM}, backoff=FAST) as run:
        kinds = []
        for env in run:
            kinds.append(kind(env))
            if run.pending is not None:
                run.answer([{"tool_use_id": run.pending[0]["tool_use_id"], "content": "yes"}])
        assert run.done
        assert run.protocol == "envelope"
        assert run.run_id is not None
        assert run.agent_uuid in run.transcript.to_dict()["agents"]
    assert kinds[-1] == "meta_final"
    assert kinds.count("meta_init") == 2


def test_the_sync_twin_takes_each_argument_of_connect() -> None:
    """[CL1-e] connect_sync names every argument of connect, in order, with its default and type (none drifts)."""

    def shape(fn: Any) -> list[tuple[str, Any, Any, Any]]:
        return [(p.name, p.kind, p.default, p.annotation) for p in inspect.signature(fn).parameters.values()]

    assert shape(connect_sync) == shape(connect)
    run = Run(None, "", None, None, None, Backoff(), keep_transcript=False)  # type: ignore[arg-type]  # never sent
    public = {name for name in dir(run) if not name.startswith("_")}
    assert public == {"agent_uuid", "answer", "done", "pending", "protocol", "run_id", "stop", "transcript"}
    assert public <= set(vars(SyncRun))  # each typed on the twin, none reached through a __getattr__
    assert not hasattr(SyncRun, "__getattr__")


def test_a_refused_request_is_an_http_error(base: str) -> None:
    """[CL1-b] a 4xx is HTTPError with the server's error type; never retried."""

    async def go() -> None:
        async with connect(base + "/agent/run", body={"no_prompt": 1}) as run:
            async for _ in run:
                pass

    with pytest.raises(HTTPError) as info:
        asyncio.run(go())
    assert 400 <= info.value.status < 500


def test_a_stream_that_ends_without_done_is_a_clear_error() -> None:
    """[CL2-b] a server that ends the body before [DONE] and cannot resume: ResumeError, said plainly."""
    body = b'data: {"type":"text","agent":"a","final":false,"delta":"hi"}\n\n'

    def handle(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    async def go() -> list[Any]:
        async with connect("http://x.invalid/agent/run", body={}, transport=httpx2.MockTransport(handle)) as run:
            return [e async for e in run]

    with pytest.raises(ResumeError, match=r"before \[DONE\]"):
        asyncio.run(go())


def test_headers_go_on_every_request(base: str) -> None:
    """[CL1-c] headers (a callable, asked each time) on the first request and on resumptions."""
    asked: list[int] = []

    def headers() -> dict[str, str]:
        asked.append(1)
        return {"x-test": str(len(asked))}

    async def go() -> CuttingTransport:
        transport = CuttingTransport([250])
        async with connect(
            base + "/agent/run", body={"prompt": ARITHMETIC}, headers=headers, backoff=FAST, transport=transport
        ) as run:
            [e async for e in run]
        return transport

    transport = asyncio.run(go())
    assert [r.headers["x-test"] for r in transport.requests] == ["1", "2"]


def test_without_transcript_memory_does_not_keep_the_stream(base: str) -> None:
    """[CL1-d] keep_transcript=False: envelopes only; asking for the transcript is a clear error."""
    from envelope.client import ClientError

    async def go() -> int:
        async with connect(base + "/agent/run", body={"prompt": ARITHMETIC}, keep_transcript=False) as run:
            n = len([e async for e in run])
            with pytest.raises(ClientError, match="keeps no transcript"):
                _ = run.transcript
            assert run._reconstructor is None
            return n

    assert asyncio.run(go()) > 3


def test_an_event_id_that_skips_is_a_resume_error() -> None:
    """[CL2-c] ids must follow one another: a skip is refused, never shown."""
    body = (
        b'id: r:0:0\ndata: {"type":"text","agent":"a","final":false,"delta":"hi"}\n\n'
        b'id: r:0:2\ndata: {"type":"text","agent":"a","final":true,"delta":""}\n\n'
    )

    def handle(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream", "x-run-id": "r"})

    async def go() -> list[Any]:
        async with connect("http://x.invalid/agent/run", body={}, transport=httpx2.MockTransport(handle)) as run:
            return [e async for e in run]

    with pytest.raises(ResumeError, match="expected sequence 1"):
        asyncio.run(go())


def test_stop_posts_to_the_run_and_gives_the_answer(base: str) -> None:
    """[CL3-b] stop() on a run that already ended: the server's 409 run_finished as an HTTPError."""

    async def go() -> None:
        async with connect(base + "/agent/run", body={"prompt": ARITHMETIC}, backoff=FAST) as run:
            [e async for e in run]
            with pytest.raises(HTTPError) as info:
                await run.stop()
            assert info.value.status == 409
            assert info.value.type == "run_finished"

    asyncio.run(go())
