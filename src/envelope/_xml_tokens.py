"""The legacy tag tokenizer: text in, tags and body text out (``spec/legacy-xml.md`` §M2).

Owns: layer 4 of the legacy scanner, the machine below: finding tags (``<...>``, quotes,
the name and tag limits of §M2.8), their attributes and references (§M2.4), and where each
kind of body ends: a streamed body at its exact close tag (§M2.1), an empty element at its
close tag (§M2.2), a buffered body at a close tag after ``]]>`` when it is CDATA (§M2.3),
citations between ``<citations>`` tags. It keeps each position of the input (byte offset
and line, across the separators the unframer removed: ``_seams``) and reports every
problem through ``_problem`` (§M4).
Does not own: the bytes (``_Scanner`` in ``_xml_scan.py``, its subclass, recovers the
text from a raw SSE capture and decodes UTF-8), what a tag becomes (the translator,
``_xml_translate.py``, decides by calling one of the transitions ``_to_*``).

Deliberately not used: any XML library. The legacy stream is not XML (text bodies hold
raw ``<`` and ``&``), and a parser that resolves entities or DTDs is an attack surface the
migrator does not need. Attributes know five named references and numeric ones; nothing
else is expanded, so entity-expansion inputs are inert text (§M2.4).

The machine (``_S``; one step function per state in ``_steps``, chosen by one dispatch in
``_run``; the spec section of each move beside it)::

    TOP --'<'--> TAG --'>'--> (the translator's transition for the tag)   §M2
     ^            |               _to_stream  -> STREAM    (text, thinking)         §M2.1
     |            '<' or end      _to_empty   -> EMPTY     (meta_*, tool calls)     §M2.2
     |            -> bad tag      _to_body    -> BODY      (results, files, error)  §M2.3
     |                            _to_citations -> CITATIONS                         §M2.10
     |                            _to_top     -> TOP       (self-closing tags)
     +-- STREAM: its close tag;  EMPTY: its close tag (else §M2.2);
         BODY: its close tag where §M2.3 says it ends;  CITATIONS: '</citations>'
    CITATIONS --'<'--> TAG --'<citation>'--> BODY --'</citation>'--> CITATIONS
    any state --close()--> DONE
"""

from __future__ import annotations

import re
from enum import Enum
from typing import TYPE_CHECKING, Final, NoReturn

from ._errors import MigrationError, Position
from ._limits import MAX_LEGACY_ATTRIBUTES, MAX_LEGACY_NAME_CHARS
from ._structs import MigrationWarning

if TYPE_CHECKING:
    from collections.abc import Callable

__all__: list[str] = []

_WS: Final = " \t\r\n"
#: The first character that is not ``_WS``: ``search(buf, at)`` is ``lstrip`` without a copy.
_NON_WS: Final = re.compile(r"[^ \t\r\n]")
_CDATA: Final = "<![CDATA["
#: Characters of a text that an error message shows (``_show``); one more tells it was cut.
_SHOWN: Final = 60
#: Characters of the text shown when text stands between citations (§M2.10).
_CITATIONS_TEXT_SHOWN: Final = 40

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
_TAG_SCAN: Final = re.compile(r"[<>\"']")
#: The open tags of most records, written the old server's way; where it matches, _WHOLE_TAG,
#: _TAG_RE and _ATTR_RE would find the same end, name and attributes (no `<`, `>` or quote
#: outside the quoted values), so the translator's ``_open_fast`` dispatches on its groups.
_FAST_TAG: Final = re.compile(
    r"<(?:(content-block-(?:text|thinking))"
    r'|(content-block-(?:server_)?tool_(?:call|result)) id="([^"]*)" name="([^"]*)"(?: arguments="([^"]*)")?)>'
)
#: A whole tag: `<`, then text and quoted values with no `<` outside quotes, then `>`; the
#: same end as the `_TAG_SCAN` loop, in one call. Possessive, so a failed match is linear.
_WHOLE_TAG: Final = re.compile(r"""<(?:[^<>"']++|"[^"]*+"|'[^']*+')*+>""")


class _S(Enum):
    """The scanner's states (the machine is drawn in the module docstring)."""

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


