"""Agents with tools from real MCP servers (written with the SDK in mcp_test_server.py): spec/agent-ref.md §19.

Each transport the toolset speaks: a process over stdio, streamable HTTP on loopback, an
in-process server object; and each failure it must survive: a server that does not
start, one that dies in the middle of a call, one that never answers. Every run is a
real ``Agent`` run driven by a scripted model; its stream is validated strictly by the
tee of conftest.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore
from agent_ref.policy.permissions import PermissionAllow, PermissionDeny, PermissionResult, ToolPermissionContext
from agent_ref.server.app import create_app
from agent_ref.tools.mcp import HttpServer, InProcessServer, McpToolset, StdioServer, tool_name
from agent_ref_support import envelopes
from fault_support import wait_until, wait_until_async
from mcp_support import alive, calling_prompt, children, stdio_config, tool_names, wait_gone
from mcp_test_server import PNG, build
from server_support import data_lines, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from agent_ref import AgentResult, Tool
    from agent_ref.tools.mcp import McpServerConfig

#: A bound that only a hang reaches (seconds): a test that would hang fails there, loudly.
#: It times nothing; what ran is judged by the outcome (which timeout's message, which order).
HANG_GUARD = 60.0


async def _run_agent(
    servers: dict[str, McpServerConfig],
    calls: list[tuple[str, dict[str, Any]]],
    *,
    call_timeout: float = 20,
    before_close: Callable[[McpToolset], Any] | None = None,
    **agent_options: Any,
) -> tuple[AgentResult, ScriptedModel, list[bytes], McpToolset]:
    model = ScriptedModel()
    lines: list[bytes] = []
    async with McpToolset(servers, connect_timeout=20, call_timeout=call_timeout) as toolset:
        agent = Agent(model, tools=toolset.tools, **agent_options)
        result = await agent.run(calling_prompt(calls), lines.append)
        if before_close is not None:
            await before_close(toolset)
    return result, model, lines, toolset


def _tool_results(lines: list[bytes]) -> dict[str, str]:
    """The streamed text of each tool's result, by tool name."""
    out: dict[str, str] = {}
    for e in envelopes(lines):
        if e["type"] == "tool_result":
            out[e["name"]] = out.get(e["name"], "") + e["delta"]
    return out


def _listed_schemas(name: str) -> dict[str, dict[str, Any]]:
    async def listing() -> dict[str, dict[str, Any]]:
        return {t.name: t.input_schema for t in await build(name).list_tools()}

    return asyncio.run(listing())


def test_stdio_server_tools_named_schemas_as_given_results_mapped() -> None:
    """A stdio server: tools mcp__<server>__<tool> [R19.1-a], schemas as listed [R19.2-a], text and image results [R19.3-a].

    The process is gone when the toolset closes [R19.5-a].
    """
    before = children()
    pids: list[int] = []

    async def remember_pid(toolset: McpToolset) -> None:
        (pid_tool,) = [t for t in toolset.tools if t.name == "mcp__io__pid"]
        assert pid_tool.fn is not None
        pids.append(int(await pid_tool.fn()))

    result, model, lines, _ = asyncio.run(
        _run_agent(
            {"io": stdio_config("io")},
            [("mcp__io__echo", {"text": "héllo"}), ("mcp__io__picture", {})],
            before_close=remember_pid,
        )
    )
    assert result.stop_reason == "end_turn"
    assert tool_names(model) == [
        "mcp__io__echo",
        "mcp__io__add",
        "mcp__io__picture",
        "mcp__io__refuse",
        "mcp__io__pid",
        "mcp__io__crash",
        "mcp__io__hang",
    ]
    schemas = {t["name"].removeprefix("mcp__io__"): t["input_schema"] for t in model.requests[0]["tools"]}
    assert schemas == _listed_schemas("io")
    results = _tool_results(lines)
    assert results["mcp__io__echo"] == "io echoes: héllo"
    images = [e for e in envelopes(lines) if e["type"] == "tool_result_image"]
    assert [(e["name"], e["src"]) for e in images] == [
        ("mcp__io__picture", "data:image/png;base64," + base64.b64encode(PNG).decode())
    ]
    history = model.requests[1]["messages"][-1]["content"]
    picture = [b for b in history if b["type"] == "tool_result"][1]
    assert picture["content"][-1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": base64.b64encode(PNG).decode(),
    }
    assert "io echoes: héllo" in result.final_text
    (pid,) = pids
    assert wait_gone(pid, 10), "the stdio server outlived its toolset"
    assert children() <= before


