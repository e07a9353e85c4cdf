"""Rebuilding blocks from an interleaved envelope stream, routed by ``(agent, type)``.

Owns: the block state machine (spec §7), and building the ``Block`` and ``Transcript``
values (defined, with their dict form, in ``_blocks``: this module is compiled by mypyc
where a compiler works, and they must stay plain dataclasses, see there).
Does not own: judging a stream (the validator is strict; this is lenient about what
does not affect the rebuilt content: extra fields, numbers sent as strings, an image
marked final), or reading bytes (``StreamReader`` gives lines, ``decode_lenient`` fields).

The machine, one per ``(agent, type)`` key (as h2 has one per stream id)::

             chunk (final: false)                 chunk (final: false)
      IDLE ───────────────────────▶ OPEN ◀──────────────────────┐
       ▲ │                           │  └───────────────────────┘
       │ │ chunk (final: true)       │ chunk (final: true)
       │ └──── opens and closes ─────┤     image (tool_result key only): stays OPEN
       └─────────────────────────────┘

``tool_result_image`` has no key of its own: it is an ``image`` input to the
``(agent, tool_result)`` machine, legal only in OPEN and only with the open block's
``id`` (spec §7.3). ``citation`` lines form a block of key ``(agent, citation)``
whose citations attach to that agent's most recently completed ``text`` block
(spec §7.4).

Above the key machines, one machine per recording (``PHASES``)::

               [DONE] (spec §8.2-a)
      READING ──────────────────────▶ DONE
         ▲  └─ any line ─┐              │
         │ ◀─────────────┘              │ meta_init: the next response (spec §8.5-a)
         └──────────────────────────────┘

A recording may hold several responses back to back (a run log, spec §8.5); the
reconstructor rebuilds it as one transcript, in which the agents go on. Anything else in
DONE (a line, a second ``[DONE]``) is refused (spec §8.2-a, §8.5-b).

Where the work is: ``feed`` reads a line and steps the recording machine
(``_step_phase``); ``_apply`` sends the line to an image, a citation, or its key's
machine (``_route``), whose moves are ``_open_block``, an id check and the delta
appended inline, and ``_close_block``. ``_feed_run`` is ``feed``'s common path inlined
for ``feed_many`` (the reason is written above it).
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ._blocks import Block, Transcript, _parse
from ._decoder import (
    CITATION_FIELDS,
    DONE_DATA,
    RawLine,
    _lenient,
    _LineBatch,
    _Wire,
    decode_lenient,
    nesting_error,
)
from ._depth import too_deep
from ._errors import DecodeError, EnvelopeError, Position, SequenceError, ValidationError
from ._limits import DEFAULT_MAX_BLOCK_BYTES, DEFAULT_MAX_OPEN_BLOCKS, MAX_NESTING_DEPTH
from ._speedups import loaded
from ._types import ENVELOPE_TYPES, BlockKey

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    #: ``_cread.route_run``'s signature.
    _RouteRun = Callable[
        [Sequence[bytes | str], int, dict[bytes, tuple[str, str]], list[int], dict[tuple[str, str], "_Open"], int], int
    ]

__all__ = ["Block", "Reconstructor", "Transcript", "reconstruct"]


class State(Enum):
    """State of one ``(agent, type)`` key."""

    IDLE = "idle"  # no block open; the next line opens one
    OPEN = "open"  # a block is open and takes more lines


class Input(Enum):
    """What a line does to its key's machine."""

    CHUNK = "chunk"  # a line with final: false
    FINAL = "final"  # a line with final: true
    IMAGE = "image"  # a tool_result_image, applied to the (agent, tool_result) key


