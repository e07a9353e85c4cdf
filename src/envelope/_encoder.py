"""Encoding envelopes to lines, and the ``Emitter`` that keeps every line within the bound.

Owns: the byte layout of a line (spec §3.2), how a payload becomes lines for each
emission mode (spec §5), and what happens when a line cannot fit (spec §6.5).
Does not own: where cuts fall inside the escaped payload (``_chunker``) or SSE framing
(``_sse``). Nothing here does I/O; an ``Emitter`` returns bytes and the caller sends them.

How a line is built: the envelope is encoded once with an empty delta. Its bytes split
at the delta value into a *head* (everything up to ``"delta":``) and a *tail* (the
extras after the delta and the closing brace). The payload is escaped once, cut into
pieces that fit ``max_bytes - len(head) - len(tail) - 2``, and each line is
``head + '"' + piece + '"' + tail``. A golden test and a property test check that
this equals ``msgspec.json.encode`` of the same Struct, byte for byte.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, overload

import msgspec

from ._chunker import cut_lines, escape, fused_lines
from ._depth import too_deep
from ._emit_structs import CitationData, ImageRef, OversizeLine
from ._errors import EncodeError, OversizeError
from ._limits import DEFAULT_MAX_BYTES, MAX_CODE_POINT_BYTES, MAX_NESTING_DEPTH
from ._types import (
    BUFFERED_TYPES,
    STREAMED_TYPES,
    AwaitingFrontendTools,
    BufferedType,
    Citation,
    Envelope,
    Error,
    MetaCompaction,
    MetaFiles,
    MetaFinal,
    MetaInit,
    MetaStatus,
    ServerToolCall,
    ServerToolResult,
    StreamedType,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    ToolResultImage,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "CitationData",
    "Emitter",
    "ImageRef",
    "OversizeLine",
    "chunk",
    "encode",
]

_encoder = msgspec.json.Encoder()
_encode_str = _encoder.encode
_decode_json = msgspec.json.decode
_DELTA_KEY: Final = b'"delta":""'
_FINAL_FALSE: Final = b'"final":false'
_FINAL_TRUE: Final = b'"final":true'
_TYPES_WITH_ID: Final = frozenset({"tool_call", "server_tool_call", "tool_result", "server_tool_result"})

#: The emitter profiles (spec §10): ``default`` keeps every line within the bound;
#: ``seed`` sends the control types whole, for clients written to the seed.
Profile = Literal["default", "seed"]
#: Control types the ``seed`` profile sends as one line whatever its length (spec §10.2):
#: clients written to the seed parse these on their own line and do not join chunks.
SEED_WHOLE_TYPES: Final = frozenset(
    {"meta_init", "meta_files", "error", "awaiting_frontend_tools", "meta_final", "meta_compaction", "meta_status"}
)


def encode(envelope: Envelope) -> bytes:
    """Encode one envelope as one compact JSON line, with no bound and no chunking.

    Args:
        envelope: any envelope Struct.

    Returns:
        The UTF-8 JSON object, fields in wire order (spec §3.2), no newline.

    Raises:
        EncodeError: a string field holds a lone surrogate (spec §6.4).
    """
    try:
        return _encoder.encode(envelope)
    except UnicodeEncodeError as exc:
        raise EncodeError(
            f"lone surrogate in a {envelope.__struct_config__.tag} envelope cannot be encoded as UTF-8 ({exc.reason})",
            section="6.4",
        ) from None


class _Template:
    """The bytes of one envelope around its delta value, for both values of ``final``.

    ``open_false``/``open_true`` are the head with the delta's opening quote and ``close``
    the closing quote with the tail: a line of one escaped piece is one join of three.
    """

    __slots__ = ("agent", "close", "head_false", "head_true", "open_false", "open_true", "tail", "type")

    def __init__(self, envelope: Envelope) -> None:
        """Build from ``envelope``, whose ``final`` and ``delta`` are ignored."""
        self.type: str = str(envelope.__struct_config__.tag)
        self.agent: str = envelope.agent
        if envelope.final or envelope.delta:
            envelope = msgspec.structs.replace(envelope, final=False, delta="")
        line = encode(envelope)
        # `"delta":""` cannot occur inside a JSON string value (an unescaped `""` is
        # impossible there), and only keys are followed by `:`, so the match is the delta
        # key itself. The same holds for `"final":false`, which comes before the delta
        # (spec §3.2: type, agent, final, ...): the head for `final: true` differs from
        # this one only there, so one encode gives both.
        at = line.index(_DELTA_KEY) + len(_DELTA_KEY) - 2
        head = line[:at]
        flag = head.index(_FINAL_FALSE)
        self.head_false: bytes = head
        self.head_true: bytes = b"".join((head[:flag], _FINAL_TRUE, head[flag + len(_FINAL_FALSE) :]))
        self.tail: bytes = line[at + 2 :]
        self.open_false: bytes = head + b'"'
        self.open_true: bytes = self.head_true + b'"'
        self.close: bytes = b'"' + self.tail

    def line(self, final: bool, piece: bytes) -> bytes:
        """The line for one escaped piece (without quotes)."""
        return b"".join((self.open_true if final else self.open_false, piece, self.close))


def _lines(
    template: _Template,
    quoted: bytes,
    final: bool,
    max_bytes: int,
    on_oversize: Callable[[OversizeLine], None] | None,
    strict: bool,
) -> list[bytes]:
    """Lines for one payload: all ``final: false`` but the last, which gets ``final``.

    ``quoted`` is the escaped payload with its quotes. Spec §6.3: every line is within
    ``max_bytes`` and every non-last piece is maximal, unless the fixed part leaves no
    room for a code point, in which case spec §6.5 applies: one line holds the whole
    payload, reported through ``on_oversize`` (or refused in strict mode).

    The pieces are never copied out of ``quoted``: each line is joined from the head, a
    view of its piece, and the tail (one copy of the payload's bytes in all, into the
    lines).
    """
    head_last = template.head_true if final else template.head_false
    tail = template.tail
    if len(head_last) + len(quoted) + len(tail) <= max_bytes:
        return [b"".join((head_last, quoted, tail))]
    budget = max_bytes - len(template.head_false) - len(tail) - 2
    if budget < MAX_CODE_POINT_BYTES:
        line = b"".join((head_last, quoted, tail))
        _report(
            OversizeLine(
                type=template.type,
                agent=template.agent,
                size=len(line),
                max_bytes=max_bytes,
                reason=(
                    f"the fixed part of the envelope leaves {max(budget, 0)} bytes for the delta, "
                    f"fewer than the {MAX_CODE_POINT_BYTES} one code point may need"
                ),
            ),
            on_oversize,
            strict,
        )
        return [line]
    last_budget = max_bytes - len(head_last) - len(tail) - 2
    opening = template.open_false
    return cut_lines(quoted, budget, last_budget, opening, template.open_true if final else opening, template.close)


def _text_lines(
    template: _Template,
    text: str,
    final: bool,
    max_bytes: int,
    on_oversize: Callable[[OversizeLine], None] | None,
    strict: bool,
) -> list[bytes]:
    """``_lines(template, escape(text), ...)``, escaping and cutting in one step where it can.

    When the fixed part leaves room for a code point, the lines are ``fused_lines``'s: in
    the compiled build, ``text`` is escaped straight into each line (issue 31). One line
    when the escaped text fits is the same there: ``cut_lines`` gives one line
    (``last_opening + body + close``) exactly when ``_lines``'s whole-line test passes.
    """
    tail = template.tail
    budget = max_bytes - len(template.head_false) - len(tail) - 2
    if budget < MAX_CODE_POINT_BYTES:
        return _lines(template, escape(text), final, max_bytes, on_oversize, strict)
    head_last = template.head_true if final else template.head_false
    last_budget = max_bytes - len(head_last) - len(tail) - 2
    opening = template.open_false
    return fused_lines(text, budget, last_budget, opening, template.open_true if final else opening, template.close)


def _report(record: OversizeLine, on_oversize: Callable[[OversizeLine], None] | None, strict: bool) -> None:
    if strict:
        raise OversizeError(
            f"{record.type} line of {record.size} bytes exceeds max_bytes={record.max_bytes}: {record.reason}",
            key=(record.agent, record.type),
            section="6.5",
        )
    if on_oversize is not None:
        on_oversize(record)


def _atomic(
    envelope: Envelope,
    max_bytes: int,
    on_oversize: Callable[[OversizeLine], None] | None,
    strict: bool,
    reason: str,
) -> bytes:
    """Encode an envelope that must stay one line (an image, a citation), reporting if oversize."""
    line = encode(envelope)
    if len(line) > max_bytes:
        tag = str(envelope.__struct_config__.tag)
        _report(
            OversizeLine(type=tag, agent=envelope.agent, size=len(line), max_bytes=max_bytes, reason=reason),
            on_oversize,
            strict,
        )
    return line


@overload
def chunk(
    envelope: Envelope,
    max_bytes: int = ...,
    *,
    strict: Literal[False] = ...,
    on_oversize: Callable[[OversizeLine], None] | None = ...,
) -> list[bytes]: ...


@overload
def chunk(
    envelope: Envelope,
    max_bytes: int = ...,
    *,
    strict: Literal[True],
    on_oversize: Callable[[OversizeLine], None] | None = ...,
) -> list[bytes]: ...


def chunk(
    envelope: Envelope,
    max_bytes: object = DEFAULT_MAX_BYTES,
    *,
    strict: bool = False,
    on_oversize: Callable[[OversizeLine], None] | None = None,
) -> list[bytes]:
    """Split one envelope into lines within ``max_bytes`` whose deltas join to its delta.

    Every line but the last has ``final: false``; the last keeps the envelope's
    ``final``. ``tool_result_image`` and ``citation`` envelopes are never split
    (spec §6.5): they give one line, reported if oversize.

    Args:
        envelope: the envelope to split.
        max_bytes: the bound on each line (spec §6.1).
        strict: raise ``OversizeError`` instead of reporting an oversize line.
        on_oversize: called with each oversize line's report.

    Returns:
        The encoded lines.

    Raises:
        EncodeError: a lone surrogate anywhere in the envelope.
        OversizeError: in strict mode, when a line cannot fit.
    """
    bound = _check_bound(max_bytes)
    if isinstance(envelope, (ToolResultImage, Citation)):
        return [_atomic(envelope, bound, on_oversize, strict, "this type is never split (spec §6.5)")]
    return _lines(_Template(envelope), escape(envelope.delta), envelope.final, bound, on_oversize, strict)


#: Types whose payload is JSON text (spec §4.1's table, §7.5): a strict ``Emitter``
#: refuses any other text for them (spec §5.2-c). ``tool_result`` and
#: ``server_tool_result`` carry text that readers do not parse.
_JSON_PAYLOAD_TYPES: Final = frozenset(
    {
        "meta_init",
        "meta_final",
        "meta_files",
        "meta_compaction",
        "meta_status",
        "error",
        "awaiting_frontend_tools",
        "tool_call",
        "server_tool_call",
    }
)


def _refuse_non_json(type: str, payload: str) -> None:
    """``EncodeError`` unless ``payload`` is JSON that readers parse (spec §5.2-c, §6.7, §7.5).

    The same test as the validator's (``E140``, ``E116``): nested no deeper than
    ``MAX_NESTING_DEPTH``, then RFC 8259 strictly as msgspec reads it (no ``NaN``, no
    number beyond a double, no escaped lone surrogate).
    """
    deep = too_deep(payload, MAX_NESTING_DEPTH)
    if deep is None:
        try:
            _decode_json(payload)
        except msgspec.MsgspecError as exc:
            why = str(exc).removeprefix("JSON is malformed: ")
            why = "the text ends inside a value" if why == "Input data was truncated" else why
        else:
            return
    else:
        why = f"it nests arrays and objects deeper than {MAX_NESTING_DEPTH} levels (character {deep})"
    raise EncodeError(
        f"{type} payload is not JSON ({why}); a strict Emitter sends only JSON for this type: "
        "pass json.dumps(value), or use strict=False to send the text as given",
        field="$.delta",
        section="5.2-c",
    )


def _check_bound(max_bytes: object) -> int:
    """``max_bytes`` itself when it is a positive int (not a bool), else ``EncodeError``.

    ``chunk`` takes ``max_bytes`` as ``object`` in its implementation, behind typed
    overloads: compiled by mypyc, an ``int`` parameter would turn ``True`` into ``1``
    before this check could refuse it. ``Emitter.__init__`` cannot do the same (mypyc
    miscompiles an overloaded native ``__init__``): compiled, its argument check raises
    ``TypeError`` for a value of the wrong type and takes ``True`` as ``1``
    (spec/limits.md L4).
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
        raise EncodeError(f"max_bytes must be a positive int, got {max_bytes!r}", section="6.1")
    return max_bytes


