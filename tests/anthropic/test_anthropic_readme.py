"""The README's "Translate Anthropic streams in your server" example runs, offline, as printed."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

from agent_ref.replay import ReplayServer, load_events, split_calls
from anthropic_support import MODEL, expected_blocks, rebuilt_blocks, stream_calls
from conftest import ROOT
from envelope import DONE, StreamReader

if TYPE_CHECKING:
    from pathlib import Path

HEADING = "## Translate Anthropic streams in your server"


def _section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(HEADING)
    end = text.index("\n## ", start + len(HEADING))
    return text[start:end]


def test_readme_relay_example_runs_against_the_corpus_recording(corpus: Path) -> None:
    section = _section()
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    scope: dict[str, Any] = {}
    exec(code, scope)
    server = ReplayServer(load_events(corpus / "anthropic_events_1.json"))
    history: list[Any] = [{"role": "user", "content": "Make an invoice image"}]

    async def run() -> list[bytes]:
        async with server.client() as client:
            return [chunk async for chunk in scope["relay"](client, "agent-1", history, model=MODEL, max_tokens=64)]

    chunks = asyncio.run(run())
    assert chunks[-1] == DONE
    reader = StreamReader("sse")
    lines = [raw for chunk in chunks for raw in reader.feed(chunk) if raw.data != "[DONE]"]
    assert len(lines) == 126  # the number the README states
    assert "126 lines" in section
    # The history got the assistant turn, equal to what the SDK reconstructs.
    assert history[-1]["role"] == "assistant"
    assert [b["type"] for b in history[-1]["content"]][:2] == ["thinking", "text"]
    assert rebuilt_blocks([raw.data for raw in lines], "agent-1") == expected_blocks_from(corpus)


def expected_blocks_from(corpus: Path) -> list[dict[str, Any]]:
    (run,) = stream_calls(split_calls(load_events(corpus / "anthropic_events_1.json")))
    blocks: list[dict[str, Any]] = expected_blocks(run.final)
    return blocks


def test_readme_relay_reports_a_cut_stream_as_an_error_envelope() -> None:
    """The example's ``close()`` branch: a stream cut mid-text ends with an ``error`` envelope."""
    (code,) = re.findall(r"```python\n(.*?)```", _section(), re.S)
    scope: dict[str, Any] = {}
    exec(code, scope)
    cut: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_cut",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hal"}},
    ]
    history: list[Any] = [{"role": "user", "content": "hi"}]

    async def run() -> list[bytes]:
        async with ReplayServer([cut]).client() as client:
            return [chunk async for chunk in scope["relay"](client, "a", history, model=MODEL, max_tokens=8)]

    chunks = asyncio.run(run())
    reader = StreamReader("sse")
    lines = [raw.data for chunk in chunks for raw in reader.feed(chunk)]
    assert lines[-1] == "[DONE]"
    assert '"type":"error"' in lines[-2]
    assert "incomplete_stream" in lines[-2]
    assert history[-1] == {"role": "assistant", "content": []}
