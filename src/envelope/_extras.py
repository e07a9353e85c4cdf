"""The optional parts of the distribution: which extra brings which import, and the one line said when it is missing.

Owns: ``EXTRAS`` (each extra of ``pyproject.toml`` that code asks for, with the
top-level modules it must bring), ``missing`` (which of them are not installed: a
lookup with ``importlib.util.find_spec``, nothing is imported), ``needs`` (the one
line naming the extra and the ``pip install`` that brings it) and ``import_failed``
(what a library module behind an extra raises when its own imports fail, spec cli
[C10-c]).
Does not own: the lists of requirements (``pyproject.toml``; ``tests/install`` checks
that each module below comes from a distribution the extra lists), or what a caller
does with the line (the command lines print it and exit 2; ``agent_ref`` and the
library modules behind an extra raise ``MissingExtraError`` with it).

``pip install envelope-stream`` brings msgspec alone: the codec needs nothing more.
"""

from __future__ import annotations

import importlib.util
from typing import Final

__all__ = ["EXTRAS", "MissingExtraError", "import_failed", "missing", "needs"]

#: Each extra and the top-level modules the code imports from it (``pyproject.toml`` lists the distributions).
EXTRAS: Final[dict[str, tuple[str, ...]]] = {
    # The reference agent (agent_ref, the agent-ref command): the Claude SDK, its HTTP client, JSON Schema.
    "agent": ("anthropic", "httpx2", "jsonschema", "referencing"),
    # agent-ref serve: the agent plus its ASGI app, SSE responses and server.
    "server": ("anthropic", "httpx2", "jsonschema", "referencing", "starlette", "sse_starlette", "uvicorn"),
    "postgres": ("psycopg", "psycopg_pool"),
    "asgi": ("starlette", "sse_starlette"),
    # agent_ref.tools.mcp: tools from MCP servers, through the official SDK (spec/agent-ref.md §19).
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


class MissingExtraError(ModuleNotFoundError):
    """An optional part is not installed; the message is ``needs``' line.

    A ``ModuleNotFoundError`` (so an ``ImportError``): code that guards an optional import
    with either still catches it; ``name`` is the missing module when one is known.
    """


def missing(extra: str) -> list[str]:
    """The modules of ``extra`` that cannot be imported here (``[]`` when it is installed)."""
    return [name for name in EXTRAS[extra] if importlib.util.find_spec(name) is None]


def needs(what: str, extra: str) -> str:
    """One line: ``WHAT needs the 'EXTRA' extra: pip install 'envelope-stream[EXTRA]'``."""
    return f"{what} needs the {extra!r} extra: pip install 'envelope-stream[{extra}]'"


def import_failed(error: ModuleNotFoundError, what: str, extra: str) -> ModuleNotFoundError:
    """What a module behind ``extra`` raises when one of its imports failed with ``error``.

    Used as ``except ModuleNotFoundError as exc: raise import_failed(exc, __name__, "asgi") from None``
    around the imports at the top of such a module (spec cli [C10-c]).

    Args:
        error: the import's failure.
        what: the module that needs the extra, as its user imported it.
        extra: the extra that brings its dependencies.

    Returns:
        A ``MissingExtraError`` whose message is ``needs``' line when the module not found is
        one that ``extra`` brings (or inside one); otherwise ``error`` itself: a dependency
        that is installed but broken is no missing extra, and its own message says more.
    """
    top = (error.name or "").partition(".")[0]
    if top not in EXTRAS[extra]:
        return error
    return MissingExtraError(needs(what, extra), name=error.name)
