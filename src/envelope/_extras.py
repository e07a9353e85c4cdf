"""The optional parts of the distribution: which extra brings which import, and the one line said when it is missing.

Owns: ``EXTRAS`` (each extra of ``pyproject.toml`` that code asks for, with the
top-level modules it must bring), ``missing`` (which of them are not installed: a
lookup with ``importlib.util.find_spec``, nothing is imported) and ``needs`` (the one
line naming the extra and the ``pip install`` that brings it).
Does not own: the lists of requirements (``pyproject.toml``; ``tests/install`` checks
that each module below comes from a distribution the extra lists), or what a caller
does with the line (the command lines print it and exit 2; ``agent_ref`` raises
``ImportError`` with it).

``pip install envelope-stream`` brings msgspec alone: the codec needs nothing more.
"""

from __future__ import annotations

import importlib.util
from typing import Final

__all__ = ["EXTRAS", "MissingExtraError", "missing", "needs"]

#: Each extra and the top-level modules the code imports from it (``pyproject.toml`` lists the distributions).
EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    # The reference agent (agent_ref, the agent-ref command): the Claude SDK, its HTTP client, JSON Schema.
    "agent": ("anthropic", "httpx2", "jsonschema", "referencing"),
    # agent-ref serve: the agent plus its ASGI app, SSE responses and server.
    "server": ("anthropic", "httpx2", "jsonschema", "referencing", "starlette", "sse_starlette", "uvicorn"),
    "postgres": ("psycopg", "psycopg_pool"),
    "asgi": ("starlette", "sse_starlette"),
    # agent_ref.mcp_tools: tools from MCP servers, through the official SDK (spec/agent-ref.md §19).
    "mcp": ("mcp",),
    # agent_ref.tracing: OpenTelemetry spans and the OTLP exporter of `agent-ref serve --otlp` (spec/agent-ref.md §20).
    "otel": ("opentelemetry",),
    # envelope check: an HTTP client.
    "check": ("httpx2",),
    # The OpenAI SDK that envelope.openai's translators read (spec/openai-adapter.md), and its HTTP client.
    "openai": ("openai", "httpx2"),
    # Progress bars of the command lines on a terminal (spec/cli.md C6).
    "progress": ("rich",),
    # envelope bench: the peers, the chart and the bench's status line.
    "bench": ("ag_ui", "matplotlib", "rich"),
}


class MissingExtraError(ImportError):
    """An optional part is not installed; the message is ``needs``' line."""


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (``[]`` when it is installed)."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def needs(what: str, extra: str) -> str:
    """One line: ``WHAT needs the 'EXTRA' extra: pip install 'envelope-stream[EXTRA]'``."""
    return f"{what} needs the {extra!r} extra: pip install 'envelope-stream[{extra}]'"