#: The legal moves. A pair missing here is a ``SequenceError`` naming both.
TRANSITIONS: Final[dict[tuple[State, Input], State]] = {
    (State.IDLE, Input.CHUNK): State.OPEN,  # spec §7.2-a: a line opens a block
    (State.IDLE, Input.FINAL): State.IDLE,  # spec §7.2-b: a one-line block opens and closes
    (State.OPEN, Input.CHUNK): State.OPEN,
    (State.OPEN, Input.FINAL): State.IDLE,  # spec §7.2-c: final closes the block
    (State.OPEN, Input.IMAGE): State.OPEN,  # spec §7.3-a: an image joins the open tool_result
}

#: TRANSITIONS resolved for the hot path: ``_AFTER[block_is_open][final]`` is the next
#: state. Derived from the table at import, so the table stays the one statement of the
#: machine; hashing enum pairs on every line cost more than the rest of the routing.
_AFTER: Final = tuple(
    tuple(TRANSITIONS[(state, Input.FINAL if final else Input.CHUNK)] for final in (False, True))
    for state in (State.IDLE, State.OPEN)
)


class Phase(Enum):
    """State of the whole recording."""

    READING = "reading"  # inside a response: envelope lines are taken
    DONE = "done"  # after [DONE]: only a meta_init (the next response) is taken


class Mark(Enum):
    """What a line does to the recording's machine."""

    LINE = "line"  # any envelope line but a meta_init
    META_INIT = "meta_init"  # a meta_init line: may start the next response
    TERMINATOR = "terminator"  # the [DONE] line


#: The recording's legal moves. A pair missing here is "content after [DONE]" (spec §8.2-a).
PHASES: Final[dict[tuple[Phase, Mark], Phase]] = {
    (Phase.READING, Mark.LINE): Phase.READING,
    (Phase.READING, Mark.META_INIT): Phase.READING,
    (Phase.READING, Mark.TERMINATOR): Phase.DONE,  # spec §8.2-a: [DONE] ends the response
    (Phase.DONE, Mark.META_INIT): Phase.READING,  # spec §8.5-a: the next response of a recording
}


def _where(position: Position | None, index: int) -> Position:
    """The position of line ``index`` for an error: its line and offset, if known, and the index."""
    return Position(
        line=position.line if position else None,
        offset=position.offset if position else None,
        index=index,
    )


_KNOWN_TYPES: Final = frozenset(ENVELOPE_TYPES)
#: The types ``feed_many`` routes inline: each opens, continues and closes its own block.
#: Types feed_many routes inline. Citations and images attach elsewhere, and an error may
#: carry a discarded-attempt signal (spec §7.7): those lines go through ``feed``.
_ROUTED_TYPES: Final = _KNOWN_TYPES - {"citation", "tool_result_image", "error"}
_encode = msgspec.json.Encoder().encode
#: Decodes the delta of a line matched by its prefix: one JSON string, as the lenient
#: decoder would read that field.
_delta_decoder: Final = msgspec.json.Decoder(str)
#: Types whose block ``data`` is the JSON of the joined deltas (spec §7.5); ``meta_compaction``
#: and ``meta_status`` are control blocks like ``meta_files`` (spec §4.15, §4.16).
_JSON_TYPES: Final = frozenset(
    {"meta_init", "meta_final", "meta_files", "error", "awaiting_frontend_tools", "meta_compaction", "meta_status"}
)


def _tail(wid: str | None, wname: str | None) -> bytes:
    """The bytes after the delta value of a ``final: false`` line of a block with this id and name.

    As this codec encodes them (spec §3.2: the extras after ``delta``, ``id`` before
    ``name``); ``feed_many``'s fast path takes a line only when it ends so.
    """
    parts = [b',"id":', _encode(wid)] if wid is not None else []
    if wname is not None:
        parts += (b',"name":', _encode(wname))
    parts.append(b"}")
    return b"".join(parts)


def _load_route_run() -> _RouteRun | None:
    """``_cread.route_run`` in the compiled build; ``None`` in the pure one (all or none)."""
    if loaded() != "compiled":
        return None
    from ._cread import route_run  # only the compiled build has it

    return route_run


