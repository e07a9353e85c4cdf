"""``agent-ref run --mcp-config FILE`` (spec/agent-ref.md R19.6-a, R19.6-b): the console script in a subprocess.

The model is the embedded scripted model, driven by its generic prompt "call TOOL with
{json}" (spec R8.3-a); the MCP server is the test server over stdio.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agent_ref_support import envelopes, sse_lines
from mcp_support import SERVER_SCRIPT, calling_prompt, wait_gone
from validating import assert_valid

SCRIPT = Path(sys.executable).parent / "agent-ref"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
    )


def _config(path: Path, servers: dict[str, Any]) -> None:
    path.write_text(json.dumps({"mcpServers": servers}))


def test_run_with_mcp_config_calls_a_stdio_server(tmp_path: Path) -> None:
    """run --mcp-config: the servers' tools join the run; the server is stopped when it ends [R19.6-b]."""
    _config(tmp_path / ".mcp.json", {"io": {"command": sys.executable, "args": [str(SERVER_SCRIPT), "io"]}})
    prompt = calling_prompt([("mcp__io__echo", {"text": "from the cli"}), ("mcp__io__pid", {})])
    done = _cli("run", prompt, "--mcp-config", ".mcp.json", "--db", str(tmp_path / "a.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = sse_lines(done.stdout)
    assert_valid(lines)
    results: dict[str, str] = {}
    for e in envelopes(lines):
        if e["type"] == "tool_result":
            results[e["name"]] = results.get(e["name"], "") + e["delta"]
    assert results["mcp__io__echo"] == "io echoes: from the cli"
    pid = int(results["mcp__io__pid"])
    assert pid != os.getpid()
    assert wait_gone(pid, 10), "the MCP server outlived agent-ref run"


def test_bad_mcp_config_is_one_line_naming_file_and_key(tmp_path: Path) -> None:
    """A config with a wrong key: exit 2, one line naming the file and the key, nothing run [R19.6-a]."""
    _config(tmp_path / "bad.json", {"io": {"command": "x", "args": "not-a-list"}})
    done = _cli("run", "go", "--mcp-config", "bad.json", "--db", str(tmp_path / "a.db"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("bad.json: error: mcpServers.io.args: must be a list of strings")


def test_r19_7_c_serve_takes_mcp_config_and_checks_it_first(tmp_path: Path) -> None:
    """serve --mcp-config: the file is read before the server starts; a bad one is one line, exit 2 [R19.7-c]."""
    _config(tmp_path / "bad.json", {"io": {"command": "python", "args": "server.py"}})
    done = _cli("serve", "--mcp-config", "bad.json", "--port", "0", "--db", str(tmp_path / "a.db"), cwd=tmp_path)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("bad.json: error: mcpServers.io.args: must be a list of strings")


def test_r19_7_c_serve_gives_the_servers_to_the_agents_options(tmp_path: Path) -> None:
    """serve's agent options carry the servers the file lists (opened per response, [R19.7-a]) [R19.7-c]."""
    from agent_ref.cli.commands import _parser
    from agent_ref.cli.flags import agent_config

    _config(tmp_path / ".mcp.json", {"io": {"command": "python", "args": ["server.py"]}})
    args = _parser().parse_args(["serve", "--mcp-config", str(tmp_path / ".mcp.json")])
    config = agent_config(args)
    assert list(config["mcp_servers"]) == ["io"]
    assert config["mcp_servers"]["io"].command == "python"


def test_paused_run_repeats_mcp_config_in_the_resume_command(tmp_path: Path) -> None:
    """A run that pauses prints a resume command with the same --mcp-config [R19.6-b]."""
    _config(tmp_path / ".mcp.json", {"io": {"command": sys.executable, "args": [str(SERVER_SCRIPT), "io"]}})
    prompt = calling_prompt([("confirm", {"question": "go on?"})])
    done = _cli("run", prompt, "--mcp-config", ".mcp.json", "--db", str(tmp_path / "a.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_valid(sse_lines(done.stdout))
    (command,) = [line for line in done.stderr.splitlines() if "agent-ref resume" in line]
    assert "--mcp-config .mcp.json" in command
