"""Every size limit of the codec, named once, each with the reason for its value.

Owns: the numbers. Does not own: enforcing them (each reader does, with a position).
"""

from __future__ import annotations

from typing import Final

#: Bound on the UTF-8 bytes of one encoded envelope (the JSON object after ``data: ``).
#: 2048 is the seed's ``MAX_SSE_CHUNK_BYTES``; small enough that no proxy or browser
#: buffers a line in pieces, large enough that overhead stays under 5 %. (spec §6.1)
DEFAULT_MAX_BYTES: Final = 2048

#: Longest JSON encoding of one code point in a string body: ``\u001f`` is 6 bytes;
#: an astral character is 4 raw UTF-8 bytes (the encoder never writes surrogate pairs).
#: A chunk budget below this cannot guarantee progress. (spec §6.6)
MAX_CODE_POINT_BYTES: Final = 6

#: Longest SSE line the reader holds before it gives up on finding a line end.
#: Lines above the envelope bound exist (an image data URI that cannot be chunked,
#: spec §6.5), so this is far above 2048; it exists so that input with no line end
#: cannot grow memory without bound. (spec §2.3)
DEFAULT_MAX_LINE_BYTES: Final = 16 * 1024 * 1024

#: Most bytes one open block may hold in the reconstructor before it is refused.
#: A tool input or result of this size is already far beyond any API limit.
DEFAULT_MAX_BLOCK_BYTES: Final = 256 * 1024 * 1024

#: Most blocks open at once across all agents in a reconstructor (14 types an agent,
#: so this allows thousands of live subagents while stopping a key-flooding input).
DEFAULT_MAX_OPEN_BLOCKS: Final = 65_536

#: Most digits an SSE ``retry:`` value may have (spec §2.3-f). Ten digits are 115 days in
#: milliseconds, beyond any reconnection delay a client acts on; past it the reader refuses
#: the line instead of converting thousands of digits (CPython's ``int`` raises a bare
#: ``ValueError`` over 4,300 digits, and converting fewer still costs time quadratic in them).
MAX_RETRY_DIGITS: Final = 10

#: Longest legacy XML tag (``<`` to ``>``) the migrator holds. A tool call's ``arguments``
#: attribute carries a whole file the model wrote, so this is large; it exists so that a
#: ``<`` with no ``>`` cannot grow memory without bound.
DEFAULT_MAX_LEGACY_TAG_CHARS: Final = 16 * 1024 * 1024

#: Longest legacy tag name; the longest known one (``content-block-server_tool_result``)
#: has 32 characters, so a longer name is refused before its tag is buffered.
MAX_LEGACY_NAME_CHARS: Final = 128

#: Most attributes on one legacy tag; a citation has the most (nine).
MAX_LEGACY_ATTRIBUTES: Final = 32

#: Deepest nesting of JSON arrays and objects the codec parses in a payload or line.
#: Real payloads (tool inputs, API results) stay far below 64; msgspec and the stdlib
#: recurse per level and meet the interpreter's recursion limit near 1,000, so a limit of
#: 256 refuses hostile input with a coded diagnostic, long before any parser's own limit
#: and with headroom for the caller's stack. (spec/limits.md)
MAX_NESTING_DEPTH: Final = 256
