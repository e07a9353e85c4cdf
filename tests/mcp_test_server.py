"""A real MCP server written with the SDK, for tests/mcp: over stdio when run as a script.

``build(name)`` makes the server object (the in-process and HTTP tests use it directly);
``python mcp_test_server.py`` serves it over stdin/stdout (the stdio tests start it so).
Its tools cover every result shape the agent maps (spec/agent-ref.md §19) and every
failure it must survive: ``crash`` ends the process mid-call, ``hang`` never answers.
"""

from __future__ import annotations

import asyncio
import base64
import os
import sys
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

#: A 1x1 transparent PNG.
PNG: bytes = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def build(name: str = "testsrv") -> MCPServer[Any]:
    """The test server, named ``name``."""
    server: MCPServer[Any] = MCPServer(name, log_level="ERROR")

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back, with the server's name."""
        return f"{name} echoes: {text}"

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers (a structured result too)."""
        return a + b

    @server.tool()
    def picture() -> Image:
        """A 1x1 PNG."""
        return Image(data=PNG, format="png")

    @server.tool()
    def refuse(reason: str) -> str:
        """Always fails with the reason (an isError result)."""
        raise ToolError(f"refused: {reason}")

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def crash() -> str:
        """End the server's process in the middle of the call."""
        sys.stdout.flush()
        os._exit(3)

    @server.tool()
    async def hang(mark: str = "") -> str:
        """Never answer; first create the file ``mark`` if given (so a test sees the call arrived)."""
        if mark:
            Path(mark).touch()
        await asyncio.sleep(3600)
        return "too late"

    return server


if __name__ == "__main__":
    build(sys.argv[1] if len(sys.argv) > 1 else "testsrv").run()