_STREAMED: Final[dict[str, type[Text] | type[Thinking]]] = {"text": Text, "thinking": Thinking}
_BUFFERED: Final[dict[str, type[Envelope]]] = {
    "meta_init": MetaInit,
    "meta_final": MetaFinal,
    "meta_files": MetaFiles,
    "meta_compaction": MetaCompaction,
    "meta_status": MetaStatus,
    "error": Error,
    "awaiting_frontend_tools": AwaitingFrontendTools,
    "tool_call": ToolCall,
    "server_tool_call": ServerToolCall,
    "tool_result": ToolResult,
    "server_tool_result": ServerToolResult,
}


class Emitter:
    """Turns one agent's output into envelope lines, each within ``max_bytes``.

    One ``Emitter`` per agent. It holds no stream state: which block is open is the
    caller's business, and the decoder's. Lines are compact JSON objects without SSE
    framing; pass each to ``frame()`` to send it over SSE.

    Example::

        em = Emitter("abc-123")
        lines = em.streamed("text", "Hello") + em.end("text")

    Attributes:
        agent: the agent id written into every envelope.
        max_bytes: the bound on each line (spec §6.1).
        strict: raise ``OversizeError`` rather than report an unavoidable oversize line,
            and refuse a payload of a JSON type that is not JSON (``EncodeError``,
            spec §5.2-c) rather than send it as given.
        profile: ``"default"`` or ``"seed"`` (spec §10.2).
        oversize: every oversize line reported so far (spec §6.5), oldest first. A
            control line the ``seed`` profile sends whole is its rule, not an oversize
            line, and is not reported.
    """

    __slots__ = ("_markers", "_rooms", "_streamed", "_whole", "agent", "max_bytes", "oversize", "profile", "strict")

    def __init__(
        self, agent: str, max_bytes: int = DEFAULT_MAX_BYTES, *, strict: bool = False, profile: Profile = "default"
    ) -> None:
        """Create an emitter.

        Args:
            agent: the agent id (a UUID in practice; any string is carried as is).
            max_bytes: the bound on each line; 2048 by default, as in the seed.
            strict: see the class attributes.
            profile: ``"default"`` (every line within ``max_bytes``) or ``"seed"``
                (``meta_init``, ``meta_files``, ``error``, ``awaiting_frontend_tools``,
                ``meta_final`` and ``meta_compaction`` sent whole, one ``final: true`` line
                each, whatever their length; every other type keeps the bound). Spec §10.2.
                A seed-profile producer puts compactions in ``meta_final``'s
                ``compactions`` instead of sending ``meta_compaction`` (spec §10.2-d).

        Raises:
            EncodeError: ``max_bytes`` is not a positive int, ``agent`` is not a str,
                or ``profile`` is not one of the two.
        """
        bound = _check_bound(max_bytes)
        if not isinstance(agent, str):
            raise EncodeError(f"agent must be a str, got {type(agent).__name__}", field="$.agent")
        if profile != "default" and profile != "seed":
            raise EncodeError(f"profile must be 'default' or 'seed', got {profile!r}", section="10.2")
        self.agent: Final[str] = agent
        self.max_bytes: Final[int] = bound
        self.strict: Final[bool] = strict
        self.profile: Final[Profile] = profile
        self._whole: frozenset[str] = SEED_WHOLE_TYPES if profile == "seed" else frozenset()
        self.oversize: list[OversizeLine] = []
        self._streamed: dict[str, _Template] = {}
        self._markers: dict[str, bytes] = {}
        #: Per streamed type: the most bytes a quoted delta may have to fit one line.
        self._rooms: dict[str, int] = {}
        for name, cls in _STREAMED.items():
            template = _Template(cls(agent=agent, final=False, delta=""))
            self._streamed[name] = template
            self._markers[name] = template.line(True, b"")
            self._rooms[name] = bound - len(template.head_false) - len(template.tail)

    def streamed(self, type: StreamedType, delta: str) -> list[bytes]:
        """Lines for one streamed delta, all ``final: false`` (spec §5.1).

        An oversized delta becomes several lines; an empty delta gives none (it would
        carry nothing, and the final marker is ``end()``'s job).

        Args:
            type: ``"text"`` or ``"thinking"``.
            delta: the text as it arrived.

        Returns:
            Zero or more lines.

        Raises:
            EncodeError: unknown type, or a lone surrogate in ``delta``.
        """
        template = self._streamed.get(type)
        if template is None:
            raise EncodeError(f"{type!r} is not a streamed type (text, thinking)", field="$.type", section="5.1")
        if not delta:
            return []
        try:
            quoted = _encode_str(delta)
        except UnicodeEncodeError:
            quoted = escape(delta)  # raises the error that names the index
        if len(quoted) <= self._rooms[type]:
            # The common case: the delta fits one line, a single join.
            return [b"".join((template.head_false, quoted, template.tail))]
        return _lines(template, quoted, False, self.max_bytes, self.oversize.append, self.strict)

    def end(self, type: StreamedType) -> bytes:
        """The final marker of a streamed block: ``final: true`` and an empty delta (spec §5.1).

        Raises:
            EncodeError: unknown type.
        """
        marker = self._markers.get(type)
        if marker is None:
            raise EncodeError(f"{type!r} is not a streamed type (text, thinking)", field="$.type", section="5.1")
        if len(marker) > self.max_bytes:
            # spec §6.5-a: even an empty marker exceeds the bound; it is sent, and reported
            _report(
                OversizeLine(
                    type=type,
                    agent=self.agent,
                    size=len(marker),
                    max_bytes=self.max_bytes,
                    reason="the final marker alone exceeds the bound",
                ),
                self.oversize.append,
                self.strict,
            )
        return marker

    def buffered(
        self,
        type: BufferedType,
        payload: str,
        *,
        id: str | None = None,
        name: str | None = None,
    ) -> list[bytes]:
        """Lines for a whole buffered payload; the last line is ``final: true`` (spec §5.2).

        An empty payload gives one line. In the ``seed`` profile a control type
        (``meta_init``, ``meta_files``, ``error``, ``awaiting_frontend_tools``,
        ``meta_final``, ``meta_compaction``) is always one line, whatever its length
        (spec §10.2).

        Args:
            type: a buffered type (every type but text, thinking, citation, tool_result_image).
            payload: the whole payload, for example JSON text.
            id: required for tool_call, server_tool_call, tool_result, server_tool_result;
                refused for the others.
            name: as ``id``.

        Returns:
            One or more lines.

        A payload of a JSON type (``meta_*``, ``error``, ``awaiting_frontend_tools``,
        ``tool_call``, ``server_tool_call``) that is not JSON is refused in strict mode;
        otherwise it is sent as given, unparsed, and a reader rebuilds it as the raw text
        (spec §5.2-c, §7.5).

        Raises:
            EncodeError: unknown type, missing or unexpected ``id``/``name``, lone
                surrogate; strict mode, a payload of a JSON type that is not JSON.
            OversizeError: strict mode, and the fixed part leaves no room (spec §6.5).
        """
        return self._buffered(type, payload, id, name, final=True)

    def _buffered(self, type: str, payload: str, id: str | None, name: str | None, *, final: bool) -> list[bytes]:
        lines = self._buffered_lines(type, payload, id, name, final)
        if self.strict and type in _JSON_PAYLOAD_TYPES:
            # After the lines: a lone surrogate or an oversize line is reported first.
            _refuse_non_json(type, payload)
        return lines

    def _buffered_lines(self, type: str, payload: str, id: str | None, name: str | None, final: bool) -> list[bytes]:
        cls = _BUFFERED.get(type)
        if cls is None:
            raise EncodeError(f"{type!r} is not a buffered type", field="$.type", section="5.2")
        if type in _TYPES_WITH_ID:
            if id is None or name is None:
                raise EncodeError(f"{type} needs both id and name", field="$.id", section="4.1")
            envelope: Envelope = cls(agent=self.agent, final=final, id=id, name=name, delta=payload)  # type: ignore[call-arg]  # cls is one of the id-carrying types here
        else:
            if id is not None or name is not None:
                raise EncodeError(f"{type} carries no id or name", field="$.id", section="4.1")
            envelope = cls(agent=self.agent, final=final, delta=payload)  # type: ignore[call-arg]  # cls takes no id/name here
            if type in self._whole:
                # spec §10.2-a: the seed profile sends a control type as one line, never cut.
                return [encode(envelope)]
        if len(payload) < self.max_bytes:
            # Most payloads fit one line: a single encode, no template. (A payload of
            # max_bytes characters or more cannot fit: each takes at least one byte.)
            try:
                line = _encoder.encode(envelope)
            except UnicodeEncodeError:
                pass  # the template path below raises the precise error
            else:
                if len(line) <= self.max_bytes:
                    return [line]
                # Too long: the line is head + quoted payload + tail, so the escaped
                # payload is already here, between the template's head and tail.
                template = _Template(envelope)
                head = template.head_true if final else template.head_false
                quoted = line[len(head) : len(line) - len(template.tail)]
                return _lines(template, quoted, final, self.max_bytes, self.oversize.append, self.strict)
        return _text_lines(_Template(envelope), payload, final, self.max_bytes, self.oversize.append, self.strict)

    def tool_result(
        self,
        id: str,
        name: str,
        text: str,
        images: Iterable[ImageRef] = (),
    ) -> list[bytes]:
        """Lines for a tool result, multimodal when ``images`` is not empty (spec §5.3).

        Without images this is ``buffered("tool_result", text, id=id, name=name)``.
        With images: the text as a non-final ``tool_result`` (chunked when large), one
        ``tool_result_image`` per image (never split), then an empty ``final: true``
        ``tool_result`` marker.

        Raises:
            EncodeError: a lone surrogate anywhere.
            OversizeError: strict mode, and an image line exceeds the bound.
        """
        images = list(images)
        if not images:
            return self._buffered("tool_result", text, id, name, final=True)
        lines = self._buffered("tool_result", text, id, name, final=False)
        for image in images:
            envelope = ToolResultImage(
                agent=self.agent, final=False, id=id, name=name, delta="", src=image.src, media_type=image.media_type
            )
            lines.append(
                _atomic(
                    envelope,
                    self.max_bytes,
                    self.oversize.append,
                    self.strict,
                    "an image's src cannot be split across lines (spec §6.5)",
                )
            )
        lines.extend(self._buffered("tool_result", "", id, name, final=True))
        return lines

    def citations(self, citations: Sequence[CitationData]) -> list[bytes]:
        """One line per citation, ``final: true`` on the last (spec §5.4).

        Call right after the cited text block's final marker. A citation line is never
        split: the seed gives no way to continue one citation on another line, so a
        citation too large for the bound is one oversize line (spec §6.5).

        Returns:
            One line per citation; none for an empty sequence.
        """
        last = len(citations) - 1
        lines: list[bytes] = []
        for i, data in enumerate(citations):
            envelope = Citation(
                agent=self.agent,
                final=i == last,
                delta=data.cited_text,
                citation_type=data.citation_type,
                document_index=data.document_index,
                document_title=data.document_title,
                start_char_index=data.start_char_index,
                end_char_index=data.end_char_index,
                start_page_number=data.start_page_number,
                end_page_number=data.end_page_number,
                url=data.url,
                title=data.title,
            )
            lines.append(
                _atomic(
                    envelope,
                    self.max_bytes,
                    self.oversize.append,
                    self.strict,
                    "a citation is never split across lines (spec §6.5)",
                )
            )
        return lines


assert frozenset(_STREAMED) == STREAMED_TYPES
assert frozenset(_BUFFERED) == BUFFERED_TYPES
