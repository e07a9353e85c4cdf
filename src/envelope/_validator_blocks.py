"""The rules of a block's and the stream's flow, which read and move the line machine's state.

Owns ``_BlockRules``, a base of ``Validator`` that holds the state these rules share
(its slots: the agents, the open-block count, ``[DONE]`` seen, the profile and bounds):
routing a line to its block (``_route``: open, continue, close, spec §7.2), an agent's
first message and its calls (spec §8.1), a closing JSON block's payload checks
(spec §7.5), images and citations (spec §7.3, §7.4), the bound (E107/W108), and the
stream rules that need state (E119, E120, E160, W149).

Does not own: reading a line (``_validator_lines``), the rules that need no state
(``_validator_rules``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from ._depth import too_deep
from ._limits import MAX_CODE_POINT_BYTES, MAX_NESTING_DEPTH
from ._validator_codes import _ATOMIC, _ID_TYPES, _JSON_TYPES, Violation, _decode_json, _encode_json, _rule, _violation
from ._validator_rules import (
    _PAYLOAD_RULES,
    _Agent,
    _announce_resumed,
    _Block,
    _e107_over_bound,
    _e116_too_deep,
    _e122_image_outside,
    _e123_image_id,
    _e126_citation_without_text,
    _e127_id_changes,
    _e130_compaction_order,
    _e140_payload_not_json,
    _e141_payload_shape,
    _e162_meta_init_order,
    _e164_after_final,
    _e168_call_repeated,
    _remember,
    _w108_unavoidable,
    _w128_split_citations,
    _w129_split_control,
    _w163_first_message,
    _w165_unannounced_result,
    _w166_unannounced_server_result,
)

if TYPE_CHECKING:
    from ._validator_codes import Profile


class _BlockRules:
    """The rules a line meets in its block's and its stream's flow; ``Validator`` is one."""

    __slots__ = (
        "_agents",
        "_continuation",
        "_done",
        "_done_reported",
        "_epoch",
        "_open_count",
        "_whole_types",
        "max_bytes",
        "max_payload_bytes",
        "profile",
    )

    # The line machine's state these rules read and move (``Validator`` holds the slots).
    profile: Profile
    max_bytes: int
    max_payload_bytes: int
    _agents: dict[str, _Agent]
    _continuation: bool
    _open_count: int
    #: Counts the changes that can change which blocks the batch loop's compiled pass may
    #: take (a block opened or closed, a payload no longer kept, a meta_final, a next
    #: response): ``Validator._run`` rebuilds its prefixes only when it moved (spec VF2-a).
    _epoch: int
    _done: bool
    _done_reported: bool
    _whole_types: frozenset[str]

    @_rule("E119")
    def _e119_unknown_to_profile(self, kind: str, lno: int, off: int, agent: str | None, out: list[Violation]) -> None:
        # spec §10.2-d: the seed profile's clients know only the seed's 13 types
        message = (
            f"{kind} under the {self.profile} profile, whose clients know only the seed's 13 types; "
            "a seed-profile producer puts compactions in meta_final's `compactions` and sends no meta_status"
        )
        out.append(_violation("E119", message, lno, off, agent, kind))

    def _next_response(self, out: list[Violation]) -> None:
        """A recording's next response starts: end this one (E120 per open block), start afresh."""
        self._e120_unclosed(out)
        self._agents.clear()  # in place: the batch loop (_run) holds this dict
        self._continuation = False  # [V2.1-e] a next response starts at its own start
        self._open_count = 0
        self._epoch += 1
        self._done = False
        self._done_reported = False

    @_rule("E120")
    def _e120_unclosed(self, out: list[Violation]) -> None:
        for agent, st in self._agents.items():
            for kind, block in st.open.items():
                # [V7.2-b] every block is closed by a final line before its response ends
                message = f"{kind} block opened here is never closed (no line with final: true follows)"
                out.append(_violation("E120", message, block.line, block.offset, agent, kind))

    @_rule("E160")
    def _e160_after_done(self, lno: int, off: int, out: list[Violation]) -> None:
        if not self._done_reported:
            self._done_reported = True
            # [V8.2-a] nothing follows [DONE]
            message = "content after [DONE] (later lines are checked but not reported again)"
            out.append(_violation("E160", message, lno, off))

    def _oversize(
        self, obj: dict[str, Any], kind: str, size: int, lno: int, off: int, agent: str | None, out: list[Violation]
    ) -> None:
        """A line over the bound: W108 when no writer could have kept it, else E107."""
        if kind in _ATOMIC:
            # [V6.5-a] citation and image lines are never split: over the bound is unavoidable
            _w108_unavoidable(kind, size, None, self.max_bytes, lno, off, agent, out)
            return
        # [V6.6-a] the fixed part is the line re-encoded with an empty delta, measured
        # with final: false (the longer form, which every non-last chunk has)
        fixed = len(_encode_json({**obj, "delta": "", "final": False}))
        if fixed + MAX_CODE_POINT_BYTES > self.max_bytes:
            _w108_unavoidable(kind, size, fixed, self.max_bytes, lno, off, agent, out)
        else:
            _e107_over_bound(kind, size, fixed, self.max_bytes, lno, off, agent, out)

    # -- blocks and the stream --------------------------------------------------------

    def _route(
        self,
        obj: dict[str, Any],
        agent: str,
        kind: str,
        final: bool,
        delta: str,
        lno: int,
        off: int,
        out: list[Violation],
    ) -> None:
        """The line's move in its key's block (spec §7.2): open, continue or close, with the rules each move meets."""
        st, first = self._agent(agent, kind, lno, off, out)
        # [V2.1-e] in a continuation, a block may have opened before the first line seen of it
        begun = (st.seen is not None and kind not in st.seen) or (first and self._continuation)
        if st.seen is not None:
            st.seen.add(kind)
        if kind in _ATOMIC:
            if kind == "citation":
                self._citation(st, agent, final, lno, off, out)
            else:
                self._image(obj, st, agent, lno, off, out)
            return
        block = st.open.get(kind)
        if block is None:
            if st.open:
                _e130_compaction_order(st, agent, kind, lno, off, out)
            wid = obj.get("id")
            self._announce(st, agent, kind, wid, first, lno, off, out)
            if final:
                self._closed_block(st, agent, kind, delta, lno, off, out, begun=begun)
                return
            if kind in self._whole_types:
                _w129_split_control(agent, kind, lno, off, out)
            block = _Block(lno, off, wid, obj.get("name"), kind in _JSON_TYPES, begun)
            st.open[kind] = block
            self._open_count += 1
            self._epoch += 1
        elif kind in _ID_TYPES:
            _e127_id_changes(block, obj.get("id"), obj.get("name"), agent, kind, lno, off, out)
        if block.parts is not None and delta:
            self._collect(block, block.parts, agent, kind, delta, out)
        if final:
            del st.open[kind]
            self._open_count -= 1
            self._epoch += 1
            payload = None if block.parts is None else "".join(block.parts)
            self._closed_block(st, agent, kind, payload, block.line, block.offset, out, lno, begun=block.begun)

    def _agent(self, agent: str, kind: str, lno: int, off: int, out: list[Violation]) -> tuple[_Agent, bool]:
        """The agent's state, and whether this is its first message (spec §8.1: W163, E164)."""
        st = self._agents.get(agent)
        first = st is None
        if st is None:
            st = self._agents[agent] = _Agent()
            if not self._continuation:
                _w163_first_message(agent, kind, lno, off, out)
            elif kind != "meta_init":
                # [V2.1-e] a continuation starts mid-stream: this agent began before it
                st.carried = True
                st.seen = set()
        if st.final_done:
            _e164_after_final(st, agent, kind, lno, off, out)
        return st, first

    def _announce(
        self, st: _Agent, agent: str, kind: str, wid: object, first: bool, lno: int, off: int, out: list[Violation]
    ) -> None:
        """A block opens: what it says about the agent's order and its calls (spec §8.1)."""
        if kind == "meta_init":
            _e162_meta_init_order(st, first, agent, lno, off, out)
            st.meta_init = True
        elif not isinstance(wid, str):
            return
        elif kind == "tool_call":
            _e168_call_repeated(st, wid, agent, lno, off, out)
        elif kind == "server_tool_call":
            _remember(st.server_calls, wid)
        elif st.carried:  # [V2.1-e] its call may be before the continuation: answered, not judged
            if kind == "tool_result":
                _remember(st.answered, wid)
            (st.calls if kind == "tool_result" else st.server_calls).pop(wid, None)
        elif kind == "tool_result":
            _w165_unannounced_result(st, wid, agent, lno, off, out)
        elif kind == "server_tool_result":
            _w166_unannounced_server_result(st, wid, agent, lno, off, out)

    @_rule("W149")
    def _collect(
        self, block: _Block, parts: list[str], agent: str, kind: str, delta: str, out: list[Violation]
    ) -> None:
        """Keep a JSON block's delta (``parts`` is ``block.parts``) for its payload check, up to
        ``max_payload_bytes`` (W149 past it)."""
        block.size += len(delta)
        if block.size > self.max_payload_bytes:
            # spec §7.5 (validation.md §5.3, §6): a payload this large is not held, so memory stays bounded
            block.parts = None
            self._epoch += 1
            block.unchecked = True
            message = f"{kind} payload over {self.max_payload_bytes} characters; its JSON is not checked"
            out.append(_violation("W149", message, block.line, block.offset, agent, kind))
        else:
            parts.append(delta)

    def _closed_block(
        self,
        st: _Agent,
        agent: str,
        kind: str,
        payload: str | None,
        lno: int,
        off: int,
        out: list[Violation],
        last: int | None = None,
        *,
        begun: bool = False,
    ) -> None:
        """A block has just closed: update the agent's flags and check its payload (spec §7.5).

        ``begun``: the block may have opened before a continuation's first line [V2.1-e],
        so a payload that does not parse may be the tail of one: not reported.
        """
        if kind == "text":
            st.has_text = True
            st.citations_closed = False
        elif kind == "meta_final":
            st.final_done = True
            self._epoch += 1
        if payload is None or kind not in _JSON_TYPES:
            return
        where = f"line {lno}" if last is None or last == lno else f"lines {lno}-{last}"
        deep = too_deep(payload, MAX_NESTING_DEPTH)
        if deep is not None:
            # spec §6.7-a: a payload nested deeper than the limit is not parsed (given raw, §7.5)
            message = (
                f"{kind} payload ({where}) nests arrays and objects deeper than {MAX_NESTING_DEPTH} "
                f"levels (character offset {deep}); it is not parsed (spec/limits.md)"
            )
            _e116_too_deep(message, lno, off, out, agent, kind)
            return
        try:
            value = _decode_json(payload)
        except msgspec.MsgspecError as exc:
            if not begun:
                _e140_payload_not_json(payload, exc, kind, where, agent, lno, off, out)
            return
        _e141_payload_shape(value, kind, where, agent, lno, off, out)
        if kind == "meta_init" and isinstance(value, dict):
            _announce_resumed(st, value)
        for rule in _PAYLOAD_RULES.get(kind, ()):
            rule(value, kind, where, agent, lno, off, out)

    def _image(self, obj: dict[str, Any], st: _Agent, agent: str, lno: int, off: int, out: list[Violation]) -> None:
        """An image joins the open tool_result of its agent (spec §7.3): E122, E123."""
        block = st.open.get("tool_result")
        if block is None:
            if not (st.seen is not None and "tool_result" not in st.seen):  # [V2.1-e] opened before?
                _e122_image_outside(agent, lno, off, out)
            return
        _e123_image_id(obj, block, agent, lno, off, out)

    def _citation(self, st: _Agent, agent: str, final: bool, lno: int, off: int, out: list[Violation]) -> None:
        """A citation joins its agent's last completed text block (spec §7.4): E126, W128, E130."""
        block = st.open.get("citation")
        if block is None:
            if st.open:
                _e130_compaction_order(st, agent, "citation", lno, off, out)
            if not st.has_text:
                if not st.carried:  # [V2.1-e] its text may be before the continuation
                    _e126_citation_without_text(agent, lno, off, out)
            elif st.citations_closed:
                _w128_split_citations(agent, lno, off, out)
            if not final:
                st.open["citation"] = _Block(lno, off, None, None, False)
                self._open_count += 1
                self._epoch += 1
        elif final:
            del st.open["citation"]
            self._open_count -= 1
            self._epoch += 1
        if final and st.has_text:
            st.citations_closed = True

    # -- what the stream wrapper feeds: SSE field lines, refused lines, the end --------------
