"""The line machine: envelope lines in, violations out (``Validator``), and ``validate``.

Owns ``Validator``: ``feed`` reads a line (``_parse``), checks its fields and bound,
dispatches the type's line rules from ``_LINE_RULES`` and routes it to its block
(``_BlockRules._route``); ``feed_many``'s batch loop ``_run`` takes the common line
inline and hands every other line to ``feed``'s path; the SSE line rules (W112, W113,
W118) and the end of the stream (``close``) are here too, fed by ``StreamValidator``.

Memory: a ``Validator`` holds, per agent, a handful of flags and the ids of tool calls
still waiting for their result (at most ``MAX_PENDING_IDS`` each); per open block, its
position and, for the types whose payload is JSON, the deltas so far (at most
``max_payload_bytes``). It never holds a closed block or the stream.

Does not own: splitting bytes into lines (``_validator_stream``, ``StreamReader``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, cast

import msgspec

from ._decoder import DONE_DATA, RawLine, _LineBatch
from ._depth import too_deep
from ._errors import DecodeError
from ._limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINE_BYTES, MAX_NESTING_DEPTH
from ._quote import quote
from ._speedups import loaded
from ._types import STREAMED_TYPES
from ._utf8 import utf8_fault

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

from ._validator_blocks import _BlockRules
from ._validator_codes import (
    _ALLOWED,
    _EXTRAS,
    _ID_TYPES,
    _INLINE_TYPES,
    _JSON_TYPES,
    _KNOWN_TYPES,
    SEED_UNKNOWN_TYPES,
    SEED_WHOLE_TYPES,
    Profile,
    Violation,
    _decode_json,
    _encode_json,
    _rule,
    _violation,
)
from ._validator_rules import (
    _LINE_RULES,
    _SSE_FIELDS,
    _Agent,
    _Block,
    _e100_not_utf8,
    _e101_not_json,
    _e102_not_object,
    _e103_base_fields,
    _e104_unknown_type,
    _e105_unknown_fields,
    _e106_extras,
    _e109_line_over_cap,
    _e111_data_lines,
    _e116_too_deep,
    _e117_lone_surrogate,
    _e167_no_envelope,
    _e169_retry_too_long,
    _id_key,
    _lone_surrogate,
    _opens_response,
    _remember,
    _w113_named_event,
    _w161_no_done,
)


class _Common(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """The fields a line of ``Validator._run``'s common case may have, each of its JSON type.

    Decoding into it fails (and the line takes ``feed``'s path) unless the line is a JSON
    object with the four base fields of their types and no field but ``id`` and ``name``
    (strings when present); duplicate keys resolve as in a dict (the last one wins).
    """

    type: str
    agent: str
    final: bool
    delta: str
    id: str | msgspec.UnsetType = msgspec.UNSET
    name: str | msgspec.UnsetType = msgspec.UNSET


_decode_common = msgspec.json.Decoder(_Common).decode


def _load_take_run() -> Callable[[Sequence[bytes | str], int, tuple[bytes, ...], int], int] | None:
    """``_cvalid.take_run`` in the compiled build; ``None`` in the pure one (all or none)."""
    if loaded() != "compiled":
        return None
    from ._cvalid import take_run  # only the compiled build has it

    return take_run


#: The compiled build's pass over the validator's ordinary lines (``Validator._run``, spec VF1-a).
_take_run: Final = _load_take_run()


def _fast_prefixes(agents: dict[str, _Agent]) -> tuple[bytes, ...]:
    """The line prefixes ``take_run`` may count (spec VF1-b): one per open block whose chunk ``_run`` only counts.

    A block qualifies when its agent has not sent its ``meta_final`` (E164), its type is one
    ``_run`` takes inline, its deltas are not kept (``parts`` is None: no payload check, no
    W149) and, for the id types, its id and name are strings (E106, E127). The prefix is
    the encoding of ``{"type":T,"agent":A,"final":false,`` (then ``"id":I,"name":N,``) and
    ``"delta":``: a line that is this, one JSON string and ``}`` decodes to a chunk of that
    block with those fields and no other, the case ``_run`` counts and reports nothing on.
    """
    out: list[bytes] = []
    for agent, st in agents.items():
        if st.final_done:
            continue
        for kind, block in st.open.items():
            if block.parts is not None or kind not in _INLINE_TYPES:
                continue
            prefix = block.prefix
            if prefix is None:  # built once a block: its agent, type, id and name do not change
                prefix = block.prefix = _prefix(agent, kind, block)
            if prefix:
                out.append(prefix)
    return tuple(out)


def _prefix(agent: str, kind: str, block: _Block) -> bytes:
    """A block's line prefix for ``take_run``; empty for an id type whose id or name is not a string."""
    line = b'{"type":' + _encode_json(kind) + b',"agent":' + _encode_json(agent) + b',"final":false,'
    if kind in _ID_TYPES:
        if type(block.id) is not str or type(block.name) is not str:
            return b""
        line += b'"id":' + _encode_json(block.id) + b',"name":' + _encode_json(block.name) + b","
    return line + b'"delta":'


class Validator(_BlockRules):
    """Checks envelope lines one at a time: ``feed(line) -> list[Violation]``, then ``close()``.

    Never raises on any input line: every fault is a ``Violation``. Lines given as plain
    ``bytes``/``str`` are numbered as the lines of a JSON-lines file (1, 2, ...; offsets
    as if each ended in one LF); a ``RawLine`` from ``StreamReader`` brings its own position.

    Attributes:
        max_bytes: the bound on one line (spec §6.1) for E107/W108.
        max_payload_bytes: the most bytes of one open JSON payload held for checking.
        profile: the profile the stream is judged by (spec §10).
    """

    __slots__ = (
        "_closed",
        "_count",
        "_id_reported",
        "_last",
        "_last_id",
        "_next_offset",
        "_plain",
        "_refused",
        "_unknown_seen",
        "_unreadable_seen",
    )

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_payload_bytes: int = DEFAULT_MAX_LINE_BYTES,
        profile: Profile = "default",
        continuation: bool = False,
    ) -> None:
        """Create a validator.

        Args:
            max_bytes: the bound on one encoded envelope line (spec §6.1).
            max_payload_bytes: cap on the bytes of one open JSON payload kept for the
                payload checks; a larger payload is reported (W149), not checked.
            profile: ``"default"``, or ``"seed"``: the control types are sent whole,
                exempt from the bound, and one sent in several lines is W129 (spec §10.2).
            continuation: the stream's first response resumes one whose start it does not
                hold (the answer to a ``Last-Event-ID``, spec §2.1-c): what lay before its
                first line is not judged (validation.md [V2.1-e]).

        Raises:
            ValueError: an unknown profile.
        """
        if profile not in ("default", "seed"):
            raise ValueError(f"unknown profile {profile!r}; expected 'default' or 'seed'")
        self.max_bytes = max_bytes
        self.max_payload_bytes = max_payload_bytes
        self.profile = profile
        #: Types whose lines are exempt from the bound and must be one line (spec §10.2).
        self._whole_types: frozenset[str] = SEED_WHOLE_TYPES if profile == "seed" else frozenset()
        #: Types the profile's clients do not know (spec §10.2-d): E119.
        self._refused: frozenset[str] = SEED_UNKNOWN_TYPES if profile == "seed" else frozenset()
        self._agents: dict[str, _Agent] = {}
        self._continuation = continuation  # until the recording's next response (spec §8.5)
        self._count = 0  # lines fed, [DONE] included
        self._plain = 0  # plain (not RawLine) lines fed, blank ones included
        self._next_offset = 0  # for plain lines: offset of the next one
        self._last = (1, 0)  # position of the last line fed
        self._done = False
        self._done_reported = False
        self._closed = False
        self._open_count = 0
        self._epoch = 0
        # What the SSE line rules and the end of a recording need (fed by StreamValidator):
        self._unknown_seen = False  # a W112 was reported
        self._last_id: str | None = None  # the last SSE id seen (spec §2.1-d)
        self._id_reported = False  # a W118 was reported
        self._unreadable_seen = False  # an E100 or E109 from the reader was reported

    # -- introspection -------------------------------------------------------------

    def open_blocks(self) -> list[tuple[str, str]]:
        """The ``(agent, type)`` keys of the blocks open now."""
        return [(agent, kind) for agent, st in self._agents.items() for kind in st.open]

    @property
    def held_bytes(self) -> int:
        """Bytes of payload held for the payload checks (only open JSON blocks)."""
        return sum(b.size for st in self._agents.values() for b in st.open.values() if b.parts is not None)

    # -- feeding ---------------------------------------------------------------------

    def feed(self, line: bytes | str | RawLine) -> list[Violation]:
        """Check one envelope line (or ``[DONE]``).

        Args:
            line: the JSON text of one envelope as bytes or str (a trailing LF or CRLF
                is dropped; a blank line is skipped), or a ``RawLine``.

        Returns:
            The violations this line reveals, in the order found (a block's payload
            violations come with its final line but carry the block's first line).

        Raises:
            DecodeError: ``feed()`` after ``close()`` (a caller's bug, not the input's).
        """
        if self._closed:
            raise DecodeError("feed() after close()")
        out: list[Violation] = []
        if isinstance(line, RawLine):
            data: str | bytes = line.data
            lno, off = line.line, line.offset
        else:
            self._plain += 1
            lno, off = self._plain, self._next_offset
            if isinstance(line, bytes):
                length = len(line)
                data = line.removesuffix(b"\n").removesuffix(b"\r")
            else:
                length = len(line) if line.isascii() else len(line.encode("utf-8", "surrogatepass"))
                data = line.removesuffix("\n").removesuffix("\r")
            # numbered as the lines of a JSON-lines file: each ends in one LF
            self._next_offset += length + (1 if len(data) == len(line) else 0)
            if not data.strip():
                return out
        if isinstance(data, str):
            self._text(data, lno, off, out)
        else:
            self._bytes(data, lno, off, out)
        return out

    def feed_many(self, lines: Iterable[bytes | str | RawLine]) -> list[Violation]:
        """Check envelope lines in order: the same as ``feed`` on each, in fewer steps.

        The violations (codes, positions, messages, in order) and the state afterwards
        are exactly those of calling ``feed(line)`` for each line in turn. The speed
        comes from checking the common line (a chunk of a block of a known agent that
        opens, continues or closes it and breaks no rule) in one loop with no call per
        line besides the JSON decoding; any other line goes through ``feed``'s own path.

        Args:
            lines: envelope lines as ``feed`` takes them. The batch that
                ``StreamReader.feed_batch`` returns is the fast case (no ``RawLine`` is
                built); a list or tuple of ``RawLine`` is read directly; anything else is
                fed one line at a time.

        Returns:
            The violations these lines reveal, in the order ``feed`` would give them.

        Raises:
            DecodeError: ``feed_many()`` after ``close()`` (a caller's bug, not the input's).
        """
        if self._closed:
            raise DecodeError("feed_many() after close()")
        out: list[Violation] = []
        if isinstance(lines, _LineBatch):
            position = lines.position

            def where(index: int) -> tuple[int, int]:
                at = position(index)
                return at.line or 0, at.offset or 0

            self._run(lines.data, where, out)
        elif isinstance(lines, list | tuple) and all(isinstance(x, RawLine) for x in lines):
            raws: Sequence[RawLine] = lines
            self._run([x.data for x in raws], lambda index: (raws[index].line, raws[index].offset), out)
        else:
            for line in lines:
                out += self.feed(line)
        return out

    def _bytes(self, data: bytes, lno: int, off: int, out: list[Violation]) -> None:
        """Check one envelope line given as bytes at a known position (``feed``'s bytes path)."""
        self._count += 1
        self._last = (lno, off)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            # Where and why in our words (_utf8, spec/limits.md L5-a), not the decoder's.
            at, reason = utf8_fault(data) or (0, "")
            _e100_not_utf8(f"invalid UTF-8 at column {at + 1} ({reason})", lno, off, out, at + 1)
            return
        self._line(text, len(data), lno, off, out)

    # Over 60 lines on purpose: this is the hot loop of the batch path, with the common
    # line's checks inlined so that a valid line costs one decode and no call; splitting
    # it into functions would add calls per line (the speed it exists for). Every line it
    # does not take goes to _slow, and a property test compares it with feed line by line.
    # Measured (issue 28 §3): StreamValidator over the benchmark's 4-agent SSE stream
    # (16 MiB, pure build) takes 2.25x as long when this loop hands every line to _slow.
    def _run(self, data: Sequence[bytes | str], where: Callable[[int], tuple[int, int]], out: list[Violation]) -> None:
        """Check each of ``data`` as ``feed`` checks a ``RawLine``; ``where(k)`` is line k's ``(line, offset)``.

        The loop is ``_line``'s common path and ``_route``'s, inlined, for a line that
        gives no violation. It decodes into ``_Common`` (no dict; the decoder does the
        base-field and unknown-field checks), then takes a known agent's chunk of a block
        of a type with no line checks of its own (not citation, server_tool_result,
        tool_result_image), within the bound, whose block is open or opens (not a meta_init, not a tool_result whose
        call is unknown) without a changed id or name and within ``max_payload_bytes``.
        Every such condition is tested before the line changes anything; a line that
        fails one goes to ``_text``/``_bytes``, untouched, so its violations and effects
        are ``feed``'s by construction. A closing block's payload is checked by
        ``_closed_block``, as ``_route`` does. ``where`` is asked only for a line that
        opens or closes a block or leaves the loop, and for the last line. The property
        test of this path against ``feed`` guards the inlined part.
        """
        count = len(data)
        if not count:
            return
        decode = _decode_common
        decode_error = msgspec.MsgspecError
        unset = msgspec.UNSET
        agents = self._agents
        inline_types = _INLINE_TYPES
        id_types = _ID_TYPES
        json_types = _JSON_TYPES
        streamed = STREAMED_TYPES
        max_bytes = self.max_bytes
        max_payload = self.max_payload_bytes
        whole_types = self._whole_types
        done = self._done
        inline = 0
        take = _take_run  # the compiled build's C pass over the ordinary lines (spec VF1-a), or None
        prefixes: tuple[bytes, ...] = ()
        built = -1  # the _epoch prefixes was built at (spec VF2-a)
        taken = 0  # data[:taken] is done
        for k, line in enumerate(data):
            if k < taken:
                continue  # counted by take
            if take is not None and not done:
                if built != self._epoch:
                    prefixes = _fast_prefixes(agents)
                    built = self._epoch
                if prefixes:
                    taken = take(data, k, prefixes, max_bytes)
                    if taken > k:
                        inline += taken - k
                        continue
            if done:
                self._slow(line, where(k), out)
                done = self._done  # a meta_init may have started the next response (spec §8.5)
                continue
            if isinstance(line, bytes) or line.isascii():
                size = len(line)
            else:
                try:
                    size = len(line.encode("utf-8"))
                except UnicodeEncodeError:  # a lone surrogate: E100
                    self._slow(line, where(k), out)
                    continue
            try:
                wire = decode(line)
            except decode_error:  # not JSON, [DONE], or not the common case's fields
                self._slow(line, where(k), out)
                done = self._done
                continue
            kind = wire.type
            agent = wire.agent
            final = wire.final
            delta = wire.delta
            st = agents.get(agent)
            if (
                st is None  # the agent's first line
                or st.final_done  # after its meta_final: E164
                or kind not in inline_types  # E104, or checks of its own
                or size > max_bytes  # E107, W108
                or (final and delta and kind in streamed)  # E121
            ):
                self._slow(line, where(k), out)
                continue
            rid = wire.id
            rname = wire.name
            wid: str | None = None
            wname: str | None = None
            if kind in id_types:
                if type(rid) is not str or type(rname) is not str:  # E106
                    self._slow(line, where(k), out)
                    continue
                wid = rid
                wname = rname
            elif rid is not unset or rname is not unset:  # E105
                self._slow(line, where(k), out)
                continue
            block = st.open.get(kind)
            if block is None:
                if (
                    kind == "meta_init"  # E162 or the agent's first
                    or (st.seen is not None and kind not in st.seen)  # [V2.1-e] may have begun before
                    or "meta_compaction" in st.open  # E130
                    or (kind == "tool_result" and wid not in st.calls)  # W165
                    or (kind == "tool_call" and (wid in st.calls or wid in st.answered))  # an edit, or E168
                    or (not final and kind in whole_types)  # W129
                    or (not final and kind in json_types and len(delta) > max_payload)  # W149
                ):
                    self._slow(line, where(k), out)
                    continue
                inline += 1
                if wid is not None:  # the inline id types: tool_call, server_tool_call, tool_result
                    if kind == "tool_call":
                        _remember(st.calls, wid)
                    elif kind == "server_tool_call":
                        _remember(st.server_calls, wid)
                    else:
                        del st.calls[wid]
                        _remember(st.answered, wid)
                lno, off = where(k)
                if final:
                    self._closed_block(st, agent, kind, delta, lno, off, out)
                    continue
                block = _Block(lno, off, wid, wname, kind in json_types)
                st.open[kind] = block
                self._open_count += 1
                self._epoch += 1
                if block.parts is not None and delta:
                    block.size = len(delta)
                    block.parts.append(delta)
                continue
            parts = block.parts
            if (kind in id_types and (wid != block.id or wname != block.name)) or (  # E127
                parts is not None and block.size + len(delta) > max_payload  # W149
            ):
                self._slow(line, where(k), out)
                continue
            inline += 1
            if parts is not None and delta:
                block.size += len(delta)
                parts.append(delta)
            if final:
                del st.open[kind]
                self._open_count -= 1
                self._epoch += 1
                if kind in json_types:
                    payload = None if parts is None else "".join(parts)
                    self._closed_block(
                        st, agent, kind, payload, block.line, block.offset, out, where(k)[0], begun=block.begun
                    )
                elif kind == "text":
                    st.has_text = True
                    st.citations_closed = False
        self._count += inline
        self._last = where(count - 1)

    def _slow(self, line: bytes | str, at: tuple[int, int], out: list[Violation]) -> None:
        """One line of ``_run`` through ``feed``'s own path."""
        if isinstance(line, bytes):
            self._bytes(line, at[0], at[1], out)
        else:
            self._text(line, at[0], at[1], out)

    def _text(self, text: str, lno: int, off: int, out: list[Violation]) -> None:
        """Check one envelope line given as text at a known position (``feed``'s str path)."""
        self._count += 1
        self._last = (lno, off)
        if text.isascii():
            size = len(text)
        else:
            try:
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError as exc:
                message = f"lone surrogate U+{ord(text[exc.start]):04X} at character offset {exc.start} cannot be UTF-8"
                _e100_not_utf8(message, lno, off, out)
                return
        self._line(text, size, lno, off, out)

    def _line(self, text: str, size: int, lno: int, off: int, out: list[Violation]) -> None:
        if text == DONE_DATA:
            if self._done:
                self._e160_after_done(lno, off, out)
            self._done = True
            return
        if self._done:
            if _opens_response(text):
                # spec §8.5-a: in a recording, a meta_init after [DONE] starts the next response
                self._next_response(out)
            else:
                self._e160_after_done(lno, off, out)
        obj = self._parse(text, lno, off, out)
        if obj is None:
            return
        kind = obj.get("type")
        agent = obj.get("agent")
        final = obj.get("final")
        raw_delta = obj.get("delta")
        # The common case in one test: the four base fields of their types, a known type,
        # and no field the type does not allow. Then [V3.1-a], [V4.1-a] and [V3.4-a] hold
        # and the loops below that would report them are skipped (same findings, faster).
        if (
            type(kind) is str
            and type(agent) is str
            and type(final) is bool
            and type(raw_delta) is str
            and (allowed := _ALLOWED.get(kind)) is not None
            and obj.keys() <= allowed
        ):
            extras = _EXTRAS[kind]
            if extras:
                _e106_extras(obj, kind, extras, lno, off, agent, out)
            if kind in self._refused:
                self._e119_unknown_to_profile(kind, lno, off, agent, out)
            if size > self.max_bytes and kind not in self._whole_types:  # spec §10.2-b: exempt
                self._oversize(obj, kind, size, lno, off, agent, out)
            for rule in _LINE_RULES[final][kind]:
                rule(obj, kind, final, raw_delta, (lno, off, agent), out)
            self._route(obj, agent, kind, final, raw_delta, lno, off, out)
            return
        self._irregular(obj, kind, agent, final, raw_delta, size, lno, off, out)

    def _parse(self, text: str, lno: int, off: int, out: list[Violation]) -> dict[str, Any] | None:
        """The line's JSON object, or None with the violation that says why there is none."""
        deep = too_deep(text, MAX_NESTING_DEPTH)
        if deep is not None:
            at = len(text[:deep].encode("utf-8"))
            message = (
                f"the line nests arrays and objects deeper than {MAX_NESTING_DEPTH} levels "
                f"(column {at + 1}); it is not parsed (spec/limits.md)"
            )
            _e116_too_deep(message, lno, off, out, column=at + 1)
            return None
        try:
            obj = _decode_json(text)
        except msgspec.MsgspecError as exc:
            lone = _lone_surrogate(text)
            if lone is not None:
                _e117_lone_surrogate(text, lone, lno, off, out)
            else:
                _e101_not_json(text, exc, lno, off, out)
            return None
        if type(obj) is not dict:  # msgspec decodes a JSON object to exactly dict
            _e102_not_object(obj, lno, off, out)
            return None
        return cast("dict[str, Any]", obj)

    def _irregular(
        self,
        obj: dict[str, Any],
        kind: object,
        agent: object,
        final: object,
        raw_delta: object,
        size: int,
        lno: int,
        off: int,
        out: list[Violation],
    ) -> None:
        """A JSON object that is not the common case: each base or extra field fault, then routing if it can."""
        v_type = kind if isinstance(kind, str) else None
        v_agent = agent if isinstance(agent, str) else None
        _e103_base_fields(obj, lno, off, v_agent, v_type, out)
        if v_type is None:
            return
        if v_type not in _KNOWN_TYPES:
            _e104_unknown_type(v_type, lno, off, v_agent, out)
            return
        _e105_unknown_fields(obj, v_type, lno, off, v_agent, out)
        _e106_extras(obj, v_type, _EXTRAS[v_type], lno, off, v_agent, out)
        if v_type in self._refused:
            self._e119_unknown_to_profile(v_type, lno, off, v_agent, out)
        if size > self.max_bytes and v_type not in self._whole_types:  # spec §10.2-b: exempt
            self._oversize(obj, v_type, size, lno, off, v_agent, out)
        delta = raw_delta if isinstance(raw_delta, str) else ""
        for rule in _LINE_RULES[final is True][v_type]:
            rule(obj, v_type, final, delta, (lno, off, v_agent), out)
        if v_agent is None or type(final) is not bool:
            return  # no block to route the line to; the line-level violations say why
        self._route(obj, v_agent, v_type, final, delta, lno, off, out)

    def _event(self, data: str, lno: int, off: int, out: list[Violation]) -> None:
        """One SSE event's data: the envelope line, then E111 when the event had several data lines."""
        self._text(data, lno, off, out)
        if "\n" in data:
            _e111_data_lines(data, lno, off, out)

    def _sse_field(self, name: bytes, value: bytes, lno: int, off: int, out: list[Violation]) -> None:
        """An SSE field line other than ``data`` (the wrapper reads it; these rules judge it)."""
        if name == b"event":
            _w113_named_event(value.removeprefix(b" "), lno, off, out)
        elif name == b"id":
            self._w118_id_order(value.removeprefix(b" "), lno, off, out)
        elif name not in _SSE_FIELDS:
            self._w112_unknown_field(name, lno, off, out)

    def _sse_quiet(self, name: bytes, value: bytes) -> bool:
        """Whether ``_sse_field`` would say nothing on this line now; ids aside (``_ids_quiet`` judges a span's)."""
        if name == b"event":
            return value.removeprefix(b" ") in (b"", b"message")
        return name == b"id" or name in _SSE_FIELDS or self._unknown_seen

    def _ids_quiet(self, ids: list[bytes], done_in_span: bool) -> bool:
        """Whether a span's ids need no W118 and no reset; if so, take its last id (as ``_w118_id_order`` would).

        Otherwise the span goes line by line, where ``_w118_id_order`` reports and resets in
        place: a [DONE] in the span, or one before it, may start a new sequence (spec §8.5).
        """
        if self._done or done_in_span:
            return False
        last = self._last_id
        for value in ids:
            if not value or b"\x00" in value:
                continue
            text = value.decode("utf-8", "replace")
            if last is not None and not self._id_reported and not _id_key(last) < _id_key(text):
                return False
            last = text
        self._last_id = last
        return True

    @_rule("W112")
    def _w112_unknown_field(self, name: bytes, lno: int, off: int, out: list[Violation]) -> None:
        if self._unknown_seen:
            return
        self._unknown_seen = True
        # [V2.1-a] WHATWG ignores other fields; in a recording they mean a broken capture
        message = (
            f"SSE line with field {quote(name)} is ignored (not data, event, id or retry); "
            "later such lines are not reported"
        )
        out.append(_violation("W112", message, lno, off))

    @_rule("W118")
    def _w118_id_order(self, value: bytes, lno: int, off: int, out: list[Violation]) -> None:
        """spec §2.1-d: ids, when sent, strictly increase within a response (W118, once)."""
        if not value or b"\x00" in value:
            return  # an empty id resets the last event id; one with NUL is ignored (WHATWG)
        if self._done:
            self._last_id = None  # after [DONE] only a new response may follow (spec §8.5)
        text = value.decode("utf-8", "replace")
        last = self._last_id
        self._last_id = text
        if last is None or self._id_reported or _id_key(last) < _id_key(text):
            return
        self._id_reported = True
        message = (
            f"SSE id {quote(value)} does not increase on the id before it ({quote(last)}); a client "
            "resuming with Last-Event-ID could miss or repeat events (later ones are not reported)"
        )
        out.append(_violation("W118", message, lno, off))

    def _unreadable(self, message: str, lno: int, off: int, column: int, out: list[Violation]) -> None:
        """A line the reader refused, where the wrapper found it.

        E100 (not UTF-8), E169 (a ``retry:`` value too long) or E109 (over its cap).
        """
        self._unreadable_seen = True
        message += "; skipped to the next line"
        if "UTF-8" in message:  # the reader has no codes of its own; its refusals differ so
            _e100_not_utf8(message, lno, off, out, column)
        elif message.startswith("retry value"):
            _e169_retry_too_long(message, lno, off, column, out)
        else:
            _e109_line_over_cap(message, lno, off, column, out)

    def close(self) -> list[Violation]:
        """Signal the end of the stream; report blocks left open and a missing ``[DONE]``.

        Returns:
            The end-of-stream violations (E120 per open block, W161, E167).

        Raises:
            DecodeError: ``close()`` twice.
        """
        return self._end()

    def _end(self, read: int = 0, fmt: str | None = None) -> list[Violation]:
        """``close()``; ``read`` and ``fmt`` describe the bytes the wrapper read, for E167's message."""
        if self._closed:
            raise DecodeError("close() called twice")
        self._closed = True
        out: list[Violation] = []
        self._e120_unclosed(out)
        if self._count == 0:
            if not self._unreadable_seen:  # the input held lines; E100/E109 said why none could be read
                _e167_no_envelope(read, fmt, out)
        elif not self._done:
            _w161_no_done(*self._last, out)
        return out


def validate(
    lines: Iterable[bytes | str | RawLine],
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    profile: Profile = "default",
    continuation: bool = False,
) -> Iterator[Violation]:
    """Check a stream of envelope lines lazily, in bounded memory.

    Args:
        lines: envelope lines (``[DONE]`` included) as bytes, str or ``RawLine``.
        max_bytes: the bound on one line (spec §6.1).
        profile: the profile to judge by, ``"default"`` or ``"seed"`` (spec §10).
        continuation: the stream resumes one whose start it does not hold (``Validator``).

    Yields:
        Each violation as soon as it is known; the end-of-stream ones last.
    """
    validator = Validator(max_bytes=max_bytes, profile=profile, continuation=continuation)
    for line in lines:
        yield from validator.feed(line)
    yield from validator.close()
