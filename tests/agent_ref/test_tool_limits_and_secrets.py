"""Tool timeouts the agent enforces, and no held secret in any stream, store or log (issue 18 §4).

spec/agent-ref.md §2.5, §6.3-b.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

import msgspec

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools, tool
from agent_ref_support import blocks, fast_retry, meta, run

if TYPE_CHECKING:
    import pytest

#: A key in no common credential shape: only holding it can keep it out.
HELD_KEY = "zq9-held-client-key-4711-xyzzy"
SERVER_TOKEN = "plain-server-token-0815-quux"


def test_spec_2_5_a_a_blocking_tool_that_overruns_times_out_and_the_run_goes_on() -> None:
    """A thread tool over its timeout: an is_error 'timed out after N s' result; the run continues [R2.5-a]."""
    release = threading.Event()

    @tool(name="calculator")
    def stuck(expression: str) -> str:
        """Blocks until released."""
        release.wait(60)
        return expression

    lines: list[bytes] = []
    try:
        agent = Agent(ScriptedModel(), tools=[stuck], retry=fast_retry(), tool_timeout=0.2)
        result = run(agent.run("What is 1 + 2?", lines.append))
    finally:
        release.set()
    assert result.stop_reason == "end_turn"
    res = next(b for b in blocks(lines) if b["type"] == "tool_result")
    assert res["content"] == "timed out after 0.2 s"
    assert result.conversation_history[2]["content"][0]["is_error"] is True
    assert result.final_text.startswith("The calculator failed: timed out")


def test_spec_2_5_a_a_tools_own_timeout_wins() -> None:
    """@tool(timeout=...) over the agent's default [R2.5-a]."""

    @tool(name="calculator", timeout=0.1)
    async def slow(expression: str) -> str:
        """Sleeps."""
        await asyncio.sleep(30)
        return expression

    lines: list[bytes] = []
    run(Agent(ScriptedModel(), tools=[slow], retry=fast_retry(), tool_timeout=None).run("What is 1 + 2?", lines.append))
    assert next(b for b in blocks(lines) if b["type"] == "tool_result")["content"] == "timed out after 0.1 s"


def test_spec_2_5_a_abort_does_not_wait_for_a_blocking_tool() -> None:
    """Abort while a thread tool blocks: the run ends at once; the thread is left alone [R2.5-a] [R5.5-b]."""
    release = threading.Event()
    started = threading.Event()
    finished = threading.Event()

    @tool(name="calculator")
    def stuck(expression: str) -> str:
        """Blocks until released."""
        started.set()
        release.wait(60)
        finished.set()
        return expression

    lines: list[bytes] = []

    async def scenario() -> Any:
        agent = Agent(ScriptedModel(), tools=[stuck], retry=fast_retry())
        task = asyncio.ensure_future(agent.run("What is 1 + 2?", lines.append))
        await asyncio.to_thread(started.wait, 60)
        agent.abort()
        return await task

    try:
        result = asyncio.run(scenario())  # returns although the tool's thread still blocks
        assert not finished.is_set()
    finally:
        release.set()
    assert result.stop_reason == "aborted"
    assert meta(lines, "meta_final")["stop_reason"] == "aborted"


def _model_with_key() -> ScriptedModel:
    model = ScriptedModel()
    model.client = model.client.with_options(api_key=HELD_KEY)
    return model


def test_spec_6_3_b_held_secrets_never_reach_stream_store_or_log(caplog: pytest.LogCaptureFixture) -> None:
    """A tool error quoting the client's key and the server token: redacted everywhere [R6.3-b] [R2.4-b]."""

    @tool(name="calculator")
    def leaky(expression: str) -> str:
        """Fails with secrets in its message."""
        raise RuntimeError(f"upstream refused {expression} with key {HELD_KEY} and token {SERVER_TOKEN}")

    store = MemoryStore()
    lines: list[bytes] = []
    agent = Agent(_model_with_key(), tools=[leaky], store=store, retry=fast_retry(), secrets=[SERVER_TOKEN])
    with caplog.at_level(logging.DEBUG, logger="agent_ref"):
        logging.getLogger("agent_ref").warning("tool said %s", f"key={HELD_KEY} {SERVER_TOKEN}")
        result = run(agent.run("What is 1 + 1?", lines.append))
    res = next(b for b in blocks(lines) if b["type"] == "tool_result")
    assert res["content"].startswith("RuntimeError: upstream refused 1 + 1 with key [redacted]")
    stored = asyncio.run(store.load(agent.agent_uuid))
    everything = [
        b"".join(lines),
        msgspec.json.encode(stored),
        msgspec.json.encode(asyncio.run(store.runs(agent.agent_uuid))),
        b"".join(asyncio.run(store.run_log(result.run_id))),
        caplog.text.encode(),
    ]
    for where, data in enumerate(everything):
        assert HELD_KEY.encode() not in data, where
        assert SERVER_TOKEN.encode() not in data, where
    assert "[redacted]" in caplog.text


def test_spec_6_3_b_a_traceback_in_the_log_is_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    """log.exception of an error quoting a held secret: message and traceback scrubbed [R6.3-b]."""
    Agent(ScriptedModel(), tools=default_tools(), secrets=[SERVER_TOKEN])
    with caplog.at_level(logging.ERROR, logger="agent_ref"):
        try:
            raise ValueError(f"bad token {SERVER_TOKEN}")
        except ValueError:
            logging.getLogger("agent_ref").exception("failed with %s", SERVER_TOKEN)
    assert SERVER_TOKEN not in caplog.text
    assert "ValueError: bad token [redacted]" in caplog.text
