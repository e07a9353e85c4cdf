"""``examples/mcp_demo_server.py`` and ``examples/mcp.json``: the scripted model's MCP demo prompt (spec R8.3-b).

The example server (written with the ``mcp`` SDK) in process under a real ``Agent``, and
over stdio as ``examples/mcp.json`` starts it, under ``agent-ref run --mcp-config``
in a subprocess; every stream is validated strictly.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from examples.mcp_demo_server import GLOSSARY, build

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref.tools.mcp import InProcessServer, McpToolset, StdioServer, load_mcp_config
from agent_ref_support import assert_valid_responses, envelopes, sse_lines
from conftest import ROOT
from validating import assert_valid

SCRIPT = Path(sys.executable).parent / "agent-ref"
CONFIG = "examples/mcp.json"


def _results(lines: list[bytes]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in envelopes(lines):
        if e["type"] == "tool_result":
            out[e["name"]] = out.get(e["name"], "") + e["delta"]
    return out


def test_mcp_json_is_the_common_shape_with_a_relative_command() -> None:
    """examples/mcp.json reads as one stdio server, `python examples/mcp_demo_server.py` [R8.3-b]."""
    raw = json.loads((ROOT / CONFIG).read_text(encoding="utf-8"))
    assert list(raw) == ["mcpServers"]
    servers = load_mcp_config(ROOT / CONFIG)
    assert servers == {"demo": StdioServer("python", ("examples/mcp_demo_server.py",))}


def test_use_the_mcp_tools_in_process_calls_the_first_tool_with_a_demo_input() -> None:
    """An Agent with the demo tools and the example server: "use the mcp tools" looks up "demo" [R8.3-b]."""

    async def go() -> tuple[Any, ScriptedModel, list[bytes]]:
        model = ScriptedModel()
        lines: list[bytes] = []
        async with McpToolset({"demo": InProcessServer(build())}, connect_timeout=20) as toolset:
            agent = Agent(model, tools=[*default_tools(), *toolset.tools])
            result = await agent.run("Please use the MCP tools.", lines.append)
        return result, model, lines

    result, model, lines = asyncio.run(go())
    assert_valid_responses(lines)
    offered = [t["name"] for t in model.requests[0]["tools"] if t["name"].startswith("mcp__")]
    assert offered == ["mcp__demo__lookup", "mcp__demo__add"]
    assert _results(lines) == {"mcp__demo__lookup": f"demo: {GLOSSARY['demo']}"}
    assert result.final_text == f"The MCP tool mcp__demo__lookup answered: demo: {GLOSSARY['demo']}"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    # "python" in examples/mcp.json is the interpreter on PATH: this one, which has the mcp SDK.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
    )


def test_cli_run_with_the_example_config_uses_the_mcp_tools(tmp_path: Path) -> None:
    """`agent-ref run --mcp-config examples/mcp.json "use the mcp tools"`: the stdio server answers [R8.3-b]."""
    done = _cli("run", "--mcp-config", CONFIG, "--db", str(tmp_path / "a.db"), "use the mcp tools", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = sse_lines(done.stdout)
    assert_valid(lines)
    assert _results(lines) == {"mcp__demo__lookup": f"demo: {GLOSSARY['demo']}"}


def test_cli_run_with_the_generic_prompt_calls_the_example_add(tmp_path: Path) -> None:
    """The generic prompt drives any of the example's tools over stdio: add(2, 40) is 42 [R8.3-a]."""
    prompt = 'call mcp__demo__add with {"a": 2, "b": 40}'
    done = _cli("run", "--mcp-config", CONFIG, "--db", str(tmp_path / "a.db"), prompt, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = sse_lines(done.stdout)
    assert_valid(lines)
    assert _results(lines) == {"mcp__demo__add": "42"}
