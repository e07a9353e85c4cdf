"""spec agent-ref [R2.4-e]: one tool result's bytes are bounded; head and tail kept, a note between.

Issue 38 §7: a 20 MB MCP result took 372 MB of memory and an 88 MB database, all of it
streamed and put into the next model turn. Now the result is cut once, before anything
is streamed or kept: the client's (strictly valid) stream, the history and the model's
next request hold the same bounded text, with the note the model reads.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent_ref import Agent, ScriptedModel, tool
from agent_ref.cli.commands import main
from agent_ref.errors import ConfigError
from agent_ref.tools.mcp import InProcessServer
from agent_ref.tools.result_bound import DEFAULT_MAX_TOOL_RESULT_BYTES, MIN_TOOL_RESULT_BYTES, bound_result
from agent_ref_support import envelopes
from envelope import ImageRef
from mcp_support import calling_prompt

if TYPE_CHECKING:
    from collections.abc import Callable

    from validating import ValidatedSink

NOTE = "[agent-ref: tool result truncated: "


def size(text: str, images: tuple[ImageRef, ...] = ()) -> int:
    return len(text.encode("utf-8", "surrogatepass")) + sum(len(i.src.encode()) for i in images)


@given(
    text=st.text(max_size=3_000),
    images=st.lists(st.integers(min_value=0, max_value=2_000), max_size=3),
    limit=st.integers(min_value=MIN_TOOL_RESULT_BYTES, max_value=4_000),
)
@example(text="é" * 2_000, images=[], limit=MIN_TOOL_RESULT_BYTES)
@example(text="\U0001f600" * 1_000, images=[1_500], limit=1_025)
def test_spec_R2_4_e_the_bound_keeps_head_and_tail_and_says_so(text: str, images: list[int], limit: int) -> None:
    """[R2.4-e] within the bound; the exact head and tail of the text; the note when cut, never otherwise."""
    refs = tuple(ImageRef(src="data:image/png;base64," + "A" * n, media_type="image/png") for n in images)
    out, kept, cut = bound_result(text, refs, limit)
    if size(text, refs) <= limit:
        assert (out, kept, cut) == (text, refs, False)
        return
    assert cut
    assert size(out, kept) <= limit
    head, note, tail = out.partition("\n" + NOTE)
    assert note
    tail = tail.split("]\n", 1)[1]
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) + len(tail) <= len(text)
    assert all(image in refs for image in kept)


def test_spec_R2_4_e_a_large_python_tool_result_is_bounded_everywhere(
    validated_sink: Callable[..., ValidatedSink],
) -> None:
    """[R2.4-e] 3 MB from a tool: the stream, the history and the model's next turn hold the same bounded text."""
    body = "HEAD-" + "x" * 3_000_000 + "-TAIL"

    @tool
    def dump() -> str:
        """Return a lot of text."""
        return body

    model = ScriptedModel()
    agent = Agent(model, tools=[dump])
    sink = validated_sink()
    asyncio.run(agent.run(calling_prompt([("dump", {})]), sink.append))
    streamed = "".join(e["delta"] for e in envelopes(list(sink)) if e["type"] == "tool_result")
    assert len(streamed.encode()) <= DEFAULT_MAX_TOOL_RESULT_BYTES
    assert streamed.startswith("HEAD-")
    assert streamed.endswith("-TAIL")
    assert f"{NOTE}{len(body):,} bytes, over max_tool_result_bytes={DEFAULT_MAX_TOOL_RESULT_BYTES:,}" in streamed
    sent = [b for b in model.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert sent[0]["content"][0]["text"] == streamed
    assert len(json.dumps(model.requests[1]).encode()) < 2 * DEFAULT_MAX_TOOL_RESULT_BYTES


def test_spec_R2_4_e_an_mcp_result_is_bounded_and_none_turns_it_off(
    validated_sink: Callable[..., ValidatedSink],
) -> None:
    """[R2.4-e] an MCP tool's result (in-process server), under a bound of 4 KiB; ``None``: whole."""
    from mcp.server.mcpserver import MCPServer

    server: MCPServer[Any] = MCPServer("big", log_level="ERROR")

    @server.tool()
    def big(n: int) -> str:
        """Return n bytes."""
        return "y" * n

    def streamed(bound: int | None) -> str:
        agent = Agent(ScriptedModel(), mcp_servers={"big": InProcessServer(server)}, max_tool_result_bytes=bound)
        sink = validated_sink()
        asyncio.run(agent.run(calling_prompt([("mcp__big__big", {"n": 100_000})]), sink.append))
        return "".join(e["delta"] for e in envelopes(list(sink)) if e["type"] == "tool_result")

    bounded = streamed(4_096)
    assert len(bounded.encode()) <= 4_096
    assert NOTE + "100,000 bytes" in bounded
    assert streamed(None) == "y" * 100_000


def test_spec_R2_4_e_the_option_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    """[R2.4-e] [RC8-e] a bound below 1,024 is a ConfigError naming the option, and a one-line CLI error."""
    with pytest.raises(ConfigError, match="max_tool_result_bytes must be an integer of at least 1024"):
        Agent(ScriptedModel(), max_tool_result_bytes=100)
    assert Agent(ScriptedModel(), max_tool_result_bytes=None).options.to_dict()["max_tool_result_bytes"] is None
    assert main(["run", "hello", "--max-tool-result-bytes", "10", "--db", ":memory:"]) == 2
    err = capsys.readouterr().err
    assert "--max-tool-result-bytes" in err
    assert "Traceback" not in err