#: The compiled build's pass over the continuation lines of open blocks (``_feed_run``).
_route_run: Final = _load_route_run()


def _after_done(where: Position) -> SequenceError:
    return SequenceError(
        "content after [DONE] (only a meta_init may follow it, to start the next response)",
        position=where,
        section="8.2-a",
    )


class _Open:
    """A block being built; mutable, private. ``Block`` is its snapshot."""

    __slots__ = (
        "agent",
        "buf",
        "citations",
        "complete",
        "dropped",
        "id",
        "images",
        "name",
        "parts",
        "prev_text",
        "size",
        "tail",
        "type",
    )

    def __init__(self, type: str, agent: str, id: str | None, name: str | None) -> None:
        self.type = type
        self.agent = agent
        self.id = id
        self.name = name
        self.complete = False
        self.parts: list[str] = []
        self.size = 0
        self.citations: list[dict[str, Any]] = []
        self.images: list[dict[str, str]] = []
        #: text blocks: the agent's text block completed before this one (spec §7.4's
        #: "most recent" after a discard is found along these links, spec §7.7)
        self.prev_text: _Open | None = None
        #: a discarded-attempt signal removed this block from its agent (spec §7.7-a)
        self.dropped = False
        #: ``feed_many``'s fast path: the exact bytes a ``final: false`` line of this
        #: block ends with after its delta value (its ``id`` and ``name`` as this codec
        #: encodes them, then ``}``); ``None`` when the block takes no fast path
        self.tail: bytes | None = None
        #: the compiled build: the UTF-8 of the deltas after ``parts`` (``_cread.route_run``
        #: decodes into it, and a delta from the Python path is encoded into it while it is
        #: set), decoded once into ``parts`` by ``flush`` (spec [RF1-b]); ``None`` in the pure build
        self.buf: bytearray | None = None

    def flush(self) -> None:
        """Move the content gathered in ``buf`` to ``parts`` (one str), before ``parts`` is read."""
        buf = self.buf
        if buf is not None:
            self.buf = None
            if buf:
                self.parts.append(buf.decode("utf-8"))

    def snapshot(self) -> Block:
        if self.buf is not None:
            self.flush()
        if len(self.parts) > 1:
            self.parts = ["".join(self.parts)]
        return Block(
            type=self.type,
            agent=self.agent,
            complete=self.complete,
            content=self.parts[0] if self.parts else "",
            id=self.id,
            name=self.name,
            citations=tuple(self.citations),
            images=tuple(self.images),
        )


