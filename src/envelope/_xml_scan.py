"""The legacy scanner's front: bytes of a legacy XML stream in, text for the tag tokenizer (``spec/legacy-xml.md``).

Owns: layers 1-3 of the legacy scanner, the legacy *framing*: recovering the old
server's chunks from a raw SSE capture by its writing rule (§M1.1), detecting the input
kind (§M1.2), the ``[DONE]`` record (§M1.3), incremental UTF-8 (§M1.4), and the position
of each piece of text in the input (the seams where the unframer removed separators).
``_Scanner`` is a subclass of the tokenizer (``_Tokenizer`` in ``_xml_tokens.py``: layer
4, the machine, tags and attributes, where each body ends), which it feeds text; the
translator (``_xml_translate.py``) subclasses ``_Scanner``.
Does not own: tags and bodies (``_xml_tokens.py``), what a tag becomes (the translator),
eras, agents, envelopes.

Whole-record fast paths (raw SSE, the shape the old server wrote) are offered to the
translator through three hooks, ``_stream_run``, ``_stream_records`` and ``_open_fast``;
each gives exactly what the general steps give (``tests/migrate/test_fast_paths.py``).
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING, Final, Literal

from ._errors import MigrationError, Position
from ._limits import MAX_LEGACY_NAME_CHARS
from ._structs import MigrationWarning
from ._utf8 import utf8_reason
from ._xml_tokens import _BODY, _EMPTY, _FAST_TAG, _NAME_RUN, _NON_WS, _STREAM, _TOP, _WHOLE_TAG, _Tokenizer

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["InputKind", "MigrationWarning"]

#: What the input is: the old server's raw SSE response, or the decoded tag text (§M1).
InputKind = Literal["raw-sse", "tags"]

_SEP: Final = b"\n\ndata: "
_PREFIX: Final = b"data: "
_DONE_REC: Final = b"[DONE]"


class _Scanner(_Tokenizer):
    """Bytes to text for the tokenizer (layers 1-3); the translator subclasses it."""

    def __init__(
        self,
        *,
        input: Literal["auto", "raw-sse", "tags"],
        lenient: bool,
        on_warning: Callable[[MigrationWarning], None] | None,
        max_tag_chars: int,
        max_block_chars: int,
    ) -> None:
        super().__init__(
            lenient=lenient, on_warning=on_warning, max_tag_chars=max_tag_chars, max_block_chars=max_block_chars
        )
        self.input_kind: InputKind | None = None if input == "auto" else input
        # front and unframer
        self._in_off = 0  # input bytes received
        self._raw = b""  # unframer / detection holdback
        self._raw_off = 0  # input offset of _raw[0]
        self._raw_line = 1
        self._rec_start = True  # the unframer is at the start of a record
        self._started = False  # raw-sse: the leading "data: " was consumed
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._held_bytes = 0  # bytes inside the UTF-8 decoder, not yet text
        #: ``(line, offset)`` of the first held byte: a character cut across raw records has
        #: framing bytes inside it, so its start is not ``offset - _held_bytes``.
        self._held_at = (1, 0)

    # ------------------------------------------------------------------ layer 1+2: front, unframer

    def _front(self, *, final: bool) -> None:
        if self.input_kind is None:
            # §M1.2: raw SSE iff the input starts with `data: `.
            if len(self._raw) < len(_PREFIX) and _PREFIX.startswith(self._raw) and not final:
                return
            self.input_kind = "raw-sse" if self._raw.startswith(_PREFIX) else "tags"
        if self.input_kind == "tags":
            if self._raw:
                off, line = self._raw_off, self._raw_line
                self._bytes(self._consume_raw(len(self._raw)), off, line)
            return
        self._unframe(final=final)

    def _consume_raw(self, n: int) -> bytes:
        data = self._raw[:n]
        self._raw = self._raw[n:]
        self._raw_off += n
        self._raw_line += data.count(b"\n")
        return data

    def _unframe(self, *, final: bool) -> None:
        """Recover the old server's chunks by its writing rule (§M1.1), not by an SSE parser.

        Works on an index into ``_raw`` and slices the buffer once per call (in ``finally``,
        so an error leaves the same state as consuming record by record would), instead of
        re-slicing the rest of the input after every record.
        """
        if not self._started and not self._start_raw(final=final):
            return
        raw = self._raw
        n = len(raw)
        i = 0  # raw[:i] is consumed; self._raw_off and self._raw_line are those of raw[i]
        try:
            while True:
                if self._rec_start and raw.startswith(b"<", i):
                    # A record that starts with a tag (most records that are not body text): the
                    # general step below, without first trying the body-text paths, which
                    # stop at a `<` at once. Tag records seldom hold a line feed, so the first
                    # one (a memchr) is usually the separator's.
                    at = raw.find(b"\n", i)
                    if at >= 0 and not raw.startswith(_SEP, at):
                        at = raw.find(_SEP, at)
                    if at >= 0:
                        i = self._record(raw, i, at)
                        continue
                if self._state is _STREAM and self._rec_start and self._stream_fast():
                    j = self._stream_run(raw, i)
                    if j != i:
                        i = j
                        continue
                if self._rec_start and raw.startswith(b"[", i):
                    # A record that is exactly `[DONE]` is the terminator (§M1.3).
                    whole = _DONE_REC + _SEP
                    full = raw.startswith(whole, i)
                    if full or (final and raw[i:] == _DONE_REC + b"\n\n"):
                        where = Position(line=self._raw_line, offset=self._raw_off)
                        end = i + len(whole) if full else n
                        self._raw_line += raw.count(b"\n", i, end)
                        self._raw_off += end - i
                        i = end
                        self._done_record(where)
                        continue
                    if whole.startswith(raw[i:]) and not final:
                        return  # not enough bytes to tell
                at = raw.find(_SEP, i)
                if at >= 0 and self._state is _STREAM and self._rec_start and self._stream_fast():
                    j = self._stream_records(raw, i, at)
                    if j != i:
                        i = j
                        continue
                if at >= 0:
                    i = self._record(raw, i, at)
                    continue
                i = self._unframe_tail(raw, i, final=final)
                return
        finally:
            if i:
                self._raw = raw[i:]

    def _start_raw(self, *, final: bool) -> bool:
        """Consume the leading ``data: `` of a raw capture (§M1.1); ``False`` until it is here."""
        if len(self._raw) < len(_PREFIX):
            if final and self._raw:
                raise MigrationError(
                    "raw SSE input does not start with 'data: '",
                    position=Position(line=1, offset=0),
                    section="M1.1",
                )
            return False
        if not self._raw.startswith(_PREFIX):
            raise MigrationError(
                "raw SSE input does not start with 'data: '", position=Position(line=1, offset=0), section="M1.1"
            )
        self._consume_raw(len(_PREFIX))
        self._started = True
        self._rec_start = True
        return True

    def _unframe_tail(self, raw: bytes, i: int, *, final: bool) -> int:
        """No separator after ``raw[i]``: the last record at the end, else what is surely record text.

        Returns where ``raw`` is consumed to. Keeps back what could begin a separator.
        """
        n = len(raw)
        if final:
            start_off, start_line = self._raw_off, self._raw_line
            if raw.endswith(b"\n\n") and n - i >= 2:
                record = raw[i : n - 2]
                self._raw_off += len(record)
                self._raw_line += record.count(b"\n")
                i = n - 2
                self._bytes(record, start_off, start_line)
                self._raw_off += 2
                self._raw_line += 2
                i = n
            elif i < n or not self._rec_start:
                self._problem(
                    "raw SSE capture ends inside a record (no final blank line); the rest is kept",
                    Position(line=self._raw_line, offset=self._raw_off),
                    "M1.1",
                )
                record = raw[i:]
                self._raw_off += len(record)
                self._raw_line += record.count(b"\n")
                i = n
                self._bytes(record, start_off, start_line)
            return i
        keep = len(_SEP) - 1
        if n - i > keep:
            start_off, start_line = self._raw_off, self._raw_line
            record = raw[i : n - keep]
            self._raw_off += len(record)
            self._raw_line += record.count(b"\n")
            i = n - keep
            self._bytes(record, start_off, start_line)
            self._rec_start = False
        return i

    def _record(self, raw: bytes, i: int, at: int) -> int:
        """The whole record ``raw[i:at]``, followed by a separator; return where the next one starts."""
        start_off, start_line = self._raw_off, self._raw_line
        record = raw[i:at]
        lines = record.count(b"\n") if b"\n" in record else 0  # (`in` a byte is a memchr)
        self._raw_off = start_off + (at - i)
        self._raw_line = start_line + lines
        if not (
            record.startswith(b"<")
            and not (self._buf or self._held_bytes or self._done_seen)
            and self._tag_record(record, start_off, start_line, lines)
        ):
            self._bytes(record, start_off, start_line)
        self._raw_off += len(_SEP)
        self._raw_line += 2
        self._rec_start = True
        return at + len(_SEP)

    def _tag_record(self, record: bytes, offset: int, line: int, lines: int) -> bool:
        """A whole record that starts with a tag, with nothing pending; ``False`` leaves it to ``_bytes``.

        Between blocks, a record that starts with a whole tag is what ``_text`` and the
        ``_top`` and ``_tag`` steps would reach in several calls: the tag's position is
        the record's, the tag ends where ``_WHOLE_TAG`` says, and the rest of the record
        (a close tag, a body) goes to the tokenizer as usual. In a text or thinking
        body, a record that is exactly the close tag ends the block, as ``_stream`` would.
        """
        state = self._state
        if state is _STREAM:
            if record == self._stream_close_b and self._stream_fast():
                self._seams = [(0, offset + len(record), line)]
                self._end_stream()
                return True
            return False
        if state is not _TOP:
            return False
        try:
            text = record.decode("utf-8")
        except UnicodeDecodeError:
            return False
        fast = _FAST_TAG.match(text)
        if fast is not None:
            end = fast.end()
        else:
            whole = _WHOLE_TAG.match(text)
            if whole is None:
                return False
            # The name must end within MAX_LEGACY_NAME_CHARS (§M2.8): longer ones go the long way, which raises.
            run = _NAME_RUN.match(text, 2 if text.startswith("/", 1) else 1, MAX_LEGACY_NAME_CHARS + 2)
            if run is None or run.end() > MAX_LEGACY_NAME_CHARS + 1:
                return False
            end = whole.end()
        pos = Position(line, offset)
        self._tag_pos = pos
        self._scan = 1
        self._quote = ""
        size = end if text.isascii() else len(text[:end].encode("utf-8"))
        rest = text[end:]
        self._buf = rest
        self._seams = [(0, offset + size, line + text.count("\n", 0, end) if lines else line)]
        self._open_fast(text[:end], fast, pos)
        if rest:
            self._record_rest(rest, (offset + len(record), line + lines))
        return True

    def _record_rest(self, rest: str, end: tuple[int, int]) -> None:
        """The rest of a tag record after its open tag; ``end`` is the record's (offset, line)."""
        state = self._state
        if state is _EMPTY:
            if rest == self._empty_close:  # as _empty: the close tag right after the open tag
                self._buf = ""
                self._seams = [(0, *end)]
                self._to_top()
                return
        elif state is _BODY:
            # As _body_step when the record holds the whole body: the first close tag is the
            # record's end, and it ends the body (§M2.3).
            body = self._body
            assert body is not None
            close = body.close
            at = len(rest) - len(close)
            if rest.find(close) == at >= 0 and body.take_whole(rest[:at]):
                self._buf = ""
                self._seams = [(0, *end)]
                self._finish_body()
                return
        self._run()

    def _done_record(self, at: Position) -> None:
        if self._state is _TOP and self._buf:
            # Text held back for its report (§M4.2-b) ends at a record boundary like this one.
            self._no_hold = True
            self._run()
            self._no_hold = False
        if self._state is _TOP and _NON_WS.search(self._buf, self._at) is None:
            if self._done_seen:
                self._problem("a second [DONE] record", at, "M1.3")
            self._done_seen = True
            return
        # Inside a block, `[DONE]` is content the model wrote (§M1.3).
        self._bytes(_DONE_REC, at.offset, at.line)

    # ------------------------------------------------------------------ layer 3: UTF-8

    def _bytes(self, data: bytes, offset: int | None = None, line: int | None = None) -> None:
        if offset is None:
            offset, line = self._raw_off - len(data), self._raw_line - data.count(b"\n")
        assert line is not None
        if not self._held_bytes:
            # Nothing held in the incremental decoder: a piece that decodes whole gives the
            # same text and leaves the decoder empty, without its Python-level wrapper.
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                if text:
                    self._text(text, offset, line)
                return
        try:
            text = self._utf8.decode(data)
        except UnicodeDecodeError as exc:
            # The decoder's object is the bytes it held (a character begun in an earlier
            # piece) and then ``data``; its start counts from the first held byte, so a
            # fault in a held character lies before ``offset``. The words are ours (_utf8,
            # spec/limits.md L5-a).
            held = len(exc.object) - len(data)
            if exc.start < held:  # the fault is in the character the decoder held
                fault_line, fault_at = self._held_at
            else:
                at = exc.start - held
                fault_line, fault_at = line + data.count(b"\n", 0, at), offset + at
            raise MigrationError(
                f"invalid UTF-8 ({utf8_reason(exc.object, exc.start)})",
                position=Position(line=fault_line, offset=fault_at),
                section="M1.4",
            ) from None
        start = offset - self._held_bytes
        held_before = self._held_bytes
        self._held_bytes = self._utf8.getstate()[0].__len__()
        if self._held_bytes and (text or not held_before):
            # A character begins in this piece and is not complete yet: it is its last bytes.
            self._held_at = (line + data.count(b"\n"), offset + len(data) - self._held_bytes)
        if text:
            self._text(text, start, line)
