"""The msgspec Structs of the reading side, in a module that is never compiled.

Owns: ``SSEEvent`` (what ``SSEReader`` dispatches), ``RawLine`` (an envelope line of a
recorded stream with its position), ``_Wire`` (the reconstructor's lenient form of a
line), ``_LineBatch`` (a batch of lines, positions built on demand) and
``MigrationWarning``. ``_sse``, ``_decoder`` and ``_xml_scan`` re-export them.
Does not own: reading or decoding (``_sse``, ``_decoder``); the envelope types (``_types``).

Why a module of their own: ``setup.py`` compiles the hot modules with mypyc, and a
class compiled by mypyc gets ``__annotations__`` with each union replaced by the class
``type``; msgspec reads a Struct's fields from those annotations, so a compiled
``id: str | UnsetType`` field would expect a type object. A Struct therefore lives in a
module mypyc leaves alone (a test checks every Struct's annotations on both paths).
``_LineBatch`` (the lines ``StreamReader.feed_batch`` returns) is here for a like reason:
a compiled subclass of ``collections.abc.Sequence`` shares the ABC's instance cache, so
after ``isinstance([], _LineBatch)`` said no, ``isinstance([], Sequence)`` said no too.
And the frozen dataclasses a user may keep (``MigrationWarning``): compiled, they could
not be pickled or copied (``FrozenInstanceError`` on the way back).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, overload

import msgspec
from msgspec import UNSET, UnsetType

from ._errors import Position

__all__ = ["MigrationWarning", "RawLine", "SSEEvent"]


class SSEEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One dispatched event.

    Attributes:
        data: the data lines joined with LF, without the trailing LF.
        event: the event type; ``"message"`` when the stream named none.
        id: the last event id in force when the event was dispatched (``""`` if none).
        line: 1-based line of the input where the event's first field starts.
        offset: byte offset of that line in the whole input.
    """

    data: str
    event: str = "message"
    id: str = ""
    line: int = 0
    offset: int = 0


class RawLine(msgspec.Struct, frozen=True):
    """One envelope line of a recorded stream, not yet decoded.

    Attributes:
        data: the line's text (the SSE event's data, or the JSON line), or ``"[DONE]"``.
        line: 1-based physical line where it starts in the input.
        offset: byte offset where it starts in the input.
    """

    data: str
    line: int
    offset: int

    @property
    def position(self) -> Position:
        """The position as an error would carry it."""
        return Position(line=self.line, offset=self.offset)


class _Wire(msgspec.Struct, gc=False):
    """The lenient form: base fields checked, known extras typed loosely, others ignored.

    Recorded streams from other implementations put numbers in strings, mark images
    final and so on; the reconstructor still rebuilds them (the validator judges them).
    """

    type: str
    agent: str
    final: bool
    delta: str
    id: str | UnsetType = UNSET
    name: str | UnsetType = UNSET
    src: str | UnsetType = UNSET
    media_type: str | UnsetType = UNSET
    citation_type: Any = UNSET
    document_index: Any = UNSET
    document_title: Any = UNSET
    start_char_index: Any = UNSET
    end_char_index: Any = UNSET
    start_page_number: Any = UNSET
    end_page_number: Any = UNSET
    url: Any = UNSET
    title: Any = UNSET


class _LineBatch(Sequence[RawLine]):
    """The envelope lines one chunk completed, as ``StreamReader.feed_batch`` returns them.

    A sequence of ``RawLine`` built on demand: ``Reconstructor.feed_many`` reads
    ``data`` and asks ``position`` only for a line it reports an error on, so the hot
    path builds no ``RawLine`` and no ``Position`` per line. Two shapes: explicit line
    numbers and offsets, or (the SSE fast path) a run of ``data: <line>`` events each
    followed by a blank line, whose positions follow from the first one and the lengths.
    """

    __slots__ = ("_cursor", "_first_line", "_first_offset", "_lines", "_offsets", "data")

    def __init__(
        self,
        data: list[bytes] | list[str],
        *,
        lines: list[int] | None = None,
        offsets: list[int] | None = None,
        first_line: int = 0,
        first_offset: int = 0,
    ) -> None:
        #: The lines' text: bytes (valid UTF-8) on the SSE fast path, else str.
        self.data: Final = data
        self._lines = lines
        self._offsets = offsets
        self._first_line = first_line
        self._first_offset = first_offset
        self._cursor = (0, first_offset)  # (index, offset) of the last line ``at`` placed

    @classmethod
    def of(cls, raws: list[RawLine]) -> _LineBatch:
        """A batch of lines already read, with their own positions."""
        return cls([r.data for r in raws], lines=[r.line for r in raws], offsets=[r.offset for r in raws])

    def position(self, index: int) -> Position:
        """Where line ``index`` of the batch starts (line and byte offset)."""
        line, offset = self.at(index)
        return Position(line=line, offset=offset)

    def at(self, index: int) -> tuple[int, int]:
        """``position(index)`` as a plain ``(line, offset)``: what the validator's batch loop asks per reported line.

        On the SSE fast path event k is ``"data: " + data[k] + "\\n\\n"``, two lines, and
        ``data[k]`` is bytes, so its length is its size in the input (spec §2.1). The
        offset is summed from the last line asked (a cursor), so lines asked in order,
        as the batch loop asks them, cost one pass over the batch in all, not one each.
        """
        lines, offsets = self._lines, self._offsets
        if lines is not None and offsets is not None:
            return lines[index], offsets[index]
        if index < 0:
            index += len(self.data)
        known, offset = self._cursor
        if index < known:
            known, offset = 0, self._first_offset
        if index > known:
            offset += sum(map(len, self.data[known:index])) + 8 * (index - known)
        self._cursor = (index, offset)
        return self._first_line + 2 * index, offset

    def __len__(self) -> int:
        return len(self.data)

    @overload
    def __getitem__(self, index: int) -> RawLine: ...

    @overload
    def __getitem__(self, index: slice) -> list[RawLine]: ...

    def __getitem__(self, index: int | slice) -> RawLine | list[RawLine]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.data)))]
        if index < 0:
            index += len(self.data)
        if not 0 <= index < len(self.data):
            raise IndexError("line index out of range")
        data = self.data[index]
        where = self.position(index)
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return RawLine(text, where.line or 0, where.offset or 0)


@dataclass(frozen=True, slots=True)
class MigrationWarning:
    """Something the migrator did that the user should know about; the content was kept.

    Attributes:
        message: what happened, one sentence.
        position: where in the input.
        section: the ``spec/legacy-xml.md`` section (``"M4.2"``).
    """

    message: str
    position: Position
    section: str | None = None
    #: An error that ``lenient`` turned into a warning (the input was broken); ``False``
    #: for notes about a faithful conversion (an older label mapped, an era guessed).
    recovered: bool = False

    def __str__(self) -> str:
        where = str(self.position)
        text = f"{where}: {self.message}" if where else self.message
        return f"{text} (spec §{self.section})" if self.section else text