# The members as module constants: a global lookup, not an attribute lookup on the Enum
# class (about 6x faster; the machine compares states several times per record).
_TOP: Final = _S.TOP
_TAG: Final = _S.TAG
_EMPTY: Final = _S.EMPTY
_STREAM: Final = _S.STREAM
_BODY: Final = _S.BODY
_CITATIONS: Final = _S.CITATIONS
_DONE: Final = _S.DONE


def _mode(lead: str, kind: str) -> str:
    """How a buffered body is written, from its first non-whitespace characters (§M2.3)."""
    if lead.startswith(_CDATA):
        return "cdata"
    if kind == "tool_result" and (lead.startswith("<text>") or lead.startswith("<image")):
        return "multimodal"
    return "raw"


class _Body:
    """A buffered body being gathered, and what to do with it at its close tag."""

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


class _Tokenizer:
    """Text to tags and body text (the machine in the module docstring); ``_Scanner`` feeds it text."""

    def __init__(
        self,
        *,
        lenient: bool,
        on_warning: Callable[[MigrationWarning], None] | None,
        max_tag_chars: int,
        max_block_chars: int,
    ) -> None:
        self.lenient: Final = lenient
        self.max_tag_chars: Final = max_tag_chars
        self.max_block_chars: Final = max_block_chars
        self.warnings: list[MigrationWarning] = []
        self.warning_count = 0
        self._on_warning = on_warning
        # [DONE] (the front sees it; the tokenizer's steps read it)
        self._done_seen = False
        self._after_done_warned = False
        # tokenizer
        self._state = _TOP
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
        self._empty_close = ""
        self._stream_close = ""
        self._stream_close_b = b""  # _stream_close, encoded (the tag-record fast path compares bytes)
        self._stray_open = False  # a text block of stray text is open (§M4.2)
        self._stray_run = False  # the current run of text outside any block was reported (§M4.2-b)
        self._no_hold = False  # at the end of the input or a [DONE] record: hold no text back
        self._body: _Body | None = None
        #: The step for each state: the one dispatch of the machine (``_run``).
        self._steps: Final[dict[_S, Callable[[], bool]]] = {
            _TOP: self._top,  # §M2: whitespace, then a tag
            _TAG: self._tag,  # §M2.4, §M2.8: a tag's end, outside quotes
            _EMPTY: self._empty,  # §M2.2: the close tag of an empty element
            _STREAM: self._stream,  # §M2.1: raw body text up to its exact close tag
            _BODY: self._body_step,  # §M2.3: a buffered body up to the close tag that ends it
            _CITATIONS: self._citations_step,  # §M2.10: <citation> elements
        }

    # ------------------------------------------------------------------ transitions (called by the translator)

    def _to_top(self) -> None:
        self._state = _CITATIONS if self._in_citations else _TOP

    def _to_stream(self, close: str) -> None:
        """§M2.1: a streamed body follows; only ``close`` ends it."""
        self._stream_close = close
        self._stream_close_b = close.encode()
        self._state = _STREAM

    def _to_empty(self, close: str) -> None:
        """§M2.2: an empty element; its close tag follows."""
        self._empty_close = close
        self._state = _EMPTY

    def _to_body(self, body: _Body) -> None:
        """§M2.3: a buffered body follows, gathered in ``body``."""
        self._body = body
        self._state = _BODY

    def _to_citations(self, inside: bool) -> None:
        """§M2.10: enter (or leave) the ``<citations>`` container."""
        self._in_citations = inside
        self._state = _CITATIONS if inside else _TOP

    # ------------------------------------------------------------------ hooks (the translator's)

    def _on_element(  # pragma: no cover - the translator's
        self, text: str, name: str, closing: bool, selfclose: bool, attrs: dict[str, str], pos: Position
    ) -> None:
        raise NotImplementedError

    def _open_fast(self, text: str, fast: re.Match[str] | None, pos: Position) -> None:  # pragma: no cover
        raise NotImplementedError

    def _bad_tag(self, text: str, pos: Position, why: str) -> None:  # pragma: no cover - the translator's
        raise NotImplementedError

    def _problem_stray(
        self, text: str, pos: Position, why: str, *, shown: str | None = None
    ) -> None:  # pragma: no cover
        raise NotImplementedError

    def _stray(self, text: str, pos: Position) -> None:  # pragma: no cover - the translator's
        raise NotImplementedError

    def _stream_text(self, text: str) -> None:  # pragma: no cover - the translator's
        raise NotImplementedError

    def _end_stream(self) -> None:  # pragma: no cover - the translator's
        raise NotImplementedError

    def _finish_body(self, *, truncated: bool = False) -> None:  # pragma: no cover - the translator's
        raise NotImplementedError

    def _stream_fast(self) -> bool:  # pragma: no cover - the translator's
        raise NotImplementedError

    def _stream_run(self, raw: bytes, i: int) -> int:  # pragma: no cover - the translator's
        raise NotImplementedError

    def _stream_records(self, raw: bytes, i: int, at: int) -> int:  # pragma: no cover - the translator's
        raise NotImplementedError

    # ------------------------------------------------------------------ problems

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

    # ------------------------------------------------------------------ layer 4: the machine

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
        steps = self._steps
        while self._buf and steps[self._state]():
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
        self._state = _TAG
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
            whole = self._tag_first_look(buf, a, n)
            if whole is not None:
                return whole
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
                self._to_top()
                self._on_tag(text, self._tag_pos)
                return True
            if c == "<":
                # A `<` before the `>`: what came before was not a tag (§M4.2).
                text = self._tag_text(m.start())
                self._to_top()
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

    def _tag_first_look(self, buf: str, a: int, n: int) -> bool | None:
        """The first look at a tag: its name's length (§M2.8), then the whole tag if it is here.

        Returns the step's result when it decided, ``None`` to scan on for the `>`.
        """
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
            self._to_top()
            self._on_tag(text, self._tag_pos)
            return True
        return None

    def _empty(self) -> bool:
        buf = self._buf
        first = _NON_WS.search(buf, self._at)
        j = first.start() if first is not None else len(buf)
        close = self._empty_close
        if buf.startswith(close, j):
            self._consume_to(j + len(close))
            self._to_top()
            return True
        if len(buf) - j < len(close) and close.startswith(buf[j:]):
            self._consume_to(j)  # the whitespace, so that a long run of it is not held
            return False
        # §M2.2: an empty element's close tag is expected; in lenient mode go on without it.
        self._problem(f"expected {close} here", self._pos(j), "M2.2")
        self._consume_to(j)
        self._to_top()
        return True

    def _stream(self) -> bool:
        buf, a = self._buf, self._at
        close = self._stream_close
        at = buf.find(close, a)
        if at >= 0:
            self._stream_text(buf[a:at])
            self._consume_to(at + len(close))
            self._end_stream()
            return True
        end = len(buf) - _partial_suffix(buf, close, a)
        if end > a:
            self._stream_text(buf[a:end])
            self._consume_to(end)
        return False

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

    def _citations_step(self) -> bool:
        buf = self._buf
        first = _NON_WS.search(buf, self._at)
        if first is None:
            self._consume_to(len(buf))
            return False
        j = first.start()
        if buf[j] != "<":
            if len(buf) - j < _CITATIONS_TEXT_SHOWN:
                return False  # the excerpt must not depend on where the input was cut (§M4.2-b): wait, or the end
            self._text_between_citations(j)
        self._consume_to(j)
        self._begin_tag()
        return True

    def _text_between_citations(self, j: int) -> NoReturn:
        """Refuse the text at ``buf[j]`` inside ``<citations>`` (§M2.10), shown as the whole input would show it."""
        raise MigrationError(
            f"text between citations: {_show(self._buf[j : j + _CITATIONS_TEXT_SHOWN])}",
            position=self._pos(j),
            section="M2.10",
        )

    # ------------------------------------------------------------------ tags and attributes (§M2.4)

    def _on_tag(self, text: str, pos: Position) -> None:
        """A whole tag ``<...>``: its name and attributes, for the translator's ``_on_element``."""
        m = _TAG_RE.match(text)
        if m is None:
            self._bad_tag(text, pos, "malformed tag")
            return
        closing, name, attr_text, selfclose = m.group(1) == "/", m.group(2), m.group(3), m.group(4) == "/"
        if closing and (attr_text or selfclose):
            self._bad_tag(text, pos, "malformed closing tag")
            return
        self._on_element(text, name, closing, selfclose, self._attrs(attr_text, name, pos), pos)

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


def _show(text: str, limit: int = _SHOWN) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")
