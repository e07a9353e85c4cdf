"""Decoding envelope lines, and splitting a recorded stream into envelope lines.

Owns: ``decode`` (one line to one typed envelope, strictly), the lenient wire form
the reconstructor reads, turning msgspec's errors into ours with positions, and
``StreamReader``, which takes the bytes of a recorded stream (an SSE capture or JSON
lines, detected from the first byte) and yields each envelope line with the physical
line and byte offset where it starts.
Does not own: what sequences of envelopes mean (``_reconstruct``, the validator).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from ._depth import too_deep
from ._errors import DecodeError, EnvelopeError, Position, ValidationError
from ._limits import DEFAULT_MAX_LINE_BYTES, MAX_NESTING_DEPTH
from ._shape import expected_kind, shape_error
from ._sse import SSEReader
from ._structs import RawLine
from ._structs import _LineBatch as _LineBatch  # re-exported: the validator reads it from here
from ._structs import _Wire as _Wire  # re-exported: _reconstruct reads it from here
from ._types import Envelope
from ._utf8 import utf8_fault

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["DONE_DATA", "RawLine", "StreamReader", "decode"]

#: The data of the terminator event (spec §8.2).
DONE_DATA: Final = "[DONE]"

_strict = msgspec.json.Decoder(Envelope)
#: What may precede the first content byte of a recording: whitespace, and the bytes of a BOM.
_LEADING: Final = b" \t\r\n\xef\xbb\xbf"
_PATH = re.compile(r" - at `(\$[^`]*)`$")
_BYTE = re.compile(r"\(byte (\d+)\)")
_MISSING = re.compile(r"missing required field `([^`]+)`")
_UNKNOWN = re.compile(r"unknown field `([^`]+)`")


_lenient = msgspec.json.Decoder(_Wire)

#: The citation extras in wire order (spec §4.5).
CITATION_FIELDS: Final = (
    "citation_type",
    "document_index",
    "document_title",
    "start_char_index",
    "end_char_index",
    "start_page_number",
    "end_page_number",
    "url",
    "title",
)


def _translate(exc: msgspec.MsgspecError, line: bytes | str | None = None, *, lenient: bool = False) -> EnvelopeError:
    """Turn a msgspec error into ours: the message without msgspec's suffix, the path as ``field``.

    Args:
        exc: what msgspec raised.
        line: the line it was decoding, to name an escaped lone surrogate, which msgspec
            reports as truncation or as a bad pair (spec §6.4), and to find a shape fault
            in our words (``_shape``, spec/limits.md L5-c).
        lenient: the line was read as the reconstructor reads it (``_Wire``).
    """
    text = str(exc)
    if isinstance(exc, msgspec.ValidationError):
        shaped = shape_error(line, lenient=lenient) if line is not None else None
        if shaped is not None:
            return shaped
        # Not found by our check (a line nested too deep to read as members): msgspec's
        # path and the field names it gives are kept, the words are ours.
        field = None
        ours = None
        match = _PATH.search(text)
        if match:
            field = match.group(1)
        missing = _MISSING.search(text)
        if missing:
            field = (field or "$") + "." + missing.group(1)
            ours = f"missing required field `{missing.group(1)}`"
        unknown = _UNKNOWN.search(text)
        if unknown:
            field = (field or "$") + "." + unknown.group(1)
            ours = f"field `{unknown.group(1)}` is not allowed on this type"
        if ours is None:
            kind = expected_kind(field) if field is not None else None
            ours = f"expected {kind}" if kind else "the line does not have the shape of an envelope"
        return ValidationError(ours, field=field, section="3.1")
    if line is not None and (text == "Input data was truncated" or "surrogate" in text):
        lone = _lone_surrogate(line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass"))
        if lone is not None:
            at, escape = lone
            return DecodeError(
                f"not JSON this library reads: an escaped lone surrogate {escape} in a string",
                position=Position(offset=at),
                section="6.4",
            )
    match = _BYTE.search(text)
    position = Position(offset=int(match.group(1))) if match else None
    if match:
        # The byte is in the position; do not say it twice.
        text = (text[: match.start()] + text[match.end() :]).rstrip()
    if text.startswith("JSON is malformed: "):
        text = "not JSON: " + text.removeprefix("JSON is malformed: ")
    elif text == "Input data was truncated":
        text = "not JSON: the line ends inside a value"
    return DecodeError(text, position=position, section="3.1")


#: A JSON string escape: ``\uXXXX`` (group 1 the hex) or a backslash and one other byte.
_ESCAPE: Final = re.compile(rb"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def _lone_surrogate(data: bytes) -> tuple[int, str] | None:
    """The byte offset and text of the first escaped lone surrogate in ``data``, or None.

    A high surrogate escape (``\\ud800`` to ``\\udbff``) is lone unless a low one
    (``\\udc00`` to ``\\udfff``) follows at once; a low one is lone unless it ends such a
    pair. One at the very end of the line is not reported: there the line was cut, and
    "the line ends inside a value" says so. Error path only: a linear scan of the escapes.
    """
    pending: tuple[int, str] | None = None  # a high surrogate waiting for its low half
    for match in _ESCAPE.finditer(data):
        hex4 = match.group(1)
        unit = int(hex4, 16) if hex4 is not None else -1
        if pending is not None:
            if 0xDC00 <= unit <= 0xDFFF and match.start() == pending[0] + 6:
                pending = None
                continue
            return pending
        if 0xD800 <= unit <= 0xDBFF:
            pending = (match.start(), match.group().decode("ascii"))
        elif 0xDC00 <= unit <= 0xDFFF:
            return match.start(), match.group().decode("ascii")
    if pending is not None and pending[0] + 6 < len(data):
        return pending
    return None


def _bad_utf8(data: bytes | str | None) -> DecodeError | None:
    """The error for a line given as bytes that are not UTF-8, or ``None`` when they are.

    Asked on every error path of the decoders, before what msgspec said is read: a line
    that is not UTF-8 is refused as such whatever else is wrong with it, and the offset
    and words are ours (``_utf8``), not the parser's, whose type and text changed between
    msgspec versions (spec/limits.md L5-a).
    """
    if not isinstance(data, bytes):
        return None
    fault = utf8_fault(data)
    if fault is None:
        return None
    at, reason = fault
    return DecodeError(f"invalid UTF-8 ({reason})", position=Position(offset=at), section="3.1")


def _from_parser(
    exc: msgspec.MsgspecError | UnicodeDecodeError, line: bytes | str, *, lenient: bool = False
) -> EnvelopeError:
    """Our error for what msgspec raised on a line that is UTF-8 (``_bad_utf8`` found nothing)."""
    if isinstance(exc, msgspec.MsgspecError):
        return _translate(exc, line, lenient=lenient)
    # A UnicodeDecodeError from the parser on bytes our check passed: the two disagree.
    return DecodeError("invalid UTF-8", section="3.1")  # pragma: no cover


def _too_deep(line: bytes | str) -> DecodeError:
    """The error for a line too deep for msgspec to walk (it raised ``RecursionError``).

    Both readings can meet it: to find the ``type`` tag that selects the struct, msgspec
    skips the members before it, and the lenient reading also skips unknown members and
    builds the loosely typed citation extras; msgspec recurses per level for each, up to
    the interpreter's recursion limit (near 1,000 levels less the caller's stack). The
    error names ``MAX_NESTING_DEPTH`` and the byte where the nesting first passes it
    (spec/limits.md L2-a).
    """
    data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    offset = too_deep(data, MAX_NESTING_DEPTH)
    if offset is None:  # pragma: no cover  # only when the caller's own stack is near the limit
        return DecodeError("nested too deeply for the parser at this call depth", section="L2-a")
    return nesting_error(offset)


def nesting_error(offset: int) -> DecodeError:
    """The ``DecodeError`` for a line nested deeper than ``MAX_NESTING_DEPTH`` (spec/limits.md L2-a).

    Args:
        offset: the byte in the line of the bracket that opens level ``MAX_NESTING_DEPTH + 1``.
    """
    return DecodeError(
        f"nested deeper than MAX_NESTING_DEPTH={MAX_NESTING_DEPTH}",
        position=Position(offset=offset),
        section="L2-a",
    )


def _as_bytes(line: bytes | str) -> bytes:
    if isinstance(line, str):
        try:
            return line.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise DecodeError(
                "line holds a lone surrogate", position=Position(offset=exc.start), section="6.4"
            ) from None
    return line


def decode(line: bytes | str, *, position: Position | None = None) -> Envelope:
    """Decode one envelope line strictly into its typed Struct.

    Args:
        line: one JSON object, as bytes (UTF-8) or str.
        position: where the line starts in its stream, folded into any error.

    Returns:
        The envelope.

    Raises:
        DecodeError: not UTF-8, not JSON.
        ValidationError: a field missing, of the wrong JSON type, or not allowed; an
            unknown ``type``. The error's ``field`` names it (``$.final``).
    """
    try:
        data = _as_bytes(line)
        envelope: Envelope = _strict.decode(data)
        return envelope
    except (msgspec.MsgspecError, UnicodeDecodeError) as exc:
        # Our UTF-8 check first (spec/limits.md L5-a): msgspec 0.22 raised UnicodeDecodeError,
        # 0.23 its own DecodeError, and it may meet another fault in the line first.
        error = _bad_utf8(data) or _from_parser(exc, data)
    except EnvelopeError as exc:
        error = exc
    except RecursionError:
        error = _too_deep(data)
    raise error.at(position) if position is not None else error


def decode_lenient(line: bytes | str, position: Position | None = None) -> _Wire:
    """Decode the base fields strictly and the extras loosely (the reconstructor's reading)."""
    try:
        # msgspec reads a str as its UTF-8 encoding itself, raising the same
        # UnicodeEncodeError (same index) as str.encode for a lone surrogate; handing it
        # the str saves a copy of every line on the read path.
        wire: _Wire = _lenient.decode(line)
    except (msgspec.MsgspecError, UnicodeDecodeError) as exc:
        error = _bad_utf8(line) or _from_parser(exc, line, lenient=True)  # only bytes can hold invalid UTF-8
    except UnicodeEncodeError as exc:
        error = DecodeError("line holds a lone surrogate", position=Position(offset=exc.start), section="6.4")
    except RecursionError:
        error = _too_deep(line)
    else:
        # msgspec skips an unknown member without checking its UTF-8 (0.23): bytes that
        # are not all ASCII are checked here, so no invalid UTF-8 is read silently
        # (spec/limits.md L5-b). ASCII, the common line, costs one scan.
        bad = _bad_utf8(line) if type(line) is bytes and not line.isascii() else None
        if bad is None:
            return wire
        error = bad
    raise error.at(position) if position is not None else error


class StreamReader:
    """Splits a recorded stream's bytes into envelope lines: ``feed(bytes) -> list[RawLine]``.

    Two input formats, detected from the first byte that is not whitespace: ``{`` means
    JSON lines (one envelope per line, blank lines ignored, ``[DONE]`` allowed as a
    line), anything else an SSE capture (each event's data is one envelope line).

    Attributes:
        format: ``"sse"``, ``"jsonl"``, or ``None`` until detected.
    """

    __slots__ = (
        "_error",
        "_head",
        "_head_len",
        "_line_no",
        "_max",
        "_offset",
        "_parts",
        "_parts_len",
        "_sse",
        "format",
    )

    def __init__(
        self,
        format: Literal["auto", "sse", "jsonl"] = "auto",
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        """Create a reader.

        Args:
            format: force a format instead of detecting it.
            max_line_bytes: the cap on one line (spec §2.3).
        """
        self.format: Literal["sse", "jsonl"] | None = None if format == "auto" else format
        self._max = max_line_bytes
        self._sse = SSEReader(max_line_bytes=max_line_bytes)
        # Until the format is known: the bytes so far (all whitespace or BOM), as they came.
        self._head: list[bytes] = []
        self._head_len = 0
        # JSON lines: the line not yet ended, as the pieces it arrived in (joined when it ends).
        self._parts: list[bytes] = []
        self._parts_len = 0
        self._line_no = 1
        self._offset = 0
        #: The error a JSON-lines input met, once it has: every later call raises it again
        #: (an SSE capture's reader keeps its own).
        self._error: DecodeError | None = None

    def feed(self, chunk: bytes) -> list[RawLine]:
        """Consume bytes; return the envelope lines they complete.

        Raises:
            DecodeError: invalid UTF-8, an over-long line. When the chunk completed lines
                before the error, they are returned and the error is raised by the next
                call (``feed``, ``feed_batch`` or ``close``) instead, so that a caller sees
                the same lines, then the same error, however the input was split (spec
                §2.3-a). After an error every call raises it again.
        """
        chunk = self._detect(chunk)
        if self.format == "sse":
            return [RawLine(e.data, e.line, e.offset) for e in self._sse.feed(chunk)]
        if self.format is None:
            return []
        return self._jsonl(chunk)

    def feed_batch(self, chunk: bytes) -> Sequence[RawLine]:
        """Consume bytes; return the envelope lines they complete, for ``Reconstructor.feed_many``.

        The same lines, positions and errors as ``feed``, and the reader ends in the same
        state; but on an SSE capture the common case (each event one ``data:`` line) is
        split in a few calls over the whole chunk, and the ``RawLine`` objects are only
        built if the sequence is indexed. ``Reconstructor.feed_many`` reads the batch
        without building them; that pair is the fast way to read a capture.

        Args:
            chunk: any bytes of the stream, split anywhere.

        Returns:
            The lines completed by this chunk, in order.

        Raises:
            DecodeError: invalid UTF-8, an over-long line.
        """
        chunk = self._detect(chunk)
        if self.format == "sse":
            lines, line, offset, events = self._sse._feed_batch(chunk)
            if lines:
                return _LineBatch(lines, first_line=line, first_offset=offset)
            return _LineBatch.of([RawLine(e.data, e.line, e.offset) for e in events])
        if self.format is None:
            return _LineBatch([])
        return _LineBatch.of(self._jsonl(chunk))

    def _detect(self, chunk: bytes) -> bytes:
        """Until the format is known, hold bytes and detect it; return the bytes to read.

        Only the new chunk is searched for the first content byte: every byte held so far
        is whitespace or BOM, so the first content byte of the whole is the first of the
        first chunk that has one (each byte looked at once, spec/limits.md).
        """
        if self._error is not None:
            raise self._error
        if self.format is not None:
            return chunk
        stripped = chunk.lstrip(_LEADING)
        if not stripped:
            if chunk:
                self._head.append(chunk)
                self._head_len += len(chunk)
            if self._head_len > self._max:
                self._error = DecodeError("no content in the first bytes", position=Position(offset=0))
                raise self._error
            return b""
        if self._head_len + len(chunk) - len(stripped) > self._max:
            # The same limit whether the leading bytes came in this chunk or before it.
            self._error = DecodeError("no content in the first bytes", position=Position(offset=0))
            raise self._error
        self.format = "jsonl" if stripped[:1] == b"{" else "sse"
        if self._head:
            self._head.append(chunk)
            chunk = b"".join(self._head)
            self._head = []
            self._head_len = 0
        if self.format == "jsonl" and chunk.startswith(b"\xef\xbb\xbf"):
            chunk = chunk[3:]
            self._offset = 3
        return chunk

    def close(self) -> list[RawLine]:
        """Signal the end of input; return the last line if it had no line end.

        Raises:
            DecodeError: an SSE capture ended inside an event.
        """
        if self._error is not None:
            raise self._error
        if self.format == "sse":
            self._sse.close()
            return []
        rest = b"".join(self._parts)
        self._parts = []
        self._parts_len = 0
        if self.format is None:
            return []
        out: list[RawLine] = []
        self._emit(rest, self._offset, out)
        return out

    def _jsonl(self, chunk: bytes) -> list[RawLine]:
        out: list[RawLine] = []
        try:
            self._jsonl_into(chunk, out)
        except DecodeError as exc:
            self._error = exc
            if not out:
                raise
        return out

    def _jsonl_into(self, chunk: bytes, out: list[RawLine]) -> None:
        if self._parts:
            if b"\n" not in chunk:
                # The held line goes on: only the new bytes were searched.
                if chunk:
                    self._parts.append(chunk)
                    self._parts_len += len(chunk)
                self._check_held()
                return
            self._parts.append(chunk)
            data = b"".join(self._parts)
            self._parts = []
            self._parts_len = 0
        else:
            data = chunk
        start = 0
        offset = self._offset
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            self._emit(data[start:end], offset + start, out)
            self._line_no += 1
            start = end + 1
        if start < len(data):
            self._parts.append(data[start:])
            self._parts_len = len(data) - start
        self._offset = offset + start
        self._check_held()

    def _check_held(self) -> None:
        """Refuse a held line that is already over the bound, whatever ends it (spec §2.3).

        A JSON line may end in CRLF, whose CR ``_emit`` removes: a held line one byte over
        the bound whose last byte is CR may still end within it, so it is kept until its
        LF arrives (or does not), and the verdict does not depend on the chunking.
        """
        size = self._parts_len
        if size > self._max and not (size == self._max + 1 and self._parts[-1].endswith(b"\r")):
            raise DecodeError(
                f"line longer than max_line_bytes={self._max}",
                position=Position(line=self._line_no, offset=self._offset),
                section="2.3",
            )

    def _emit(self, raw: bytes, offset: int, out: list[RawLine]) -> None:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        if not raw.strip():
            return
        if len(raw) > self._max:
            raise DecodeError(
                f"line longer than max_line_bytes={self._max}",
                position=Position(line=self._line_no, offset=offset),
                section="2.3",
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            at, reason = utf8_fault(raw) or (0, "")
            raise DecodeError(
                f"invalid UTF-8 ({reason})",
                position=Position(line=self._line_no, offset=offset + at),
                section="2.3",
            ) from None
        out.append(RawLine(text, self._line_no, offset))
