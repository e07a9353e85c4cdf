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
