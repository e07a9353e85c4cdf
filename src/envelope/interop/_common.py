"""What both converters share: the coded error, JSON helpers, the envelope writer, the envelope reader.

Owns: ``InteropError`` and its codes; ``EnvelopeWriter``, which turns block operations
(begin, add, end, whole, citation, piece) into envelope lines in the order blocks
opened; ``EnvelopeReader``, which turns envelope lines into block operations for a
target protocol's formatter (the hooks of its subclasses).
Does not own: any protocol's event shapes (``agui``, ``vercel``).

Order is the one thing both directions must keep: a transcript lists an agent's blocks
in the order they *opened* (spec §7.6). A target event that can only be sent whole (an
AG-UI ``TOOL_CALL_RESULT``, a control payload) is held until its block completes; when
another block of the same agent opens first, the held block is sent at once as a
*piece* (``envelope.piece`` / ``data-envelope-piece``) and the rest of it follows as
pieces, so that it opens first on the other side too. The writer keeps the same rule
in the other direction (spec/interop.md §3).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._blocks import _parse
from .._decoder import CITATION_FIELDS, decode
from .._depth import too_deep, value_too_deep
from .._encoder import CitationData, Emitter, ImageRef
from .._errors import EnvelopeError, Position
from .._limits import DEFAULT_MAX_BLOCK_BYTES, DEFAULT_MAX_BYTES, MAX_NESTING_DEPTH
from .._types import ENVELOPE_TYPES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "DONE_LINE",
    "EnvelopeReader",
    "EnvelopeWriter",
    "Inputs",
    "InteropError",
    "OpenBlock",
    "OpenParts",
    "image_ref",
    "image_refs",
    "made_meta_init",
    "write_awaiting",
    "write_piece",
    "write_result",
]

#: The terminator line of an envelope stream and of a UI message stream.
DONE_LINE: Final = b"[DONE]"

#: The control types: no counterpart in either protocol, carried as extension events
#: (``meta_status`` too, and AG-UI's steps beside it: spec/interop.md [I4-g]).
CONTROL_TYPES: Final = frozenset(
    {"meta_init", "meta_final", "meta_files", "error", "awaiting_frontend_tools", "meta_compaction", "meta_status"}
)
#: Types a target protocol sends whole (held until the block completes).
WHOLE_TYPES: Final = CONTROL_TYPES | {"tool_result", "server_tool_result"}
STREAMED: Final = frozenset({"text", "thinking"})
CALLS: Final = frozenset({"tool_call", "server_tool_call"})
WITH_ID: Final = frozenset({"tool_call", "server_tool_call", "tool_result", "server_tool_result"})
BLOCK_TYPES: Final = CONTROL_TYPES | STREAMED | CALLS | {"tool_result", "server_tool_result"}
#: The citation extras in wire order (spec §4.5), as the decoder reads them.
CITATION_KEYS: Final = CITATION_FIELDS

#: Codes of ``InteropError`` (spec/interop.md §6).
CODES: Final = {
    "I201": "input is not a JSON object",
    "I202": "a field is missing or of the wrong type",
    "I203": "an event that cannot cross into envelopes",
    "I204": "an event out of sequence",
    "I205": "a block left open where the other protocol must close it",
    "I206": "the converter was closed",
    "I207": "an envelope line the codec refuses",
    "I208": "a block over the size limit",
    "I209": "an event nested deeper than MAX_NESTING_DEPTH",
}

_json_encode = msgspec.json.encode
_json_decode = msgspec.json.decode


class InteropError(EnvelopeError):
    """Input a converter cannot carry across, with a code (``I2xx``) and where.

    Attributes:
        code: one of ``CODES``.
    """

    def __init__(self, code: str, message: str, *, position: Position | None = None, field: str | None = None) -> None:
        """Create the error; ``code`` is a key of ``CODES``."""
        self.code = code
        super().__init__(message, position=position, field=field, section=None)

    def __str__(self) -> str:
        return f"{self.code} {super().__str__()}"

    def at(self, position: Position) -> InteropError:
        """A copy with ``position`` filled in (the line of the original file)."""
        return InteropError(self.code, self.message, position=position, field=self.field)


def dumps(value: Any) -> str:
    """Compact JSON text of a JSON value."""
    return _json_encode(value).decode()


def check_depth(value: Any, position: Position, what: str = "the event") -> None:
    """Refuse (``I209``) a parsed value nested deeper than ``MAX_NESTING_DEPTH`` (spec/interop.md I6-a).

    Measured without recursion before any part is read or encoded: msgspec and the
    standard library recurse per level and raise ``RecursionError`` near 1,000.
    """
    deep = value_too_deep(value, MAX_NESTING_DEPTH)
    if deep is not None:
        raise InteropError(
            "I209",
            f"{what} nests arrays and objects deeper than MAX_NESTING_DEPTH={MAX_NESTING_DEPTH} levels",
            position=position,
            field=deep,
        )


def parse_object(raw: bytes | str | Mapping[str, Any], position: Position) -> dict[str, Any]:
    """One event as a dict: a JSON object (bytes or str), or a mapping as given.

    Either is measured for depth first (``I209``, spec/interop.md I6-a): the text before
    it is parsed, the mapping before any of it is read.
    """
    if isinstance(raw, dict):
        check_depth(raw, position)
        return raw
    if not isinstance(raw, bytes | str):
        raise InteropError("I201", f"an event must be a JSON object, got {type(raw).__name__}", position=position)
    deep = too_deep(raw, MAX_NESTING_DEPTH)
    if deep is not None:
        unit = "byte" if isinstance(raw, bytes) else "character"
        raise InteropError(
            "I209",
            f"the event nests arrays and objects deeper than MAX_NESTING_DEPTH={MAX_NESTING_DEPTH} levels "
            f"(at {unit} {deep} of the event)",
            position=position,
        )
    try:
        value = _json_decode(raw)
    except msgspec.DecodeError as exc:
        raise InteropError("I201", f"not JSON ({exc})", position=position) from None
    if not isinstance(value, dict):
        raise InteropError("I201", f"a JSON {type(value).__name__}, not an object", position=position)
    return value


def need(event: Mapping[str, Any], key: str, kind: type | tuple[type, ...], position: Position) -> Any:
    """``event[key]``, which must be present and of ``kind``."""
    value = event.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise InteropError(
            "I202", f"{event.get('type')!s} needs {key!r} of type {_kind(kind)}", position=position, field=f"$.{key}"
        )
    return value


def optional(event: Mapping[str, Any], key: str, kind: type | tuple[type, ...], position: Position) -> Any:
    """``event[key]`` if present (``None`` if absent); of ``kind`` when present."""
    if key not in event:
        return None
    return need(event, key, kind, position)


def _kind(kind: type | tuple[type, ...]) -> str:
    names = {str: "string", dict: "object", list: "array", bool: "boolean", int: "integer"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def envelope_meta(event: Mapping[str, Any], key: str = "metadata") -> dict[str, Any]:
    """The ``envelope`` entry of an event's metadata object (ours), or ``{}``."""
    meta = event.get(key)
    if isinstance(meta, dict):
        ours = meta.get("envelope")
        if isinstance(ours, dict):
            return ours
    return {}


