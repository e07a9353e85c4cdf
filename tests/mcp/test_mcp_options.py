"""MCP servers in ``AgentOptions`` (spec/agent-ref.md §19.7): opened per response, closed however it ends.

Every run is a real ``Agent`` run on a scripted model, its stream validated strictly by the
tee of conftest.py; the servers are real (the test server over stdio).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent_ref import Agent, AgentSpec, ScriptedModel, default_tools
from agent_ref.errors import ConfigError
from agent_ref.tools.mcp import StdioServer
from agent_ref_support import envelopes, fast_retry
from mcp_support import calling_prompt, children, stdio_config, tool_names, wait_gone


def _results(lines: list[bytes]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in envelopes(lines):
        if e["type"] == "tool_result":
            out[e["name"]] = out.get(e["name"], "") + e["delta"]
    return out


def _errors(lines: list[bytes]) -> list[dict[str, Any]]:
    return [json.loads(e["delta"]) for e in envelopes(lines) if e["type"] == "error" and e["delta"]]


def test_r19_7_a_servers_open_for_the_response_and_close_when_it_ends() -> None:
    """``mcp_servers``: the tools join the run; the process is gone when the run ends [R19.7-a]."""
    before = children()
    calls: list[tuple[str, dict[str, Any]]] = [("mcp__io__echo", {"text": "hi"}), ("mcp__io__pid", {})]
    model = ScriptedModel()
    agent = Agent(model, mcp_servers={"io": stdio_config("io")}, retry=fast_retry())
    lines: list[bytes] = []
    result = asyncio.run(agent.run(calling_prompt(calls), lines.append))
    assert result.stop_reason == "end_turn"
    results = _results(lines)
    assert results["mcp__io__echo"] == "io echoes: hi"
    assert "mcp__io__pid" in tool_names(model)
    pid = int(results["mcp__io__pid"])
    assert wait_gone(pid, 10), "the MCP server outlived the response"
    assert children() <= before
    assert "mcp__io__echo" not in agent.tools  # the agent's own tools are as they were


def test_r19_7_a_a_pause_closes_the_servers_and_the_resume_reopens_them() -> None:
    """A response that pauses closes its servers; the resumed one opens them again [R19.7-a]."""
    before = children()
    calls: list[tuple[str, dict[str, Any]]] = [("mcp__io__pid", {}), ("confirm", {"question": "go on?"})]
    model = ScriptedModel()
    agent = Agent(model, tools=default_tools(), mcp_servers={"io": stdio_config("io")}, retry=fast_retry())
    lines: list[bytes] = []
    paused = asyncio.run(agent.run(calling_prompt(calls), lines.append))
    assert paused.stop_reason == "awaiting_frontend_tools"
    pid = int(_results(lines)["mcp__io__pid"])
    assert wait_gone(pid, 10), "the MCP server outlived the paused response"
    (pending,) = paused.pending_frontend_tools
    more: list[bytes] = []
    answer = [{"tool_use_id": pending.tool_use_id, "content": "yes"}]
    done = asyncio.run(agent.continue_with_tool_results(answer, more.append))
    assert done.stop_reason == "end_turn"
    assert any(t["name"] == "mcp__io__pid" for t in model.requests[-1]["tools"])
    assert children() <= before


def test_r19_7_a_a_server_that_fails_is_a_diagnostic_not_a_crash() -> None:
    """A server that does not start: an ``mcp_server`` status, failed, no ``error``; the run goes on [R19.7-a]."""
    model = ScriptedModel()
    prompt = calling_prompt([("mcp__io__echo", {"text": "x"})])
    servers = {"io": stdio_config("io"), "gone": StdioServer("/nonexistent/mcp-server")}
    lines: list[bytes] = []
    result = asyncio.run(Agent(model, mcp_servers=servers, retry=fast_retry()).run(prompt, lines.append))
    assert result.stop_reason == "end_turn"
    assert _errors(lines) == []  # envelope-v1 [4.16-c]: the run goes on, so a status
    statuses = [json.loads(e["delta"]) for e in envelopes(lines) if e["type"] == "meta_status"]
    (failed,) = [s for s in statuses if s["kind"] == "mcp_server"]
    assert (failed["state"], failed["server"]) == ("failed", "gone")
    assert "'gone'" in failed["message"]
    assert _results(lines)["mcp__io__echo"] == "io echoes: x"


def test_r19_7_b_a_child_inherits_the_servers() -> None:
    """A subagent's options carry its parent's MCP servers [R19.7-b]; bad entries are refused by name [R19.7-a]."""
    from agent_ref.run.options import AgentOptions
    from agent_ref.store.core import MemoryStore

    servers = {"io": stdio_config("io")}
    parent = AgentOptions(mcp_servers=servers, subagents={"r": AgentSpec("researches")})
    assert parent.for_child(AgentSpec("researches"), MemoryStore()).mcp_servers == servers
    with pytest.raises(ConfigError, match=r"mcp_servers\['io'\]: str is not a server configuration"):
        AgentOptions(mcp_servers={"io": "python server.py"})  # type: ignore[dict-item]
