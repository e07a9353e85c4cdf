"""The tools wing: the tool model and the tools the reference agent ships.

Owns: ``Tool``, ``tool()`` and the outcome of a call (``core``), the JSON schema of a
tool's input (``schema``), what a tool's function is given (``context``: ``ToolContext``),
the bound on a result's size (``result_bound``), the demo tools (``demo``), the memory
tool and long-term memory (``memory``, ``memory_store``), tools from MCP servers
(``mcp``) and the snapshots that make a file-changing tool undoable (``snapshots``).

Must not import: store, models, fleet, run, server, cli, nor ``agent``. It may use
policy, ``errors`` and ``tracing``. A tool that needs to name what the run gives it
names a small type of this wing.
"""