def split_data_uri(src: str, media_type: str) -> str | None:
    """The base64 body of ``src`` when it is exactly ``data:<media_type>;base64,<body>``, else ``None``."""
    prefix = f"data:{media_type};base64,"
    if src.startswith(prefix):
        return src[len(prefix) :]
    return None


# ---------------------------------------------------------------------------------------
# envelope lines out


@dataclass(slots=True)
class _Pending:
    """A block the writer has begun: held text not yet written, whether a line opened it."""

    type: str
    id: str | None
    name: str | None
    held: list[str] = field(default_factory=list)
    size: int = 0
    opened: bool = False


class EnvelopeWriter:
    """Writes envelope lines from block operations, keeping each agent's blocks in opening order.

    Streamed types (``text``, ``thinking``) are written as their deltas come. Buffered
    types hold their text until ``end`` (so the last line carries content, spec §5.2-a),
    unless another block of the same agent opens first: then the held text is written at
    once as non-final lines, so that the block opens where it opened in the source.
    """

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES, *, max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES) -> None:
        """Create a writer; ``max_bytes`` is the bound on each line written (spec §6.1)."""
        self.max_bytes = max_bytes
        self.max_block_bytes = max_block_bytes
        self._emitters: dict[str, Emitter] = {}
        self._open: dict[tuple[str, str], _Pending] = {}
        self._order: dict[str, list[tuple[str, str]]] = {}

    def _em(self, agent: str) -> Emitter:
        em = self._emitters.get(agent)
        if em is None:
            em = self._emitters[agent] = Emitter(agent, self.max_bytes)
        return em

    def is_open(self, agent: str, type: str) -> bool:
        """Whether a block of ``(agent, type)`` has begun and not ended."""
        return (agent, type) in self._open

    def _opening(self, agent: str, key: tuple[str, str]) -> list[bytes]:
        """Lines that open the blocks of ``agent`` begun before ``key`` and not yet opened."""
        out: list[bytes] = []
        for other in self._order.get(agent, ()):
            if other == key:
                break
            pend = self._open[other]
            if not pend.opened and pend.type not in STREAMED:
                out += self._flush(agent, pend, final=False)
        return out

    def _flush(self, agent: str, pend: _Pending, *, final: bool) -> list[bytes]:
        text = "".join(pend.held)
        pend.held.clear()
        pend.size = 0
        pend.opened = True
        return self._em(agent)._buffered(pend.type, text, pend.id, pend.name, final=final)

    def begin(
        self, agent: str, type: str, position: Position, *, id: str | None = None, name: str | None = None
    ) -> None:
        """Begin a block of ``(agent, type)``; nothing is written yet."""
        key = (agent, type)
        if key in self._open:
            raise InteropError("I204", f"a {type} block of agent {agent!r} is already open", position=position)
        self._open[key] = _Pending(type, id, name)
        self._order.setdefault(agent, []).append(key)

    def add(self, agent: str, type: str, text: str, position: Position) -> list[bytes]:
        """Add text to the open block of ``(agent, type)``."""
        key = (agent, type)
        pend = self._open.get(key)
        if pend is None:
            raise InteropError(
                "I204", f"content for a {type} block of agent {agent!r} that is not open", position=position
            )
        if not text:
            return []
        out: list[bytes] = []
        if pend.type in STREAMED:
            if not pend.opened:
                out += self._opening(agent, key)
                pend.opened = True
            out += self._em(agent).streamed(pend.type, text)  # type: ignore[arg-type]  # STREAMED checked
            return out
        pend.size += len(text)
        if pend.size > self.max_block_bytes:
            raise InteropError("I208", f"{type} block over {self.max_block_bytes} characters", position=position)
        if pend.opened:
            # once opened, text goes out as it comes (the block is already in place)
            out += self._em(agent)._buffered(pend.type, text, pend.id, pend.name, final=False)
        else:
            pend.held.append(text)
        return out

    def end(self, agent: str, type: str, position: Position) -> list[bytes]:
        """End the open block of ``(agent, type)``: its final line."""
        key = (agent, type)
        pend = self._open.pop(key, None)
        if pend is None:
            raise InteropError("I204", f"end of a {type} block of agent {agent!r} that is not open", position=position)
        order = self._order[agent]
        out = [] if pend.opened else self._opening(agent, key)
        order.remove(key)
        if pend.type in STREAMED:
            out.append(self._em(agent).end(pend.type))  # type: ignore[arg-type]  # STREAMED checked
            return out
        return out + self._flush(agent, pend, final=True)

    def whole(
        self, agent: str, type: str, payload: str, position: Position, *, id: str | None = None, name: str | None = None
    ) -> list[bytes]:
        """A whole block in one call."""
        self.begin(agent, type, position, id=id, name=name)
        return self.add(agent, type, payload, position) + self.end(agent, type, position)

    def tool_result(
        self,
        agent: str,
        id: str,
        name: str,
        text: str,
        images: list[ImageRef],
        position: Position,
        *,
        final: bool = True,
    ) -> list[bytes]:
        """A tool result (multimodal when ``images``); with ``final=False`` it stays open for more."""
        key = (agent, "tool_result")
        pend = self._open.get(key)
        if pend is None:
            self.begin(agent, "tool_result", position, id=id, name=name)
            pend = self._open[key]
        elif pend.id != id or pend.name != name:
            raise InteropError(
                "I204", f"tool result {id!r} while result {pend.id!r} of agent {agent!r} is open", position=position
            )
        out = self.add(agent, "tool_result", text, position)
        if images:
            if not pend.opened:
                out += self._opening(agent, key) + self._flush(agent, pend, final=False)
            em = self._em(agent)
            whole = em.tool_result(id, name, "", images)
            out += whole[1:-1]  # the image lines only: the text line and the marker are ours
        if final:
            out += self.end(agent, "tool_result", position)
        return out

    def citation(self, agent: str, data: dict[str, Any], final: bool, position: Position) -> list[bytes]:
        """One citation line (spec §5.4): ``final`` on the last of its block."""
        key = (agent, "citation")
        if key not in self._open:
            self.begin(agent, "citation", position)
        out = self._opening(agent, key)
        if final:
            self._open.pop(key)
            self._order[agent].remove(key)
        try:
            cite = msgspec.convert(data, CitationData)
        except msgspec.ValidationError as exc:
            raise InteropError("I202", f"citation: {exc}", position=position) from None
        line = self._em(agent).citations([cite])[0]
        if not final:
            line = line.replace(b'"final":true', b'"final":false', 1)
        return [*out, line]

    def piece(
        self,
        agent: str,
        type: str,
        text: str,
        final: bool,
        position: Position,
        *,
        id: str | None = None,
        name: str | None = None,
        images: list[ImageRef] | None = None,
    ) -> list[bytes]:
        """Part of a block sent before it completed (spec/interop.md §3): written at once."""
        if type == "tool_result" and id is not None and name is not None:
            return self.tool_result(agent, id, name, text, images or [], position, final=final)
        if type not in WHOLE_TYPES:
            raise InteropError("I202", f"a piece of type {type!r}", position=position, field="$.type")
        key = (agent, type)
        if key not in self._open:
            self.begin(agent, type, position, id=id, name=name)
        pend = self._open[key]
        out = self._opening(agent, key)
        if not pend.opened:
            pend.held.append(text)
            if final:
                return out + self.end(agent, type, position)
            return out + self._flush(agent, pend, final=False)
        out += self.add(agent, type, text, position)
        if final:
            out += self.end(agent, type, position)
        return out

    def open_blocks(self) -> list[tuple[str, str]]:
        """The ``(agent, type)`` of every block begun and not ended, in begin order."""
        return list(self._open)

    def cut(self) -> list[bytes]:
        """The stream was cut: write what is held, every open block left open (no final)."""
        out: list[bytes] = []
        for agent, order in self._order.items():
            for key in list(order):
                pend = self._open[key]
                if pend.type in STREAMED or pend.type == "citation":
                    continue
                if not pend.opened or pend.held:
                    out += self._flush(agent, pend, final=False)
        return out

    def done(self, position: Position) -> list[bytes]:
        """``[DONE]``: every block must be closed."""
        if self._open:
            agent, type = next(iter(self._open))
            raise InteropError(
                "I205", f"the run ended with a {type} block of agent {agent!r} still open", position=position
            )
        self._order.clear()
        return [DONE_LINE]


