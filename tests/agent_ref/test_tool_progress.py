"""ToolContext injected by annotation, and tool progress in the stream (spec/agent-ref.md §2.6)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading
import time
from typing import Any

import pytest

from agent_ref import Agent, MemoryStore, ReplayModel, ToolDefinitionError, ToolOutput, tool
from agent_ref.run import tool_step as tool_step_module
from agent_ref.tools.core import ToolCallRequest, ToolContext, ToolContextBase, ToolProgress, run_tools
from agent_ref_support import fast_retry, run
from envelope import Emitter, ImageRef
from validating import assert_valid

AGENT = "agent-1"


@tool
async def fetch(url: str, ctx: ToolContext) -> str:
    """Fetch a page.

    Args:
        url: The page.
        ctx: Never in the schema.
    """
    ctx.progress("connecting")
    await asyncio.sleep(0.01)
    ctx.progress("reading", 0.5)
    await asyncio.sleep(0.01)
    return f"{url} by {ctx.agent_uuid}/{ctx.run_id}/{ctx.tool_use_id}/{ctx.tool_name}"


def test_spec_2_6_a_a_tool_context_is_not_in_the_schema_and_is_given_to_the_call() -> None:
    """The ToolContext parameter is left out of the schema; the model may not send it [R2.6-a]."""
    assert fetch.input_schema == {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The page."}},
        "required": ["url"],
    }
    assert fetch.context_param == "ctx"
    assert fetch.param_types == {"url": str}

    async def go(tool_input: dict[str, Any]) -> list[str]:
        sent: list[bytes] = []

        async def send(lines: list[bytes]) -> None:
            sent.extend(lines)

        call = ToolCallRequest(id="toolu_1", name="fetch", input=tool_input)
        done = await run_tools([call], {"fetch": fetch}, Emitter(AGENT), send)
        return [o.text for o in done]

    # no context given (today's callers): empty ids, progress goes nowhere
    assert asyncio.run(go({"url": "u"})) == ["u by //toolu_1/fetch"]
    assert asyncio.run(go({"url": "u", "ctx": {}})) == ["invalid input for fetch: unexpected argument 'ctx'"]


def test_spec_2_6_a_two_contexts_or_a_bad_report_are_refused() -> None:
    """One context per tool; progress takes a string and a fraction from 0 to 1 [R2.6-a]."""
    with pytest.raises(
        ToolDefinitionError, match=r"parameter 'b': a second ToolContext parameter \(the first is 'a'\)"
    ):

        @tool
        def two(a: ToolContext, b: ToolContext) -> str:
            """Two."""
            return a.tool_use_id + b.tool_use_id

    ctx = ToolContext(agent_uuid="", run_id="", tool_use_id="t", tool_name="n")
    for bad in (1.5, -0.1, float("nan"), True, "half"):
        with pytest.raises(ValueError, match="fraction"):
            ctx.progress("x", bad)  # type: ignore[arg-type]  # the wrong types on purpose
    with pytest.raises(ValueError, match="message must be a string"):
        ctx.progress(3)  # type: ignore[arg-type]
    ctx.progress("fine", 1)


def _progress(lines: list[bytes]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        if line == b"[DONE]":
            continue
        env = json.loads(line)
        if env["type"] == "meta_status":
            out.append(json.loads(env["delta"]))
    return out


async def _step(calls: list[ToolCallRequest], tools: dict[str, Any], base: ToolContextBase, **kw: Any) -> list[bytes]:
    """One step's lines, between a meta_init and a meta_final, as an agent would send them."""
    emitter = Emitter(AGENT)
    init = {"format": "json", "user_query": "q", "agent_uuid": AGENT, "model": "m"}
    lines: list[bytes] = list(emitter.buffered("meta_init", json.dumps(init)))
    for call in calls:
        lines += emitter.buffered("tool_call", json.dumps(call.input), id=call.id, name=call.name)

    async def send(group: list[bytes]) -> None:
        for line in group:
            lines.append(line)
            await asyncio.sleep(0)  # a sink that yields between lines, as a socket does

    await run_tools(calls, tools, emitter, send, context=base, **kw)
    final = {"stop_reason": "end_turn", "total_steps": 1, "cumulative_usage": {}}
    lines += emitter.buffered("meta_final", json.dumps(final))
    return [*lines, b"[DONE]"]