def _auth(app: Any, token: str) -> Any:
    """The app, answering 401 to a request without ``Authorization: Bearer <token>``."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"no"})
                return
        await app(scope, receive, send)

    return guarded


def test_streamable_http_server_with_headers() -> None:
    """Streamable HTTP on loopback, headers sent [R19.6-a]; structured results read as text [R19.3-a]."""
    app = _auth(build("web").streamable_http_app(), "t0k")
    with running(app) as base:
        good = HttpServer(f"{base}/mcp", headers={"Authorization": "Bearer t0k"})
        result, _model, lines, toolset = asyncio.run(
            _run_agent({"web": good}, [("mcp__web__echo", {"text": "over http"}), ("mcp__web__add", {"a": 2, "b": 40})])
        )
        assert toolset.failed == {}
        results = _tool_results(lines)
        assert results["mcp__web__echo"] == "web echoes: over http"
        assert results["mcp__web__add"] == "42"
        assert result.stop_reason == "end_turn"

        async def without_token() -> McpToolset:
            async with McpToolset({"web": HttpServer(f"{base}/mcp")}, connect_timeout=10) as toolset:
                return toolset

        refused = asyncio.run(without_token())
        assert refused.tools == []
        assert set(refused.failed) == {"web"}
        assert "t0k" not in refused.failed["web"]


def test_in_process_server_and_is_error() -> None:
    """An in-process server object; its isError result is an error result the model reads [R19.3-b]."""
    server = build("mem")
    result, model, lines, _ = asyncio.run(
        _run_agent(
            {"mem": InProcessServer(server)},
            [("mcp__mem__refuse", {"reason": "not today"}), ("mcp__mem__add", {"a": 1, "b": 2})],
        )
    )
    assert result.stop_reason == "end_turn"
    blocks = [b for b in model.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    refused, added = blocks
    assert refused["is_error"] is True
    assert "refused: not today" in refused["content"][0]["text"]
    assert refused["content"][0]["text"].startswith("McpToolError: ")
    assert "is_error" not in added
    assert added["content"][0]["text"] == "3"
    assert _tool_results(lines)["mcp__mem__refuse"].startswith("McpToolError: ")


def test_server_that_crashes_mid_call(caplog: pytest.LogCaptureFixture) -> None:
    """A stdio server that dies in the middle of a call: an error result, the run goes on [R19.4-b].

    Later calls to it fail at once with the same kind of message [R19.4-c].
    """
    later: list[str] = []

    async def call_again(toolset: McpToolset) -> None:
        (echo,) = [t for t in toolset.tools if t.name == "mcp__io__echo"]
        assert echo.fn is not None
        with pytest.raises(Exception, match="MCP server 'io'") as caught:
            await asyncio.wait_for(echo.fn(text="still there?"), HANG_GUARD)
        # "at once": from the dead connection, not from waiting out the call's timeout
        assert "did not answer" not in str(caught.value)
        later.append(str(caught.value))

    with caplog.at_level("WARNING", logger="agent_ref.mcp"):
        result, model, _lines, _ = asyncio.run(
            _run_agent({"io": stdio_config("io")}, [("mcp__io__crash", {})], before_close=call_again)
        )
    assert "MCP server 'io' failed the call" in caplog.text
    assert result.stop_reason == "end_turn"
    (block,) = [b for b in model.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert block["is_error"] is True
    text = block["content"][0]["text"]
    assert text.startswith("McpToolError: MCP server 'io'")
    assert "Traceback" not in text
    assert later


def test_server_that_hangs_times_out() -> None:
    """A call that never returns is answered "did not answer ... within N s"; the run is not hung [R19.4-b].

    The toolset's call_timeout, not the agent's tool_timeout, bounds MCP calls.
    """
    result, model, _lines, _ = asyncio.run(
        asyncio.wait_for(  # a hung run fails here, loudly, instead of hanging the suite
            _run_agent(
                {"io": stdio_config("io"), "mem": InProcessServer(build("mem"))},
                [("mcp__io__hang", {}), ("mcp__mem__hang", {})],
                call_timeout=1.0,
                tool_timeout=0.5,  # the agent's bound for other tools: the toolset's own wins for its calls
            ),
            HANG_GUARD,
        )
    )
    assert result.stop_reason == "end_turn"
    blocks = [b for b in model.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert [b["content"][0]["text"] for b in blocks] == [
        "McpToolError: MCP server 'io' did not answer hang within 1 s",
        "McpToolError: MCP server 'mem' did not answer hang within 1 s",
    ]
    assert all(b["is_error"] for b in blocks)


def test_servers_that_do_not_start_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    """A missing program, or one that never speaks MCP: no tools from it, a diagnostic, the others work [R19.4-a]."""
    before = children()
    silent = StdioServer(sys.executable, ("-c", "import time; time.sleep(60)"))
    missing = StdioServer("/nonexistent/mcp-server-program")

    async def main() -> tuple[McpToolset, list[Tool]]:
        async with McpToolset(
            {"silent": silent, "missing": missing, "mem": InProcessServer(build("mem"))}, connect_timeout=1.5
        ) as toolset:
            return toolset, list(toolset.tools)

    with caplog.at_level("WARNING", logger="agent_ref.mcp"):
        # the silent server is given up at its connect_timeout ("within 1.5 s" below), not waited for
        toolset, tools = asyncio.run(asyncio.wait_for(main(), HANG_GUARD))
    assert {t.name for t in tools} == {
        f"mcp__mem__{n}" for n in ("echo", "add", "picture", "refuse", "pid", "crash", "hang")
    }
    assert set(toolset.failed) == {"silent", "missing"}
    assert "within 1.5 s" in toolset.failed["silent"]
    assert "FileNotFoundError" in toolset.failed["missing"]
    logged = caplog.text
    assert "'silent'" in logged
    assert "'missing'" in logged
    wait_until(lambda: children() <= before, "a server that did not start to be gone", timeout=10)


def test_cancelled_block_still_closes_servers(tmp_path: Path) -> None:
    """Cancel the task inside the block (a call hanging): every server process is stopped anyway [R19.5-a]."""
    pids: list[int] = []
    mark = tmp_path / "hanging"

    async def main() -> None:
        async def body() -> None:
            async with McpToolset({"io": stdio_config("io")}, call_timeout=60) as toolset:
                tools = {t.name: t for t in toolset.tools}
                pid_fn, hang_fn = tools["mcp__io__pid"].fn, tools["mcp__io__hang"].fn
                assert pid_fn is not None
                assert hang_fn is not None
                pids.append(int(await pid_fn()))
                await hang_fn(mark=str(mark))

        task = asyncio.create_task(body())
        # cancelled while the server runs the call: it received it (created the mark) and never answers
        await wait_until_async(mark.exists, "the server to receive the hanging call", timeout=HANG_GUARD)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # still inside the loop: the end of asyncio.run would cancel every task left, closing them for us
        (pid,) = pids
        await wait_until_async(lambda: not alive(pid), "the stdio server to end with its cancelled toolset", 10)

    asyncio.run(main())


def test_mcp_calls_go_through_permissions() -> None:
    """An MCP tool is a tool like any other: can_use_tool sees its name and may deny or edit the input [R19.2-a]."""
    asked: list[tuple[str, dict[str, Any]]] = []

    def can_use_tool(name: str, tool_input: dict[str, Any], _context: ToolPermissionContext) -> PermissionResult:
        asked.append((name, dict(tool_input)))
        if name == "mcp__mem__refuse":
            return PermissionDeny(message="not this one")
        if name == "mcp__mem__add":
            return PermissionAllow(updated_input={"a": 10, "b": 5})
        return PermissionAllow()

    result, model, lines, _ = asyncio.run(
        _run_agent(
            {"mem": InProcessServer(build("mem"))},
            [
                ("mcp__mem__refuse", {"reason": "x"}),
                ("mcp__mem__add", {"a": 1, "b": 1}),
                ("mcp__mem__echo", {"text": "hi"}),
            ],
            can_use_tool=can_use_tool,
        )
    )
    assert result.stop_reason == "end_turn"
    assert [name for name, _ in asked] == ["mcp__mem__refuse", "mcp__mem__add", "mcp__mem__echo"]
    results = _tool_results(lines)
    assert results["mcp__mem__add"] == "15"
    assert "not this one" in results["mcp__mem__refuse"]
    assert "refused: x" not in results["mcp__mem__refuse"]  # the server was never asked
    assert results["mcp__mem__echo"] == "mem echoes: hi"
    denied = next(b for b in model.requests[1]["messages"][-1]["content"] if b["type"] == "tool_result")
    assert denied["is_error"] is True


def test_a_tool_name_that_does_not_fit_is_sanitised_and_still_called() -> None:
    """A server tool named ``files.read`` is offered under a sanitised name and called by its own [R19.1-a]."""
    from mcp.server.mcpserver import MCPServer

    server: MCPServer[Any] = MCPServer("odd", log_level="ERROR")

    @server.tool(name="files.read")
    def read(path: str) -> str:
        """Read a file (pretend)."""
        return f"contents of {path}"

    offered = tool_name("odd", "files.read")
    assert offered != "mcp__odd__files.read"
    result, model, lines, _ = asyncio.run(_run_agent({"odd": InProcessServer(server)}, [(offered, {"path": "a.txt"})]))
    assert tool_names(model) == [offered]
    assert _tool_results(lines)[offered] == "contents of a.txt"
    assert result.stop_reason == "end_turn"


def test_a_server_that_cannot_start_is_said_once_per_turn_through_the_server(tmp_path: Path) -> None:
    """Issue 37: two turns of one agent through ``agent-ref serve``'s app, a stdio server that exits at once.

    The issue saw ``mcp_server_failed: ... Connection closed`` twice per turn on the page.
    Each response has it once, after ``meta_init``, with the server's own words [R19.7-a],
    as an ``mcp_server`` status (envelope-v1 [4.16-c]), no ``error``.
    """
    script = "import sys\nprint(\"No module named 'mcp'\", file=sys.stderr)\nsys.exit(1)\n"
    app = create_app(
        store=SQLiteStore(tmp_path / "agents.db"),
        model_factory=ScriptedModel,
        agent_config={"mcp_servers": {"demo": StdioServer(sys.executable, ("-c", script))}},
    )
    failures: list[list[str]] = []
    agent: dict[str, str] = {}
    with running(app) as base:
        for prompt in ("What is 2 + 2?", "What is 3 + 3?"):
            answer = post(base, "/agent/run", {"prompt": prompt, **agent})
            assert answer.status_code == 200, answer.text[:400]
            assert_valid(answer.content)
            agent = {"agent_uuid": answer.headers["x-agent-uuid"]}
            sent = envelopes(data_lines(answer.content))
            assert not [e for e in sent if e["type"] == "error"]
            statuses = [json.loads(e["delta"]) for e in sent if e["type"] == "meta_status"]
            failures.append([f"{f['state']}: {f['message']}" for f in statuses if f["kind"] == "mcp_server"])
    assert [len(turn) for turn in failures] == [1, 1]
    for (said,) in failures:
        assert said.startswith("failed: MCP server 'demo' did not start: "), said
        assert said.endswith("its stderr ended: No module named 'mcp'; its tools are left out"), said