# ---------------------------------------------------------------------------------------
# what both foreign formats carry alike, read into writer calls


def image_ref(value: Any, where: Position) -> ImageRef:
    """An image as our metadata carries it: an object with ``src`` and ``media_type``."""
    if not isinstance(value, dict):
        raise InteropError("I202", "an image must be an object with src and media_type", position=where)
    return ImageRef(src=need(value, "src", str, where), media_type=need(value, "media_type", str, where))


def image_refs(values: list[Any] | None, where: Position) -> list[ImageRef]:
    """Every image of a list as ``image_ref`` reads it (none for ``None``)."""
    return [image_ref(value, where) for value in values or []]


def write_piece(writer: EnvelopeWriter, agent: str, value: Mapping[str, Any], where: Position) -> list[bytes]:
    """Our piece of a block (``envelope.piece`` / ``data-envelope-piece``, spec/interop.md §3) written."""
    btype = need(value, "type", str, where)
    text = need(value, "text", str, where)
    final = need(value, "final", bool, where)
    images = image_refs(optional(value, "images", list, where), where)
    return writer.piece(
        agent,
        btype,
        text,
        final,
        where,
        id=optional(value, "id", str, where),
        name=optional(value, "name", str, where),
        images=images,
    )


def write_result(
    writer: EnvelopeWriter,
    agent: str,
    tid: str,
    name: str,
    text: str,
    images: list[ImageRef],
    where: Position,
    *,
    server: bool,
) -> list[bytes]:
    """A tool's result: a ``tool_result`` (with its images), or a ``server_tool_result`` (none)."""
    if not server:
        return writer.tool_result(agent, tid, name, text, images, where)
    if images:
        raise InteropError("I203", "images in a server tool result have no envelope counterpart", position=where)
    return writer.whole(agent, "server_tool_result", text, where, id=tid, name=name)