def test_spec_2_6_b_progress_is_a_status_envelope_of_kind_tool_progress_before_the_result() -> None:
    """Each report is one `meta_status` line of kind tool_progress (never `error`); passes --strict [R2.6-b] [4.16-c]."""
    heard: list[ToolProgress] = []
    base = ToolContextBase(agent_uuid=AGENT, run_id="run-9", progress_interval=0, on_progress=heard.append)
    call = ToolCallRequest(id="toolu_1", name="fetch", input={"url": "u"})
    lines = asyncio.run(_step([call], {"fetch": fetch}, base))
    assert_valid(lines)
    assert _progress(lines) == [
        {"kind": "tool_progress", "message": "connecting", "tool_use_id": "toolu_1", "name": "fetch"},
        {"kind": "tool_progress", "message": "reading", "tool_use_id": "toolu_1", "name": "fetch", "fraction": 0.5},
    ]
    kinds = [json.loads(line)["type"] for line in lines[:-1]]
    assert kinds == ["meta_init", "tool_call", "meta_status", "meta_status", "tool_result", "meta_final"]
    assert json.loads(lines[4])["delta"] == "u by agent-1/run-9/toolu_1/fetch"
    assert [(p.message, p.fraction) for p in heard] == [("connecting", None), ("reading", 0.5)]
    # not streamed when the caller says so; the observer still hears every report
    quiet = asyncio.run(
        _step([call], {"fetch": fetch}, ToolContextBase(stream_progress=False, on_progress=heard.append))
    )
    assert _progress(quiet) == []
    assert len(heard) == 4


@tool
def blocking(n: int, ctx: ToolContext) -> str:
    """A blocking tool: reports from its own thread."""
    for i in range(n):
        ctx.progress("x" * 1000 if i == 0 else f"step {i}", (i + 1) / n)
        time.sleep(0.01)
    return threading.current_thread().name


def test_spec_2_6_b_a_blocking_tool_reports_from_its_thread_and_long_messages_are_cut() -> None:
    """Thread-safe reporting; a message over 300 characters is cut so a report stays one line [R2.6-b]."""
    base = ToolContextBase(agent_uuid=AGENT, run_id="r", progress_interval=0)
    call = ToolCallRequest(id="toolu_1", name="blocking", input={"n": 3})
    lines = asyncio.run(_step([call], {"blocking": blocking}, base))
    assert_valid(lines)
    reports = _progress(lines)
    assert reports[0]["message"] == "x" * 300
    assert [r["fraction"] for r in reports] == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert json.loads(lines[-3])["delta"] == "tool-blocking"


@tool
async def chatty(n: int, ctx: ToolContext) -> str:
    """Reports n times in a tight loop."""
    for i in range(n):
        ctx.progress(f"{i}")
        await asyncio.sleep(0)
    return "done"


def test_spec_2_6_c_reports_are_coalesced_per_interval_and_none_follows_the_result() -> None:
    """A tight loop of 500 reports: a few lines, the latest kept; nothing of the call after its result [R2.6-c]."""
    base = ToolContextBase(agent_uuid=AGENT, run_id="r", progress_interval=0.05)
    call = ToolCallRequest(id="toolu_1", name="chatty", input={"n": 500})
    lines = asyncio.run(_step([call], {"chatty": chatty}, base))
    assert_valid(lines)
    reports = _progress(lines)
    assert 1 <= len(reports) < 20
    assert reports[0]["message"] == "0"
    kinds = [json.loads(line)["type"] for line in lines[:-1]]
    assert kinds[-2:] == ["tool_result", "meta_final"]


#: ``overrun`` waits for this before it reports (set once its call has timed out) ...
_OVERRUN_GO = threading.Event()
#: ... and sets this once its report is made, so the test knows the late report happened.
_OVERRUN_REPORTED = threading.Event()


@tool
def overrun(ctx: ToolContext) -> str:
    """Reports after its call has timed out: it waits for the test to say the call has ended."""
    assert _OVERRUN_GO.wait(30), "the test never released the tool"
    ctx.progress("too late")
    _OVERRUN_REPORTED.set()
    return "never seen"


def test_spec_2_6_c_a_report_after_the_calls_end_is_dropped() -> None:
    """A timed-out blocking tool's thread reports later: nothing is sent after the step [R2.6-c].

    The thread reports only once the step has returned, and the test waits for the report
    to be made before it looks (a late thread would otherwise make the test pass unseen).
    """
    _OVERRUN_GO.clear()
    _OVERRUN_REPORTED.clear()
    heard: list[ToolProgress] = []
    base = ToolContextBase(agent_uuid=AGENT, run_id="r", progress_interval=0, on_progress=heard.append)

    async def go() -> list[bytes]:
        lines = await _step(
            [ToolCallRequest(id="t1", name="overrun", input={})], {"overrun": overrun}, base, timeout=0.05
        )
        _OVERRUN_GO.set()
        # the report is handed to the loop (call_soon_threadsafe) before the event is set,
        # and this wait's own wake-up is handed after it: the report is taken first
        assert await asyncio.to_thread(_OVERRUN_REPORTED.wait, 30), "the tool's thread never reported"
        await asyncio.sleep(0)  # one more turn of the loop for anything the report scheduled
        return lines

    lines = asyncio.run(go())
    assert_valid(lines)
    assert heard == []  # dropped where it arrives, before any observer or sink
    assert _progress(lines) == []
    assert b"timed out after 0.05 s" in lines[-3]


