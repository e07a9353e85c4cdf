"""The loop end to end on the scripted model (spec/agent-ref.md §1, §5, §7)."""

from __future__ import annotations

import asyncio
import json

import pytest

from agent_ref import Agent, Price, ScriptedModel, ToolOutput, default_tools, tool
from agent_ref.errors import ConfigError
from agent_ref_support import CALCULATOR_RUN_TYPES, blocks, fast_retry, meta, run, types
from envelope import ImageRef, decode, reconstruct


def _agent(**kw: object) -> Agent:
    kw.setdefault("tools", default_tools())
    kw.setdefault("retry", fast_retry())
    return Agent(ScriptedModel(), **kw)  # type: ignore[arg-type]


def test_spec_1_calculator_run_streams_call_result_answer() -> None:
    """Calculator run end to end [R1.1-a] [R1.2-a] [R1.2-b] [R8.1-a] [R7.1-a]."""
    lines: list[bytes] = []
    agent = _agent()
    result = run(agent.run("What is 5 + (10 * 2)?", lines.append))
    assert types(lines) == CALCULATOR_RUN_TYPES
    assert lines[-1] == b"[DONE]"  # spec §7.1-a
    for line in lines[:-1]:
        decode(line)  # every line is a valid, typed envelope
    rebuilt = blocks(lines)
    call = next(b for b in rebuilt if b["type"] == "tool_call")
    assert call["name"] == "calculator"
    assert call["input"] == {"expression": "5 + (10 * 2)"}
    res = next(b for b in rebuilt if b["type"] == "tool_result")
    assert (res["id"], res["content"]) == (call["id"], "25")
    assert rebuilt[-3]["content"] == "5 + (10 * 2) = 25."  # then the step_finish status, meta_final
    assert result.stop_reason == "end_turn"
    assert result.steps == 2
    assert result.final_text == "5 + (10 * 2) = 25."
    final = meta(lines, "meta_final")
    assert final["stop_reason"] == "end_turn"
    assert final["total_steps"] == 2
    assert final["cumulative_usage"]["output_tokens"] == result.usage["output_tokens"] > 0
    init = meta(lines, "meta_init")
    assert init["agent_uuid"] == agent.agent_uuid
    assert init["user_query"] == "What is 5 + (10 * 2)?"
    # history: user, assistant(tool_use), user(tool_result), assistant(answer)
    roles = [m["role"] for m in result.conversation_history]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert result.conversation_history[2]["content"][0]["tool_use_id"] == call["id"]


def test_spec_1_every_line_is_within_the_bound_and_long_text_is_chunked() -> None:
    """Long answers are chunked within the bound [R8.1-a]."""
    lines: list[bytes] = []
    run(_agent(max_bytes=256).run("Give me a long answer please", lines.append))
    assert all(len(line) <= 256 for line in lines)
    text = [b for b in blocks(lines) if b["type"] == "text"][-1]["content"]
    assert "découpage" in text
    assert len(text.encode()) > 2000


def test_spec_1_citations_attach_to_the_text_block() -> None:
    """The scripted model's citation reaches the text block [R8.1-a]."""
    lines: list[bytes] = []
    run(_agent().run("Cite a source about the Moon", lines.append))
    texts = [b for b in blocks(lines) if b["type"] == "text"]
    cited = [b for b in texts if b["citations"]]
    assert len(cited) == 1
    (citation,) = cited[0]["citations"]
    assert citation["citation_type"] == "char_location"
    assert citation["cited_text"] in cited[0]["content"]


def test_spec_2_tool_exception_becomes_an_error_result() -> None:
    """A raising tool gives an is_error result, redacted, no traceback [R2.4-b] [R6.3-a]."""

    @tool(name="calculator")
    def broken(expression: str) -> str:
        """Always fails."""
        raise RuntimeError(f"cannot do {expression}; api_key=sk-ant-secret123")

    lines: list[bytes] = []
    result = run(_agent(tools=[broken]).run("What is 1 + 1?", lines.append))
    assert result.stop_reason == "end_turn"
    res = next(b for b in blocks(lines) if b["type"] == "tool_result")
    assert res["content"].startswith("RuntimeError: cannot do 1 + 1")
    assert "sk-ant" not in b"".join(lines).decode()
    assert "Traceback" not in b"".join(lines).decode()
    tool_result = result.conversation_history[2]["content"][0]
    assert tool_result["is_error"] is True
    assert result.final_text.startswith("The calculator failed")


def test_spec_2_multimodal_tool_result() -> None:
    """Text plus images: tool_result, tool_result_image, marker; image blocks in history [R2.4-a] [R2.4-c]."""

    @tool(name="calculator")
    def pic(expression: str) -> ToolOutput:
        """Returns an image."""
        return ToolOutput(
            text=f"plot of {expression}", images=[ImageRef(src="data:image/png;base64,iVBOR", media_type="image/png")]
        )

    lines: list[bytes] = []
    result = run(_agent(tools=[pic]).run("What is 2 * 3?", lines.append))
    res = next(b for b in blocks(lines) if b["type"] == "tool_result")
    assert res["images"] == [{"src": "data:image/png;base64,iVBOR", "media_type": "image/png"}]
    content = result.conversation_history[2]["content"][0]["content"]
    assert content[1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}


