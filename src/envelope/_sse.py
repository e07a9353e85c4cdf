"""SSE framing of envelope lines, and an incremental reader of ``text/event-stream`` bytes.

Owns: ``frame`` (one envelope line to one SSE event), ``DONE`` (the terminator), and
``SSEReader``, which turns byte chunks split anywhere into events.
Does not own: what an event's data means (``_decoder``, ``_reconstruct``), sockets, or
reconnection (a client's job; the reader only records ``retry`` and the last event id).

The reader follows WHATWG HTML "9.2.6 Interpreting an event stream"
(https://html.spec.whatwg.org/multipage/server-sent-events.html), with these
deliberate divergences, all in the direction of refusing rather than repairing:

* Invalid UTF-8 is a ``DecodeError`` with its byte offset. WHATWG decodes with
  replacement characters, which would silently change payloads.
* A line longer than ``max_line_bytes`` (or an event's data longer than it) is a
  ``DecodeError``: input with no line end must not grow memory without bound.
* A ``retry`` value of more than ``MAX_RETRY_DIGITS`` digits is a ``DecodeError``
  (WHATWG takes any number of digits; no delay needs more than ten).
* ``close()`` raises when the input stops inside an event, where WHATWG discards the
  unfinished event without a word.

Lines are split on the bytes CR, LF and CRLF *before* decoding; those bytes never
occur inside a multi-byte UTF-8 character, so each complete line decodes on its own
and no decoder state crosses ``feed()`` calls. A CR at the end of a chunk ends its
line at once; an LF opening the next chunk is then dropped as the second half of CRLF.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ._errors import DecodeError, EncodeError, Position
from ._limits import DEFAULT_MAX_LINE_BYTES, MAX_RETRY_DIGITS
from ._speedups import loaded
from ._structs import SSEEvent
from ._utf8 import utf8_fault

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["DONE", "SSEEvent", "SSEReader", "frame"]

#: The stream terminator event, ``data: [DONE]`` and a blank line (spec §8.2).
DONE: Final = b"data: [DONE]\n\n"
_CR: Final = 0x0D
_LF: Final = 0x0A


def frame(line: bytes) -> bytes:
    """Frame one encoded envelope line as an SSE event: ``data: <line>\\n\\n`` (spec §2.1).

    Args:
        line: one compact JSON object, as an ``Emitter`` returns it.

    Returns:
        The event bytes.

    Raises:
        EncodeError: ``line`` contains CR or LF, which would break the framing. Encoded
            envelopes never do: JSON escapes both inside strings.
    """
    # Byte values, not one-byte strings: ``10 in line`` is a plain byte search, while
    # ``b"\n" in line`` first takes a buffer of the needle (issue 31: about 7x slower).
    if _LF in line or _CR in line:
        at = min(i for i in (line.find(b"\n"), line.find(b"\r")) if i >= 0)
        raise EncodeError("an SSE data line cannot contain CR or LF", position=Position(offset=at), section="2.1")
    return b"data: " + line + b"\n\n"


def _load_is_utf8() -> Callable[[bytes], bool] | None:
    """``_cread.is_utf8`` in the compiled build; ``None`` in the pure one (all or none)."""
    if loaded() != "compiled":
        return None
    from ._cread import is_utf8  # only the compiled build has it

    return is_utf8


_c_is_utf8: Final = _load_is_utf8()


def _load_split_lines() -> Callable[[bytes, int], tuple[list[bytes], int] | None] | None:
    """``_cread.split_lines`` in the compiled build; ``None`` in the pure one (all or none)."""
    if loaded() != "compiled":
        return None
    from ._cread import split_lines  # only the compiled build has it

    return split_lines


#: The compiled build's one pass over a batch's events (``SSEReader._batch``, spec [RF1-a]).
_c_split_lines: Final = _load_split_lines()


def _is_utf8(data: bytes) -> bool:
    """Whether ``data`` is valid UTF-8 (the check ``bytes.decode`` makes, in one call).

    The compiled build asks ``_cread.is_utf8``, the same answer without building the str
    (on non-ASCII batches the decoding was a tenth of the read path, issue 43).
    """
    if data.isascii():
        return True
    if _c_is_utf8 is not None:
        return _c_is_utf8(data)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class SSEReader:
    """Incremental ``text/event-stream`` parser: ``feed(bytes) -> list[SSEEvent]``.

    Attributes:
        last_event_id: the id buffer of the stream (persists across events).
        retry: the last valid ``retry`` value in milliseconds, or ``None``.
        max_line_bytes: the cap on one line, and on one event's data.
    """

    __slots__ = (
        "_buf_offset",
        "_closed",
        "_data",
        "_data_len",
        "_error",
        "_event",
        "_line_no",
        "_parts",
        "_parts_len",
        "_skip_lf",
        "_start_line",
        "_start_offset",
        "_started",
        "last_event_id",
        "max_line_bytes",
        "retry",
    )

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        """Create a reader.

        Args:
            max_line_bytes: longest line (and longest event data) accepted, in bytes.
        """
        self.max_line_bytes: Final = max_line_bytes
        self.last_event_id = ""
        self.retry: int | None = None
        # The line not yet ended (or, before the first byte is known not to start a
        # BOM, those bytes), as the pieces it arrived in; joined when it ends.
        self._parts: list[bytes] = []
        self._parts_len = 0
        self._buf_offset = 0  # offset in the whole input of the held line's first byte
        self._line_no = 1  # line number of the held line
        self._skip_lf = False
        self._started = False  # a BOM is only stripped at the very start
        self._closed = False
        #: The error the input met, once it has: every later call raises it again.
        self._error: DecodeError | None = None
        self._data: list[str] = []
        self._data_len = 0
        self._event = ""
        self._start_line = 0  # 0: no field seen in the current event yet
        self._start_offset = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Consume bytes and return the events they complete.

        Args:
            chunk: any bytes of the stream; chunks may split lines, CRLF pairs and characters.

        Returns:
            The events completed by this chunk, in order.

        Raises:
            DecodeError: invalid UTF-8, an over-long line, or a feed after ``close()``.
                When the chunk completed events before the error, they are returned and
                the error is raised by the next call instead, so that what a caller sees
                does not depend on how the input was split (spec §2.3-a): the same events,
                then the same error. After an error every call raises it again.
        """
        self._check_usable()
        events: list[SSEEvent] = []
        try:
            data = self._take(chunk)
            if data:
                self._feed_data(data, events)
        except DecodeError as exc:
            self._error = exc
            if not events:
                raise
        return events

    def _check_usable(self) -> None:
        if self._closed:
            raise DecodeError("feed() after close()")
        if self._error is not None:
            raise self._error

    def _feed_batch(self, chunk: bytes) -> tuple[list[bytes], int, int, list[SSEEvent]]:
        """``feed``, with the common case returned without building an ``SSEEvent`` per event.

        The common case: no event in progress, no CR, and the complete events of the
        chunk are each exactly one ``data: `` line and a blank line. Their data come back
        as one list of bytes (valid UTF-8, checked once for the whole run) together with
        the line and byte offset of the first; event ``k`` then starts at line
        ``line + 2 * k`` and at that offset plus ``len(data[i]) + 8`` for each ``i < k``.
        Everything else goes through ``feed``'s own path and comes back as events. The
        reader ends in the same state, and raises the same errors (deferred the same
        way), as ``feed`` would.

        Returns:
            ``(data, line, offset, events)``: at most one of ``data`` and ``events`` is
            non-empty; the events are only for dispatched events with no ``event`` name
            needed by the caller (``StreamReader`` reads only their data and position).

        Raises:
            DecodeError: as ``feed``.
        """
        self._check_usable()
        events: list[SSEEvent] = []
        lines: list[bytes] = []
        line = offset = 0
        try:
            data = self._take(chunk)
            if data:
                line, offset = self._line_no, self._buf_offset
                if not self._batch(data, lines):
                    self._feed_data(data, events)
        except DecodeError as exc:
            self._error = exc
            if not events and not lines:
                raise
        return lines, line, offset, events

    def _batch(self, data: bytes, lines: list[bytes]) -> bool:
        """The common case of ``_feed_batch``: fill ``lines`` and return True, or return False untouched."""
        if self._start_line or b"\r" in data or not data.startswith(b"data: "):
            return False
        # The compiled build finds the same lines in one pass (spec [RF1-a]); when either
        # says no, the input is not the common case, and feed's own path reads it.
        found = _c_split_lines(data, self.max_line_bytes) if _c_split_lines is not None else self._split(data)
        if found is None:
            return False
        run, cut = found
        # Each line is within the bound, so each event's data is too (it is one line).
        lines += run
        self._line_no += 2 * len(run)
        self._buf_offset += cut
        # The rest holds no blank line (the cut was after the last "\n\n", and the body
        # ends in LF), so it completes no event: it only starts the next one (and may
        # raise: an over-long line; the lines above are then returned first).
        self._feed_lf(data[cut:], [])
        return True

    def _split(self, data: bytes) -> tuple[list[bytes], int] | None:
        """``_batch``'s lines of ``data`` and the cut after them, or None: the pure build's ``_cread.split_lines``."""
        cut = data.rfind(b"\n\n") + 2
        if cut < 8:  # no complete event ("data: " and a blank line take 8 bytes)
            return None
        body = data[:cut] if cut < len(data) else data
        run = body[6:-2].split(b"\n\ndata: ")
        # ``body`` is "data: " + the lines joined with "\n\ndata: " + "\n\n"; it holds
        # exactly two LFs per line iff no line holds one, i.e. iff every line of the body
        # is a data line or the blank line that dispatches it.
        if body.count(b"\n") != 2 * len(run) or max(map(len, run)) + 6 > self.max_line_bytes or not _is_utf8(body):
            return None
        return run, cut

    def _take(self, chunk: bytes) -> bytes:
        """The bytes to split: the held partial line and ``chunk``, without a BOM or a CRLF's LF.

        Empty when there is nothing to split yet: ``chunk`` only continues the held line
        (it holds no line end), and is held with it.
        """
        if not chunk:
            return b""
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == _LF:
                chunk = chunk[1:]
                self._buf_offset += 1
                if not chunk:
                    return b""
        if not self._started:
            data = b"".join(self._parts) + chunk  # at most two bytes were held
            self._parts = []
            self._parts_len = 0
            if len(data) < 3 and b"\xef\xbb\xbf".startswith(data):
                self._hold(data)
                return b""
            self._started = True
            if data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]
                self._buf_offset += 3
            return data  # empty when the chunk was only the BOM
        if not self._parts:
            return chunk
        if b"\n" not in chunk and b"\r" not in chunk:
            # The held line goes on: only the new bytes were searched.
            self._hold(chunk)
            if self._parts_len > self.max_line_bytes:
                self._too_long(self._buf_offset)
            return b""
        self._parts.append(chunk)
        data = b"".join(self._parts)
        self._parts = []
        self._parts_len = 0
        return data

    def _hold(self, piece: bytes) -> None:
        """Keep ``piece`` as the next piece of the line not yet ended."""
        if piece:
            self._parts.append(piece)
            self._parts_len += len(piece)

    def _feed_data(self, data: bytes, events: list[SSEEvent]) -> list[SSEEvent]:
        """Split ``data`` (from ``_take``, not empty) into lines and process them, adding to ``events``."""
        if b"\r" not in data:
            return self._feed_lf(data, events)
        lines = data.splitlines(keepends=True)
        last = lines[-1]
        if last[-1] not in (_LF, _CR):
            rest = lines.pop()
        else:
            rest = b""
            if last[-1] == _CR:
                # The LF of a CRLF may arrive in the next chunk.
                self._skip_lf = True
        offset = self._buf_offset
        for raw in lines:
            end = len(raw) - (2 if raw.endswith(b"\r\n") else 1)
            if end > self.max_line_bytes:
                self._too_long(offset)
            self._line(raw[:end], offset, events)
            offset += len(raw)
            self._line_no += 1
        if len(rest) > self.max_line_bytes:
            self._too_long(offset)
        self._hold(rest)
        self._buf_offset = offset
        return events

    def _feed_lf(self, data: bytes, events: list[SSEEvent]) -> list[SSEEvent]:
        """``feed`` for data with no CR (every line ends in LF): the same result, faster.

        The two lines that make up nearly every envelope stream, ``data: <json>`` and
        the blank line, are handled inline; any other line goes to ``_line``, and so
        does a data line that would raise (bad UTF-8, over-long data), so that every
        error is the one ``_line`` gives. ``self._line_no`` is kept current before each
        call that can raise.
        """
        lines = data.split(b"\n")
        rest = lines.pop()
        offset = self._buf_offset
        line_no = self._line_no
        limit = self.max_line_bytes
        for raw in lines:
            size = len(raw)
            if not raw:
                if self._start_line:
                    self._dispatch(events)
            elif size <= limit and raw.startswith(b"data: "):
                try:
                    value = raw[6:].decode("utf-8")
                except UnicodeDecodeError:
                    self._line_no = line_no
                    self._line(raw, offset, events)  # raises, with the offset of the bad byte
                    raise  # pragma: no cover  # _line raised already
                if self._data_len + len(value) + 1 > limit:
                    self._line_no = line_no
                    self._line(raw, offset, events)  # raises: event data too long
                if not self._start_line:
                    self._start_line = line_no
                    self._start_offset = offset
                self._data_len += len(value) + 1
                self._data.append(value)
            else:
                self._line_no = line_no
                if size > limit:
                    self._too_long(offset)
                self._line(raw, offset, events)
            offset += size + 1
            line_no += 1
        self._line_no = line_no
        if len(rest) > limit:
            self._too_long(offset)
        self._hold(rest)
        self._buf_offset = offset
        return events

    def close(self) -> list[SSEEvent]:
        """Signal the end of input.

        Returns:
            Always empty: an event is only dispatched by a blank line. The method exists
            so every stateful reader has the same ``feed``/``close`` pair.

        Raises:
            DecodeError: the input stopped inside a line or an event (spec §2.3), or
                the error a ``feed`` met (see ``feed``).
        """
        if self._error is not None:
            self._closed = True
            raise self._error
        self._closed = True
        if not self._started and self._parts:
            self._started = True
        if self._parts:
            raise DecodeError(
                "stream ended inside a line (no line end after the last bytes)",
                position=Position(line=self._line_no, offset=self._buf_offset),
                section="2.3",
            )
        if self._start_line:
            raise DecodeError(
                "stream ended inside an event (no blank line after its last field)",
                position=Position(line=self._start_line, offset=self._start_offset),
                section="2.3",
            )
        return []

    def _too_long(self, offset: int) -> None:
        raise DecodeError(
            f"SSE line longer than max_line_bytes={self.max_line_bytes}",
            position=Position(line=self._line_no, offset=offset),
            section="2.3",
        )

    def _line(self, raw: bytes, offset: int, events: list[SSEEvent]) -> None:
        """Process one complete line without its line end."""
        if not raw:
            self._dispatch(events)
            return
        if raw[0] == 0x3A:  # ':' starts a comment
            return
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            # The offset and the words are ours (_utf8), as on every path (spec/limits.md L5-a).
            at, reason = utf8_fault(raw) or (0, "")
            raise DecodeError(
                f"invalid UTF-8 ({reason})",
                position=Position(line=self._line_no, offset=offset + at),
                section="2.3",
            ) from None
        if not self._start_line:
            self._start_line = self._line_no
            self._start_offset = offset
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data_len += len(value) + 1
            if self._data_len > self.max_line_bytes:
                raise DecodeError(
                    f"event data longer than max_line_bytes={self.max_line_bytes}",
                    position=Position(line=self._line_no, offset=offset),
                    section="2.3",
                )
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            if "\x00" not in value:
                self.last_event_id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            # spec §2.3-f: a value past MAX_RETRY_DIGITS is refused before int() sees it.
            if len(value) > MAX_RETRY_DIGITS:
                raise DecodeError(
                    f"retry value of {len(value):,} digits; at most MAX_RETRY_DIGITS={MAX_RETRY_DIGITS} are read",
                    position=Position(line=self._line_no, offset=offset),
                    section="2.3",
                )
            self.retry = int(value)
        # Any other field name is ignored, as WHATWG says.

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if self._data:
            events.append(
                SSEEvent(
                    data="\n".join(self._data),
                    event=self._event or "message",
                    id=self.last_event_id,
                    line=self._start_line,
                    offset=self._start_offset,
                )
            )
        self._data = []
        self._data_len = 0
        self._event = ""
        self._start_line = 0