class Inputs:
    """The numbering of a converter's inputs (events, chunks): each one's position, and the end of input."""

    def __init__(self) -> None:
        """No input yet."""
        self._count = 0
        self._closed = False

    def _next_input(self) -> Position:
        """The position of the input ``feed`` was given (its 1-based number); I206 after ``close``."""
        self._count += 1
        where = Position(line=self._count, index=self._count - 1)
        if self._closed:
            raise InteropError("I206", "feed() after close()", position=where)
        return where

    def _end_of_input(self) -> Position:
        """The position just past the last input, marking the converter closed; I206 the second time."""
        where = Position(line=self._count + 1, index=self._count)
        if self._closed:
            raise InteropError("I206", "close() twice", position=where)
        self._closed = True
        return where


def made_meta_init(agent: str, origin: str) -> dict[str, Any]:
    """The ``meta_init`` payload made for an agent of a stream not ours, ``migrated_from`` its format."""
    return {"format": "json", "user_query": "", "agent_uuid": agent, "model": "", "migrated_from": origin}


def write_awaiting(
    writer: EnvelopeWriter,
    meta: Callable[[str, Position], list[bytes]],
    agent: str,
    pending: list[dict[str, Any]],
    where: Position,
) -> list[bytes]:
    """A stream not ours ends with client tool calls unanswered: ``awaiting_frontend_tools`` (none: nothing).

    ``meta`` makes the agent's ``meta_init`` first when the stream needs one (the converter's ``_meta``).
    """
    if not pending:
        return []
    return meta(agent, where) + writer.whole(agent, "awaiting_frontend_tools", dumps(pending), where)


