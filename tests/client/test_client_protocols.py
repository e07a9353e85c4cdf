"""``envelope.client`` reading AG-UI and UI message streams through the converters (spec/client.md §CL4).

The responses are served by ``httpx2.MockTransport`` (no socket): these tests are about
which protocol a response is read as, what each event becomes, how an unfinished stream
ends, and memory on an endless one. The real servers are in ``test_client_servers.py``.
Every stream the client gives is checked by the strict validator, and every transcript
against what the converter itself makes of the same events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tracemalloc
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from envelope import EnvelopeError, encode, reconstruct
from envelope.client import ClientError, IncompleteError, connect
from envelope.interop.agui import AguiToEnvelope
from envelope.interop.vercel import VercelToEnvelope
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable, Sequence

    from envelope import Envelope

URL = "http://agent.invalid/agent/run"

AGUI: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 'Let me check "that" \\ for you.'},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "confirm", "parentMessageId": "m1"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"question": '},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"delete?"}'},
    {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    {
        "type": "RUN_FINISHED",
        "threadId": "t1",
        "runId": "r1",
        "outcome": {"type": "success", "pendingToolCallIds": ["c1"]},
    },
]

VERCEL: list[dict[str, Any] | str] = [
    {"type": "start", "messageId": "msg1"},
    {"type": "start-step"},
    {"type": "reasoning-start", "id": "r1"},
    {"type": "reasoning-delta", "id": "r1", "delta": "Thinking about it."},
    {"type": "reasoning-end", "id": "r1"},
    {"type": "text-start", "id": "t1"},
    {"type": "text-delta", "id": "t1", "delta": "The answer "},
    {"type": "text-delta", "id": "t1", "delta": "is 25."},
    {"type": "text-end", "id": "t1"},
    {"type": "finish-step"},
    {"type": "finish"},
    "[DONE]",
]


def sse(events: Sequence[dict[str, Any] | str]) -> bytes:
    """The SSE body of ``events`` (a string is sent as it is: ``[DONE]``)."""
    return b"".join(b"data: " + (e if isinstance(e, str) else json.dumps(e)).encode() + b"\n\n" for e in events)


def serving(body: bytes, headers: dict[str, str] | None = None) -> httpx2.MockTransport:
    def handle(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream", **(headers or {})})

    return httpx2.MockTransport(handle)


def converted(converter: AguiToEnvelope | VercelToEnvelope, events: Sequence[dict[str, Any] | str]) -> list[bytes]:
    """What the converter alone makes of ``events``: the reference the client must equal."""
    lines = [line for e in events for line in converter.feed(e if isinstance(e, str) else json.dumps(e))]
    return lines + converter.close()


async def read(transport: httpx2.AsyncBaseTransport, **options: Any) -> tuple[list[Envelope], Any]:
    async with connect(URL, body={}, transport=transport, **options) as run:
        return [env async for env in run], run


def valid(envelopes: list[Envelope]) -> None:
    assert_valid([*(encode(e) for e in envelopes), b"[DONE]"])


def test_an_agui_stream_is_told_by_its_first_event_and_read_through_the_converter() -> None:
    """[CL4-a] no header names AG-UI: RUN_STARTED first does; [CL4-b] the transcript is the converter's."""
    envelopes, run = asyncio.run(read(serving(sse(list(AGUI)))))
    assert run.protocol == "agui"
    valid(envelopes)
    reference = converted(AguiToEnvelope(), list(AGUI))
    assert [encode(e) for e in envelopes] == reference[:-1]  # the converter's lines, [DONE] left out
    assert run.transcript.to_dict() == reconstruct(reference).to_dict()
    # [CL4-d] the run's pending calls, and the iteration ends with the response
    assert run.pending == [{"tool_use_id": "c1", "name": "confirm", "input": {"question": "delete?"}}]
    assert not run.done


def test_a_ui_message_stream_is_told_by_its_header() -> None:
    """[CL4-a] x-vercel-ai-ui-message-stream: v1 names the AI SDK's stream."""
    envelopes, run = asyncio.run(read(serving(sse(VERCEL), {"x-vercel-ai-ui-message-stream": "v1"})))
    assert run.protocol == "vercel"
    assert run.done
    valid(envelopes)
    reference = converted(VercelToEnvelope(), VERCEL)
    assert run.transcript.to_dict() == reconstruct(reference).to_dict()
    texts = [b.content for blocks in run.transcript.agents.values() for b in blocks if b.type == "text"]
    assert texts == ["The answer is 25."]


