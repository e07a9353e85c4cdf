"""envelope: the JSON envelope streaming protocol codec (spec ``spec/envelope-v1.md``).

Re-exports only. ``__all__`` is the public API; the README lists the same names and a
test compares the two.
"""

from __future__ import annotations

# First: picks the compiled or the pure-Python hot modules before any is imported (ENVELOPE_PURE=1: pure).
from . import _speedups  # noqa: F401
from ._decoder import DONE_DATA, RawLine, StreamReader, decode
from ._encoder import CitationData, Emitter, ImageRef, OversizeLine, Profile, chunk, encode
from ._errors import (
    DecodeError,
    EncodeError,
    EnvelopeError,
    MigrationError,
    OversizeError,
    Position,
    SequenceError,
    ValidationError,
)
from ._limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINE_BYTES
from ._reconstruct import Block, Reconstructor, Transcript, reconstruct
from ._sse import DONE, SSEEvent, SSEReader, frame
from ._tree import AgentNode, AgentTree, tree
from ._types import (
    ENVELOPE_TYPES,
    AwaitingFrontendTools,
    BlockKey,
    BufferedType,
    Citation,
    Envelope,
    EnvelopeType,
    Error,
    MetaCompaction,
    MetaFiles,
    MetaFinal,
    MetaInit,
    MetaStatus,
    ServerToolCall,
    ServerToolResult,
    StreamedType,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    ToolResultImage,
)
from ._validator import StreamValidator, Validator, Violation, validate
from ._xml_migrate import MigrationWarning, XmlMigrator, migrate_xml

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "DONE",
    "DONE_DATA",
    "ENVELOPE_TYPES",
    "AgentNode",
    "AgentTree",
    "AwaitingFrontendTools",
    "Block",
    "BlockKey",
    "BufferedType",
    "Citation",
    "CitationData",
    "DecodeError",
    "Emitter",
    "EncodeError",
    "Envelope",
    "EnvelopeError",
    "EnvelopeType",
    "Error",
    "ImageRef",
    "MetaCompaction",
    "MetaFiles",
    "MetaFinal",
    "MetaInit",
    "MetaStatus",
    "MigrationError",
    "MigrationWarning",
    "OversizeError",
    "OversizeLine",
    "Position",
    "Profile",
    "RawLine",
    "Reconstructor",
    "SSEEvent",
    "SSEReader",
    "SequenceError",
    "ServerToolCall",
    "ServerToolResult",
    "StreamReader",
    "StreamValidator",
    "StreamedType",
    "Text",
    "Thinking",
    "ToolCall",
    "ToolResult",
    "ToolResultImage",
    "Transcript",
    "ValidationError",
    "Validator",
    "Violation",
    "XmlMigrator",
    "chunk",
    "decode",
    "encode",
    "frame",
    "migrate_xml",
    "reconstruct",
    "tree",
    "validate",
]