class OpenParts:
    """The text and thinking blocks open under a foreign id (AG-UI's ``messageId``, the AI SDK's part id)."""

    def __init__(self, writer: EnvelopeWriter, what: str) -> None:
        """``what`` names the foreign id's kind in errors (``message``, ``part``)."""
        self._writer = writer
        self._what = what
        self._open: dict[str, tuple[str, str]] = {}  # foreign id -> (agent, type)

    def begin(self, pid: str, agent: str, btype: str, where: Position) -> None:
        """Open ``btype`` (text or thinking) of ``agent`` under ``pid``."""
        self._open[pid] = (agent, btype)
        self._writer.begin(agent, btype, where)

    def step(self, event: Mapping[str, Any], key: str, kind: str, where: Position, *, end: bool) -> list[bytes]:
        """The event ``kind`` of the block ``event[key]`` names: its next ``delta``, or its ``end``."""
        pid = need(event, key, str, where)
        if pid not in self._open:
            raise InteropError("I204", f"{kind} for {self._what} {pid!r} that is not open", position=where)
        agent, btype = self._open[pid]
        if end:
            del self._open[pid]
            return self._writer.end(agent, btype, where)
        return self._writer.add(agent, btype, need(event, "delta", str, where), where)


# ---------------------------------------------------------------------------------------
# envelope lines in