def test_the_callers_protocol_wins() -> None:
    """[CL4-a] protocol="vercel" reads a body without the header; protocol="envelope" refuses an AG-UI body plainly."""
    envelopes, run = asyncio.run(read(serving(sse(VERCEL)), protocol="vercel"))
    assert run.protocol == "vercel"
    valid(envelopes)
    with pytest.raises(EnvelopeError, match="unknown envelope type 'RUN_STARTED'"):  # the decoder's, said plainly
        asyncio.run(read(serving(sse(list(AGUI))), protocol="envelope"))
    with pytest.raises(ClientError, match="protocol='sse'"):
        asyncio.run(read(serving(b""), protocol="sse"))


@pytest.mark.parametrize(
    ("headers", "said"),
    [
        ({"x-vercel-ai-ui-message-stream": "v2"}, "'v2' is not a version"),
        ({"content-type": "application/vnd.ag-ui.event+proto"}, "protobuf"),
    ],
)
def test_a_response_this_client_cannot_read_is_refused_by_its_headers(headers: dict[str, str], said: str) -> None:
    """[CL4-a] another version of the UI message stream, AG-UI's protobuf: ClientError before any event."""
    with pytest.raises(ClientError, match=said):
        asyncio.run(read(serving(sse(VERCEL), headers)))


def test_an_agui_stream_without_run_finished_is_a_clear_error_and_keeps_what_it_read() -> None:
    """[CL4-c] the body ends inside the run: IncompleteError says what is missing; the text read is in the transcript."""
    cut = list(AGUI[:3])
    got: list[Envelope] = []

    async def go() -> tuple[Any, str]:
        async with connect(URL, body={}, transport=serving(sse(cut))) as run:
            try:
                async for env in run:
                    got.append(env)
            except IncompleteError as exc:
                return run, str(exc)
            raise AssertionError("the iteration ended without an error")

    run, said = asyncio.run(go())
    assert "the AG-UI stream ended after 3 events without RUN_FINISHED or RUN_ERROR" in said
    assert_valid([encode(e) for e in got], expect=["E120", "W161"])  # a cut stream: open, no [DONE]
    texts = [b.content for blocks in run.transcript.agents.values() for b in blocks if b.type == "text"]
    assert texts == ['Let me check "that" \\ for you.']


def test_a_ui_message_stream_without_done_is_a_clear_error() -> None:
    """[CL4-c] `finish` came but no `[DONE]`: the stream did not end as the protocol says."""
    headers = {"x-vercel-ai-ui-message-stream": "v1"}
    with pytest.raises(IncompleteError, match=r"after 11 events without \[DONE\]"):
        asyncio.run(read(serving(sse(VERCEL[:-1]), headers)))


