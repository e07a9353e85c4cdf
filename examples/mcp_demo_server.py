"""A tiny MCP server over stdio, written with the official ``mcp`` SDK: two tools to try.

``lookup(term)`` looks a word up in a small built-in glossary; ``add(a, b)`` adds two
integers. ``examples/mcp.json`` points at this file, so (from the repository root, with
the ``mcp`` extra installed)::

    agent-ref run --mcp-config examples/mcp.json "use the mcp tools"

gives the embedded offline model the tools ``mcp__demo__lookup`` and ``mcp__demo__add``;
"use the mcp tools" calls the first with a demo input (spec/agent-ref.md R8.3-b), and
``call mcp__demo__add with {"a": 2, "b": 40}`` calls any of them (R8.3-a).
"""

from __future__ import annotations

from typing import Any, Final

from mcp.server.mcpserver import MCPServer

#: The glossary ``lookup`` reads (lower-case terms).
GLOSSARY: Final = {
    "demo": "a small example that shows how something works",
    "envelope": "one JSON line of the envelope streaming protocol",
    "mcp": "the Model Context Protocol, which lets an agent use tools served by another process",
}


def build() -> MCPServer[Any]:
    """The demo server (named ``demo``) with its two tools."""
    server: MCPServer[Any] = MCPServer("demo", log_level="ERROR")

    @server.tool()
    def lookup(term: str) -> str:
        """Look a term up in the demo glossary.

        Args:
            term: The word to look up, e.g. "envelope".
        """
        meaning = GLOSSARY.get(term.strip().lower())
        if meaning is None:
            known = ", ".join(sorted(GLOSSARY))
            return f"{term!r} is not in the glossary (it knows: {known})"
        return f"{term}: {meaning}"

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first integer.
            b: The second integer.
        """
        return a + b

    return server


if __name__ == "__main__":
    build().run()