def test_spec_5_2_max_steps_then_a_last_call_without_tools() -> None:
    """max_steps, then one call with tool_choice none [R5.2-a] [R5.1-a]."""
    lines: list[bytes] = []
    model = ScriptedModel()
    agent = Agent(model, tools=default_tools(), max_steps=3, retry=fast_retry())
    result = run(agent.run("keep calculating", lines.append))
    assert result.stop_reason == "max_steps"
    assert result.steps == 4  # 3 steps with tools, then the last call
    assert [r.get("tool_choice") for r in model.requests] == [None, None, None, {"type": "none"}]
    assert "I stopped after 3 calculations" in result.final_text
    assert meta(lines, "meta_final")["stop_reason"] == "max_steps"
    calls = [b for b in blocks(lines) if b["type"] == "tool_call"]
    results = [b for b in blocks(lines) if b["type"] == "tool_result"]
    assert [c["id"] for c in calls] == [r["id"] for r in results]


def test_spec_5_3_budget_stops_before_the_next_call() -> None:
    """The budget stops the run before the next call [R5.3-a]."""
    lines: list[bytes] = []
    prices = {"scripted": Price(input=1000.0, output=1000.0)}
    agent = Agent(ScriptedModel(), tools=default_tools(), max_budget_usd=0.01, prices=prices, retry=fast_retry())
    result = run(agent.run("keep calculating", lines.append))
    assert result.stop_reason == "max_budget"
    assert result.steps == 1
    assert result.cost_usd is not None
    assert result.cost_usd >= 0.01
    final = meta(lines, "meta_final")
    assert final["cost"]["total_usd"] == result.cost_usd
    # the tool call of the last step was answered: history stays valid
    assert result.conversation_history[-1]["content"][0]["type"] == "tool_result"


def test_spec_5_3_budget_needs_a_price() -> None:
    """A budget needs a priced model [R5.3-a]."""
    with pytest.raises(ConfigError, match="price"):
        Agent(ScriptedModel(name="mystery-model"), max_budget_usd=1.0)


def test_spec_1_3_max_tokens_inside_a_tool_call_is_answered_not_run() -> None:
    """A call cut by max_tokens is shown and answered, never run [R1.3-a] [R1.3-b] [R1.2-b]."""
    lines: list[bytes] = []
    ran: list[str] = []

    @tool(name="calculator")
    def spy(expression: str) -> str:
        """Records calls."""
        ran.append(expression)
        return "0"

    # Enough tokens for thinking and text, not for the whole tool input.
    agent = Agent(ScriptedModel(), tools=[spy], max_tokens=38, retry=fast_retry(), max_steps=1)
    result = run(agent.run("What is 123456 + (654321 * 2)?", lines.append))
    assert ran == []
    history = result.conversation_history
    tool_use = [b for b in history[1]["content"] if b["type"] == "tool_use"]
    assert len(tool_use) == 1
    answer = history[2]["content"][0]
    assert answer["tool_use_id"] == tool_use[0]["id"]
    assert answer["is_error"] is True
    assert "max_tokens" in answer["content"][0]["text"]
    call = next(b for b in blocks(lines) if b["type"] == "tool_call")
    assert call["complete"]
    # every tool_use in history has its result
    uses = {b["id"] for m in history if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"}
    answered = {
        b["tool_use_id"] for m in history if m["role"] == "user" for b in m["content"] if b.get("type") == "tool_result"
    }
    assert uses <= answered


def test_spec_5_5_abort_ends_the_stream_cleanly() -> None:
    """abort() cancels the step, closes blocks, ends with error, meta_final, [DONE] [R5.5-a]."""
    started = asyncio.Event()

    @tool(name="calculator")
    async def slow(expression: str) -> str:
        """Never finishes on its own."""
        started.set()
        await asyncio.sleep(3600)
        return expression

    lines: list[bytes] = []

    async def scenario() -> object:
        agent = _agent(tools=[slow])
        task = asyncio.ensure_future(agent.run("What is 1 + 2?", lines.append))
        await started.wait()
        agent.abort()
        return await task

    result = asyncio.run(scenario())
    assert result.stop_reason == "aborted"  # type: ignore[attr-defined]
    assert lines[-1] == b"[DONE]"
    assert meta(lines, "error")["type"] == "aborted"
    assert meta(lines, "meta_final")["stop_reason"] == "aborted"
    transcript = reconstruct(lines)
    assert all(b.complete for bs in transcript.agents.values() for b in bs)


def test_spec_1_backend_tools_of_a_step_run_concurrently_with_a_bound() -> None:
    """Bounded concurrency, contiguous groups in call order [R2.3-a]."""
    running = 0
    peak = 0

    @tool
    async def work(n: int) -> str:
        """Counts concurrency."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01 * (5 - n))
        running -= 1
        return f"done {n}"

    from agent_ref.tools.core import ToolCallRequest, run_tools
    from envelope import Emitter

    sent: list[list[bytes]] = []

    async def send(group: list[bytes]) -> None:
        sent.append(group)

    calls = [ToolCallRequest(id=f"t{i}", name="work", input={"n": i}) for i in range(5)]
    outcomes = asyncio.run(run_tools(calls, {"work": work}, Emitter("a"), send, max_concurrency=2))
    assert peak == 2
    assert [o.text for o in outcomes] == [f"done {i}" for i in range(5)]
    # each call's lines are one contiguous group, in call order
    assert [json.loads(g[0])["id"] for g in sent] == [f"t{i}" for i in range(5)]