PNG = "data:image/png;base64,iVBORw0KGgo="


@tool
async def pictures() -> ToolOutput:
    """A result of several lines (text, images, closing marker)."""
    return ToolOutput(text="three pictures", images=[ImageRef(src=PNG, media_type="image/png")] * 3)


@tool
async def ticker(ctx: ToolContext) -> str:
    """Reports all the time while the other call's result group is being sent."""
    for i in range(200):
        ctx.progress(f"tick {i}")
        await asyncio.sleep(0)
    return "ticked"


def test_spec_2_6_c_a_progress_line_never_falls_inside_a_result_group() -> None:
    """The lines of one call's result stay contiguous while another call reports [R2.6-c, R2.3-a].

    Without the step's one lock, a tick lands between `pictures`' tool_result and its images.
    """
    base = ToolContextBase(agent_uuid=AGENT, run_id="r", progress_interval=0)
    calls = [ToolCallRequest(id="p", name="pictures", input={}), ToolCallRequest(id="t", name="ticker", input={})]
    lines = asyncio.run(_step(calls, {"pictures": pictures, "ticker": ticker}, base))
    assert_valid(lines)
    envs = [json.loads(line) for line in lines[:-1]]
    first = next(i for i, e in enumerate(envs) if e["type"] == "tool_result" and e["id"] == "p")
    group = envs[first : first + 5]
    assert [e["type"] for e in group] == ["tool_result", *["tool_result_image"] * 3, "tool_result"]
    assert len(_progress(lines)) > 1  # the ticker did report around it


def test_spec_2_6_b_an_agent_run_with_progress_is_strictly_valid() -> None:
    """A whole run whose tool reports, with the context the agent core is to pass (run_tools' context) [R2.6-b].

    The validating tee checks the response strictly; the patch the agent needs is this wrapper.
    """
    store = MemoryStore()
    model = ReplayModel(_tool_call("fetch", {"url": "page"}))
    agent = Agent(model, tools=[fetch], retry=fast_retry(), store=store)
    original = run_tools  # what tool_step calls
    run_ids: list[str] = []

    def with_context(*args: Any, **kwargs: Any) -> Any:
        run_state = agent.state.run
        assert run_state is not None
        base = kwargs.get("context") or ToolContextBase(  # the agent's own, once the core passes it
            agent_uuid=agent.agent_uuid, run_id=run_state.run_id, store=agent.store
        )
        kwargs["context"] = dataclasses.replace(base, progress_interval=0)
        run_ids.append(run_state.run_id)
        return original(*args, **kwargs)

    lines: list[bytes] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tool_step_module, "run_tools", with_context)
        run(agent.run("go", lines.append))
    assert_valid(lines)
    reports = [r for r in _progress([line for line in lines if line != b"[DONE]"]) if r["kind"] == "tool_progress"]
    assert [r["message"] for r in reports] == ["connecting", "reading"]
    result = model.server.requests[1]["messages"][-1]["content"][0]["content"][0]["text"]
    assert result == f"page by {agent.agent_uuid}/{run_ids[0]}/toolu_1/fetch"


def _tool_call(name: str, tool_input: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """A recorded model that calls ``name`` once with ``tool_input``, then answers."""
    message: dict[str, Any] = {"id": "m", "type": "message", "role": "assistant", "model": "r", "content": []}
    message |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
    start: dict[str, Any] = {"type": "message_start", "message": message}
    block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}
    delta = {"type": "input_json_delta", "partial_json": json.dumps(tool_input)}
    end = {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 2}}
    call: list[dict[str, Any]] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": delta},
        {"type": "content_block_stop", "index": 0},
        end,
    ]
    text = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}}
    answer: list[dict[str, Any]] = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        text,
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}},
    ]
    return [call, answer]


def test_spec_2_6_c_a_sink_failing_on_a_progress_line_is_raised_to_the_caller() -> None:
    """The client goes away while a progress line is sent: run_tools raises it, as a failing result send does [R2.6-c].

    The agent learns that its client is gone (spec §5.5-c) instead of running on unheard.
    """

    class Gone(Exception):
        pass

    attempted: list[bytes] = []

    async def go() -> None:
        async def send(lines: list[bytes]) -> None:
            attempted.extend(lines)
            if b"tool_progress" in lines[0]:
                raise Gone("client went away")

        base = ToolContextBase(agent_uuid=AGENT, run_id="r", progress_interval=0)
        call = ToolCallRequest(id="toolu_1", name="fetch", input={"url": "u"})
        await run_tools([call], {"fetch": fetch}, Emitter(AGENT), send, context=base)

    with pytest.raises(Gone, match="client went away"):
        asyncio.run(go())
    assert len(attempted) == 1  # raised at the next send: the result is not sent to a gone client
