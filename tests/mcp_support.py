"""Helpers of the MCP tests: a scripted model that calls given tools, the test server's launch, process checks.

``CallingModel`` is ``agent_ref.scripted.ScriptedModel`` (the real ``AsyncAnthropic``
over a mock transport) with one script of its own: the first answer calls the given
tools with the given input; the next says what each result was. The embedded model has
no prompt that calls an arbitrary tool; this one reuses its event rendering.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

from agent_ref import scripted
from agent_ref.mcp_tools import StdioServer

#: The test server's script (run over stdio).
SERVER_SCRIPT = Path(__file__).resolve().parent / "mcp_test_server.py"


def stdio_config(name: str = "testsrv") -> StdioServer:
    """The test server as a process over stdio (this interpreter running ``mcp_test_server.py``)."""
    return StdioServer(sys.executable, (str(SERVER_SCRIPT), name))


class CallingScript(scripted._Script):
    """The scripted model's renderer with one decision: call ``calls`` first, then report the results."""

    def __init__(self, request: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]) -> None:
        super().__init__(request)
        self.calls = calls

    def _decide(self) -> None:
        if not self.results and self.tools_allowed and self.calls:
            self._text("Calling the tools.")
            for name, arguments in self.calls:
                self._tool_use(name, arguments)
            self.stop_reason = "tool_use"
            return
        said = [f"{name} {'failed' if is_error else 'gave'}: {text}" for name, text, is_error in self.results]
        self._text("Results. " + " | ".join(said))


class CallingModel(scripted.ScriptedModel):
    """A scripted model whose first answer calls ``calls`` (tool name, input), in one step."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        """See the class docstring."""
        super().__init__()
        self.calls = calls

    def _handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content or b"{}")
        self.requests.append(body)
        events = list(CallingScript(body, self.calls).events())
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=scripted._sse(events))

    def tool_names(self) -> list[str]:
        """The tool names of the first request (what the model was offered)."""
        return [str(t["name"]) for t in self.requests[0].get("tools", [])]


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
