"""Helpers of the MCP tests: a prompt that makes the scripted model call given tools, the test server's launch, process checks.

``calling_prompt`` writes the embedded model's generic prompt, "call TOOL with {json}"
(spec R8.3-a): its first answer calls the given tools with the given input, in one step;
the next says what each result was.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_ref.tools.mcp import StdioServer

if TYPE_CHECKING:
    from agent_ref import ScriptedModel

#: The test server's script (run over stdio).
SERVER_SCRIPT = Path(__file__).resolve().parent / "mcp_test_server.py"


def stdio_config(name: str = "testsrv") -> StdioServer:
    """The test server as a process over stdio (this interpreter running ``mcp_test_server.py``)."""
    return StdioServer(sys.executable, (str(SERVER_SCRIPT), name))


def calling_prompt(calls: list[tuple[str, dict[str, Any]]]) -> str:
    """A prompt for the scripted model's generic prompt (spec R8.3-a): it calls ``calls`` in one step, then answers."""
    return " and ".join(f"call {name} with {json.dumps(arguments, ensure_ascii=False)}" for name, arguments in calls)


def tool_names(model: ScriptedModel) -> list[str]:
    """The tool names of the model's first request (what it was offered)."""
    return [str(t["name"]) for t in model.requests[0].get("tools", [])]


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def wait_gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether process ``pid`` is gone within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return not alive(pid)


def children() -> set[int]:
    """This process's live children."""
    me = os.getpid()
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry.name))
    return found