def test_a_broken_agui_connection_is_said_and_not_resumed() -> None:
    """[CL4-c] a transport error mid-stream: IncompleteError naming it; no second request."""
    requests: list[httpx2.Request] = []

    class Broken(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield sse(list(AGUI[:4]))
            raise httpx2.ReadError("reset by peer")

    def handle(request: httpx2.Request) -> httpx2.Response:
        requests.append(request)
        return httpx2.Response(200, stream=Broken(), headers={"content-type": "text/event-stream", "x-run-id": "r1"})

    with pytest.raises(IncompleteError, match="the connection broke: reset by peer"):
        asyncio.run(read(httpx2.MockTransport(handle)))
    assert len(requests) == 1


def test_answer_is_refused_on_a_foreign_run() -> None:
    """[CL4-d] answer() speaks /agent/tool_results; an AG-UI run is continued by the caller's next RunAgentInput."""

    async def go() -> None:
        async with connect(URL, body={}, transport=serving(sse(list(AGUI)))) as run:
            async for _ in run:
                pass
            assert run.pending is not None
            with pytest.raises(ClientError, match="a agui run is continued by a new request"):
                await run.answer([{"tool_use_id": "c1", "content": "yes"}])

    asyncio.run(go())


# ---------------------------------------------------------------------------------------
# bounded memory on an endless stream [CL1-d]


def _endless_envelope(n: int) -> str:
    if n == 0:
        meta = {"format": "json", "user_query": "q", "agent_uuid": "a", "model": "m"}
        return json.dumps({"type": "meta_init", "agent": "a", "final": True, "delta": json.dumps(meta)})
    return json.dumps({"type": "text", "agent": "a", "final": False, "delta": f"word {n} "})


def _endless_agui(n: int) -> str:
    if n == 0:
        return json.dumps({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    if n == 1:
        return json.dumps({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
    return json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"word {n} "})


def _endless_vercel(n: int) -> str:
    if n == 0:
        return json.dumps({"type": "start"})
    if n == 1:
        return json.dumps({"type": "text-start", "id": "t"})
    return json.dumps({"type": "text-delta", "id": "t", "delta": f"word {n} "})


class Endless(httpx2.AsyncByteStream):
    """A body that never ends: event ``n`` is ``make(n)``, 50 events a chunk."""

    def __init__(self, make: Callable[[int], str]) -> None:
        self.make = make

    async def __aiter__(self) -> AsyncIterator[bytes]:
        n = 0
        while True:
            yield b"".join(b"data: " + self.make(n + k).encode() + b"\n\n" for k in range(50))
            n += 50


def _growth(make: Callable[[int], str], *, keep_transcript: bool, first: int = 2_000, last: int = 12_000) -> int:
    """Bytes traced after ``last`` envelopes less after ``first`` (the stream never ends; the read is left)."""
    headers = {"content-type": "text/event-stream"}
    if make is _endless_vercel:
        headers["x-vercel-ai-ui-message-stream"] = "v1"

    def handle(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, stream=Endless(make), headers=headers)

    async def go() -> int:
        marks: dict[int, int] = {}
        async with (
            connect(URL, body={}, transport=httpx2.MockTransport(handle), keep_transcript=keep_transcript) as run,
            contextlib.aclosing(aiter(run)) as envelopes,
        ):
            count = 0
            async for _ in envelopes:
                count += 1
                if count in (first, last):
                    marks[count] = tracemalloc.get_traced_memory()[0]
                if count == last:
                    break
        return marks[last] - marks[first]

    tracemalloc.start()
    try:
        return asyncio.run(go())
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def bound() -> int:
    """The growth allowed over 10,000 envelopes: 64 KiB, under 7 bytes an envelope (a kept transcript takes more)."""
    return 64 * 1024


@pytest.mark.parametrize(
    "make", [_endless_envelope, _endless_agui, _endless_vercel], ids=["envelope", "agui", "vercel"]
)
def test_memory_stays_bounded_on_an_endless_stream(make: Callable[[int], str], bound: int) -> None:
    """[CL1-d] keep_transcript=False, 10,000 envelopes more: the traced memory grows by less than the bound."""
    assert _growth(make, keep_transcript=False) < bound


def test_the_memory_measure_sees_a_kept_transcript_grow(bound: int) -> None:
    """The control of the test above: with the transcript kept, the same count of envelopes exceeds the bound."""
    assert _growth(_endless_agui, keep_transcript=True) > bound


def test_the_transcript_is_current_at_every_envelope_and_a_refusal_is_raised() -> None:
    """[CL1-a] lines reach the reconstructor in batches, yet the transcript read after each envelope holds it;
    a line the reconstructor refuses (an id that changes inside an open block) is raised, not dropped."""
    deltas = [f"w{n} " for n in range(600)]  # more than one batch
    lines = [_endless_envelope(0), *(_endless_envelope(n + 1) for n in range(len(deltas)))]
    lines.append(json.dumps({"type": "text", "agent": "a", "final": True, "delta": ""}))

    async def go() -> list[str]:
        seen: list[str] = []
        body = sse([*lines, "[DONE]"])
        async with connect(URL, body={}, transport=serving(body)) as run:
            async for env in run:
                if type(env).__struct_config__.tag == "text" and not env.final:
                    seen.append(run.transcript.agents["a"][-1].content)
        return seen

    seen = asyncio.run(go())
    assert seen[-1] == "".join(f"word {n} " for n in range(1, 601))
    assert [len(s) for s in seen] == sorted(len(s) for s in seen)
    assert len(seen) == 600
    assert_valid([*(line.encode() for line in lines), b"[DONE]"])

    call = {"type": "tool_call", "agent": "a", "name": "f"}
    changed = [{**call, "id": "c1", "final": False, "delta": "{"}, {**call, "id": "c2", "final": True, "delta": "}"}]
    with pytest.raises(EnvelopeError, match="c2"):
        asyncio.run(read(serving(sse([*lines, *changed, "[DONE]"]))))
