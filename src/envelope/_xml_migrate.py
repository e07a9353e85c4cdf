"""Incremental conversion of legacy XML tag streams (and raw SSE captures of them) to envelopes.

Owns: ``XmlMigrator`` (sans-I/O, ``feed()``/``close()``), ``migrate_xml``, ``MigrationWarning``,
and every rule of ``spec/legacy-xml.md`` (cited as ``§M…``): recovering the old server's
chunks from a raw capture by its writing rule, a hand-written tokenizer for the tags,
the two escaping eras, the older server-tool labels, and what is an error or a warning.
Does not own: line layout and the bound (the codec's ``Emitter`` writes every line),
SSE framing of the output (``frame``), files or printing (``cli.py``).

Deliberately not used: any XML library. The legacy stream is not XML (text bodies hold
raw ``<`` and ``&``), and a parser that resolves entities or DTDs is an attack surface
the migrator does not need. Attributes know five named references and numeric ones;
nothing else is expanded, so entity-expansion inputs are inert text (§M2.4).

Layers, each incremental and each holding only a bounded tail:

1. the front: ``str`` chunks become UTF-8 bytes; the input kind is detected (§M1.2);
2. the unframer (raw SSE only): records are cut at ``\\n\\ndata: `` (§M1.1); a record
   that is exactly ``[DONE]`` is the terminator;
3. an incremental UTF-8 decoder (invalid UTF-8 is an error with its byte offset);
4. the tokenizer: a small state machine over the decoded text (``_S``), which keeps a
   list of *seams* so that any index of its buffer maps back to the input's byte offset
   and line, across SSE separators the unframer removed.

Fast paths (raw SSE, the shape the old server wrote; each gives exactly what the layers
above give, and leaves anything else to them): a run of whole records inside a text or
thinking body is unframed, decoded and escaped in a few C calls (``_stream_run``); a whole
record that starts with a tag goes from the unframer to the tag's handler, skipping the
UTF-8 and tokenizer steps (``_record``, ``_tag_record``), and the usual open tags are
read by one regex (``_FAST_TAG``). Memory stays as before: the current record, the
current block and the limits.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from ._depth import too_deep
from ._encoder import CitationData, Emitter, ImageRef
from ._errors import EncodeError, MigrationError, Position
from ._limits import (
    DEFAULT_MAX_BLOCK_BYTES,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LEGACY_TAG_CHARS,
    MAX_LEGACY_ATTRIBUTES,
    MAX_LEGACY_NAME_CHARS,
    MAX_NESTING_DEPTH,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from ._types import BufferedType, StreamedType

__all__ = ["Era", "InputKind", "MigrationWarning", "XmlMigrator", "migrate_xml"]

#: The escaping era of a log (§M3).
Era = Literal["early", "later"]
#: What the input is: the old server's raw SSE response, or the decoded tag text (§M1).
InputKind = Literal["raw-sse", "tags"]

#: The data of the terminator line the migrator passes on (spec §8.2).
DONE_LINE: Final = b"[DONE]"

_SEP: Final = b"\n\ndata: "
_PREFIX: Final = b"data: "
_DONE_REC: Final = b"[DONE]"
_WS: Final = " \t\r\n"
#: The first character that is not ``_WS``: ``search(buf, at)`` is ``lstrip`` without a copy.
_NON_WS: Final = re.compile(r"[^ \t\r\n]")
_CDATA: Final = "<![CDATA["
#: Characters of a text that an error message shows (``_show``); one more tells it was cut.
_SHOWN: Final = 60
_CDATA_REOPEN: Final = "]]><![CDATA["
_json_decode = msgspec.json.decode
_decode_raw_object = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
#: What a migrated ``meta_init`` says of its stream (§M6.3): JSON envelopes, migrated from XML.
_MIGRATED_FROM: Final = "xml"
_MIGRATED_KEYS: Final = {"format": msgspec.Raw(b'"json"'), "migrated_from": msgspec.Raw(b'"xml"')}
_encode_list = msgspec.json.Encoder().encode

_STREAMED_TAGS: Final[dict[str, StreamedType]] = {
    "content-block-thinking": "thinking",
    "content-block-text": "text",
}
_DATA_TAGS: Final[dict[str, BufferedType]] = {
    "meta_init": "meta_init",
    "awaiting_frontend_tools": "awaiting_frontend_tools",
    "meta_final": "meta_final",
}
_CALL_TAGS: Final[dict[str, BufferedType]] = {
    "content-block-tool_call": "tool_call",
    "content-block-server_tool_call": "server_tool_call",
}
_BODY_TAGS: Final[dict[str, BufferedType]] = {
    "content-block-tool_result": "tool_result",
    "content-block-server_tool_result": "server_tool_result",
    "content-block-meta_files": "meta_files",
    "content-block-error": "error",
}
#: Compatibility form (§M2.6): a result tag named after the result type.
_RESULT_TYPE_TAG: Final = re.compile(r"(?:content-block-)?([a-z0-9_]+_tool_result)\Z")
_CITATION_INTS: Final = ("document_index", "start_char_index", "end_char_index", "start_page_number", "end_page_number")
_CITATION_STRS: Final = ("document_title", "url", "title")

#: The characters of a tag name, as a run; matched up to one past the longest name allowed (§M2.8).
_NAME_RUN: Final = re.compile(r"[A-Za-z0-9_.:\-]*")
_TAG_RE: Final = re.compile(
    r"<(/?)([A-Za-z_][A-Za-z0-9_.:\-]*)"
    r"((?:\s+[A-Za-z_][A-Za-z0-9_.:\-]*\s*=\s*(?:\"[^\"]*\"|'[^']*'))*)"
    r"\s*(/?)>\Z",
    re.S,
)
_ATTR_RE: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_.:\-]*)\s*=\s*(?:\"([^\"]*)\"|'([^']*)')", re.S)
_REF_RE: Final = re.compile(r"&(?:#[xX]([0-9A-Fa-f]{1,8})|#([0-9]{1,10})|([A-Za-z][A-Za-z0-9]{0,31}));|&")
_NAMED_REFS: Final = {"quot": '"', "amp": "&", "lt": "<", "gt": ">", "apos": "'"}
#: The references ``html.escape`` writes (and ``&apos;``, ``&#39;``), ``&amp;`` last (see ``_unescape``).
_COMMON_REFS: Final = (("&quot;", '"'), ("&#x27;", "'"))
_OTHER_REFS: Final = {"&lt;": "<", "&gt;": ">", "&#39;": "'", "&apos;": "'", "&amp;": "&"}
_LATER_RE: Final = re.compile(r"\\(.?)", re.S)
_MULTIMODAL_RE: Final = re.compile(r"\s*(?:<text>(.*)</text>)?((?:\s*<image\b[^>]*>(?:\s*</image>)?)*)\s*\Z", re.S)
_IMAGE_RE: Final = re.compile(r"<image\b([^>]*?)\s*/?>", re.S)


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


class _S(Enum):
    """Tokenizer states."""

    TOP = "top"  # between blocks: whitespace, then a tag
    TAG = "tag"  # inside `<...>`, looking for its `>`
    EMPTY = "empty"  # after an empty element's open tag, expecting its close tag
    STREAM = "stream"  # a text or thinking body, forwarded as it arrives
    BODY = "body"  # a buffered body (results, meta_files, error, citation), held until its close tag
    CITATIONS = "citations"  # inside <citations>, between <citation> elements
    DONE = "done"  # after close()

    # Members are singletons compared by identity; hashing them by identity keeps the
    # per-record table lookup in C (Enum's own __hash__ is Python code).
    __hash__ = object.__hash__


def _mode(lead: str, kind: str) -> str:
    """How a buffered body is written, from its first non-whitespace characters (§M2.3)."""
    if lead.startswith(_CDATA):
        return "cdata"
    if kind == "tool_result" and (lead.startswith("<text>") or lead.startswith("<image")):
        return "multimodal"
    return "raw"


class _Body:
    """The buffered body being gathered, and what to do with it at its close tag."""

    __slots__ = ("attrs", "close", "kind", "lead", "name", "nw_tail", "parts", "pos", "size", "tag", "tail")

    def __init__(self, tag: str, kind: str, close: str, attrs: dict[str, str], pos: Position) -> None:
        self.tag = tag
        self.kind = kind  # a wire type or "citation"
        self.close = close
        self.attrs = attrs
        self.pos = pos
        self.name: str | None = None
        self.parts: list[str] = []
        self.size = 0
        self.lead = ""  # up to the first 9 non-whitespace characters
        self.tail = ""  # the last 16 characters
        self.nw_tail = ""  # the last 16 characters of the body with trailing whitespace removed

    def add(self, piece: str) -> None:
        if not piece:
            return
        if len(self.lead) < 9:
            if self.lead:
                self.lead = (self.lead + piece)[:9]
            else:
                self.lead = piece.lstrip(_WS)[:9]
        stripped = piece.rstrip(_WS)
        if stripped:
            self.nw_tail = (self.tail + stripped)[-16:]
        self.tail = (self.tail + piece)[-16:]
        self.parts.append(piece)
        self.size += len(piece)

    def mode(self) -> str:
        return _mode(self.lead, self.kind)

    def take_whole(self, inner: str) -> bool:
        """On a body with nothing added yet: ``ends_body(inner)``, and if so ``add(inner)``, in one go."""
        stripped = inner.rstrip(_WS)
        lead = inner.lstrip(_WS)[:9] if stripped else ""
        mode = _mode(lead, self.kind)
        if mode != "raw" and not stripped.endswith("]]>" if mode == "cdata" else ">"):
            return False
        if inner:
            self.lead = lead
            if stripped:
                self.nw_tail = stripped[-16:]
            self.tail = inner[-16:]
            self.parts.append(inner)
            self.size += len(inner)
        return True

    def ends_body(self, buf: str, start: int, end: int) -> bool:
        """Whether a close tag at ``buf[end]`` ends the body, ``buf[start:end]`` not yet added (§M2.3).

        Looks only at the few characters it needs (the lead, the last non-whitespace ones),
        so that many false close tags in one buffer cost time linear in the buffer.
        """
        lead = self.lead
        if len(lead) < 9:
            if lead:
                lead = (lead + buf[start : min(end, start + 9)])[:9]
            else:
                first = _NON_WS.search(buf, start, end)
                lead = buf[first.start() : min(end, first.start() + 9)] if first is not None else ""
        mode = _mode(lead, self.kind)
        if mode == "raw":
            return True
        stripped = _last_non_ws(buf, start, end)
        tail = (self.tail + stripped)[-16:] if stripped else self.nw_tail
        return tail.endswith("]]>") if mode == "cdata" else tail.endswith(">")

    def text(self) -> str:
        return "".join(self.parts)


class XmlMigrator:
    """Sans-I/O converter of a legacy XML stream to envelope lines (``spec/legacy-xml.md``).

    Feed it chunks as they arrive, split anywhere; each call returns the envelope lines
    (compact JSON, no SSE framing, each within ``max_bytes`` unless spec §6.5 applies)
    that became known. The terminator is returned as ``b"[DONE]"`` by ``close()`` when
    the input had one.

    Example::

        m = XmlMigrator()
        lines = m.feed(capture_bytes) + m.close()

    Attributes:
        warnings: every warning so far (§M4), oldest first, when no ``on_warning`` callback
            was given; with one, warnings go only to it and this stays empty, so memory
            stays bounded on inputs of any size (§M6.2).
        warning_count: how many warnings were made, in either case.
        era: the escaping era in force, ``None`` until detected.
        input_kind: ``"raw-sse"`` or ``"tags"``, ``None`` until detected.
        agent: the agent in force (from ``meta_init`` or the caller).
    """

    def __init__(
        self,
        *,
        agent: str | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        input: Literal["auto", "raw-sse", "tags"] = "auto",
        era: Literal["auto", "early", "later"] = "auto",
        keep_labels: bool = False,
        lenient: bool = False,
        on_warning: Callable[[MigrationWarning], None] | None = None,
        max_tag_chars: int = DEFAULT_MAX_LEGACY_TAG_CHARS,
        max_block_chars: int = DEFAULT_MAX_BLOCK_BYTES,
    ) -> None:
        """Create a migrator.

        Args:
            agent: the agent for envelopes before (or without) a ``meta_init`` (§M5.1).
            max_bytes: the bound on each envelope line (spec §6.1).
            input: ``"raw-sse"``, ``"tags"``, or ``"auto"`` to detect (§M1.2).
            era: ``"early"``, ``"later"``, or ``"auto"`` to detect (§M3.1).
            keep_labels: keep older server-tool labels as written (§M2.7).
            lenient: turn recoverable errors into warnings, keeping the content (§M4.2).
            on_warning: called with each warning as it is made; when given, warnings
                are not also kept in ``warnings`` (§M6.2).
            max_tag_chars: longest tag held.
            max_block_chars: longest buffered body held.

        Raises:
            MigrationError: a bad option value.
        """
        if input not in ("auto", "raw-sse", "tags"):
            raise MigrationError(f"input must be auto, raw-sse or tags, got {input!r}")
        if era not in ("auto", "early", "later"):
            raise MigrationError(f"era must be auto, early or later, got {era!r}")
        try:
            Emitter(agent or "", max_bytes)
        except EncodeError as exc:
            raise MigrationError(exc.message, section=exc.section) from None
        self.max_bytes: Final = max_bytes
        self.keep_labels: Final = keep_labels
        self.lenient: Final = lenient
        self.max_tag_chars: Final = max_tag_chars
        self.max_block_chars: Final = max_block_chars
        self.warnings: list[MigrationWarning] = []
        self.warning_count = 0
        self.era: Era | None = None if era == "auto" else era
        self.input_kind: InputKind | None = None if input == "auto" else input
        self.agent: str | None = agent
        self._caller_agent = agent
        self._on_warning = on_warning
        self._emitters: dict[str, Emitter] = {}
        self._parts: dict[tuple[str, str], tuple[bytes, bytes, bytes]] = {}  # see _stream_parts
        self._oversize_seen: dict[str, int] = {}  # per agent: Emitter.oversize entries already reported
        self._out: list[bytes] = []
        # front and unframer
        self._in_off = 0  # input bytes received
        self._raw = b""  # unframer / detection holdback
        self._raw_off = 0  # input offset of _raw[0]
        self._raw_line = 1
        self._rec_start = True  # the unframer is at the start of a record
        self._started = False  # raw-sse: the leading "data: " was consumed
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._held_bytes = 0  # bytes inside the UTF-8 decoder, not yet text
        self._done_seen = False
        self._after_done_warned = False
        # tokenizer
        self._state = _S.TOP
        # The tokenizer reads ``_buf[_at:]``; consuming moves ``_at`` (slicing the buffer per
        # token would copy the rest of a large chunk once per token). The buffer is emptied
        # when all of it is consumed and compacted when text is added, and what is left then
        # is bounded (a partial close tag or tag name), so each character is copied O(1) times.
        self._buf = ""
        self._at = 0
        # (index in _buf, input offset, line); the first seam is at ``_at``.
        self._seams: list[tuple[int, int, int]] = [(0, 0, 1)]
        self._scan = 1  # TAG: where the `>` search resumes, relative to ``_at``
        self._tag_parts: list[str] = []  # TAG: the tag's text from earlier feeds (scanned once)
        self._tag_size = 0  # TAG: characters in ``_tag_parts``
        self._quote = ""  # TAG: the quote the search is inside, if any
        self._tag_pos = Position(line=1, offset=0)
        self._in_citations = False
        self._cits: list[CitationData] = []
        self._cits_pos = self._tag_pos
        self._empty_close = ""
        self._stream_type: StreamedType = "text"
        self._stream_close = ""
        self._stream_close_b = b""  # _stream_close, encoded (the tag-record fast path compares bytes)
        self._stream_pos = self._tag_pos
        self._stream_hold = ""  # later era: a trailing backslash whose pair has not arrived
        self._held: list[str] = []  # era undecided: text that depends on the era
        self._held_scan = ""  # unpaired backslash carried by the evidence scan
        self._held_size = 0
        self._stray_open = False
        self._stray_run = False  # the current run of text outside any block was reported (§M4.2-b)
        self._no_hold = False  # at the end of the input or a [DONE] record: hold no text back
        self._body: _Body | None = None
        self._has_text: set[str] = set()
        self._client_n_warned = False
        #: The tokenizer's step for each state; built once (``_run`` is called for every record).
        self._handlers: Final[dict[_S, Callable[[], bool]]] = {
            _S.TOP: self._top,
            _S.TAG: self._tag,
            _S.EMPTY: self._empty,
            _S.STREAM: self._stream,
            _S.BODY: self._body_step,
            _S.CITATIONS: self._citations_step,
        }

    # ------------------------------------------------------------------ public API

    def feed(self, chunk: str | bytes) -> list[bytes]:
        """Consume the next piece of input; return the envelope lines now known.

        Args:
            chunk: bytes of the input, or text (encoded as UTF-8), split anywhere.

        Returns:
            Zero or more envelope lines.

        Raises:
            MigrationError: input that cannot be converted, with its position (§M4.1).
        """
        if self._state is _S.DONE:
            raise MigrationError("feed() after close()")
        if isinstance(chunk, str):
            try:
                data = chunk.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise MigrationError(
                    f"lone surrogate U+{ord(chunk[exc.start]):04X} in a str chunk", position=self._pos_in(0)
                ) from None
        else:
            data = bytes(chunk)
        self._in_off += len(data)
        self._raw += data
        self._front(final=False)
        return self._take()

    def close(self) -> list[bytes]:
        """Signal the end of the input; return the last lines (and ``[DONE]`` if the input had it).

        Raises:
            MigrationError: the input stops inside a record, a character, a tag or a block
                (in lenient mode, the recoverable ones become warnings).
        """
        if self._state is _S.DONE:
            return []
        self._front(final=True)
        try:
            tail = self._utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            raise MigrationError(
                "input ends inside a UTF-8 character", position=Position(offset=self._in_off - self._held_bytes)
            ) from None
        if tail:  # pragma: no cover - the decoder raises rather than returning text at the end
            self._text(tail, self._in_off, self._raw_line)
        self._end_of_input()
        if self._done_seen:
            self._out.append(DONE_LINE)
        self._state = _S.DONE
        return self._take()

    # ------------------------------------------------------------------ helpers

    def _take(self) -> list[bytes]:
        out, self._out = self._out, []
        return out

    def _pos_in(self, offset: int) -> Position:
        return Position(line=None, offset=offset)

    def _warn(self, message: str, position: Position, section: str, *, recovered: bool = False) -> None:
        warning = MigrationWarning(message, position, section, recovered)
        self.warning_count += 1
        if self._on_warning is not None:
            self._on_warning(warning)
        else:
            self.warnings.append(warning)

    def _problem(self, message: str, position: Position, section: str, *, recoverable: bool = True) -> None:
        """An error, or in lenient mode (when recoverable) a warning: the caller keeps the content (§M4)."""
        if recoverable and self.lenient:
            self._warn(message, position, section, recovered=True)
            return
        raise MigrationError(message, position=position, section=section)

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
        if not self._started:
            if len(self._raw) < len(_PREFIX):
                if final and self._raw:
                    raise MigrationError(
                        "raw SSE input does not start with 'data: '",
                        position=Position(line=1, offset=0),
                        section="M1.1",
                    )
                return
            if not self._raw.startswith(_PREFIX):
                raise MigrationError(
                    "raw SSE input does not start with 'data: '", position=Position(line=1, offset=0), section="M1.1"
                )
            self._consume_raw(len(_PREFIX))
            self._started = True
            self._rec_start = True
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
                if self._state is _S.STREAM and self._rec_start and self._stream_fast():
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
                if at >= 0 and self._state is _S.STREAM and self._rec_start and self._stream_fast():
                    # Fast path: whole records inside a text or thinking body, one delta each.
                    # Nothing is pending (no tokenizer text, partial UTF-8 character or text
                    # held for the era), so a record that decodes whole and holds no `<` (no
                    # close tag or part of one) and nothing that bears on the era (§M3.1) or
                    # needs undoing (§M3.2) is what the layers below would emit as one delta;
                    # its end becomes the tokenizer's position, as _consume would leave it.
                    # Any other record, or a possible [DONE], leaves the rest to the general path.
                    era = self.era
                    no_backslash = era != "early"
                    no_lf = era is None
                    em = self._emitter()
                    streamed = em.streamed
                    kind = self._stream_type
                    out = self._out
                    first = i
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
                    if i != first:
                        continue
                if at >= 0:
                    i = self._record(raw, i, at)
                    continue
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
                    return
                keep = len(_SEP) - 1
                if n - i > keep:
                    start_off, start_line = self._raw_off, self._raw_line
                    record = raw[i : n - keep]
                    self._raw_off += len(record)
                    self._raw_line += record.count(b"\n")
                    i = n - keep
                    self._bytes(record, start_off, start_line)
                    self._rec_start = False
                return
        finally:
            if i:
                self._raw = raw[i:]

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
        if state is _S.STREAM:
            if record == self._stream_close_b and self._stream_fast():
                self._seams = [(0, offset + len(record), line)]
                self._end_stream()
                return True
            return False
        if state is not _S.TOP:
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
        if fast is None:
            self._on_tag(text[:end], pos)
        else:
            # What _on_tag does for these tags (TAG_RE and _attrs would give these groups).
            if self._stray_open:
                self._out.append(self._emitter().end("text"))
                self._stray_open = False
            stream_tag = fast.group(1)
            if stream_tag is not None:
                self._open_stream(_STREAMED_TAGS[stream_tag], stream_tag, False, pos)
            else:
                name, rid, rname, args = fast.group(2, 3, 4, 5)
                attrs = {"id": rid, "name": rname} if args is None else {"id": rid, "name": rname, "arguments": args}
                if name in _CALL_TAGS:
                    self._call_tag(name, attrs, pos)
                    self._after_empty(name, False)
                else:
                    self._open_body(name, _BODY_TAGS[name], attrs, None, False, pos)
        if not rest:
            return True
        state = self._state
        if state is _S.EMPTY:
            if rest == self._empty_close:  # as _empty: the close tag right after the open tag
                self._buf = ""
                self._seams = [(0, offset + len(record), line + lines)]
                self._state = _S.TOP
                return True
        elif state is _S.BODY:
            # As _body_step when the record holds the whole body: the first close tag is the
            # record's end, and it ends the body (§M2.3).
            body = self._body
            assert body is not None
            close = body.close
            at = len(rest) - len(close)
            if rest.find(close) == at >= 0 and body.take_whole(rest[:at]):
                self._buf = ""
                self._seams = [(0, offset + len(record), line + lines)]
                self._finish_body()
                return True
        self._run()
        return True

    def _stream_fast(self) -> bool:
        """Whether nothing is pending that the stream fast path in ``_unframe`` would bypass."""
        if self._buf or self._held_bytes or self._done_seen:
            return False
        if self.era is None:
            return not self._held
        return not (self.era == "later" and self._stream_hold)

    def _done_record(self, at: Position) -> None:
        if self._state is _S.TOP and self._buf:
            # Text held back for its report (§M4.2-b) ends at a record boundary like this one.
            self._no_hold = True
            self._run()
            self._no_hold = False
        if self._state is _S.TOP and _NON_WS.search(self._buf, self._at) is None:
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
            raise MigrationError(
                f"invalid UTF-8 ({exc.reason})",
                position=Position(line=line + data.count(b"\n", 0, exc.start), offset=offset + exc.start),
                section="M1.4",
            ) from None
        start = offset - self._held_bytes
        self._held_bytes = self._utf8.getstate()[0].__len__()
        if text:
            self._text(text, start, line)

    # ------------------------------------------------------------------ layer 4: tokenizer

    def _text(self, text: str, offset: int, line: int) -> None:
        if self._done_seen and text.strip(_WS) and not self._after_done_warned:
            self._after_done_warned = True
            self._problem("content after the [DONE] record", Position(line=line, offset=offset), "M1.3")
        if self._buf:
            if self._at:
                self._consume(0, compact=True)
            self._seams.append((len(self._buf), offset, line))
            self._buf += text
        else:
            self._buf = text
            self._seams = [(0, offset, line)]
        self._run()

    def _pos(self, index: int) -> Position:
        """Input position of ``_buf[index]`` (an index before ``_at`` gives that of ``_at``)."""
        offset, line = self._where(index)
        return Position(line=line, offset=offset)

    def _where(self, index: int) -> tuple[int, int]:
        """Input (byte offset, line) of ``_buf[index]``."""
        seams = self._seams
        base, off, line = seams[0]
        if len(seams) > 1:
            for seam in seams:
                if seam[0] > index:
                    break
                base, off, line = seam
        piece = self._buf[base:index]
        size = len(piece) if piece.isascii() else len(piece.encode("utf-8", "surrogatepass"))
        return off + size, line + piece.count("\n")

    def _consume(self, n: int, *, compact: bool = False) -> None:
        """Consume ``_buf[_at:_at + n]``; with ``compact``, also drop the consumed text from the buffer."""
        if n <= 0 and not compact:
            return
        at = self._at + n
        if at >= len(self._buf):
            # Keep the position of the end for the next text.
            off, line = self._where(len(self._buf))
            self._buf = ""
            self._at = 0
            self._seams = [(0, off, line)]
            return
        off, line = self._where(at)
        seams = self._seams
        shift = at if compact else 0
        self._seams = (
            [(at - shift, off, line), *[(i - shift, o, ln) for (i, o, ln) in seams if i > at]]
            if len(seams) > 1
            else [(at - shift, off, line)]
        )
        if compact:
            self._buf = self._buf[at:]
            self._at = 0
        else:
            self._at = at

    def _consume_to(self, index: int) -> None:
        self._consume(index - self._at)

    def _run(self) -> None:
        handlers = self._handlers
        while self._buf and handlers[self._state]():
            pass

    def _top(self) -> bool:
        buf, a = self._buf, self._at
        first = _NON_WS.search(buf, a)
        if first is None:
            if self._stray_open:
                self._stray(buf[a:], self._pos(a))
            self._consume_to(len(buf))
            return False
        j = first.start()
        if buf[j] == "<":
            if self._stray_open and j > a:
                self._stray(buf[a:j], self._pos(a))
            self._consume_to(j)
            self._begin_tag()
            return True
        # Text outside any block: one report per run, up to the next `<`, showing the
        # run's first characters from its first non-whitespace one (§M4.2-b). Until that
        # many are here, they are held (at most _SHOWN + 1), so the report is the same
        # wherever the chunks split.
        k = buf.find("<", j)
        if k < 0 and not (self._stray_run or self._no_hold) and len(buf) - j <= _SHOWN:
            if j > a:
                if self._stray_open:
                    self._stray(buf[a:j], self._pos(a))
                self._consume_to(j)
            return False
        if k < 0:
            k = len(buf)
        start = a if self._stray_open else j
        if self._stray_run:
            self._stray(buf[start:k], self._pos(start))
        else:
            self._stray_run = True
            self._problem_stray(buf[start:k], self._pos(j), "text outside any block", shown=buf[j:k])
        self._consume_to(k)
        return bool(self._buf)

    def _begin_tag(self) -> None:
        self._stray_run = False
        self._state = _S.TAG
        self._scan = 1
        self._quote = ""
        self._tag_parts = []
        self._tag_size = 0
        self._tag_pos = self._pos(self._at)

    def _tag_text(self, end: int) -> str:
        """The tag's text up to ``_buf[end]`` (earlier pieces joined), consumed."""
        text = self._buf[self._at : end]
        if self._tag_parts:
            text = "".join(self._tag_parts) + text
            self._tag_parts = []
            self._tag_size = 0
        self._consume_to(end)
        return text

    def _tag(self) -> bool:
        buf, a = self._buf, self._at
        i = a + self._scan
        n = len(buf)
        if self._scan == 1 and not self._tag_parts:
            # The name must end within MAX_LEGACY_NAME_CHARS (§M2.8).
            name = _NAME_RUN.match(
                buf, a + 2 if buf.startswith("/", a + 1) else a + 1, min(n, a + MAX_LEGACY_NAME_CHARS + 2)
            )
            assert name is not None  # `*` matches the empty run
            j = name.end() - a
            if j > MAX_LEGACY_NAME_CHARS + 1:
                raise MigrationError(
                    f"tag name longer than {MAX_LEGACY_NAME_CHARS} characters",
                    position=self._tag_pos,
                    section="M2.8",
                )
            if a + j == n:
                return False
            whole = _WHOLE_TAG.match(buf, a) if not self._quote else None
            if whole is not None:
                # The whole tag is here: its end is the `>` the loop below would find.
                text = self._tag_text(whole.end())
                self._state = _S.TOP if not self._in_citations else _S.CITATIONS
                self._on_tag(text, self._tag_pos)
                return True
        quote = self._quote
        while i < n:
            if quote:
                q = buf.find(quote, i)
                if q < 0:
                    i = n
                    break
                quote = ""
                i = q + 1
                continue
            m = _TAG_SCAN.search(buf, i)
            if m is None:
                i = n
                break
            c = m.group()
            if c == ">":
                self._quote = ""
                text = self._tag_text(m.end())
                self._state = _S.TOP if not self._in_citations else _S.CITATIONS
                self._on_tag(text, self._tag_pos)
                return True
            if c == "<":
                # A `<` before the `>`: what came before was not a tag (§M4.2).
                text = self._tag_text(m.start())
                self._state = _S.TOP if not self._in_citations else _S.CITATIONS
                self._bad_tag(text, self._tag_pos, "a '<' that does not start a tag")
                return True
            if c in "\"'":
                quote = c
            i = m.end()
        self._quote = quote
        size = self._tag_size + n - a
        if size > self.max_tag_chars:
            raise MigrationError(
                f"tag longer than max_tag_chars={self.max_tag_chars} (no '>' found)",
                position=self._tag_pos,
                section="M2.8",
            )
        # Everything here is scanned: keep it as a piece, so the next text is scanned alone
        # and a long tag (a file in `arguments`) fed in small chunks costs linear time.
        self._tag_parts.append(buf[a:])
        self._tag_size = size
        self._consume_to(n)
        self._scan = 0
        return False

    def _empty(self) -> bool:
        buf = self._buf
        first = _NON_WS.search(buf, self._at)
        j = first.start() if first is not None else len(buf)
        close = self._empty_close
        if buf.startswith(close, j):
            self._consume_to(j + len(close))
            self._state = _S.TOP
            return True
        if len(buf) - j < len(close) and close.startswith(buf[j:]):
            self._consume_to(j)  # the whitespace, so that a long run of it is not held
            return False
        # §M2.2: an empty element's close tag is expected; in lenient mode go on without it.
        self._problem(f"expected {close} here", self._pos(j), "M2.2")
        self._consume_to(j)
        self._state = _S.TOP
        return True

    # ------------------------------------------------------------------ tags

    def _on_tag(self, text: str, pos: Position) -> None:
        m = _TAG_RE.match(text)
        if m is None:
            self._bad_tag(text, pos, "malformed tag")
            return
        closing, name, attr_text, selfclose = m.group(1) == "/", m.group(2), m.group(3), m.group(4) == "/"
        if closing and (attr_text or selfclose):
            self._bad_tag(text, pos, "malformed closing tag")
            return
        attrs = self._attrs(attr_text, name, pos)
        if self._in_citations:
            self._citations_tag(text, name, closing, selfclose, attrs, pos)
            return
        if closing:
            self._bad_tag(text, pos, f"closing tag </{name}> with no open block")
            return
        known = name in _STREAMED_TAGS or name in _DATA_TAGS or name in _CALL_TAGS or name in _BODY_TAGS
        result = _RESULT_TYPE_TAG.match(name) if not known and name != "citations" else None
        if not known and name != "citations" and result is None:
            self._bad_tag(text, pos, f"unknown tag <{name}>")
            return
        if self._stray_open:
            self._out.append(self._emitter().end("text"))
            self._stray_open = False
        if name in _STREAMED_TAGS:
            self._no_attrs(name, attrs, pos)
            self._open_stream(_STREAMED_TAGS[name], name, selfclose, pos)
        elif name in _DATA_TAGS:
            self._data_tag(name, attrs, pos)
            self._after_empty(name, selfclose)
        elif name in _CALL_TAGS:
            self._call_tag(name, attrs, pos)
            self._after_empty(name, selfclose)
        elif name == "citations":
            self._no_attrs(name, attrs, pos)
            self._open_citations(selfclose, pos)
        else:
            kind = _BODY_TAGS.get(name)
            result_name: str | None = None
            if kind is None:
                assert result is not None
                kind, result_name = "server_tool_result", result.group(1)
            self._open_body(name, kind, attrs, result_name, selfclose, pos)

    def _bad_tag(self, text: str, pos: Position, why: str) -> None:
        if self._in_citations or self._body is not None:
            raise MigrationError(f"{why}: {_show(text)}", position=pos, section="M4.1")
        self._problem_stray(text, pos, why)

    def _problem_stray(self, text: str, pos: Position, why: str, *, shown: str | None = None) -> None:
        """Text that belongs to no block: an error, or in lenient mode a text block of its own (§M4.2)."""
        if not text:
            return
        self._problem(
            f"{why}: {_show(text if shown is None else shown)}" + ("; kept as text" if self.lenient else ""),
            pos,
            "M4.2",
        )
        self._stray(text, pos)

    def _stray(self, text: str, pos: Position) -> None:
        em = self._emitter_at(pos)
        self._out.extend(em.streamed("text", text))
        self._stray_open = True

    def _attrs(self, attr_text: str, name: str, pos: Position) -> dict[str, str]:
        if not attr_text:
            return {}
        found = _ATTR_RE.findall(attr_text)
        if len(found) <= MAX_LEGACY_ATTRIBUTES:
            # One C call for all pairs; `dq or sq` is the value: a value that is not there
            # comes back as "" (an empty value in either quotes is "" too).
            attrs = {key: dq or sq for key, dq, sq in found}
            if len(attrs) == len(found):
                return attrs
        # A repeated or an extra attribute: the loop below raises the error of the first one.
        attrs = {}
        for am in _ATTR_RE.finditer(attr_text):
            key = am.group(1)
            raw = am.group(2) if am.group(2) is not None else am.group(3)
            if key in attrs:
                raise MigrationError(f"attribute {key!r} repeated on <{name}>", position=pos, section="M2.4")
            attrs[key] = raw
            if len(attrs) > MAX_LEGACY_ATTRIBUTES:
                raise MigrationError(
                    f"more than {MAX_LEGACY_ATTRIBUTES} attributes on <{name}>", position=pos, section="M2.8"
                )
        return attrs

    def _unescape(self, raw: str, key: str, pos: Position) -> str:
        """HTML references in an attribute value (§M2.4): five names and numeric ones, nothing else."""
        if "&" not in raw:
            return raw
        # When every `&` starts one of the fixed references, plain replacements give what
        # the regex below gives: a reference holds one `&`, so none overlaps another; no
        # replacement character occurs in a reference's name, so none makes a new one; and
        # `&amp;` (the only one that makes an `&`) comes last. The two that JSON written by
        # html.escape is full of go first; the `&` left after them are all in ``raw`` too.
        # Each `&` starts at most one of the others (none is a prefix of another), so their
        # counts add up to the `&` left exactly when every one of them starts a reference;
        # each test, count and replace is one C call, and the counting stops once every
        # `&` is accounted for. If an `&` starts none of them, the regex decides, from the
        # original text.
        text = raw
        for ref_text, char in _COMMON_REFS:
            if ref_text in text:
                text = text.replace(ref_text, char)
        if "&" not in text:
            return text
        left = text.count("&")
        present: list[str] = []
        for ref_text in _OTHER_REFS:
            if ref_text in text:
                present.append(ref_text)
                left -= text.count(ref_text)
                if not left:
                    for found in present:  # in _OTHER_REFS order: `&amp;` last
                        text = text.replace(found, _OTHER_REFS[found])
                    return text

        def ref(m: re.Match[str]) -> str:
            hexa, dec, named = m.group(1), m.group(2), m.group(3)
            if hexa is not None or dec is not None:
                point = int(hexa, 16) if hexa is not None else int(dec)
                if 0 < point <= 0x10FFFF and not 0xD800 <= point <= 0xDFFF:
                    return chr(point)
                self._problem(f"character reference {m.group()} in {key!r} is not a character", pos, "M2.4")
                return m.group()
            if named is not None and named in _NAMED_REFS:
                return _NAMED_REFS[named]
            self._problem(f"{_show(m.group())} in attribute {key!r} is not a known reference; kept as is", pos, "M2.4")
            return m.group()

        return _REF_RE.sub(ref, raw)

    def _no_attrs(self, name: str, attrs: dict[str, str], pos: Position, allowed: Iterable[str] = ()) -> None:
        extra = [k for k in attrs if k not in allowed]
        if extra:
            shown = ", ".join(f"{k}={attrs[k]!r}" for k in extra)
            self._problem(f"unknown attribute on <{name}> ignored: {shown}", pos, "M2.5")

    def _require(self, name: str, attrs: dict[str, str], key: str, pos: Position) -> str:
        if key not in attrs:
            raise MigrationError(f"<{name}> has no {key!r} attribute", position=pos, section="M2.5")
        return attrs[key]

    def _after_empty(self, name: str, selfclose: bool) -> None:
        if not selfclose:
            self._empty_close = f"</{name}>"
            self._state = _S.EMPTY

    def _emitter_at(self, pos: Position) -> Emitter:
        if self.agent is None:
            raise MigrationError(
                "no agent: the input has no meta_init before its first block and no agent was given (--agent)",
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
                f"(at character {deep}); carried as text",
                pos,
                "M2.9",
            )
            return None
        try:
            return _json_decode(text)
        except msgspec.DecodeError as exc:
            self._problem(f"{what} is not JSON ({exc}); carried as text", pos, "M2.9")
            return None

    def _data_tag(self, name: str, attrs: dict[str, str], pos: Position) -> None:
        self._no_attrs(name, attrs, pos, ("data",))
        payload = self._unescape(self._require(name, attrs, "data", pos), "data", pos)
        value = self._json(payload, f"the data attribute of <{name}>", pos)
        if name == "meta_init":
            found = value.get("agent_uuid") if isinstance(value, dict) else None
            if isinstance(found, str) and found:
                if self._caller_agent is not None and found != self._caller_agent:
                    self._warn(
                        f"meta_init names agent {found!r}, not the given {self._caller_agent!r}; using {found!r}",
                        pos,
                        "M5.1",
                    )
                self.agent = found
            elif self.agent is None:
                raise MigrationError(
                    "meta_init has no agent_uuid and no agent was given (--agent)", position=pos, section="M5.1"
                )
            if isinstance(value, dict):
                payload = self._migrated_meta_init(payload, value, pos)
        em = self._emitter_at(pos)
        self._emit(em.buffered(_DATA_TAGS[name], payload), pos)

    def _migrated_meta_init(self, payload: str, value: dict[str, object], pos: Position) -> str:
        """The ``meta_init`` payload a JSON client reads: ``format`` says ``json``, the origin is kept (§M6.3).

        Only the top level is rewritten: every other value keeps its bytes (decoded as
        ``msgspec.Raw``), the keys keep their order, ``format`` keeps its place (first if it
        was absent) and ``migrated_from`` follows it.
        """
        old_from = value.get("migrated_from", _MIGRATED_FROM)
        if old_from != _MIGRATED_FROM:
            self._warn(f"meta_init has migrated_from={old_from!r}; replaced by {_MIGRATED_FROM!r}", pos, "M6.3")
        raw = _decode_raw_object(payload)
        out: dict[str, msgspec.Raw] = {}
        if "format" not in raw:
            out.update(_MIGRATED_KEYS)
        for key, item in raw.items():
            if key == "format":
                out.update(_MIGRATED_KEYS)
            elif key != "migrated_from":
                out[key] = item
        return _encode_list(out).decode("utf-8")

    def _call_tag(self, name: str, attrs: dict[str, str], pos: Position) -> None:
        if len(attrs) == 3 and "id" in attrs and "name" in attrs and "arguments" in attrs:
            rid, rname, rargs = attrs["id"], attrs["name"], attrs["arguments"]
        else:
            self._no_attrs(name, attrs, pos, ("id", "name", "arguments"))
            rid = self._require(name, attrs, "id", pos)
            rname = self._require(name, attrs, "name", pos)
            rargs = self._require(name, attrs, "arguments", pos)
        em = self._emitter_at(pos)
        # §M3.2: the later era escaped the whole tag; undo that before the references.
        if self.era is None:
            self._era_evidence_call(rargs, pos)
        if self.era == "early":
            # What the general form below gives in the early era: nothing to undo (§M3.2),
            # and a value without `&` holds no reference.
            vid = self._unescape(rid, "id", pos) if "&" in rid else rid
            vname = self._unescape(rname, "name", pos) if "&" in rname else rname
            vargs = self._unescape(rargs, "arguments", pos)
        else:
            vid = self._unescape(self._undo_escaped(rid, pos), "id", pos)
            vname = self._unescape(self._undo_escaped(rname, pos), "name", pos)
            vargs = self._unescape(self._undo_escaped(rargs, pos), "arguments", pos)
        kind = _CALL_TAGS[name]
        if kind == "tool_call" and vid.startswith("srvtoolu_") and not self.keep_labels:
            # §M2.7: older label for a server tool call.
            kind = "server_tool_call"
            self._warn(
                f"older label: <{name}> with server tool id {vid!r} migrated as server_tool_call",
                pos,
                "M2.7",
            )
        if not _is_json(vargs):
            self._json(vargs, f"the arguments of <{name}>", pos)
        self._emit(em.buffered(kind, vargs, id=vid, name=vname), pos)

    # ------------------------------------------------------------------ streamed bodies

    def _open_stream(self, kind: StreamedType, name: str, selfclose: bool, pos: Position) -> None:
        em = self._emitter_at(pos)
        if selfclose:
            self._out.append(em.end(kind))
            if kind == "text":
                self._has_text.add(em.agent)
            return
        self._stream_type = kind
        self._stream_close = f"</{name}>"
        self._stream_close_b = self._stream_close.encode()
        self._stream_pos = pos
        self._stream_hold = ""
        self._state = _S.STREAM

    def _stream(self) -> bool:
        buf, a = self._buf, self._at
        close = self._stream_close
        at = buf.find(close, a)
        if at >= 0:
            self._stream_text(buf[a:at], a)
            self._consume_to(at + len(close))
            self._end_stream()
            return True
        end = len(buf) - _partial_suffix(buf, close, a)
        if end > a:
            self._stream_text(buf[a:end], a)
            self._consume_to(end)
        return False

    def _stream_text(self, text: str, at: int) -> None:
        if not text:
            return
        if self.era is None:
            if "\n" in text:
                # §M3.1-a: a raw LF inside a text block means the early era.
                self._decide("early", self._pos(at), "a raw line feed inside a text or thinking block")
                if self._held:
                    text = "".join(self._held) + text
                    self._held, self._held_size, self._held_scan = [], 0, ""
            elif self._held or "\\" in text:
                self._hold(text, at)
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
        self._emit_stream(self._undo_later(text, self._pos(at)))

    def _hold(self, text: str, at: int) -> None:
        """Era undecided: keep era-dependent text of this block until evidence (§M3.1-c)."""
        self._held.append(text)
        self._held_size += len(text)
        scan = self._held_scan + text
        verdict, rest = _scan_pairs(scan)
        self._held_scan = rest
        if verdict:
            self._decide("early", self._pos(at), "a backslash escape the later era never writes")
        elif self._held_size > self.max_block_chars:
            self._decide("later", self._pos(at), "")
        if self.era is not None:
            held, self._held, self._held_size, self._held_scan = self._held, [], 0, ""
            self._stream_text("".join(held), at)

    def _emit_stream(self, text: str) -> None:
        if text:
            self._emit(self._emitter().streamed(self._stream_type, text), self._stream_pos)

    def _end_stream(self) -> None:
        if self._held:
            self._decide("later", self._stream_pos, "")
            held, self._held, self._held_size, self._held_scan = self._held, [], 0, ""
            self._stream_text("".join(held), 0)
        if self._stream_hold:
            self._problem("a lone backslash at the end of a later-era block; kept", self._stream_pos, "M3.2")
            self._emit_stream(self._stream_hold)
            self._stream_hold = ""
        em = self._emitter()
        self._out.append(em.end(self._stream_type))
        if self._stream_type == "text":
            self._has_text.add(em.agent)
        self._state = _S.TOP

    # ------------------------------------------------------------------ eras

    def _decide(self, era: Era, pos: Position, why: str) -> None:
        if self.era is not None:
            return
        self.era = era
        if not why:
            # §M3.1-d: no evidence by the end of the first era-dependent block.
            self._warn(
                "escaping era guessed as 'later': this block's backslashes fit the later scheme and no raw "
                "line feed was seen before it (force with era='early' / --era early if wrong)",
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

    # ------------------------------------------------------------------ buffered bodies

    def _open_body(
        self,
        name: str,
        kind: str,
        attrs: dict[str, str],
        result_name: str | None,
        selfclose: bool,
        pos: Position,
    ) -> None:
        self._emitter_at(pos)
        allowed: tuple[str, ...] = ("id", "name") if kind in ("tool_result", "server_tool_result") else ()
        if not (allowed and len(attrs) == 2 and "id" in attrs and "name" in attrs):  # else nothing to report
            self._no_attrs(name, attrs, pos, allowed)
            if allowed:
                self._require(name, attrs, "id", pos)
                if result_name is None:
                    self._require(name, attrs, "name", pos)
        body = _Body(name, kind, f"</{name}>", attrs, pos)
        body.name = result_name
        self._body = body
        if selfclose:
            self._finish_body()
            return
        self._state = _S.BODY

    def _body_step(self) -> bool:
        body = self._body
        assert body is not None
        buf, a = self._buf, self._at
        close = body.close
        start = a
        while True:
            at = buf.find(close, start)
            if at < 0:
                break
            if body.ends_body(buf, a, at):
                body.add(buf[a:at])
                self._consume_to(at + len(close))
                self._finish_body()
                return True
            start = at + 1
        end = len(buf) - _partial_suffix(buf, close, a)
        if end > a:
            body.add(buf[a:end])
            self._consume_to(end)
        if body.size > self.max_block_chars:
            raise MigrationError(
                f"<{body.tag}> body longer than max_block_chars={self.max_block_chars}",
                position=body.pos,
                section="M2.8",
            )
        return False

    def _finish_body(self, *, truncated: bool = False) -> None:
        body = self._body
        assert body is not None
        self._body = None
        pos = body.pos
        text = body.text()
        kind = body.kind
        if kind == "citation":
            self._state = _S.CITATIONS
            self._add_citation(body, self._content(text, body, escaped=True, truncated=truncated), pos)
            return
        self._state = _S.TOP
        em = self._emitter()
        if kind in ("meta_files", "error"):
            payload = self._content(text, body, escaped=kind == "error", truncated=truncated)
            self._json(payload, f"the body of <{body.tag}>", pos)
            self._emit(em.buffered(kind, payload), pos)  # type: ignore[arg-type]  # kind is a BufferedType here
            return
        rid = body.attrs["id"]
        rname = body.attrs.get("name")
        if kind == "server_tool_result":
            if body.name is not None:
                if rname is not None and rname != body.name:
                    self._warn(f"<{body.tag}> has name={rname!r}; the tag's result type is used", pos, "M2.6")
                rname = body.name
            assert rname is not None
            payload = self._content(text, body, escaped=True, truncated=truncated)
            self._emit(em.buffered("server_tool_result", payload, id=self._unescape(rid, "id", pos), name=rname), pos)
            return
        assert rname is not None
        rid, rname = self._unescape(rid, "id", pos), self._unescape(rname, "name", pos)
        server = rid.startswith("srvtoolu_") or rname.endswith("_tool_result")
        if server and not self.keep_labels:
            # §M2.7: older label for a server tool result; repr() text carried unchanged.
            self._warn(
                f"older label: <{body.tag}> named {rname!r} (id {rid!r}) migrated as server_tool_result",
                pos,
                "M2.7",
            )
            payload = self._content(text, body, escaped=False, truncated=truncated)
            self._emit(em.buffered("server_tool_result", payload, id=rid, name=rname), pos)
            return
        if body.mode() == "multimodal" and not truncated:
            m = _MULTIMODAL_RE.match(text)
            if m is None:
                raise MigrationError(f"malformed multimodal body of <{body.tag}>", position=pos, section="M2.3")
            inner = m.group(1) or ""
            sub = _Body(body.tag, "tool_result", "", {}, pos)
            sub.add(inner)
            result_text = self._content(inner, sub, escaped=False)
            images = [self._image(im.group(1), pos) for im in _IMAGE_RE.finditer(m.group(2))]
            self._emit(em.tool_result(rid, rname, result_text, images), pos)
            return
        payload = self._content(text, body, escaped=False, truncated=truncated)
        self._emit(em.buffered("tool_result", payload, id=rid, name=rname), pos)

    def _image(self, attr_text: str, pos: Position) -> ImageRef:
        attrs = self._attrs(attr_text, "image", pos)
        self._no_attrs("image", attrs, pos, ("src", "media_type"))
        src = self._unescape(self._require("image", attrs, "src", pos), "src", pos)
        media = self._unescape(self._require("image", attrs, "media_type", pos), "media_type", pos)
        return ImageRef(src=src, media_type=media)

    def _content(self, text: str, body: _Body, *, escaped: bool, truncated: bool = False) -> str:
        """The payload of a buffered body: CDATA unwrapped (§M2.3), then the era undone (§M3.2)."""
        pos = body.pos
        client = not escaped and body.kind == "tool_result"
        if body.mode() == "cdata":
            inner = text.lstrip(_WS)[len(_CDATA) :]
            stripped = inner.rstrip(_WS)
            if stripped.endswith("]]>"):
                inner = stripped[:-3]
            elif not truncated:  # pragma: no cover - the close rule only accepts a body ending in ]]>
                raise MigrationError(f"unterminated CDATA in <{body.tag}>", position=pos, section="M2.3")
            cdata = True
        else:
            inner = text
            cdata = False
        if escaped:
            return self._undo_escaped(inner, pos)
        if not client:
            return inner
        # Client tool results (§M3.3): LF as `\n`, CR folded, `]]>` protected by reopening.
        if self.era is None:
            if "\n" in inner or "\r" in inner:
                self._decide("early", pos, "a raw line break inside a client tool result")
            elif cdata and _CDATA_REOPEN in inner:
                self._decide("later", pos, "a reopened CDATA section inside a client tool result")
            elif "\\n" in inner:
                self._decide("later", pos, "")
            else:
                return inner
        if self.era == "early":
            return inner
        if cdata:
            inner = inner.replace(_CDATA_REOPEN, "")
        if "\\n" in inner:
            if not self._client_n_warned:
                self._client_n_warned = True
                self._warn(
                    "later-era client tool result: each \\n is read as a line feed (a literal backslash-n "
                    "and the original CR or CRLF line ends cannot be told apart)",
                    pos,
                    "M3.3",
                )
            inner = inner.replace("\\n", "\n")
        return inner

    # ------------------------------------------------------------------ citations

    def _open_citations(self, selfclose: bool, pos: Position) -> None:
        em = self._emitter_at(pos)
        if em.agent not in self._has_text:
            raise MigrationError(
                "<citations> with no completed text block of its agent before it", position=pos, section="M2.10"
            )
        self._cits = []
        self._cits_pos = pos
        if selfclose:
            return
        self._in_citations = True
        self._state = _S.CITATIONS

    def _citations_step(self) -> bool:
        buf = self._buf
        first = _NON_WS.search(buf, self._at)
        if first is None:
            self._consume_to(len(buf))
            return False
        j = first.start()
        if buf[j] != "<":
            raise MigrationError(
                f"text between citations: {_show(buf[j : j + 40])}", position=self._pos(j), section="M2.10"
            )
        self._consume_to(j)
        self._begin_tag()
        return True

    def _citations_tag(
        self, text: str, name: str, closing: bool, selfclose: bool, attrs: dict[str, str], pos: Position
    ) -> None:
        if closing and name == "citations":
            self._in_citations = False
            self._state = _S.TOP
            if self._cits:
                self._emit(self._emitter().citations(self._cits), self._cits_pos)
            return
        if closing or name != "citation":
            raise MigrationError(f"unexpected {_show(text)} inside <citations>", position=pos, section="M2.10")
        self._no_attrs(name, attrs, pos, ("type", *_CITATION_INTS, *_CITATION_STRS))
        self._require(name, attrs, "type", pos)
        self._body = _Body(name, "citation", "</citation>", attrs, pos)
        if selfclose:
            self._finish_body()
        else:
            self._state = _S.BODY

    def _add_citation(self, body: _Body, cited: str, pos: Position) -> None:
        values: dict[str, object] = {}
        for key, raw in body.attrs.items():
            value = self._unescape(self._undo_escaped(raw, pos), key, pos)
            if key in _CITATION_INTS:
                if not re.fullmatch(r"-?[0-9]{1,18}", value):
                    raise MigrationError(f"citation {key}={value!r} is not an integer", position=pos, section="M2.10")
                values[key] = int(value)
            else:
                values[key] = value
        citation_type = values.pop("type")
        assert isinstance(citation_type, str)
        self._cits.append(CitationData(cited_text=cited, citation_type=citation_type, **values))  # type: ignore[arg-type]  # keys checked against the CitationData fields above

    # ------------------------------------------------------------------ end of input

    def _end_of_input(self) -> None:
        self._no_hold = True
        if self._state is _S.TOP:
            self._run()  # text held back for its report (§M4.2-b)
        state = self._state
        if state is _S.TAG:
            text = "".join(self._tag_parts) + self._buf[self._at :]
            pos = self._tag_pos
            self._tag_parts = []
            self._buf = ""
            self._at = 0
            self._state = _S.CITATIONS if self._in_citations else _S.TOP
            self._bad_tag(text, pos, "input ends inside a tag")
            state = self._state
        if state is _S.EMPTY:
            self._problem(f"input ends before {self._empty_close}", self._pos(len(self._buf)), "M4.1")
        elif state is _S.STREAM:
            self._problem(
                f"input ends inside <{self._stream_close[2:-1]}> (block still open); closed here",
                self._stream_pos,
                "M4.1",
            )
            if self._buf:
                self._stream_text(self._buf[self._at :], self._at)
                self._buf = ""
                self._at = 0
            self._end_stream()
        elif state is _S.BODY:
            body = self._body
            assert body is not None
            self._problem(f"input ends inside <{body.tag}> (block still open); its content is kept", body.pos, "M4.1")
            body.add(self._buf[self._at :])
            self._buf = ""
            self._at = 0
            self._finish_body(truncated=True)
            if self._in_citations:
                self._citations_tag("</citations>", "citations", True, False, {}, body.pos)
        elif state is _S.CITATIONS:
            self._problem("input ends inside <citations>; the citations read are kept", self._cits_pos, "M4.1")
            self._citations_tag("</citations>", "citations", True, False, {}, self._cits_pos)
        if self._stray_open:
            self._out.append(self._emitter().end("text"))
            self._stray_open = False


_TAG_SCAN: Final = re.compile(r"[<>\"']")
#: The open tags of most records, written the old server's way; where it matches, _WHOLE_TAG,
#: _TAG_RE and _ATTR_RE would find the same end, name and attributes (no `<`, `>` or quote
#: outside the quoted values), so ``_tag_record`` dispatches on its groups directly.
_FAST_TAG: Final = re.compile(
    r"<(?:(content-block-(?:text|thinking))"
    r'|(content-block-(?:server_)?tool_(?:call|result)) id="([^"]*)" name="([^"]*)"(?: arguments="([^"]*)")?)>'
)
#: A whole tag: `<`, then text and quoted values with no `<` outside quotes, then `>`; the
#: same end as the `_TAG_SCAN` loop, in one call. Possessive, so a failed match is linear.
_WHOLE_TAG: Final = re.compile(r"""<(?:[^<>"']++|"[^"]*+"|'[^']*+')*+>""")


def _partial_suffix(buf: str, close: str, lo: int = 0) -> int:
    """Length of the longest suffix of ``buf[lo:]`` that is a proper prefix of ``close``."""
    lo = max(lo, len(buf) - len(close) + 1)
    start = buf.rfind("<", lo)
    while start >= 0:
        if close.startswith(buf[start:]):
            return len(buf) - start
        start = buf.rfind("<", lo, start)
    return 0


def _last_non_ws(buf: str, start: int, end: int) -> str:
    """The last (up to 16) characters of ``buf[start:end]`` with trailing whitespace removed.

    Steps back in windows, so the cost is that of the trailing whitespace, not of the text.
    """
    while end > start:
        low = max(start, end - 64)
        stripped = buf[low:end].rstrip(_WS)
        if stripped:
            stop = low + len(stripped)
            return buf[max(start, stop - 16) : stop]
        end = low
    return ""


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


def _plain_unescape(raw: str) -> str:
    def ref(m: re.Match[str]) -> str:
        hexa, dec, named = m.group(1), m.group(2), m.group(3)
        try:
            if hexa is not None:
                return chr(int(hexa, 16))
            if dec is not None:
                return chr(int(dec))
        except (ValueError, OverflowError):
            return m.group()
        return _NAMED_REFS.get(named or "", m.group())

    return _REF_RE.sub(ref, raw)


def _is_json(text: str) -> bool:
    """Whether ``text`` is JSON the codec reads: nested no deeper than the limit, then parsed (§M2.9)."""
    if too_deep(text, MAX_NESTING_DEPTH) is not None:
        return False
    try:
        _json_decode(text)
    except (msgspec.DecodeError, UnicodeEncodeError):
        return False
    return True


def _show(text: str, limit: int = _SHOWN) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def migrate_xml(
    chunks: Iterable[str | bytes],
    *,
    agent: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    input: Literal["auto", "raw-sse", "tags"] = "auto",
    era: Literal["auto", "early", "later"] = "auto",
    keep_labels: bool = False,
    lenient: bool = False,
    on_warning: Callable[[MigrationWarning], None] | None = None,
) -> Iterator[bytes]:
    """Convert a legacy XML stream to envelope lines, yielding each as soon as it is known.

    Args:
        chunks: the input, as text or bytes split anywhere; a raw SSE capture of the old
            server or the decoded tag text (detected unless ``input`` says).
        agent: the agent for a capture without ``meta_init``.
        max_bytes: the bound on each line (spec §6.1).
        input: see ``XmlMigrator``.
        era: see ``XmlMigrator``.
        keep_labels: see ``XmlMigrator``.
        lenient: see ``XmlMigrator``.
        on_warning: called with each ``MigrationWarning``.

    Returns:
        An iterator of envelope lines (compact JSON, unframed); the last is ``b"[DONE]"``
        when the input had the terminator.

    Raises:
        MigrationError: the input cannot be converted (raised while iterating).
    """
    migrator = XmlMigrator(
        agent=agent,
        max_bytes=max_bytes,
        input=input,
        era=era,
        keep_labels=keep_labels,
        lenient=lenient,
        on_warning=on_warning,
    )
    for piece in chunks:
        yield from migrator.feed(piece)
    yield from migrator.close()