@dataclass(slots=True)
class OpenBlock:
    """A block of the source stream being converted.

    Attributes:
        type: the envelope type.
        agent: the agent.
        id: tool blocks: the tool use id.
        name: tool blocks: the tool or result name.
        ref: the target protocol's id for it (a message id, a part id).
        parts: held text (types sent whole), until shown.
        images: ``tool_result`` images so far.
        shown: something of it was already sent; the rest goes as it comes.
        pieces: it was sent as pieces (spec/interop.md §3).
        edit: a ``tool_call`` repeating the id of an unanswered call of its agent, or, in a
            resumed response, of a call its ``meta_init.resume`` names: the input the call
            ran with (envelope-v1 §4.6-a, spec/interop.md I4-e, I5-e).
    """

    type: str
    agent: str
    id: str | None
    name: str | None
    ref: str
    parts: list[str] = field(default_factory=list)
    images: list[ImageRef] = field(default_factory=list)
    size: int = 0
    shown: bool = False
    pieces: bool = False
    edit: bool = False


_TAGS: Final = frozenset(ENVELOPE_TYPES)


class EnvelopeReader:
    """Reads envelope lines and calls a formatter's hooks; the base of the ``EnvelopeTo*`` converters.

    Subclasses implement the ``_on_*`` hooks, each returning the target's events. The
    reader checks what the target needs: known types (strict decoding, spec §3-§4), an
    image inside an open result (spec §7.3), a citation after a text (spec §7.4), no
    block open at ``[DONE]``.
    """

    def __init__(self, *, max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES) -> None:
        """Create a reader; a held block over ``max_block_bytes`` characters is an error (I208)."""
        self.max_block_bytes = max_block_bytes
        self._line = 0
        self._closed = False
        self._in_response = False
        self._after_done = False
        self.main: str | None = None
        self._agents: set[str] = set()
        self._open: dict[tuple[str, str], OpenBlock] = {}
        self._held: dict[str, list[tuple[str, str]]] = {}  # agent -> keys held, unshown, in open order
        self._last_text: dict[str, str] = {}  # agent -> ref of its last completed text block
        self._count = 0
        self.meta: dict[str, Any] = {}  # agent -> its meta_init payload, once complete
        #: agent -> ids of its tool calls not answered yet (an edit repeats one, envelope-v1 §4.6-a)
        self._unanswered: dict[str, set[str]] = {}

    # the hooks -------------------------------------------------------------------------
    def _on_run_start(self, main: str | None) -> list[Any]:
        raise NotImplementedError

    def _on_run_end(self) -> list[Any]:
        raise NotImplementedError

    def _on_agent(self, agent: str) -> list[Any]:
        """Before the first event of a new agent (``main`` included)."""
        raise NotImplementedError

    def _on_open(self, block: OpenBlock, delta: str) -> list[Any]:
        """A streamed or call block opened (with its first delta, maybe empty)."""
        raise NotImplementedError

    def _on_delta(self, block: OpenBlock, delta: str) -> list[Any]:
        raise NotImplementedError

    def _on_close(self, block: OpenBlock) -> list[Any]:
        """A streamed or call block completed."""
        raise NotImplementedError

    def _on_whole(self, block: OpenBlock, text: str) -> list[Any]:
        """A held block (result, control) completed without having been shown."""
        raise NotImplementedError

    def _on_piece(self, block: OpenBlock, text: str, images: list[ImageRef], final: bool) -> list[Any]:
        raise NotImplementedError

    def _on_citation(self, agent: str, text_ref: str, citation: dict[str, Any], final: bool) -> list[Any]:
        raise NotImplementedError

    # the reading -----------------------------------------------------------------------
    def _ref(self, agent: str, kind: str) -> str:
        self._count += 1
        return f"{agent}.{kind}{self._count}"

    def feed(self, line: bytes | str) -> list[Any]:
        """Convert one envelope line (or ``[DONE]``); returns the target's events.

        Raises:
            InteropError: I207 for a line the codec refuses, I204/I205 for a sequence the
                target cannot carry, I206 after ``close()``.
        """
        self._line += 1
        where = Position(line=self._line, index=self._line - 1)
        if self._closed:
            raise InteropError("I206", "feed() after close()", position=where)
        raw = line.encode() if isinstance(line, str) else bytes(line)
        raw = raw.rstrip(b"\r\n")
        if raw == DONE_LINE:
            return self._done(where)
        try:
            env = decode(raw, position=where)
        except EnvelopeError as exc:
            raise InteropError("I207", exc.message, position=exc.position, field=exc.field) from None
        kind: str = type(env).__struct_config__.tag  # type: ignore[assignment]  # every envelope has a str tag
        if kind not in _TAGS:  # pragma: no cover - decode knows only these
            raise InteropError("I207", f"unknown type {kind!r}", position=where)
        agent = env.agent
        out: list[Any] = []
        if self._after_done and kind != "meta_init":
            raise InteropError(
                "I204", "content after [DONE] (only a meta_init may start the next response)", position=where
            )
        if not self._in_response:
            self._in_response = True
            self._after_done = False
            self.main = agent
            out += self._on_run_start(agent)
        delta: str = env.delta
        if kind == "tool_result_image":
            return out + self._image(env, where)
        if kind == "citation":
            return out + self._citation(env, where)
        return out + self._block_line(
            kind, agent, delta, env.final, getattr(env, "id", None), getattr(env, "name", None), where
        )

    def _block_line(
        self, kind: str, agent: str, delta: str, final: bool, id: str | None, name: str | None, where: Position
    ) -> list[Any]:
        """A line of a block (not an image or a citation): open, continue or close it in the target."""
        out: list[Any] = []
        key = (agent, kind)
        block = self._open.get(key)
        if block is None:
            block = OpenBlock(kind, agent, id, name, self._ref(agent, kind[:4]))
            self._open[key] = block
            if id is not None:
                self._track_call(block)
            if kind in WHOLE_TYPES:
                self._held.setdefault(agent, []).append(key)
            else:
                out += self._show(block)
                out += self._on_open(block, delta)
                delta = ""
        elif block.id != id or block.name != name:
            raise InteropError("I207", f"{kind} id or name changes inside a block (spec §7.2-d)", position=where)
        if kind in WHOLE_TYPES:
            out += self._hold(block, delta, where)
        elif delta:
            out += self._on_delta(block, delta)
        if final:
            del self._open[key]
            if kind in WHOLE_TYPES:
                out += self._complete(block)
            else:
                out += self._on_close(block)
                if kind == "text":
                    self._last_text[agent] = block.ref
        return out

    def _track_call(self, block: OpenBlock) -> None:
        """Mark an edited call (envelope-v1 §4.6-a); a result's id is answered and forgotten."""
        assert block.id is not None
        calls = self._unanswered.setdefault(block.agent, set())
        if block.type == "tool_call":
            meta = self.meta.get(block.agent)
            resume = meta.get("resume") if isinstance(meta, dict) else None
            resumed = resume.get("tool_use_ids") if isinstance(resume, dict) else None
            block.edit = block.id in calls or (isinstance(resumed, list) and block.id in resumed)
            calls.add(block.id)
        elif block.type == "tool_result":
            calls.discard(block.id)

    def _hold(self, block: OpenBlock, delta: str, where: Position) -> list[Any]:
        if block.pieces:
            return self._on_piece(block, delta, [], False) if delta else []
        block.parts.append(delta)
        block.size += len(delta)
        if block.size > self.max_block_bytes:
            raise InteropError("I208", f"{block.type} block over {self.max_block_bytes} characters", position=where)
        return []

    def _complete(self, block: OpenBlock) -> list[Any]:
        held = self._held.get(block.agent, [])
        key = (block.agent, block.type)
        if block.pieces:
            return self._on_piece(block, "", [], True)
        out = self._show(block)  # first: the blocks held since before this one go out as pieces
        if key in held:
            held.remove(key)
        text = "".join(block.parts)
        if block.type == "meta_init":
            self.meta[block.agent] = _parse(text)
        return out + self._on_whole(block, text)

    def _show(self, block: OpenBlock) -> list[Any]:
        """Before ``block``'s first event: the agent's start, and the held blocks opened before it, as pieces."""
        out: list[Any] = []
        agent = block.agent
        if agent not in self._agents:
            self._agents.add(agent)
            out += self._on_agent(agent)
        held = self._held.get(agent, [])
        key = (agent, block.type)
        while held and held[0] != key:
            other = self._open[held.pop(0)]
            out += self._to_pieces(other)
        return out

    def _to_pieces(self, block: OpenBlock) -> list[Any]:
        block.pieces = True
        text = "".join(block.parts)
        block.parts.clear()
        images = list(block.images)
        block.images.clear()
        return self._on_piece(block, text, images, False)

    def _image(self, env: Any, where: Position) -> list[Any]:
        block = self._open.get((env.agent, "tool_result"))
        if block is None or block.id != env.id or block.name != env.name:
            raise InteropError(
                "I207", "tool_result_image outside an open tool_result of the same id (spec §7.3)", position=where
            )
        image = ImageRef(src=env.src, media_type=env.media_type)
        if block.pieces:
            return self._on_piece(block, "", [image], False)
        block.images.append(image)
        block.size += len(env.src)
        if block.size > self.max_block_bytes:
            raise InteropError("I208", f"tool_result over {self.max_block_bytes} characters", position=where)
        return []

    def _citation(self, env: Any, where: Position) -> list[Any]:
        agent = env.agent
        text_ref = self._last_text.get(agent)
        if text_ref is None:
            raise InteropError("I207", "citation with no completed text block of its agent (spec §7.4)", position=where)
        block = OpenBlock("citation", agent, None, None, text_ref)
        out = self._show(block)
        citation: dict[str, Any] = {"cited_text": env.delta}
        for key in CITATION_KEYS:
            value = getattr(env, key)
            if value is not msgspec.UNSET:
                citation[key] = value
        return out + self._on_citation(agent, text_ref, citation, env.final)

    def _done(self, where: Position) -> list[Any]:
        out: list[Any] = []
        if self._after_done:
            raise InteropError("I204", "a second [DONE] (spec §8.2-a)", position=where)
        if not self._in_response:
            self.main = None
            out += self._on_run_start(None)
        if self._open:
            agent, kind = next(iter(self._open))
            raise InteropError(
                "I205", f"[DONE] with a {kind} block of agent {agent!r} still open (spec §7.2, E120)", position=where
            )
        out += self._on_run_end()
        self._in_response = False
        self._after_done = True
        self._agents.clear()
        self._held.clear()
        return out

    def close(self) -> list[Any]:
        """End of input. A stream without ``[DONE]`` was cut: held blocks go out as open pieces.

        Raises:
            InteropError: I206 when closed twice.
        """
        where = Position(line=self._line + 1, index=self._line)
        if self._closed:
            raise InteropError("I206", "close() twice", position=where)
        self._closed = True
        out: list[Any] = []
        if self._in_response:
            for agent, keys in list(self._held.items()):
                for key in list(keys):
                    block = self._open[key]
                    if agent not in self._agents:
                        self._agents.add(agent)
                        out += self._on_agent(agent)
                    out += self._to_pieces(block)
                keys.clear()
        return out
