"""The legacy translator's streamed side: its state, emitting, streamed bodies, eras (``spec/legacy-xml.md``).

Owns ``_StreamTranslator``, the base of ``_Translator`` (``_xml_translate.py``): the
translator's state and its ``Emitter`` per agent (the codec writes every line), the
streamed bodies (text and thinking, §M2.1) as they arrive, the two escaping eras and the
evidence that decides between them (§M3), and the whole-record fast paths that emit a
run of body records in a few C calls (each gives what the general steps give,
``tests/migrate/test_fast_paths.py``).
Does not own: what each tag becomes and the buffered bodies (``_xml_translate.py``), the
legacy syntax (``_xml_scan.py``, ``_xml_tokens.py``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from ._depth import too_deep
from ._encoder import CitationData, Emitter
from ._errors import MigrationError, Position
from ._limits import MAX_CODE_POINT_BYTES, MAX_NESTING_DEPTH
from ._xml_scan import _SEP, _Scanner
from ._xml_tokens import _plain_unescape, _show

if TYPE_CHECKING:
    from collections.abc import Callable

    from ._types import StreamedType
    from ._xml_scan import MigrationWarning

#: The escaping era of a log (§M3).
Era = Literal["early", "later"]

_json_decode = msgspec.json.decode
_encode_list = msgspec.json.Encoder().encode


_LATER_RE: Final = re.compile(r"\\(.?)", re.S)


class _StreamTranslator(_Scanner):
    """The translator's state, emitting, streamed bodies, eras and fast paths; ``_Translator`` adds the rest."""

    def __init__(
        self,
        *,
        agent: str | None,
        max_bytes: int,
        era: Literal["auto", "early", "later"],
        keep_labels: bool,
        input: Literal["auto", "raw-sse", "tags"],
        lenient: bool,
        on_warning: Callable[[MigrationWarning], None] | None,
        max_tag_chars: int,
        max_block_chars: int,
    ) -> None:
        super().__init__(
            input=input,
            lenient=lenient,
            on_warning=on_warning,
            max_tag_chars=max_tag_chars,
            max_block_chars=max_block_chars,
        )
        self.max_bytes: Final = max_bytes
        self.keep_labels: Final = keep_labels
        self.era: Era | None = None if era == "auto" else era
        self.agent: str | None = agent
        self._caller_agent = agent
        self._emitters: dict[str, Emitter] = {}
        self._parts: dict[tuple[str, str], tuple[bytes, bytes, bytes]] = {}  # see _stream_parts
        self._oversize_seen: dict[str, int] = {}  # per agent: Emitter.oversize entries already reported
        self._out: list[bytes] = []
        self._cits: list[CitationData] = []
        self._cits_pos = self._tag_pos
        self._stream_type: StreamedType = "text"
        self._stream_pos = self._tag_pos
        self._stream_hold = ""  # later era: a trailing backslash whose pair has not arrived
        self._held: list[str] = []  # era undecided: text that depends on the era
        self._held_scan = ""  # unpaired backslash carried by the evidence scan
        self._held_size = 0
        self._has_text: set[str] = set()
        self._client_n_warned = False

    def _take(self) -> list[bytes]:
        out, self._out = self._out, []
        return out

    # ------------------------------------------------------------------ emitting

    def _emitter_at(self, pos: Position) -> Emitter:
        if self.agent is None:
            raise MigrationError(
                "no agent: the input has no meta_init before its first block and no agent was given"
                " (the `agent` argument)",
                position=pos,
                section="M5.1",
            )
        return self._emitter()

    def _emitter(self) -> Emitter:
        agent = self.agent
        assert agent is not None
        em = self._emitters.get(agent)
        if em is None:
            em = Emitter(agent, self.max_bytes)
            self._emitters[agent] = em
        return em

    def _emit(self, lines: list[bytes], pos: Position) -> None:
        em = self._emitter()
        self._out.extend(lines)
        if not em.oversize:  # nothing to report (an agent not in _oversize_seen counts as 0 seen)
            return
        before = self._oversize_seen.get(em.agent, 0)
        self._oversize_seen[em.agent] = len(em.oversize)
        for record in em.oversize[before:]:
            if record.type in _STREAMED:
                continue  # reported once per block where it opens (_unbounded, §M6.1-a)
            self._warn(
                f"{record.type} line of {record.size} bytes exceeds max_bytes={record.max_bytes}: {record.reason}",
                pos,
                "M6.1",
            )

    def _json(self, text: str, what: str, pos: Position) -> object:
        """``text`` parsed, or ``None`` after reporting why it is not JSON the codec reads (§M2.9)."""
        deep = too_deep(text, MAX_NESTING_DEPTH)
        if deep is not None:
            # §M2.9-b (spec/limits.md L2): measured before any parser recurses.
            self._problem(
                f"{what} nests deeper than MAX_NESTING_DEPTH={MAX_NESTING_DEPTH} "
                f"(at character offset {deep}); carried as text",
                pos,
                "M2.9",
            )
            return None
        try:
            return _json_decode(text)
        except msgspec.DecodeError as exc:
            self._problem(f"{what} is not JSON ({exc}); carried as text", pos, "M2.9")
            return None

    # ------------------------------------------------------------------ streamed bodies

    def _unbounded(self, em: Emitter, kind: StreamedType, pos: Position) -> None:
        """§M6.1-a: a streamed block whose lines the bound cannot hold, reported once where it opens.

        How many of its lines are oversize, and how long each is, depends on where the input
        was cut (each piece is a line); whether the fixed part of its lines leaves room for
        one code point does not: it is the agent's, the type's and ``max_bytes``'.
        """
        head, _, tail = self._stream_parts(em, kind)
        room = self.max_bytes - len(head) - len(tail) - 2
        if room < MAX_CODE_POINT_BYTES:
            self._warn(
                f"{kind} block: the fixed part of its lines leaves {max(room, 0)} bytes for the delta at "
                f"max_bytes={self.max_bytes}, fewer than the {MAX_CODE_POINT_BYTES} one code point may need; "
                "its lines may exceed the bound",
                pos,
                "M6.1",
            )

    def _open_stream(self, kind: StreamedType, name: str, selfclose: bool, pos: Position) -> None:
        em = self._emitter_at(pos)
        self._unbounded(em, kind, pos)
        if selfclose:
            self._out.append(em.end(kind))
            if kind == "text":
                self._has_text.add(em.agent)
            return
        self._stream_type = kind
        self._stream_pos = pos
        self._stream_hold = ""
        self._to_stream(f"</{name}>")

    def _stream_text(self, text: str) -> None:
        if not text:
            return
        if self.era is None:
            if "\n" in text:
                # §M3.1-a: a raw LF inside a text block means the early era.
                self._decide("early", self._stream_pos, "a raw line feed inside a text or thinking block")
                if self._held:
                    text = "".join(self._held) + text
                    self._held, self._held_size, self._held_scan = [], 0, ""
            elif self._held or "\\" in text:
                self._hold(text)
                return
            else:
                self._emit_stream(text)
                return
        if self.era == "early":
            self._emit_stream(text)
            return
        text = self._stream_hold + text
        self._stream_hold = ""
        run = len(text) - len(text.rstrip("\\"))
        if run % 2:
            self._stream_hold = "\\"
            text = text[:-1]
        # Reported at the block's open tag (§M3.2, §M4.1): where a piece starts depends on the chunks.
        self._emit_stream(self._undo_later(text, self._stream_pos))

    def _hold(self, text: str) -> None:
        """Era undecided: keep era-dependent text of this block until evidence (§M3.1-c)."""
        self._held.append(text)
        self._held_size += len(text)
        scan = self._held_scan + text
        verdict, rest = _scan_pairs(scan)
        self._held_scan = rest
        if verdict:
            self._decide("early", self._stream_pos, "a backslash escape the later era never writes")
        elif self._held_size > self.max_block_chars:
            self._decide("later", self._stream_pos, "")
        if self.era is not None:
            held, self._held, self._held_size, self._held_scan = self._held, [], 0, ""
            self._stream_text("".join(held))

    def _emit_stream(self, text: str) -> None:
        if text:
            self._emit(self._emitter().streamed(self._stream_type, text), self._stream_pos)

    def _end_stream(self) -> None:
        if self._held:
            self._decide("later", self._stream_pos, "")
            held, self._held, self._held_size, self._held_scan = self._held, [], 0, ""
            self._stream_text("".join(held))
        if self._stream_hold:
            self._problem("a lone backslash at the end of a later-era block; kept", self._stream_pos, "M3.2")
            self._emit_stream(self._stream_hold)
            self._stream_hold = ""
        em = self._emitter()
        self._out.append(em.end(self._stream_type))
        if self._stream_type == "text":
            self._has_text.add(em.agent)
        self._to_top()

    # ------------------------------------------------------------------ eras

    def _decide(self, era: Era, pos: Position, why: str) -> None:
        if self.era is not None:
            return
        self.era = era
        if not why:
            # §M3.1-d: no evidence by the end of the first era-dependent block.
            self._warn(
                "escaping era guessed as 'later': this block's backslashes fit the later scheme and no raw "
                "line feed was seen before it (pass era='early' if wrong)",
                pos,
                "M3.1",
            )

    def _undo_later(self, text: str, pos: Position) -> str:
        """Undo the later era's doubling of backslashes and LF-as-``\\n`` (§M3.2)."""
        if "\\" not in text:
            return text

        def pair(m: re.Match[str]) -> str:
            c = m.group(1)
            if c == "\\":
                return "\\"
            if c == "n":
                return "\n"
            self._problem(f"backslash escape {_show(m.group())} the later era never writes; kept as is", pos, "M3.2")
            return m.group()

        return _LATER_RE.sub(pair, text)

    def _undo_escaped(self, text: str, pos: Position) -> str:
        """Text of a context the later era escaped: decide the era if needed, then undo it."""
        if self.era is None:
            if "\n" in text or _scan_pairs(text)[0]:
                self._decide("early", pos, "a raw line feed or a backslash escape the later era never writes")
            elif "\\" in text:
                self._decide("later", pos, "")
            else:
                return text
        return text if self.era == "early" else self._undo_later(text, pos)

    def _era_evidence_call(self, raw: str, pos: Position) -> None:
        """§M3.1-b: arguments that are JSON under one era's reading only decide the era."""
        if self.era is not None or "\\" not in raw or "\n" in raw or _scan_pairs(raw)[0]:
            return
        early = _is_json(_plain_unescape(raw))
        later = _is_json(_plain_unescape(_LATER_RE.sub(lambda m: "\\" if m.group(1) == "\\" else "\n", raw)))
        if early and not later:
            self._decide("early", pos, "tool call arguments that are JSON only as written")
        elif later and not early:
            self._decide("later", pos, "tool call arguments that are JSON only with backslashes undoubled")

    # ------------------------------------------------------------------ whole-record fast paths

    def _stream_fast(self) -> bool:
        """Whether nothing is pending that the stream fast path in ``_unframe`` would bypass."""
        if self._buf or self._held_bytes or self._done_seen:
            return False
        if self.era is None:
            return not self._held
        return not (self.era == "later" and self._stream_hold)

    def _stream_run(self, raw: bytes, i: int) -> int:
        """Whole records inside a text or thinking body, many at once; return where ``raw`` is consumed to.

        The run is every complete record from ``i`` up to the first ``<`` (a close tag or
        part of one ends the run), cut before the first record that bears on the era
        (§M3.1) or needs undoing (§M3.2). It is what the record-by-record fast path below
        gives, one delta per non-empty record, with the work done in a few C calls: one
        split and one decode for the run (valid UTF-8 with ASCII separators decodes the
        same whole or cut at them), one JSON encode of the list of deltas, and the lines
        built by a replace and a split (a NUL byte is escaped in JSON, so it never
        occurs in a line and can mark the cuts). Anything unusual (invalid UTF-8, a line
        over the bound, an oversize already reported by the Emitter) returns ``i`` and
        leaves the run to that path, which handles it exactly.
        """
        lt = raw.find(b"<", i)
        end = raw.rfind(_SEP, i, lt if lt >= 0 else len(raw))
        if end < i:
            return i
        run = raw[i:end]
        try:
            text = run.decode("utf-8")
        except UnicodeDecodeError:
            return i
        texts = text.split("\n\ndata: ")
        era = self.era
        if era != "early" and ("\\" in text or (era is None and "\n" in text)):  # (the separators hold LFs)
            k = 0
            for piece in texts:
                if "\\" in piece or (era is None and "\n" in piece):
                    break
                k += 1
            if k == 0:
                return i
            if k < len(texts):
                texts = texts[:k]
                rest = run.split(_SEP, k)[k]
                end -= len(rest) + len(_SEP)
                run = raw[i:end]
        em = self._emitter()
        if em.oversize:
            return i
        newlines = run.count(b"\n")
        nonempty = [t for t in texts if t] if "" in texts else texts
        if nonempty:
            head, mid, tail = self._stream_parts(em, self._stream_type)
            lines = (head + _encode_list(nonempty)[1:-1].replace(b'","', mid) + tail).split(b"\0")
            if max(map(len, lines)) > self.max_bytes:
                return i
            self._out += lines
            if texts[-1]:
                self._seams = [(0, self._raw_off + len(run), self._raw_line + newlines)]
            else:  # the position after the last non-empty record, as the record-by-record path leaves it
                last = len(run)
                while texts[-1] == "" and run.endswith(_SEP, 0, last):
                    texts.pop()
                    last -= len(_SEP)
                self._seams = [(0, self._raw_off + last, self._raw_line + run.count(b"\n", 0, last))]
        self._raw_off += len(run) + len(_SEP)
        self._raw_line += newlines + 2
        return end + len(_SEP)

    def _stream_records(self, raw: bytes, i: int, at: int) -> int:
        """Whole records inside a text or thinking body, one delta each; return where ``raw`` is consumed to.

        Nothing is pending (no tokenizer text, partial UTF-8 character or text held for the
        era), so a record that decodes whole and holds no `<` (no close tag or part of one)
        and nothing that bears on the era (§M3.1) or needs undoing (§M3.2) is what the
        general steps would emit as one delta; its end becomes the tokenizer's position, as
        ``_consume`` would leave it. Any other record, or a possible [DONE], stops the run
        (``i`` unchanged: the general path goes on).
        """
        era = self.era
        no_backslash = era != "early"
        no_lf = era is None
        em = self._emitter()
        streamed = em.streamed
        kind = self._stream_type
        out = self._out
        end_off = -1
        end_line = 0
        while at >= 0 and not raw.startswith(b"[", i):
            record = raw[i:at]
            if b"<" in record:
                break
            try:
                text = record.decode("utf-8")
            except UnicodeDecodeError:
                break  # a character cut at the record's end, or invalid UTF-8
            if (no_backslash and "\\" in text) or (no_lf and "\n" in text):
                break
            start_off = self._raw_off
            lines = record.count(b"\n")
            self._raw_off = start_off + len(record)
            self._raw_line += lines
            i = at
            if text:
                new = streamed(kind, text)
                if em.oversize:
                    self._emit(new, self._stream_pos)  # reports any new oversize line (§M6.1)
                else:
                    out += new
                end_off, end_line = self._raw_off, self._raw_line
            self._raw_off += len(_SEP)
            self._raw_line += 2
            i += len(_SEP)
            at = raw.find(_SEP, i)
        if end_off >= 0:
            self._seams = [(0, end_off, end_line)]
        return i

    def _stream_parts(self, em: Emitter, kind: StreamedType) -> tuple[bytes, bytes, bytes]:
        """The bytes of a streamed line before and after its quoted delta, for ``_stream_run``."""
        key = (em.agent, kind)
        parts = self._parts.get(key)
        if parts is None:
            # A probe delta on an unbounded Emitter of the same agent (the real one must
            # not record anything): the delta is the last field, so its quoted escape is
            # the last occurrence (an agent holding the same text comes before it).
            line = Emitter(em.agent, 1 << 62).streamed(kind, "\0")[0]
            at = line.rindex(b'"\\u0000"')
            head, tail = line[:at], line[at + 8 :]
            assert Emitter(em.agent, 1 << 62).streamed(kind, "a") == [head + b'"a"' + tail]
            parts = (head, b'"' + tail + b"\0" + head + b'"', tail)
            self._parts[key] = parts
        return parts


#: The types written as they stream (§M2.1), one line per piece of input.
_STREAMED: Final = frozenset({"text", "thinking"})


def _scan_pairs(text: str) -> tuple[bool, str]:
    """Read ``text`` as later-era escapes; return (an escape the later era never writes, unpaired tail)."""
    i = 0
    n = len(text)
    while True:
        j = text.find("\\", i)
        if j < 0:
            return False, ""
        if j + 1 == n:
            return False, "\\"
        if text[j + 1] not in "\\n":
            return True, ""
        i = j + 2


def _is_json(text: str) -> bool:
    """Whether ``text`` is JSON the codec reads: nested no deeper than the limit, then parsed (§M2.9)."""
    if too_deep(text, MAX_NESTING_DEPTH) is not None:
        return False
    try:
        _json_decode(text)
    except (msgspec.DecodeError, UnicodeEncodeError):
        return False
    return True
