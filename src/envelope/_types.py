"""The envelope types: one frozen msgspec Struct per wire type, and the union of them.

Owns: the schema of a single envelope (fields, their JSON types, their wire order),
the type-name constants and ``BlockKey``.
Does not own: chunking (``_chunker``), positions in a stream (``_decoder``), or
what sequences of envelopes mean (``_reconstruct``).

Field order here *is* the wire order (spec §3.2): ``type`` (the tag), ``agent``,
``final``, then ``id`` and ``name`` where the type has them, then ``delta``, then the
remaining extras in the order the seed's tables list them. Every class sets
``kw_only=True``: msgspec moves keyword-only fields after positional ones, so a base
alone being kw-only would put a subclass's ``id`` ahead of ``agent``.

Optional extras are ``UNSET`` by default, so an unset extra is absent on the wire
and an explicit ``null`` is a type error (spec §3.3).
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

import msgspec
from msgspec import UNSET, UnsetType

__all__ = [
    "BUFFERED_TYPES",
    "ENVELOPE_TYPES",
    "STREAMED_TYPES",
    "AwaitingFrontendTools",
    "BlockKey",
    "BufferedType",
    "Citation",
    "Envelope",
    "EnvelopeType",
    "Error",
    "MetaCompaction",
    "MetaFiles",
    "MetaFinal",
    "MetaInit",
    "MetaStatus",
    "ServerToolCall",
    "ServerToolResult",
    "StreamedType",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "ToolResultImage",
]

#: The 15 wire types (spec §4.1): the seed's 13, then ``meta_compaction`` (spec §4.15) and
#: ``meta_status`` (spec §4.16).
EnvelopeType = Literal[
    "meta_init",
    "thinking",
    "text",
    "citation",
    "tool_call",
    "server_tool_call",
    "tool_result",
    "tool_result_image",
    "server_tool_result",
    "awaiting_frontend_tools",
    "meta_files",
    "error",
    "meta_final",
    "meta_compaction",
    "meta_status",
]
#: Types whose deltas are forwarded as they arrive; ``final`` comes as a separate marker.
StreamedType = Literal["text", "thinking"]
#: Types whose whole payload is known before emission; the last chunk carries ``final``.
BufferedType = Literal[
    "meta_init",
    "tool_call",
    "server_tool_call",
    "tool_result",
    "server_tool_result",
    "awaiting_frontend_tools",
    "meta_files",
    "error",
    "meta_final",
    "meta_compaction",
    "meta_status",
]

ENVELOPE_TYPES: Final[tuple[EnvelopeType, ...]] = (
    "meta_init",
    "thinking",
    "text",
    "citation",
    "tool_call",
    "server_tool_call",
    "tool_result",
    "tool_result_image",
    "server_tool_result",
    "awaiting_frontend_tools",
    "meta_files",
    "error",
    "meta_final",
    "meta_compaction",
    "meta_status",
)
STREAMED_TYPES: Final[frozenset[str]] = frozenset({"text", "thinking"})
BUFFERED_TYPES: Final[frozenset[str]] = frozenset(
    {
        "meta_init",
        "tool_call",
        "server_tool_call",
        "tool_result",
        "server_tool_result",
        "awaiting_frontend_tools",
        "meta_files",
        "error",
        "meta_final",
        "meta_compaction",
        "meta_status",
    }
)


class BlockKey(NamedTuple):
    """Identity of a block in a stream: the agent that produced it and its wire type (spec §7.1)."""

    agent: str
    type: str


class _Base(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    tag_field="type",
    forbid_unknown_fields=True,
):
    """Base fields present on every envelope (spec §3.1). ``type`` is the tag."""

    #: Which agent produced the envelope; routes it to that agent's blocks.
    agent: str
    #: ``True`` on the last envelope of a block.
    final: bool


class _Delta(_Base, frozen=True, kw_only=True):
    """An envelope whose only field past the base is ``delta`` (the shared layout, not a type)."""

    delta: str


class _ToolBlock(_Base, frozen=True, kw_only=True):
    """A tool block's envelope: ``id``, ``name``, then ``delta`` (the shared layout, not a type)."""

    id: str
    name: str
    delta: str


