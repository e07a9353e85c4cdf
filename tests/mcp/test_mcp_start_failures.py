"""A stdio MCP server named ``python``, and one that cannot start (spec/agent-ref.md R19.6-c, R19.4-d).

Issue 37: ``examples/mcp.json`` starts ``python``; from a shell without the venv that is a
Python without ``mcp``, and the page said only ``MCPError: Connection closed``. Real
processes throughout: the test server, a stand-in ``python`` on ``PATH`` that is not this
interpreter, and servers that write to stderr and exit. Every stream goes through the
strict validator.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import sys
from typing import TYPE_CHECKING

import pytest

from agent_ref import Agent, ScriptedModel, default_tools
from agent_ref.tools.mcp import STDERR_TAIL_CHARS, McpToolset, StdioServer, load_mcp_config
from agent_ref_support import envelopes, fast_retry
from mcp_support import SERVER_SCRIPT
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

ROOT = SERVER_SCRIPT.parent.parent


def _fake_python(tmp_path: Path) -> Path:
    """A directory whose ``python`` and ``python3`` are not this interpreter: they say so and exit 1."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "python3"):
        fake = bin_dir / name
        fake.write_text("#!/bin/sh\necho 'not the agent s python' >&2\nexit 1\n")
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    return bin_dir


async def _open(servers: dict[str, StdioServer], errlog: io.StringIO | None = None) -> tuple[list[str], dict[str, str]]:
    async with McpToolset(servers, connect_timeout=30, errlog=errlog) as toolset:
        return [t.name for t in toolset.tools], dict(toolset.failed)


@pytest.mark.parametrize("command", ["python", "python3"])
def test_spec_R19_6_c_python_means_the_interpreter_running_the_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """With another ``python`` first on PATH, the server still starts under ``sys.executable`` [R19.6-c]."""
    monkeypatch.setenv("PATH", f"{_fake_python(tmp_path)}{os.pathsep}{os.environ.get('PATH', '')}")
    names, failed = asyncio.run(_open({"io": StdioServer(command, (str(SERVER_SCRIPT), "io"))}))
    assert failed == {}
    assert "mcp__io__echo" in names


def test_spec_R19_6_c_the_example_config_starts_from_a_shell_without_the_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``examples/mcp.json`` as shipped, run from the repository with a PATH whose python has no ``mcp`` [R19.6-c]."""
    monkeypatch.setenv("PATH", f"{_fake_python(tmp_path)}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.chdir(ROOT)
    servers = dict(load_mcp_config(ROOT / "examples" / "mcp.json"))
    names, failed = asyncio.run(_open(servers))  # type: ignore[arg-type]
    assert failed == {}
    assert names


def test_spec_R19_4_d_a_server_that_cannot_start_says_why() -> None:
    """The reason carries the last lines the server wrote to stderr, which still reach the errlog [R19.4-d]."""
    script = (
        "import sys\nprint('starting', file=sys.stderr)\n"
        "print(\"ModuleNotFoundError: No module named 'mcp'\", file=sys.stderr)\nsys.exit(1)\n"
    )
    errlog = io.StringIO()
    names, failed = asyncio.run(_open({"bad": StdioServer(sys.executable, ("-c", script))}, errlog))
    assert names == []
    why = failed["bad"]
    assert why.startswith("did not start: ")
    assert "its stderr ended: starting | ModuleNotFoundError: No module named 'mcp'" in why
    assert "No module named 'mcp'" in errlog.getvalue()  # passed on as before, not swallowed


def test_spec_R19_4_d_the_reason_is_bounded() -> None:
    """A server that writes a flood keeps only its last lines, within the bound [R19.4-d]."""
    script = "import sys\nfor i in range(2000): print(f'line {i} ' + 'x' * 200, file=sys.stderr)\nsys.exit(1)\n"
    names, failed = asyncio.run(_open({"loud": StdioServer(sys.executable, ("-c", script))}, io.StringIO()))
    assert names == []
    tail = failed["loud"].split("its stderr ended: ", 1)[1]
    assert len(tail) <= STDERR_TAIL_CHARS
    assert "line 1999" in tail
    assert "line 1990" not in tail


def test_spec_R19_7_a_the_stream_says_why_once_per_response() -> None:
    """The agent's one failed ``mcp_server`` status of the response names the server's own words [R19.7-a] [R19.4-d]."""
    script = "import sys\nprint('cannot open the database', file=sys.stderr)\nsys.exit(2)\n"
    servers = {"bad": StdioServer(sys.executable, ("-c", script))}
    agent = Agent(ScriptedModel(), tools=default_tools(), retry=fast_retry(), mcp_servers=servers)
    lines: list[bytes] = []
    result = asyncio.run(agent.run("What is 5 + (10 * 2)?", lines.append))
    assert result.stop_reason == "end_turn"
    assert_valid(lines)
    assert not [e for e in envelopes(lines) if e["type"] == "error"]
    statuses = [json.loads(e["delta"]) for e in envelopes(lines) if e["type"] == "meta_status"]
    failures = [s for s in statuses if s["kind"] == "mcp_server"]
    assert [(f["state"], f["server"]) for f in failures] == [("failed", "bad")]
    assert "its stderr ended: cannot open the database" in failures[0]["message"]
