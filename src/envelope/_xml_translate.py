"""The legacy translator: tags and body text in, envelope lines out (``spec/legacy-xml.md``).

Owns: the *mapping* from the legacy tags to envelope types (the tables below), the two
escaping eras and how each context was escaped in each (§M3, as the table
``_LATER_SCHEME``), the older server-tool labels (§M2.7), the agent (§M5), the checks of
JSON payloads (§M2.9), citations (§M2.10), the ``meta_init`` rewrite (§M6.3).
Does not own: the streamed bodies, the eras' evidence and the whole-record fast paths
(``_xml_streamed.py``, its base class), the legacy syntax (``_xml_scan.py`` and
``_xml_tokens.py``, which it subclasses and drives through the ``_to_*`` transitions),
line layout and the bound (the codec's ``Emitter`` writes every line), the public API
(``_xml_migrate.py``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from ._encoder import CitationData, ImageRef
from ._errors import MigrationError, Position
from ._xml_streamed import Era as Era
from ._xml_streamed import _encode_list, _is_json, _StreamTranslator
from ._xml_tokens import _BODY, _CDATA, _CITATIONS, _EMPTY, _NON_WS, _STREAM, _TAG, _TOP, _WS, _Body, _show

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._types import BufferedType, StreamedType


_CDATA_REOPEN: Final = "]]><![CDATA["

_decode_raw_object = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode

#: What a migrated ``meta_init`` says of its stream (§M6.3): JSON envelopes, migrated from XML.
_MIGRATED_FROM: Final = "xml"

_MIGRATED_KEYS: Final = {"format": msgspec.Raw(b'"json"'), "migrated_from": msgspec.Raw(b'"xml"')}

# The mapping (§M2): legacy tag -> envelope type, one table per body syntax.
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

#: The era quirks, as data (§M3.2, §M3.3): how the *later* server escaped each body before
#: writing it, keyed by the body's tag kind (the early server escaped nothing).
#: ``"doubled"``: every backslash doubled and every LF written ``\n`` (§M3.2);
#: ``"client"``: CR and CRLF folded to LF, LF written ``\n``, backslashes as they were,
#: ``]]>`` written by reopening the CDATA section (§M3.3); ``"none"``: written as is.
#: Streamed text and thinking, tool call attributes and citation attributes are
#: ``"doubled"`` too; ``data`` attributes are ``"none"`` (JSON escapes LF already).
_LATER_SCHEME: Final[dict[str, Literal["doubled", "client", "none"]]] = {
    "tool_result": "client",
    "server_tool_result": "doubled",
    "error": "doubled",
    "citation": "doubled",
    "meta_files": "none",
}

_MULTIMODAL_RE: Final = re.compile(r"\s*(?:<text>(.*)</text>)?((?:\s*<image\b[^>]*>(?:\s*</image>)?)*)\s*\Z", re.S)

_IMAGE_RE: Final = re.compile(r"<image\b([^>]*?)\s*/?>", re.S)


class _Translator(_StreamTranslator):
    """Tags and body text to envelope lines; ``XmlMigrator`` is this with the public API."""

    # ------------------------------------------------------------------ tags

    def _on_element(
        self, text: str, name: str, closing: bool, selfclose: bool, attrs: dict[str, str], pos: Position
    ) -> None:
        """A well-formed tag, found by the scanner: what it opens or closes (§M2)."""
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

    def _open_fast(self, text: str, fast: re.Match[str] | None, pos: Position) -> None:
        """A whole open tag of a record (``_tag_record``): ``_on_tag``, or its work done from ``fast``'s groups."""
        if fast is None:
            self._on_tag(text, pos)
            return
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
        if not self._stray_open:
            self._unbounded(em, "text", pos)  # §M6.1-a: once, where the block of stray text opens
        self._out.extend(em.streamed("text", text))
        self._stray_open = True

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
            self._to_empty(f"</{name}>")

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
                    "meta_init has no agent_uuid and no agent was given (the `agent` argument)",
                    position=pos,
                    section="M5.1",
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
        self._to_body(body)

    def _finish_body(self, *, truncated: bool = False) -> None:
        body = self._body
        assert body is not None
        self._body = None
        pos = body.pos
        text = body.text()
        kind = body.kind
        if kind == "citation":
            self._to_citations(True)
            self._add_citation(body, self._content(text, body, truncated=truncated), pos)
            return
        self._to_top()
        em = self._emitter()
        if kind in ("meta_files", "error"):
            payload = self._content(text, body, truncated=truncated)
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
            payload = self._content(text, body, truncated=truncated)
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
            payload = self._content(text, body, truncated=truncated)
            self._emit(em.buffered("server_tool_result", payload, id=rid, name=rname), pos)
            return
        if body.mode() == "multimodal" and not truncated:
            m = _MULTIMODAL_RE.match(text)
            if m is None:
                raise MigrationError(f"malformed multimodal body of <{body.tag}>", position=pos, section="M2.3")
            inner = m.group(1) or ""
            sub = _Body(body.tag, "tool_result", "", {}, pos)
            sub.add(inner)
            result_text = self._content(inner, sub)
            images = [self._image(im.group(1), pos) for im in _IMAGE_RE.finditer(m.group(2))]
            self._emit(em.tool_result(rid, rname, result_text, images), pos)
            return
        payload = self._content(text, body, truncated=truncated)
        self._emit(em.buffered("tool_result", payload, id=rid, name=rname), pos)

    def _image(self, attr_text: str, pos: Position) -> ImageRef:
        attrs = self._attrs(attr_text, "image", pos)
        self._no_attrs("image", attrs, pos, ("src", "media_type"))
        src = self._unescape(self._require("image", attrs, "src", pos), "src", pos)
        media = self._unescape(self._require("image", attrs, "media_type", pos), "media_type", pos)
        return ImageRef(src=src, media_type=media)

    def _content(self, text: str, body: _Body, *, truncated: bool = False) -> str:
        """The payload of a buffered body: CDATA unwrapped (§M2.3), then the era undone (§M3.2, §M3.3)."""
        pos = body.pos
        scheme = _LATER_SCHEME[body.kind]
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
        if scheme == "doubled":
            return self._undo_escaped(inner, pos)
        if scheme == "none":
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
        self._to_citations(True)

    def _citations_tag(
        self, text: str, name: str, closing: bool, selfclose: bool, attrs: dict[str, str], pos: Position
    ) -> None:
        if closing and name == "citations":
            self._to_citations(False)
            if self._cits:
                self._emit(self._emitter().citations(self._cits), self._cits_pos)
            return
        if closing or name != "citation":
            raise MigrationError(f"unexpected {_show(text)} inside <citations>", position=pos, section="M2.10")
        self._no_attrs(name, attrs, pos, ("type", *_CITATION_INTS, *_CITATION_STRS))
        self._require(name, attrs, "type", pos)
        body = _Body(name, "citation", "</citation>", attrs, pos)
        self._body = body
        if selfclose:
            self._finish_body()
        else:
            self._to_body(body)

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
        if self._state is _TOP:
            self._run()  # text held back for its report (§M4.2-b)
        state = self._state
        if state is _TAG:
            text = "".join(self._tag_parts) + self._buf[self._at :]
            pos = self._tag_pos
            self._tag_parts = []
            self._buf = ""
            self._at = 0
            self._to_top()
            self._bad_tag(text, pos, "input ends inside a tag")
            state = self._state
        if state is _EMPTY:
            self._problem(f"input ends before {self._empty_close}", self._pos(len(self._buf)), "M4.1")
        elif state is _STREAM:
            self._problem(
                f"input ends inside <{self._stream_close[2:-1]}> (block still open); closed here",
                self._stream_pos,
                "M4.1",
            )
            if self._buf:
                self._stream_text(self._buf[self._at :])
                self._buf = ""
                self._at = 0
            self._end_stream()
        elif state is _BODY:
            body = self._body
            assert body is not None
            self._problem(f"input ends inside <{body.tag}> (block still open); its content is kept", body.pos, "M4.1")
            body.add(self._buf[self._at :])
            self._buf = ""
            self._at = 0
            self._finish_body(truncated=True)
            if self._in_citations:
                self._citations_tag("</citations>", "citations", True, False, {}, body.pos)
        elif state is _CITATIONS:
            first = _NON_WS.search(self._buf, self._at)
            if first is not None:  # text the step waited on to show it whole (§M2.10, §M4.2-b)
                self._text_between_citations(first.start())
            self._problem("input ends inside <citations>; the citations read are kept", self._cits_pos, "M4.1")
            self._citations_tag("</citations>", "citations", True, False, {}, self._cits_pos)
        if self._stray_open:
            self._out.append(self._emitter().end("text"))
            self._stray_open = False