class MetaInit(_Delta, frozen=True, kw_only=True, tag="meta_init"):
    """Session metadata, once at the start of an agent's stream; ``delta`` is JSON text."""


class Thinking(_Delta, frozen=True, kw_only=True, tag="thinking"):
    """Extended thinking, streamed."""


class Text(_Delta, frozen=True, kw_only=True, tag="text"):
    """Assistant text, streamed."""


class Citation(_Delta, frozen=True, kw_only=True, tag="citation"):
    """One citation of the agent's last completed text block; ``delta`` is the cited text."""

    citation_type: str
    document_index: int | UnsetType = UNSET
    document_title: str | UnsetType = UNSET
    start_char_index: int | UnsetType = UNSET
    end_char_index: int | UnsetType = UNSET
    start_page_number: int | UnsetType = UNSET
    end_page_number: int | UnsetType = UNSET
    url: str | UnsetType = UNSET
    title: str | UnsetType = UNSET


class ToolCall(_ToolBlock, frozen=True, kw_only=True, tag="tool_call"):
    """A client tool invocation; ``delta`` is the JSON arguments text."""


class ServerToolCall(_ToolBlock, frozen=True, kw_only=True, tag="server_tool_call"):
    """A server tool invocation (web search, code execution); ``delta`` is JSON text."""


class ToolResult(_ToolBlock, frozen=True, kw_only=True, tag="tool_result"):
    """The result of a backend or frontend tool; ``delta`` is the result text."""


class ToolResultImage(_ToolBlock, frozen=True, kw_only=True, tag="tool_result_image"):
    """One image inside the open ``tool_result`` of the same agent and ``id``."""

    src: str
    media_type: str


class ServerToolResult(_ToolBlock, frozen=True, kw_only=True, tag="server_tool_result"):
    """The result of a server tool; ``name`` is the API result block type."""


class AwaitingFrontendTools(_Delta, frozen=True, kw_only=True, tag="awaiting_frontend_tools"):
    """The agent is paused; ``delta`` is a JSON array of pending frontend tool calls."""


class MetaFiles(_Delta, frozen=True, kw_only=True, tag="meta_files"):
    """Files produced during the run; ``delta`` is a JSON object with a ``files`` array."""


class MetaCompaction(_Delta, frozen=True, kw_only=True, tag="meta_compaction"):
    """The agent's context was compacted; ``delta`` is a JSON object (``trigger``, ``pre_tokens``, ...).

    A control envelope, not content: it marks where in the agent's stream the model's
    context was summarised or trimmed (spec §4.15).
    """


class MetaStatus(_Delta, frozen=True, kw_only=True, tag="meta_status"):
    """A routine status signal of the agent; ``delta`` is a JSON object with a ``kind`` (spec §4.16).

    Tool progress, a step's start and finish (with its usage and cost), compaction,
    retries, hook outcomes, an MCP server's state: what a client shows as a status line,
    never as a failure (failures stay ``error``, spec §4.13).
    """


class Error(_Delta, frozen=True, kw_only=True, tag="error"):
    """An error; ``delta`` is a JSON error payload."""


class MetaFinal(_Delta, frozen=True, kw_only=True, tag="meta_final"):
    """Run summary, once at the end of an agent's stream; ``delta`` is JSON text."""


#: The single union of every envelope type, tagged on ``type``.
Envelope = (
    MetaInit
    | Thinking
    | Text
    | Citation
    | ToolCall
    | ServerToolCall
    | ToolResult
    | ToolResultImage
    | ServerToolResult
    | AwaitingFrontendTools
    | MetaFiles
    | Error
    | MetaFinal
    | MetaCompaction
    | MetaStatus
)
