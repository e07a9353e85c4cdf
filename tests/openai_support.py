"""Helpers of the OpenAI adapter tests: recorded streams served to the real ``openai`` SDK, offline.

Owns: reading ``fixtures/openai/`` recordings, serving one to an ``AsyncOpenAI`` client
through an ``httpx2.MockTransport`` (the HTTP library the SDK is built on: its own SSE
decoding, chunk parsing and accumulation run, with no network and no key), and the
transcript the SDK's own accumulation implies, to compare with what the translators
rebuild. Not a test module (no ``test_`` prefix); beside ``conftest.py``, as
``anthropic_support.py`` is, so that mypy and pytest both import it by name.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from openai import AsyncOpenAI

from envelope import reconstruct
from envelope.openai import ChatTranslator, ResponsesTranslator

AGENT = "5d1f7c3a-2b8e-4f6a-9c0d-7e4b1a2f3c5d"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openai"
CHAT = sorted((FIXTURES / "chat").glob("*.sse"))
RESPONSES = sorted((FIXTURES / "responses").glob("*.sse"))
MESSAGES: Any = [{"role": "user", "content": "replay"}]


def client_for(body: bytes, requests: list[Any] | None = None) -> AsyncOpenAI:
    """A real ``AsyncOpenAI`` whose every request is answered with ``body`` as an SSE response."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        if requests is not None:
            requests.append(json.loads(request.content or b"null"))
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    return AsyncOpenAI(
        api_key="offline-replay-no-key",
        base_url="http://replay.invalid/v1",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)),
    )


@dataclass
class Run:
    """One recorded call replayed through the SDK and translated."""

    lines: list[bytes]
    translator: Any
    final: Any = None  # the SDK's accumulated completion or response; None when it raised
    raised: BaseException | None = None
    yielded: list[Any] = field(default_factory=list)


async def _chat(body: bytes, max_bytes: int, meta: bool, helper: bool) -> Run:
    t = ChatTranslator(AGENT, max_bytes, meta=meta, user_query="replay")
    run = Run([], t)
    async with client_for(body) as client:
        try:
            if helper:
                async with client.chat.completions.stream(model="gpt-4.1-mini", messages=MESSAGES) as stream:
                    async for event in stream:
                        run.yielded.append(event)
                        run.lines.extend(t.feed(event))
                    run.final = await stream.get_final_completion()
            else:
                chunks = await client.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES, stream=True)
                async for chunk in chunks:
                    run.yielded.append(chunk)
                    run.lines.extend(t.feed(chunk))
            run.lines.extend(t.finish())
        except Exception as exc:  # the SDK raises on an error chunk: the caller's abort() path
            run.raised = exc
            run.lines.extend(t.abort(exc))
    return run


def chat_run(path: Path, max_bytes: int = 2048, *, meta: bool = True, helper: bool = True) -> Run:
    """Replay a Chat recording through ``chat.completions.stream()`` (or ``create(stream=True)``)."""
    return asyncio.run(_chat(path.read_bytes(), max_bytes, meta, helper))


async def _responses(body: bytes, max_bytes: int, meta: bool, helper: bool) -> Run:
    t = ResponsesTranslator(AGENT, max_bytes, meta=meta, user_query="replay")
    run = Run([], t)
    async with client_for(body) as client:
        try:
            if helper:
                async with client.responses.stream(model="o4-mini", input="replay") as stream:
                    async for event in stream:
                        run.yielded.append(event)
                        run.lines.extend(t.feed(event))
                    if t.status == "completed":
                        run.final = await stream.get_final_response()
            else:
                events = await client.responses.create(model="o4-mini", input="replay", stream=True)
                async for raw in events:
                    run.yielded.append(raw)
                    run.lines.extend(t.feed(raw))
            run.lines.extend(t.finish())
        except Exception as exc:
            run.raised = exc
            run.lines.extend(t.abort(exc))
    return run


def responses_run(path: Path, max_bytes: int = 2048, *, meta: bool = True, helper: bool = True) -> Run:
    """Replay a Responses recording through ``responses.stream()`` (or ``create(stream=True)``)."""
    return asyncio.run(_responses(path.read_bytes(), max_bytes, meta, helper))


def joined(text: str) -> str:
    """``text`` with UTF-16 pairs made one code point: the SDK keeps a pair split across deltas as two."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")


def rebuilt(lines: list[bytes]) -> list[dict[str, Any]]:
    """The reconstructed blocks of the test agent."""
    blocks = reconstruct(lines).to_dict()["agents"].get(AGENT, {"blocks": []})["blocks"]
    return list(blocks)


def content_blocks(lines: list[bytes]) -> list[dict[str, Any]]:
    """``rebuilt`` without the run's meta_init, meta_final and error blocks."""
    return [b for b in rebuilt(lines) if b["type"] not in ("meta_init", "meta_final", "error")]


def chat_expected(final: Any) -> list[dict[str, Any]]:
    """The text and tool call blocks the SDK's accumulated completion implies (choice 0)."""
    message = final.choices[0].message
    out: list[dict[str, Any]] = []
    for text in (message.content, message.refusal):
        if text:
            out.append({"type": "text", "complete": True, "content": joined(text), "citations": []})
    for call in message.tool_calls or []:
        out.append(
            {
                "type": "tool_call",
                "complete": True,
                "id": call.id,
                "name": call.function.name,
                "input": json.loads(call.function.arguments or "{}"),
            }
        )
    return out


def responses_expected(final: Any) -> list[dict[str, Any]]:
    """The blocks the SDK's accumulated response implies: summaries, text, calls, server tools."""
    out: list[dict[str, Any]] = []
    for item in final.output:
        kind = item.type
        if kind == "reasoning":
            out += [{"type": "thinking", "complete": True, "content": s.text} for s in item.summary if s.text]
        elif kind == "message":
            for part in item.content:
                text = part.text if part.type == "output_text" else part.refusal
                if not text:
                    continue
                cites = []
                for a in getattr(part, "annotations", None) or []:
                    if a.type == "url_citation":
                        cites.append(
                            {
                                "cited_text": text[a.start_index : a.end_index],
                                "citation_type": "web_search_result_location",
                                "start_char_index": a.start_index,
                                "end_char_index": a.end_index,
                                "url": a.url,
                                "title": a.title,
                            }
                        )
                out.append({"type": "text", "complete": True, "content": joined(text), "citations": cites})
        elif kind == "function_call":
            out.append(
                {
                    "type": "tool_call",
                    "complete": True,
                    "id": item.call_id,
                    "name": item.name,
                    "input": json.loads(item.arguments or "{}"),
                }
            )
        elif kind == "web_search_call":
            data = item.to_dict(mode="json")
            out.append(
                {
                    "type": "server_tool_call",
                    "complete": True,
                    "id": item.id,
                    "name": "web_search",
                    "input": {"action": data["action"]},
                }
            )
            rest = {k: v for k, v in data.items() if k not in ("id", "type", "action")}
            out.append(
                {
                    "type": "server_tool_result",
                    "complete": True,
                    "id": item.id,
                    "name": "web_search_tool_result",
                    "content": json.dumps(rest, separators=(",", ":"), sort_keys=True),
                }
            )
    return out
