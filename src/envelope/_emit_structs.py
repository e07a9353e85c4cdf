"""The values the emitter takes and reports, in a module that is never compiled.

Owns: ``ImageRef`` and ``CitationData`` (msgspec Structs a caller builds and passes to
``Emitter``) and ``OversizeLine`` (the frozen dataclass ``Emitter.oversize`` holds).
``_encoder`` re-exports them; ``envelope`` exports them.
Does not own: encoding or chunking (``_encoder``, ``_chunker``).

Why a module of their own: ``setup.py`` compiles ``_encoder`` with mypyc (issue 31), and
what ``_structs`` says for the read path holds here too (spec/limits.md L4): a msgspec
Struct compiled by mypyc gets its union annotations (``int | UnsetType``) rewritten, and
a compiled frozen dataclass cannot be pickled or copied, while a caller keeps these.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["CitationData", "ImageRef", "OversizeLine"]


@dataclass(frozen=True, slots=True)
class OversizeLine:
    """Report of a line that had to exceed the bound (spec §6.5).

    Attributes:
        type: the envelope type.
        agent: the agent.
        size: the line's length in bytes.
        max_bytes: the bound in force.
        reason: why no split could help, one sentence.
    """

    type: str
    agent: str
    size: int
    max_bytes: int
    reason: str


class ImageRef(msgspec.Struct, frozen=True, kw_only=True):
    """An image of a multimodal tool result: a data URI or URL and its MIME type."""

    src: str
    media_type: str


class CitationData(msgspec.Struct, frozen=True, kw_only=True):
    """One citation to emit: the cited text and the extras of spec §4.5.

    The reconstructed transcript gives citations back as dicts with these keys.
    """

    cited_text: str
    citation_type: str
    document_index: int | UnsetType = UNSET
    document_title: str | UnsetType = UNSET
    start_char_index: int | UnsetType = UNSET
    end_char_index: int | UnsetType = UNSET
    start_page_number: int | UnsetType = UNSET
    end_page_number: int | UnsetType = UNSET
    url: str | UnsetType = UNSET
    title: str | UnsetType = UNSET
