"""Helpers shared by the Anthropic adapter tests: run a recorded call through the real SDK.

Owns: driving ``agent_ref.models.replay`` clients and comparing a reconstructed transcript with
the SDK's own final message. Not a test module (no ``test_`` prefix). It lives beside
``conftest.py``, not in ``tests/anthropic/``, so that mypy (whose path has ``tests``)
and pytest both import it as ``anthropic_support``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_ref.models.replay import ReplayServer
from envelope import reconstruct
from envelope._decoder import CITATION_FIELDS
from envelope.anthropic import AnthropicTranslator

if TYPE_CHECKING:
    from collections.abc import Sequence

    from anthropic.types import Message

AGENT = "0b6c7f1e-3a55-4d5e-9c1a-5b8f2f7d9e10"
MODEL = "claude-sonnet-4-6"
DATA = Path(__file__).resolve().parent / "anthropic" / "data"


@dataclass
class Run:
    """One API call replayed through the SDK and translated."""

    lines: list[bytes]
    translator: AnthropicTranslator
    final: Any  # Message, or BetaMessage for the beta client
    yielded: list[Any] = field(default_factory=list)


async def _stream_calls(calls: list[list[dict[str, Any]]], max_bytes: int, beta: bool) -> list[Run]:
    server = ReplayServer(calls)
    client = server.client()
    runs: list[Run] = []
    async with client:
        for _ in calls:
            t = AnthropicTranslator(AGENT, max_bytes)
            lines: list[bytes] = []
            yielded: list[Any] = []
            messages = client.beta.messages if beta else client.messages
            async with messages.stream(
                model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "replay"}]
            ) as stream:
                async for event in stream:
                    yielded.append(event)
                    lines.extend(t.feed(event))
                final = await stream.get_final_message()
            runs.append(Run(lines, t, final, yielded))
    return runs


def stream_calls(calls: list[list[dict[str, Any]]], max_bytes: int = 2048, *, beta: bool = False) -> list[Run]:
    """Replay each call through ``AsyncAnthropic().messages.stream()`` (or ``.beta.``), feeding every event."""
    return asyncio.run(_stream_calls(calls, max_bytes, beta))


async def _raw_calls(calls: list[list[dict[str, Any]]]) -> list[list[Any]]:
    client = ReplayServer(calls).client()
    out: list[list[Any]] = []
    async with client:
        for _ in calls:
            stream = await client.messages.create(
                model=MODEL, max_tokens=1024, messages=[{"role": "user", "content": "replay"}], stream=True
            )
            out.append([event async for event in stream])
    return out


def raw_calls(calls: list[list[dict[str, Any]]]) -> list[list[Any]]:
    """Replay each call through ``messages.create(stream=True)``: the SDK's raw typed events only."""
    return asyncio.run(_raw_calls(calls))


def envelope_citation(citation: Any) -> dict[str, Any]:
    """What the reconstructor should give back for one SDK citation."""
    data = citation.to_dict(mode="json")
    out: dict[str, Any] = {"cited_text": data["cited_text"], "citation_type": data["type"]}
    for name in CITATION_FIELDS[1:]:  # after citation_type
        if data.get(name) is not None:
            out[name] = data[name]
    if data["type"] == "search_result_location" and data.get("source") is not None:
        out["url"] = data["source"]  # [A3.3-c]: the search result's source travels as `url`
    return out


def expected_blocks(final: Message) -> list[dict[str, Any]]:
    """The transcript blocks (spec §7.6) the SDK's final message implies, in order."""
    blocks: list[dict[str, Any]] = []
    for block in final.content:
        data = block.to_dict(mode="json")
        kind = str(data["type"])
        if kind == "text":
            cites = [envelope_citation(c) for c in (block.citations or [])]  # type: ignore[union-attr]
            blocks.append({"type": "text", "complete": True, "content": data["text"], "citations": cites})
        elif kind == "thinking":
            blocks.append({"type": "thinking", "complete": True, "content": data["thinking"]})
        elif kind in ("tool_use", "server_tool_use"):
            blocks.append(
                {
                    "type": "tool_call" if kind == "tool_use" else "server_tool_call",
                    "complete": True,
                    "id": data["id"],
                    "name": data["name"],
                    "input": data["input"],
                }
            )
        elif kind.endswith("_tool_result"):
            blocks.append(
                {
                    "type": "server_tool_result",
                    "complete": True,
                    "id": data["tool_use_id"],
                    "name": kind,
                    "content": data["content"],
                }
            )
    return blocks


def rebuilt_blocks(lines: Sequence[bytes | str], agent: str = AGENT) -> list[dict[str, Any]]:
    """The reconstructed blocks of ``agent``, server tool result content parsed as JSON."""
    blocks = reconstruct(lines).to_dict()["agents"].get(agent, {"blocks": []})["blocks"]
    for block in blocks:
        if block["type"] == "server_tool_result":
            block["content"] = json.loads(block["content"])
    return list(blocks)


def api_view(final: Message) -> list[dict[str, Any]]:
    """The SDK final message's content as plain API blocks: top-level nulls and SDK-only fields dropped."""
    out: list[dict[str, Any]] = []
    for block in final.content:
        data = block.to_dict(mode="json")
        out.append({k: v for k, v in data.items() if v is not None and k != "parsed_output"})
    return out
