"""The validator's stream wrapper: the bytes of a recording in (``StreamValidator``).

Owns ``StreamValidator``: it splits an SSE capture or JSON lines with ``StreamReader``,
finds each envelope line, SSE field line and refusal of the reader with its position,
and hands them to a ``Validator``, which judges all of them; this module names no code.
After unreadable input it restarts the reader at the next line.

Does not own: any judgement (``_validator_lines`` and the rule modules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, cast

from ._decoder import RawLine, StreamReader, _LineBatch
from ._errors import DecodeError
from ._limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINE_BYTES
from ._speedups import loaded

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._validator_codes import Profile, Violation

from ._validator_lines import Validator
from ._validator_rules import _BLANK_LF, _BLANK_LINES, _LINE_END, _OTHER_SSE_LINE, _e110_truncated, _sse_field_of


def _load_scan_span() -> Callable[[bytes, int, int], tuple[bool, bool, int, int]] | None:
    """``_cvalid.scan_span`` in the compiled build; ``None`` in the pure one (all or none)."""
    if loaded() != "compiled":
        return None
    from ._cvalid import scan_span  # only the compiled build has it

    return scan_span


#: The compiled build's one pass over a span for ``_whole_ok`` (spec VF1-d).
_scan_span: Final = _load_scan_span()


class StreamValidator:
    """Checks the bytes of a recording (SSE capture or JSON lines): ``feed(bytes)``, ``close()``.

    Splits the input with ``StreamReader`` and hands each envelope line, each SSE field
    line and each refusal of the reader, with its position, to a ``Validator``, which
    judges them; this class names no code. Input the reader cannot read (invalid UTF-8, a
    line over ``max_line_bytes``) is reported at its line, and checking resumes after the
    line's end with a fresh reader whose positions are shifted to the whole input.

    Speed: recovery needs the reader fed one physical line at a time, which costs as
    much as the checks themselves. So the complete lines of a chunk go to the reader in
    one call whenever it provably cannot raise on them and no SSE line check would
    speak (``_whole_ok``); only other spans go line by line. That call is
    ``StreamReader.feed_batch``, and its lines go to the validator's batch loop
    (``Validator._run``, as ``feed_many``): the read path's pair, ``feed_batch`` and
    ``Reconstructor.feed_many``, with the checks in place of the rebuilding. The
    findings are the same either way (property tests compare the paths on damaged input).

    Attributes:
        validator: the line validator (its ``max_bytes`` is the bound).
        format: the input format once detected (``"sse"`` or ``"jsonl"``).
    """

    __slots__ = (
        "_base_line",
        "_base_offset",
        "_clean",
        "_closed",
        "_cr_end",
        "_drop_lf",
        "_format",
        "_head",
        "_held",
        "_held_size",
        "_jl_line",
        "_jl_start",
        "_line_no",
        "_line_start",
        "_max_line",
        "_offset",
        "_pending_line",
        "_quiet",
        "_reader",
        "_skipping",
        "_span_lines",
        "format",
        "validator",
    )

    def __init__(
        self,
        format: Literal["auto", "sse", "jsonl"] = "auto",
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        profile: Profile = "default",
        continuation: bool = False,
    ) -> None:
        """Create a validator for one recording.

        Args:
            format: the input format, or ``"auto"`` to detect it from the first byte.
            max_bytes: the bound on one envelope line (spec §6.1).
            max_line_bytes: the reader's cap on one physical line (spec §2.3).
            profile: the profile to judge by, ``"default"`` or ``"seed"`` (spec §10).
            continuation: the recording's first response resumes one whose start it does
                not hold, as a server answers ``Last-Event-ID`` (``Validator``, [V2.1-e]).

        Raises:
            ValueError: an unknown profile.
        """
        self.validator: Final = Validator(max_bytes=max_bytes, profile=profile, continuation=continuation)
        self._format: Literal["auto", "sse", "jsonl"] = format
        self.format: Literal["sse", "jsonl"] | None = None if format == "auto" else format
        self._max_line = max_line_bytes
        self._reader = StreamReader(format, max_line_bytes=max_line_bytes)
        self._base_line = 0  # the current reader's line 1 is input line _base_line + 1
        self._base_offset = 0
        self._offset = 0  # input offset of the next byte fed
        # The input line at self._offset and where it starts. Lines end as the reader
        # ends them: LF in JSON lines; CR, LF or CRLF in SSE (and before detection).
        self._line_no = 1
        self._line_start = 0
        # Before detection only: the same, counting LF alone (what JSON lines will count).
        self._jl_line = 1
        self._jl_start = 0
        self._head = b""  # the first bytes of the current line (for the SSE field checks)
        self._held: list[bytes] = []  # the current line's bytes not yet fed to the reader
        self._held_size = 0
        self._skipping = False  # after an unreadable line: drop bytes up to its line end
        self._cr_end = False  # the last line ended in CR: an LF next is the rest of a CRLF
        self._drop_lf = False  # ... and the reader restarted after it: drop that LF here
        self._clean = True  # the reader was fed nothing, or only one LF (see _absorb)
        self._pending_line = 0  # the unreadable line being skipped
        self._quiet = 0  # an input offset where the reader held no event (see _whole_ok)
        self._span_lines = -1  # the LF count of the span _whole_ok cleared, when it counted them
        self._closed = False

    def feed(self, chunk: bytes) -> list[Violation]:
        """Consume bytes of the recording; return the violations they reveal.

        Raises:
            DecodeError: ``feed()`` after ``close()``.
        """
        if self._closed:
            raise DecodeError("feed() after close()")
        out: list[Violation] = []
        # The line that began in an earlier chunk, and the one this chunk leaves open,
        # go through the reference path (_feed_by_line). The complete lines between them go to
        # the reader in one call when no line among them can make the reader raise or
        # the SSE line checks speak (_whole_ok); otherwise line by line, as before. Both
        # give the same violations: tests/validator property
        # test_fast_path_equals_line_by_line.
        first = chunk.find(b"\n")
        if first < 0:
            if chunk:
                self._feed_by_line(chunk, out)
            return out
        self._feed_by_line(chunk[: first + 1], out)
        start = first + 1
        last = chunk.rfind(b"\n")
        if last > first and chunk[start] == 0x0A:
            # A blank line next (it ends the SSE event the first line was part of): on
            # its own too, so the span can start with an event, as the reader's batch
            # path needs (StreamReader.feed_batch).
            self._feed_by_line(b"\n", out)
            start += 1
        if last >= start:
            if self._whole_ok(chunk, start, last + 1):
                self._whole(chunk[start : last + 1], out)
            else:
                self._span_lines = -1
                self._feed_by_line(chunk[start : last + 1], out)
        if last + 1 < len(chunk):
            self._feed_by_line(chunk[last + 1 :], out)
        return out

    def _whole_ok(self, chunk: bytes, start: int, stop: int) -> bool:
        """Whether ``chunk[start:stop]`` (complete lines, from a line start) may go to the reader whole.

        It may when the reader cannot raise on it and no line of it is one the SSE line
        checks report: then the reader gives the same lines in one call as line by line,
        and nothing else happens between them. The reader raises only on invalid UTF-8
        (ruled out by decoding the span), on a line over ``max_line_bytes`` (the span is
        no longer) and on an event's data over it (the data of the event in progress came
        after the last point where no event was, ``_quiet``, so the bytes since then bound it).
        A lone CR ends an SSE line the LF count would miss, so an SSE span with one takes
        the line-by-line path, which counts it.
        """
        if self._skipping or self.format is None or self._reader.format is None or self._cr_end:
            return False
        size = stop - start
        if size > self._max_line:
            return False
        sse = self.format == "sse"
        if sse and self._offset - self._quiet + size > self._max_line:
            return False
        at = self._readable(chunk, start, stop, sse)
        if at is None:
            return False
        if sse and at >= 0:
            # Lines other than `data:`, comments and blank ones: check them as _feed_by_line would,
            # from the first LF followed by a line other than `data:` or blank (at; none: -1).
            quiet = self.validator._sse_quiet
            search = _OTHER_SSE_LINE.search
            end = stop - 1
            ids: list[bytes] = []
            while (found := search(chunk, at)) is not None and (at := found.start()) < end:
                line_end = chunk.find(b"\n", at + 1)
                field = _sse_field_of(chunk[at + 1 : min(line_end + 1, at + 257)])
                if field is not None:
                    if field[0] == b"retry":
                        # The reader raises on a retry: value past MAX_RETRY_DIGITS (spec §2.3-f,
                        # E169): a span with a retry line goes line by line (rare: they are few).
                        return False
                    if field[0] == b"id":
                        ids.append(field[1].removeprefix(b" "))
                    elif not quiet(*field):
                        return False
                at += 1
            if ids and not self.validator._ids_quiet(ids, chunk.find(b"[DONE]", start, stop) >= 0):
                return False
        return True

    def _readable(self, chunk: bytes, start: int, stop: int, sse: bool) -> int | None:
        """``None`` when the span is not UTF-8 or (SSE) holds a lone CR; else where ``_whole_ok``'s
        SSE line checks start: the LF before the first line other than ``data:`` or blank, -1 if none.
        """
        scan = _scan_span
        if scan is not None:
            # The compiled build: the UTF-8, lone-CR and line-count passes below in one (spec VF1-d)
            utf8, lone_cr, self._span_lines, at = scan(chunk, start, stop)
            return None if not utf8 or (sse and lone_cr) else at
        if (
            sse
            and chunk.find(b"\r", start, stop) >= 0
            and chunk.count(b"\r", start, stop) != chunk.count(b"\r\n", start, stop)
        ):
            return None
        if not chunk.isascii():
            try:
                str(memoryview(chunk)[start:stop], "utf-8")
            except UnicodeDecodeError:
                return None
        return start - 1  # chunk[start - 1] is the LF that ends the line before; the regex finds the rest

    def _whole(self, lines_bytes: bytes, out: list[Violation]) -> None:
        """Complete lines, cleared by ``_whole_ok``, to the reader in one call and to the batch loop.

        The lines come from ``feed_batch``; an event of several data lines (only in a
        batch of ``str`` lines) needs its E111 right after its own findings, so such a
        batch goes line by line through ``_text``; any other goes to ``Validator._run``.
        """
        at = self._offset
        size = len(lines_bytes)
        self._offset = at + size
        base_line = self._base_line
        base_offset = self._base_offset
        # feed_batch returns its _LineBatch, typed as the Sequence[RawLine] it also is
        batch = cast("_LineBatch", self._reader.feed_batch(lines_bytes))
        data = batch.data
        if data and type(data[0]) is str and any("\n" in x for x in data):
            # An SSE event of several data lines (E111): its violation follows the line's own.
            event = self.validator._event
            for raw in batch:
                event(raw.data, raw.line + base_line, raw.offset + base_offset, out)
        elif data:
            line_of = batch.at

            def where(index: int) -> tuple[int, int]:
                line, offset = line_of(index)
                return line + base_line, offset + base_offset

            self.validator._run(data, where, out)
        lines = self._span_lines
        self._span_lines = -1
        self._line_no += lines if lines >= 0 else lines_bytes.count(b"\n")
        self._line_start = self._offset
        if self.format == "sse":
            # The last blank line ends any event: no event data is held past it.
            # (LF LF and LF CR LF hold one; so does a span opening with LF or CR LF, since
            # the line before it ended in LF.)
            lf = lines_bytes.rfind(b"\n\n")
            crlf = lines_bytes.rfind(b"\n\r\n", max(lf, 0))  # one before lf would end earlier: not searched
            if lf >= 0 or crlf >= 0:
                self._quiet = at + max(lf + 2, crlf + 3)
            elif lines_bytes[0] == 0x0A:
                self._quiet = at + 1
            elif lines_bytes.startswith(b"\r\n"):
                self._quiet = at + 2

    def _feed_by_line(self, piece: bytes, out: list[Violation]) -> None:
        """The reference path: ``piece`` one line at a time, each with its line end.

        Each call of the reader then completes at most one line, so when it raises, the
        fault is in that line and every event before it has been returned: what is
        found cannot depend on how the input was chunked (issue 12 §3). The line ends
        are the reader's: LF in JSON lines; CR, LF or CRLF in SSE and before detection.
        """
        n = len(piece)
        start = 0
        while start < n:
            if self.format == "jsonl":
                end = piece.find(b"\n", start)
            else:
                found = _LINE_END.search(piece, start)
                end = -1 if found is None else found.end() - 1
            stop = n if end < 0 else end + 1
            self._segment(piece[start:stop], out)
            start = stop

    def _ends_line(self, segment: bytes) -> bool:
        last = segment[-1]
        return last == 0x0A or (last == 0x0D and self.format != "jsonl")

    def _segment(self, segment: bytes, out: list[Violation]) -> None:
        """Bytes of one line, up to and including its line end if they have it."""
        at = self._offset
        self._offset += len(segment)
        crlf_rest = False  # the LF of a CRLF split across chunks: it ends no new line
        if self._cr_end:
            self._cr_end = False
            crlf_rest = segment == b"\n"
            if crlf_rest and self._drop_lf:
                # the reader restarted after the CR: the LF went with the unreadable line
                self._drop_lf = False
                self._base_offset += 1
                self._quiet = self._line_start = self._jl_start = self._offset
                return
        self._drop_lf = False
        if self._skipping:
            if self._ends_line(segment) and not crlf_rest:
                self._restart(segment[-1] == 0x0D)
            return
        if not crlf_rest and len(self._head) < 256:
            self._head += segment[: 256 - len(self._head)]
        taken = self._take(segment, at)
        if taken is None:
            return
        segment, line_at = taken
        if not crlf_rest and self.format is None and self._clean and _BLANK_LF.fullmatch(segment):
            self._absorb()
            return
        self._clean = False
        detected = self.format is None
        try:
            lines = self._reader.feed(segment)
        except DecodeError as exc:
            self._set_format()
            self._unreadable(exc, segment, line_at, out)
            return
        self._set_format()
        if detected and self.format is None and segment[-1] == 0x0A:
            self._jl_line += 1
            self._jl_start = self._offset
        self._check_lines(lines, out)
        if crlf_rest:
            if self._quiet == at:
                self._quiet = self._offset
            self._line_start = self._offset
            return
        if self._ends_line(segment):
            if line_at == self._line_start and segment in _BLANK_LINES:
                self._quiet = self._offset  # a blank line: no event in progress after it
            if self.format == "sse":
                self._check_sse_line(out)
            self._line_no += 1
            self._line_start = self._offset
            self._head = b""
            self._cr_end = segment[-1] == 0x0D

    def _check_lines(self, lines: list[RawLine], out: list[Violation]) -> None:
        """The reader's lines, at their positions in the whole input, to the line validator."""
        event = self.validator._event
        for raw in lines:
            event(raw.data, raw.line + self._base_line, raw.offset + self._base_offset, out)

    def _take(self, segment: bytes, at: int) -> tuple[bytes, int] | None:
        """The bytes to feed the reader now and the offset they start at, or None while held.

        Part of a line is held here until its line end (or until it is over the cap, when
        the reader must see it to refuse it), so the reader is fed each line once however
        small the chunks (issue 18 §1).
        """
        if not self._ends_line(segment) and self._held_size + len(segment) <= self._max_line:
            self._held.append(segment)
            self._held_size += len(segment)
            return None
        line_at = at - self._held_size
        if self._held:
            self._held.append(segment)
            segment = b"".join(self._held)
            self._held = []
            self._held_size = 0
        return segment, line_at

    def _set_format(self) -> None:
        """Take the format once the reader has detected it; JSON lines count lines by LF alone."""
        if self.format is None and self._reader.format is not None:
            self.format = self._reader.format
            if self.format == "jsonl":
                self._line_no, self._line_start = self._jl_line, self._jl_start

    def _absorb(self) -> None:
        """A blank line before the format is known: restart the reader after it, holding only its LF.

        The reader would otherwise keep every leading blank line until the first byte of
        content and look at all of them again per line (issue 18 §1). Blank lines carry
        no event in either format; the one LF the fresh reader is fed keeps a byte order
        mark after them from counting as the input's first bytes, as for the reader
        that saw them all.
        """
        self._base_line = self._line_no - 1
        self._base_offset = self._offset - 1
        self._reader = StreamReader("auto", max_line_bytes=self._max_line)
        self._reader.feed(b"\n")
        self._line_no += 1
        self._line_start = self._jl_start = self._offset
        self._jl_line += 1
        self._quiet = self._offset
        self._head = b""

    def _check_sse_line(self, out: list[Violation]) -> None:
        """The field line just ended, to the validator's SSE line rules (W112, W113, W118)."""
        head = self._head.removeprefix(b"\xef\xbb\xbf") if self._line_start == 0 else self._head
        field = _sse_field_of(head)
        if field is not None:
            self.validator._sse_field(field[0], field[1], self._line_no, self._line_start, out)

    def _unreadable(self, exc: DecodeError, segment: bytes, at: int, out: list[Violation]) -> None:
        where = exc.position
        line = self._line_no if where.line is None else where.line + self._base_line
        err_at = at if where.offset is None else where.offset + self._base_offset
        line_start = self._line_start if line == self._line_no else err_at
        self.validator._unreadable(exc.message, line, line_start, max(1, err_at - line_start + 1), out)
        # [V2.3-a] resume after the end of the unreadable line (the reader's line end: CR
        # counts in SSE) with a fresh reader; the event it was part of is lost with it.
        self._pending_line = line
        self._skipping = True
        if self._ends_line(segment):
            self._restart(segment[-1] == 0x0D)

    def _restart(self, after_cr: bool) -> None:
        self._skipping = False
        self._base_line = self._pending_line
        self._base_offset = self._offset
        self._quiet = self._offset
        fmt: Literal["auto", "sse", "jsonl"] = self.format or self._format
        self._reader = StreamReader(fmt, max_line_bytes=self._max_line)
        self._clean = True
        self._line_no = self._jl_line = self._base_line + 1
        self._line_start = self._jl_start = self._offset
        self._head = b""
        self._cr_end = self._drop_lf = after_cr

    def close(self) -> list[Violation]:
        """Signal the end of the recording; return the last violations.

        Raises:
            DecodeError: ``close()`` twice.
        """
        if self._closed:
            raise DecodeError("close() called twice")
        self._closed = True
        out: list[Violation] = []
        if self._held and not self._skipping:
            held = b"".join(self._held)
            self._held = []
            try:
                self._reader.feed(held)  # no line end: it completes no line
            except DecodeError as exc:
                self._set_format()
                self._unreadable(exc, held, self._offset - self._held_size, out)
            self._set_format()
        if not self._skipping:
            try:
                lines = self._reader.close()
            except DecodeError as exc:
                where = exc.position
                line = self._line_no if where.line is None else where.line + self._base_line
                offset = self._line_start if where.offset is None else where.offset + self._base_offset
                _e110_truncated(exc.message, line, offset, out)
                lines = []
            for raw in lines:
                out += self.validator.feed(
                    RawLine(raw.data, raw.line + self._base_line, raw.offset + self._base_offset)
                )
            if self._head and self.format == "sse":
                self._check_sse_line(out)
        out += self.validator._end(self._offset, self.format)
        return out