class Reconstructor:
    """Incremental rebuilder: ``feed(line)`` as lines arrive, ``transcript()`` at any moment.

    Attributes:
        max_block_bytes: cap on the delta bytes one open block may gather.
        max_open_blocks: cap on blocks open at once, across agents.
    """

    __slots__ = (
        "_agents",
        "_citing",
        "_count",
        "_done",
        "_fast",
        "_fast_sizes",
        "_last_text",
        "_open",
        "max_block_bytes",
        "max_open_blocks",
    )

    def __init__(
        self,
        *,
        max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
        max_open_blocks: int = DEFAULT_MAX_OPEN_BLOCKS,
    ) -> None:
        """Create an empty reconstructor."""
        self.max_block_bytes: Final = max_block_bytes
        self.max_open_blocks: Final = max_open_blocks
        self._agents: dict[str, list[_Open]] = {}
        # Keys are BlockKeys; typed as plain pairs because feed() looks them up with
        # plain tuples (equal, same hash) to skip building a named tuple per line.
        self._open: dict[tuple[str, str], _Open] = {}
        self._last_text: dict[str, _Open] = {}
        self._citing: dict[str, _Open] = {}  # agent -> text block an open citation block cites
        self._done = False
        self._count = 0
        #: ``feed_many``'s fast path (``_feed_run``): the exact bytes a ``final: false``
        #: line of an open text or thinking block starts with, up to its delta value, as
        #: this codec encodes them, mapped to the block's key; and their distinct lengths.
        self._fast: dict[bytes, tuple[str, str]] = {}
        self._fast_sizes: list[int] = []

    @property
    def done(self) -> bool:
        """``[DONE]`` was seen."""
        return self._done

    def feed(self, line: bytes | str | RawLine, *, position: Position | None = None) -> None:
        """Apply one envelope line (or ``[DONE]``).

        Args:
            line: the JSON text of one envelope, as bytes or str, or a ``RawLine``
                from ``StreamReader`` (whose position is used).
            position: where the line starts, for errors.

        Raises:
            DecodeError: not JSON, not UTF-8, or a block over ``max_block_bytes``.
            ValidationError: a base field missing or of the wrong type; unknown type.
            SequenceError: a line after ``[DONE]`` that is not a ``meta_init``; an image or
                a citation with nothing to attach to; an ``id`` that changes inside an
                open block.
        """
        if isinstance(line, RawLine):
            position = line.position
            line = line.data
        index = self._count
        self._count += 1
        if line == DONE_DATA or line == b"[DONE]":
            self._step_phase(Mark.TERMINATOR, position, index)
            return
        wire = self._read(line, position, index)
        if self._done:
            # In READING a line leaves the phase as it is (PHASES): only DONE needs the step.
            self._step_phase(Mark.META_INIT if wire.type == "meta_init" else Mark.LINE, position, index)
        self._apply(wire, line, position, index)

    def _read(self, line: bytes | str, position: Position | None, index: int) -> _Wire:
        """Decode a line; after ``[DONE]`` one that cannot be read is content after ``[DONE]``."""
        # The position is built only when an error needs it: on the hot path it was a
        # third of the time spent here.
        try:
            return decode_lenient(line)
        except EnvelopeError as exc:
            if self._done:
                raise _after_done(_where(position, index)) from None
            raise exc.at(_where(position, index)) from None

    def _step_phase(self, mark: Mark, position: Position | None, index: int) -> None:
        """Move the recording's machine (``PHASES``); a missing pair is content after ``[DONE]`` (spec §8.5-b)."""
        phase = Phase.DONE if self._done else Phase.READING
        after = PHASES.get((phase, mark))
        if after is None:
            raise _after_done(_where(position, index))
        if phase is Phase.DONE:
            # The next response. No block stays open across [DONE]: one the previous
            # response left open stays incomplete, and its key is free again. The agents
            # go on: blocks append to their lists, a citation may cite the last text.
            # Cleared in place: feed_many's loop holds these dicts.
            self._open.clear()
            self._citing.clear()
        self._done = after is Phase.DONE

    def _apply(self, wire: _Wire, line: bytes | str, position: Position | None, index: int) -> None:
        """Send a decoded line where its type says: an image, a citation, or its key's machine."""
        kind = wire.type
        if kind not in _KNOWN_TYPES:
            raise ValidationError(
                f"unknown envelope type {kind!r}", position=_where(position, index), field="$.type", section="4.1"
            )
        if kind == "tool_result_image":
            self._image(wire, _where(position, index))
        elif kind == "citation":
            self._citation(wire, line, _where(position, index))
        else:
            self._route(wire, position, index)

    def _route(self, wire: _Wire, position: Position | None, index: int) -> None:
        """One step of the ``(agent, type)`` machine (``TRANSITIONS``, spec §7.2)."""
        kind = wire.type
        agent = wire.agent
        # A plain tuple finds a BlockKey in a dict (equal and same hash); the named
        # tuple is built only when a block opens or an error names it.
        block = self._open.get((agent, kind))
        # Every (state, chunk|final) pair is in TRANSITIONS; _AFTER is that table with
        # the enums resolved once (see its definition).
        after = _AFTER[block is not None][wire.final]
        if block is None:
            block = self._open_block(wire, after, position, index)
        elif wire.id is not msgspec.UNSET and block.id is not None and wire.id != block.id:
            raise self._id_changed(block, wire.id, position, index)
        delta = wire.delta
        if delta:
            # Inline: a call per line for this was a tenth of feed()'s time.
            block.size += len(delta)
            if block.size > self.max_block_bytes:
                raise self._too_big(block, position, index)
            if block.buf is not None:
                block.buf += delta.encode("utf-8")  # no lone surrogate in it (spec §6.4): it encodes
            else:
                block.parts.append(delta)
        if after is State.IDLE:
            self._close_block(block, position, index)

    def _open_block(self, wire: _Wire, after: State, position: Position | None, index: int) -> _Open:
        """IDLE -> OPEN, or IDLE -> IDLE for a one-line block (spec §7.2-a, §7.2-b)."""
        kind, agent = wire.type, wire.agent
        wid = None if wire.id is msgspec.UNSET else wire.id
        wname = None if wire.name is msgspec.UNSET else wire.name
        block = _Open(kind, agent, wid, wname)
        if after is State.OPEN:
            if len(self._open) >= self.max_open_blocks:
                raise DecodeError(
                    f"more than max_open_blocks={self.max_open_blocks} blocks open at once",
                    position=_where(position, index),
                    key=BlockKey(agent, kind),
                )
            self._open[BlockKey(agent, kind)] = block
        self._agents.setdefault(agent, []).append(block)
        return block

    @staticmethod
    def _id_changed(block: _Open, wid: str, position: Position | None, index: int) -> SequenceError:
        """OPEN -> ?: a line whose id differs from its open block's (spec §7.2-d)."""
        # spec §7.2-d: a buffered block keeps its id across its lines
        return SequenceError(
            f"id {wid!r} differs from the open block's id {block.id!r}",
            position=_where(position, index),
            field="$.id",
            key=BlockKey(block.agent, block.type),
            section="7.2-d",
        )

    def _too_big(self, block: _Open, position: Position | None, index: int) -> DecodeError:
        """A block past ``max_block_bytes`` (spec/limits.md L1)."""
        return DecodeError(
            f"block larger than max_block_bytes={self.max_block_bytes}",
            position=_where(position, index),
            key=BlockKey(block.agent, block.type),
        )

    def _close_block(self, block: _Open, position: Position | None, index: int) -> None:
        """-> IDLE: the block is complete (spec §7.2-c); a text may be cited, an error may discard."""
        block.complete = True
        kind, agent = block.type, block.agent
        self._open.pop((agent, kind), None)
        if kind == "text":
            block.prev_text = self._last_text.get(agent)
            self._last_text[agent] = block
        elif kind == "error":
            self._maybe_discard(block, position, index)

    def _maybe_discard(self, block: _Open, position: Position | None, index: int) -> None:
        """Apply a discarded-attempt signal carried by a just-completed error block (spec §7.7).

        Error blocks are rare, so each is parsed once here when it completes.
        """
        block.flush()
        data = _parse("".join(block.parts))
        if not isinstance(data, dict) or data.get("type") != "attempt_discarded":
            return
        count = data.get("discard_blocks")
        where = _where(position, index)
        key = BlockKey(block.agent, "error")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise SequenceError(
                f"discard_blocks must be a non-negative integer, got {count!r}",
                position=where,
                key=key,
                section="7.7-b",
            )
        blocks = self._agents[block.agent]
        # Search from the end: only the blocks opened while this error block was open lie
        # after it, and those intervals do not overlap, so the searches stay linear in all
        # (issue 18 §1: copying the list per error block was quadratic).
        at = len(blocks) - 1
        while blocks[at] is not block:
            at -= 1
        if count > at:
            raise SequenceError(
                f"attempt_discarded asks to drop {count} blocks, but only {at} precede it",
                position=where,
                key=key,
                section="7.7-b",
            )
        if any(not b.complete for b in blocks[at - count : at]):
            raise SequenceError(
                "attempt_discarded would drop a block that is still open",
                position=where,
                key=key,
                section="7.7-b",
            )
        self._drop(block.agent, blocks, at - count, at)

    def _drop(self, agent: str, blocks: list[_Open], start: int, stop: int) -> None:
        """spec §7.7-a: the blocks ``start:stop`` go (the signal after them stays); the cited text moves back."""
        dropped = blocks[start:stop]
        del blocks[start:stop]
        for gone in dropped:
            gone.dropped = True
        last = self._last_text.get(agent)
        if last is not None and last.dropped:
            # The text a later citation cites is the last one left: walk back over the
            # dropped ones. Each dropped block is passed once, ever (it stays dropped).
            while last is not None and last.dropped:
                last = last.prev_text
            if last is not None:
                self._last_text[agent] = last
            else:
                del self._last_text[agent]

    def feed_many(self, lines: Iterable[bytes | str | RawLine]) -> None:
        """Apply envelope lines in order: the same as ``feed`` on each, in fewer steps.

        The blocks, the errors (message, position, envelope index) and the state after
        an error are exactly those of calling ``feed(line)`` for each line in turn: the
        lines before a bad one are applied, then its error is raised. The speed comes
        from handling the common line (a chunk of a block, opening, continuing or
        closing it) in one loop with no call per line besides the JSON decoding; any
        other line (``[DONE]``, a citation or image, an error) goes through ``feed``.

        Args:
            lines: envelope lines as ``feed`` takes them. The batch that
                ``StreamReader.feed_batch`` returns is the fast case (no ``RawLine`` is
                built); a list or tuple is read directly; any other iterable is fed one
                line at a time.

        Raises:
            DecodeError: as ``feed``, for the first line that ``feed`` would refuse.
        """
        if isinstance(lines, _LineBatch):
            self._feed_run(lines.data, lines.position)
        elif isinstance(lines, list | tuple):
            items: Sequence[bytes | str | RawLine] = lines

            def where(index: int) -> Position | None:
                item = items[index]
                return item.position if isinstance(item, RawLine) else None

            self._feed_run([x.data if isinstance(x, RawLine) else x for x in items], where)
        else:
            for line in lines:
                self.feed(line)

    # Over 60 lines on purpose: this is feed()'s common path (_read, _step_phase, _apply,
    # _route and its moves) inlined into one loop, with the loop's lookups hoisted into
    # locals; one call per line for any of those steps cost more than the decoding
    # (issue 17 §3's read target). Every line it does not handle goes to feed() whole.
    def _feed_run(self, data: Sequence[bytes | str], where: Callable[[int], Position | None]) -> None:
        """``feed`` each of ``data``; ``where(k)`` is line k's position, asked only when ``feed`` needs it.

        The loop is ``feed``'s common path, inlined: decode, route by ``(agent, type)``
        through ``_AFTER``, append the delta. Before it changes anything for a line, it
        checks every condition under which ``feed`` would do something else (a decode
        error, ``[DONE]``, an unknown type, a citation or image, a limit, an ``id``
        change); such a line is handed to ``feed`` itself, untouched, so its effects and
        its error are ``feed``'s by construction. The property test of ``feed_many``
        against ``feed`` guards the inlined part.
        """
        decode = _lenient.decode
        opened = self._open
        agents = self._agents
        last_text = self._last_text
        max_open = self.max_open_blocks
        max_size = self.max_block_bytes
        after_of = _AFTER
        is_open = State.OPEN
        unset = msgspec.UNSET
        routed = _ROUTED_TYPES
        base = self._count
        done = self._done
        fast = self._fast
        fast_sizes = self._fast_sizes
        decode_delta = _delta_decoder.decode
        route_run = _route_run
        count = len(data)
        k = -1
        while True:
            k += 1
            if k >= count:
                break
            line = data[k]
            if done:
                # After [DONE] only feed() decides (spec §8.2-a; a meta_init starts the next response).
                self._feed_one(data, k, base, where)
                done = self._done
                continue
            if route_run is not None and fast_sizes:
                # The compiled build: this line and the continuation lines after it, as many
                # as the test below takes, in one call (``_cread``: no call per line). A line
                # it leaves takes the general path: the test below would only find the rare
                # lines C leaves to it (an escaped surrogate pair, whitespace).
                taken = route_run(data, k, fast, fast_sizes, opened, max_size)
                if taken > k:
                    k = taken - 1
                    continue
            elif fast_sizes and isinstance(line, bytes) and line.endswith(b"}"):
                # The fast path: a line that is exactly a known prefix (type, agent,
                # final: false, as this codec encodes them), one JSON string and the
                # open block's tail (its id and name, as this codec encodes them, and
                # ``}``) is a chunk of that key's open block. It decodes, leniently, to
                # those fields and nothing else, and the id is the block's, so only the
                # delta is decoded; anything else about the line (no block open, a
                # string that does not decode, other bytes, a limit) takes the path
                # below, untouched.
                size = 0
                key: tuple[str, str] | None = None
                for size in fast_sizes:
                    key = fast.get(line[:size])
                    if key is not None:
                        break
                if key is not None:
                    block = opened.get(key)
                    tail = block.tail if block is not None else None
                    if block is not None and tail is not None and line.endswith(tail):
                        try:
                            delta = decode_delta(line[size : len(line) - len(tail)])
                        except Exception:  # msgspec's errors, and UnicodeDecodeError for bad UTF-8
                            pass
                        else:
                            size = len(delta)
                            if block.size + size <= max_size:
                                if size:
                                    block.size += size
                                    block.parts.append(delta)
                                continue
            try:
                wire: _Wire | None = decode(line)
            except Exception:  # feed() raises it, translated and placed (outside this handler)
                wire = None
            if wire is None or wire.type not in routed:
                self._feed_one(data, k, base, where)
                done = self._done
                continue
            kind = wire.type
            agent = wire.agent
            block = opened.get((agent, kind))
            after = after_of[block is not None][wire.final]
            delta = wire.delta
            size = len(delta)
            if block is None:
                if size > max_size or (after is is_open and len(opened) >= max_open):
                    self._feed_one(data, k, base, where)  # raises: a limit
                    continue  # pragma: no cover  # feed() raised
                wid = wire.id
                wname = wire.name
                block = _Open(kind, agent, None if wid is unset else wid, None if wname is unset else wname)
                blocks = agents.get(agent)
                if blocks is None:
                    agents[agent] = [block]
                else:
                    blocks.append(block)
                if after is is_open:
                    opened[BlockKey(agent, kind)] = block
                    block.tail = _tail(block.id, block.name)
                    self._fast_prefix(kind, agent)
                    if route_run is not None:
                        # The compiled build: the whole content as UTF-8, decoded once (spec [RF1-b]).
                        block.buf = bytearray()
            else:
                wid = wire.id
                if block.size + size > max_size or (wid is not unset and block.id is not None and wid != block.id):
                    self._feed_one(data, k, base, where)  # raises: a limit, or an id change
                    continue  # pragma: no cover  # feed() raised
            if size:
                block.size += size
                if block.buf is not None:
                    block.buf += delta.encode("utf-8")  # no lone surrogate in it (spec §6.4): it encodes
                else:
                    block.parts.append(delta)
            if after is not is_open:
                block.complete = True
                opened.pop((agent, kind), None)
                if kind == "text":
                    block.prev_text = last_text.get(agent)
                    last_text[agent] = block
        self._count = base + count

    def _fast_prefix(self, kind: str, agent: str) -> None:
        """Learn the bytes a ``final: false`` line of ``(agent, kind)`` starts with (``_feed_run``)."""
        prefix = b"".join((b'{"type":', _encode(kind), b',"agent":', _encode(agent), b',"final":false,"delta":'))
        if prefix not in self._fast:
            self._fast[prefix] = (agent, kind)
            if len(prefix) not in self._fast_sizes:
                self._fast_sizes.append(len(prefix))

    def _feed_one(
        self, data: Sequence[bytes | str], k: int, base: int, where: Callable[[int], Position | None]
    ) -> None:
        """``feed`` line ``k`` of a run as it would have been fed alone (index ``base + k``)."""
        self._count = base + k
        self.feed(data[k], position=where(k))

    def _image(self, wire: Any, where: Position) -> None:
        key = BlockKey(wire.agent, "tool_result")
        block = self._open.get(key)
        if block is None or TRANSITIONS.get((State.OPEN, Input.IMAGE)) is not State.OPEN:
            # (IDLE, IMAGE) is not in the table: spec §7.3-a
            raise SequenceError(
                "tool_result_image with no open tool_result of its agent",
                position=where,
                key=key,
                section="7.3-a",
            )
        wid = None if wire.id is msgspec.UNSET else wire.id
        if wid is not None and block.id is not None and wid != block.id:
            raise SequenceError(
                f"tool_result_image id {wid!r} differs from the open tool_result's id {block.id!r}",
                position=where,
                field="$.id",
                key=key,
                section="7.3-b",
            )
        if wire.src is msgspec.UNSET or wire.media_type is msgspec.UNSET:
            raise ValidationError(
                "tool_result_image needs src and media_type",
                position=where,
                field="$.src" if wire.src is msgspec.UNSET else "$.media_type",
                section="4.9",
            )
        block.images.append({"src": wire.src, "media_type": wire.media_type})

    def _citation(self, wire: Any, line: bytes | str, where: Position) -> None:
        agent = wire.agent
        if any(isinstance(getattr(wire, name), list | dict) for name in CITATION_FIELDS):
            # The extras are kept as parsed: hold them to the depth limit (spec/limits.md L2-a).
            data = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
            offset = too_deep(data, MAX_NESTING_DEPTH)
            if offset is not None:
                raise nesting_error(offset).at(where)
        key = BlockKey(agent, "citation")
        target = self._citing.get(agent)
        if target is None:
            target = self._last_text.get(agent)
            if target is None:
                raise SequenceError(
                    "citation with no completed text block of its agent before it",
                    position=where,
                    key=key,
                    section="7.4-a",
                )
            self._citing[agent] = target
            self._open[key] = target
        if wire.citation_type is msgspec.UNSET:
            raise ValidationError(
                "citation needs citation_type", position=where, field="$.citation_type", section="4.5"
            )
        citation: dict[str, Any] = {"cited_text": wire.delta}
        for name in CITATION_FIELDS:
            value = getattr(wire, name)
            if value is not msgspec.UNSET:
                citation[name] = value
        target.citations.append(citation)
        if wire.final:
            del self._citing[agent]
            del self._open[key]

    def open_blocks(self) -> list[BlockKey]:
        """Keys of the blocks open now, in the order they opened."""
        return [BlockKey(*key) for key in self._open]

    def transcript(self) -> Transcript:
        """A snapshot of every block so far, open ones included."""
        return Transcript(
            done=self._done,
            agents={agent: tuple(b.snapshot() for b in blocks) for agent, blocks in self._agents.items()},
        )

    def close(self) -> list[BlockKey]:
        """Signal the end of input; return the keys of blocks left open (they stay incomplete)."""
        return self.open_blocks()


def reconstruct(lines: Iterable[bytes | str | RawLine]) -> Transcript:
    """Rebuild a whole stream of envelope lines (``[DONE]`` included, if present).

    Args:
        lines: envelope lines in arrival order; each line's index is its position in errors.

    Returns:
        The transcript.

    Raises:
        DecodeError: see ``Reconstructor.feed``.
    """
    rebuilder = Reconstructor()
    for line in lines:
        rebuilder.feed(line)
    return rebuilder.transcript()
