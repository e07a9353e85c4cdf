"""The validator's rules that need no state but what they are given: one function per code.

Owns the line rules (``_LINE_RULES``), the rules of a block's flow that read only the
agent's record, the payload rules (``_PAYLOAD_RULES``) and shapes (``_SHAPES``, E141),
and the records the line machine keeps: ``_Block`` (an open block) and ``_Agent`` (an
agent's flags and open blocks). Each rule is registered under its code with ``@_rule``
and cites the rule id it enforces (``[V…]`` ids are ``spec/validation.md``'s, ``§``
numbers ``spec/envelope-v1.md``'s).

Does not own: when a rule is met (``_validator_lines``, ``_validator_blocks``), the code
table (``_validator_codes``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, cast

import msgspec

from ._depth import too_deep
from ._limits import MAX_NESTING_DEPTH
from ._quote import quote, show
from ._types import ENVELOPE_TYPES

if TYPE_CHECKING:
    from collections.abc import Mapping

from ._validator_codes import (
    _BASE,
    _BASE_NAMES,
    _CITATION_TYPES,
    _EXTRAS,
    _JSON_NAMES,
    _JSON_TYPES,
    _SECTION,
    MAX_PENDING_IDS,
    Violation,
    _json_name,
    _rule,
    _violation,
)

#: The list a rule appends its violations to.
_Out = list[Violation]
_MSGSPEC_BYTE: Final = re.compile(r"\(byte (\d+)\)")


def _reason(exc: msgspec.MsgspecError, *, line: bool = False) -> str:
    """msgspec's JSON error, worded as ours.

    msgspec's ``(byte N)`` is a 0-based offset into the text: for a ``line`` it becomes
    the 1-based column a person reads, else a labelled offset (spec/cli.md C8-a).
    """
    text = str(exc).removeprefix("JSON is malformed: ")
    if text == "Input data was truncated":
        return "the text ends inside a value"
    if line:
        return _MSGSPEC_BYTE.sub(lambda m: f"(column {int(m.group(1)) + 1})", text)
    return _MSGSPEC_BYTE.sub(lambda m: f"(byte offset {m.group(1)})", text)


#: A JSON escape: ``\\uXXXX`` (group 1: the hex) or a backslash and one character.
_ESCAPE: Final = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


def _lone_surrogate(text: str) -> tuple[int, str] | None:
    """The first escaped lone surrogate of a JSON text: ``(character index, the escape)``, or None.

    Escapes are read left to right, so ``\\\\ud800`` (an escaped backslash, then text)
    is not one. A high surrogate escape must be followed at once by a low one.
    """
    pending = -1  # index of a high surrogate escape waiting for its low half
    for match in _ESCAPE.finditer(text):
        at = match.start()
        unit = int(match.group(1), 16) if match.group(1) else -1
        if pending >= 0:
            if at == pending + 6 and 0xDC00 <= unit <= 0xDFFF:
                pending = -1
                continue
            return pending, text[pending : pending + 6]
        if 0xD800 <= unit <= 0xDBFF:
            pending = at
        elif 0xDC00 <= unit <= 0xDFFF:
            return at, match.group(0)
    return (pending, text[pending : pending + 6]) if pending >= 0 else None


@_rule("E100")
def _e100_not_utf8(message: str, lno: int, off: int, out: list[Violation], column: int = 1) -> None:
    # [V2.3-a] bytes that are not UTF-8, or a str line no UTF-8 can encode
    out.append(_violation("E100", message, lno, off, column=column))


@_rule("E101")
def _e101_not_json(text: str, exc: msgspec.MsgspecError, lno: int, off: int, out: list[Violation]) -> None:
    # [V2.1-a] every data line is one JSON object (spec §2.1)
    hint = ""
    if text.lstrip().startswith("<"):
        hint = " (this looks like the legacy XML tag format; migrate it to envelopes first)"
    at = _MSGSPEC_BYTE.search(str(exc))
    column = int(at.group(1)) + 1 if at else 1  # the byte msgspec stopped at, as the other columns
    out.append(_violation("E101", f"not JSON: {_reason(exc, line=True)}{hint}", lno, off, column=column))


@_rule("E102")
def _e102_not_object(value: object, lno: int, off: int, out: list[Violation]) -> None:
    # [V2.1-a] ... an object
    out.append(_violation("E102", f"the line is {_json_name(value)} in JSON, not an object", lno, off))


@_rule("E103")
def _e103_base_fields(
    obj: dict[str, Any], lno: int, off: int, agent: str | None, kind: str | None, out: list[Violation]
) -> None:
    """[V3.1-a] base fields present, never null, of their JSON type (spec §3.1, §3.3)."""
    for name, want in _BASE:
        value = obj.get(name, msgspec.UNSET)
        if type(value) is want:
            continue
        if value is msgspec.UNSET:
            msg = f"missing base field `{name}`"
        elif value is None:
            msg = f"base field `{name}` is null; a field is absent or has its type, never null"
        else:
            msg = f"base field `{name}` must be {_JSON_NAMES[want]}, got {_json_name(value)}"
        out.append(_violation("E103", msg, lno, off, agent, kind))


@_rule("E104")
def _e104_unknown_type(kind: str, lno: int, off: int, agent: str | None, out: list[Violation]) -> None:
    # [V4.1-a] the 14 types, nothing else
    out.append(_violation("E104", f"unknown envelope type {quote(kind)}", lno, off, agent, None))


@_rule("E105")
def _e105_unknown_fields(
    obj: dict[str, Any], kind: str, lno: int, off: int, agent: str | None, out: list[Violation]
) -> None:
    """[V3.4-a] only the type's own extras (spec §3.4, §4.x)."""
    extras = _EXTRAS[kind]
    section = _SECTION[kind]
    for name in obj:
        if name in _BASE_NAMES or name in extras:
            continue
        message = f"field {quote(name)} is not allowed on a {kind} envelope (§{section})"
        out.append(_violation("E105", message, lno, off, agent, kind))


@_rule("E106")
def _e106_extras(
    obj: dict[str, Any],
    kind: str,
    extras: dict[str, tuple[type, bool]],
    lno: int,
    off: int,
    agent: str | None,
    out: list[Violation],
) -> None:
    """The type's own fields, required ones present, each of its JSON type (spec §4.x)."""
    section = _SECTION[kind]
    for field, (want_extra, required) in extras.items():
        value = obj.get(field, msgspec.UNSET)
        if value is msgspec.UNSET:
            if required:
                message = f"missing field `{field}`, required on a {kind} envelope (§{section})"
                out.append(_violation("E106", message, lno, off, agent, kind))
            continue
        if type(value) is want_extra:
            continue
        if value is None:
            msg = f"field `{field}` is null; leave it out instead (§3.3)"
        else:
            msg = f"field `{field}` must be {_JSON_NAMES[want_extra]}, got {_json_name(value)} (§{section})"
        out.append(_violation("E106", msg, lno, off, agent, kind))


@_rule("E107")
def _e107_over_bound(
    kind: str, size: int, fixed: int, bound: int, lno: int, off: int, agent: str | None, out: list[Violation]
) -> None:
    # [V6.1-a] every line that could be split is within the bound
    message = (
        f"line of {size} bytes is over the bound of {bound} (its fixed part is "
        f"{fixed} bytes, so the delta could have been split)"
    )
    out.append(_violation("E107", message, lno, off, agent, kind))


@_rule("W108")
def _w108_unavoidable(
    kind: str, size: int, fixed: int | None, bound: int, lno: int, off: int, agent: str | None, out: list[Violation]
) -> None:
    """[V6.5-a] [V6.6-a] over the bound unavoidably: an atomic type (``fixed`` None), or no room past the fixed part."""
    if fixed is None:
        message = (
            f"{kind} line of {size} bytes is over the bound of {bound}; "
            "this type is never split, so the bound could not be kept"
        )
    else:
        message = (
            f"line of {size} bytes is over the bound of {bound}, but its fixed part "
            f"({fixed} bytes) leaves no room for a code point, so no split could help"
        )
    out.append(_violation("W108", message, lno, off, agent, kind))


@_rule("E111")
def _e111_data_lines(data: str, lno: int, off: int, out: list[Violation]) -> None:
    # [V2.1-b] one envelope is one data line; a browser joins several with LF
    message = f"the SSE event has {data.count(chr(10)) + 1} data lines; an envelope is exactly one"
    out.append(_violation("E111", message, lno, off))


@_rule("E116")
def _e116_too_deep(
    message: str,
    lno: int,
    off: int,
    out: list[Violation],
    agent: str | None = None,
    kind: str | None = None,
    column: int = 1,
) -> None:
    # spec §6.7-a: nothing nests deeper than the limit (a recursive parser would overflow)
    out.append(_violation("E116", message, lno, off, agent, kind, column=column))


@_rule("E117")
def _e117_lone_surrogate(text: str, lone: tuple[int, str], lno: int, off: int, out: list[Violation]) -> None:
    # [V6.4-a] an escaped lone surrogate is no character: the line cannot be read faithfully
    at = len(text[: lone[0]].encode("utf-8"))
    message = (
        f"escaped lone surrogate {lone[1]} at column {at + 1}: it encodes no character (a UTF-16 half with no pair)"
    )
    out.append(_violation("E117", message, lno, off, column=at + 1))


#: Where a line is, for its line rules: ``(lno, off, agent)``, as ``_violation`` takes them.
_At = tuple[int, int, "str | None"]
#: The checks of one line of a known type (routing aside): ``(obj, kind, final, delta, at, out)``.
_LineRule = Callable[[dict[str, Any], str, object, str, _At, list[Violation]], None]


def _text_of(value: object, key: str) -> str | None:
    """``value[key]`` when ``value`` is a JSON object and that key holds a string, else None.

    The shape of most field checks: a field that is a string is held to a rule; any
    other type is E106's or E141's to report.
    """
    item = value.get(key) if isinstance(value, dict) else None
    return item if isinstance(item, str) else None


@_rule("W114")
def _w114_citation_type(obj: dict[str, Any], kind: str, _final: object, _delta: str, at: _At, out: _Out) -> None:
    ctype = _text_of(obj, "citation_type")
    if ctype is not None and ctype not in _CITATION_TYPES:
        # [V4.5-a] SHOULD be one of the seed's three citation types or the API's two more
        message = f"citation_type {quote(ctype)} is not one of {', '.join(sorted(_CITATION_TYPES))}"
        out.append(_violation("W114", message, *at, kind))


@_rule("W115")
def _w115_result_name(obj: dict[str, Any], kind: str, _final: object, _delta: str, at: _At, out: _Out) -> None:
    rname = _text_of(obj, "name")
    if rname is not None and not rname.endswith("_tool_result"):
        # [V4.10-a] name is the API's result block type, e.g. web_search_tool_result
        message = (
            f"server_tool_result name {quote(rname)} is not an API result block type "
            "(those end in `_tool_result`, e.g. web_search_tool_result)"
        )
        out.append(_violation("W115", message, *at, kind))


@_rule("E121")
def _e121_marker_delta(_obj: dict[str, Any], kind: str, final: object, delta: str, at: _At, out: _Out) -> None:
    if final is True and delta:
        # [V5.1-a] a streamed block's final marker carries an empty delta
        message = f"final marker of a {kind} block has a non-empty delta ({len(delta)} characters)"
        out.append(_violation("E121", message, *at, kind))


@_rule("E124")
def _e124_image_final(_obj: dict[str, Any], kind: str, final: object, _delta: str, at: _At, out: _Out) -> None:
    if final is True:
        # [V4.9-a] an image never closes anything; the tool_result marker does
        out.append(_violation("E124", "tool_result_image has final: true; images always carry false", *at, kind))


@_rule("E125")
def _e125_image_delta(_obj: dict[str, Any], kind: str, _final: object, delta: str, at: _At, out: _Out) -> None:
    if delta:
        # [V4.9-a] ... and carries no text
        out.append(_violation("E125", "tool_result_image has a non-empty delta", *at, kind))


#: Per type, the line rules beyond the base fields, extras and bound, in the order they
#: report: ``_LINE_RULES[final is True][type]``. Split by ``final`` so that the bulk of a
#: stream (text and thinking deltas, ``final: false``) meets no call: E121 and E124 can only
#: speak on a final line.
#: Every known type has an entry (most an empty one), so the lookup is a subscript, not a call.
_LINE_RULES: Final[tuple[dict[str, tuple[_LineRule, ...]], dict[str, tuple[_LineRule, ...]]]] = (
    {
        **dict.fromkeys(ENVELOPE_TYPES, ()),
        "citation": (_w114_citation_type,),
        "server_tool_result": (_w115_result_name,),
        "tool_result_image": (_e125_image_delta,),
    },
    {
        **dict.fromkeys(ENVELOPE_TYPES, ()),
        "citation": (_w114_citation_type,),
        "server_tool_result": (_w115_result_name,),
        "tool_result_image": (_e124_image_final, _e125_image_delta),
        "text": (_e121_marker_delta,),
        "thinking": (_e121_marker_delta,),
    },
)


class _Block:
    """An open block: where it started and, for JSON payloads, its deltas so far."""

    __slots__ = ("begun", "id", "line", "name", "offset", "parts", "prefix", "size", "unchecked")

    def __init__(self, line: int, offset: int, id: object, name: object, keep: bool, begun: bool = False) -> None:
        self.line = line
        self.offset = offset
        self.id = id
        self.name = name
        self.parts: list[str] | None = [] if keep else None
        self.size = 0
        self.unchecked = False  # W149 reported; deltas no longer kept
        self.begun = begun  # a continuation's block that may have opened before its first line [V2.1-e]
        self.prefix: bytes | None = None  # its lines' prefix for the compiled build's C pass (spec VF1-b)


class _Agent:
    """Per-agent flags (spec §8.1) and the open blocks of the agent, by type."""

    __slots__ = (
        "after_final_reported",
        "answered",
        "calls",
        "carried",
        "citations_closed",
        "edited",
        "final_done",
        "has_text",
        "meta_init",
        "open",
        "seen",
        "server_calls",
    )

    def __init__(self) -> None:
        self.open: dict[str, _Block] = {}
        self.meta_init = False  # a meta_init block has opened
        self.final_done = False  # a meta_final block has closed
        self.after_final_reported = False
        self.has_text = False  # a text block has completed (citations may follow)
        self.citations_closed = False  # the last completed text's citation block has closed
        self.calls: dict[str, None] = {}  # tool_call ids awaiting a tool_result (ordered set)
        self.server_calls: dict[str, None] = {}
        # spec envelope-v1 §4.6-a: ids whose result has opened, and calls already edited (E168)
        self.answered: dict[str, None] = {}
        self.edited: dict[str, None] = {}
        # [V2.1-e] In a continuation, an agent whose first line is not meta_init started
        # before it (``carried``); ``seen`` holds the types of its lines so far: the first
        # block of each other type may have opened before the continuation's first line.
        self.carried = False
        self.seen: set[str] | None = None


def _remember(pending: dict[str, None], id: str) -> None:
    pending[id] = None
    if len(pending) > MAX_PENDING_IDS:
        del pending[next(iter(pending))]


# -- the rules met by a block opening or closing, and at the end ----------------------------


@_rule("E110")
def _e110_truncated(message: str, lno: int, off: int, out: list[Violation]) -> None:
    # [V2.3-a] a capture ends after a complete event
    out.append(_violation("E110", message + "; its data is lost", lno, off))


@_rule("E109")
def _e109_line_over_cap(message: str, lno: int, off: int, column: int, out: list[Violation]) -> None:
    # [V2.3-a] a physical line over the reader's cap is refused, and checking resumes after it;
    # the message says what to do (validation.md §2.2: a refusal with no remedy left the user stuck)
    message += (
        ". Envelope lines are far shorter (spec §6.1): this is likely a file without line ends, or a "
        "pretty-printed or binary one; give one envelope per line, or raise the reader's cap (max_line_bytes)"
    )
    out.append(_violation("E109", message, lno, off, column=column))


@_rule("E169")
def _e169_retry_too_long(message: str, lno: int, off: int, column: int, out: list[Violation]) -> None:
    # [V2.3-c] the reader refuses a retry: value past MAX_RETRY_DIGITS (spec §2.3-f); as for
    # E109, checking resumes after the line and the event it was part of is lost with it
    out.append(_violation("E169", message, lno, off, column=column))


@_rule("W113")
def _w113_named_event(name: bytes, lno: int, off: int, out: list[Violation]) -> None:
    if name not in (b"", b"message"):
        # [V2.1-a] EventSource.onmessage sees only unnamed and `message` events
        message = (
            f"SSE event named {quote(name)}: EventSource delivers it to onmessage only when it is unnamed or `message`"
        )
        out.append(_violation("W113", message, lno, off))


@_rule("E127")
def _e127_id_changes(
    block: _Block, wid: object, wname: object, agent: str, kind: str, lno: int, off: int, out: list[Violation]
) -> None:
    if wid != block.id or wname != block.name:
        # [V7.2-a] a buffered block keeps its id and name on every line
        field, was, now = ("id", block.id, wid) if wid != block.id else ("name", block.name, wname)
        message = f"{field} {show(now)} differs from {show(was)} of the open {kind} block (opened on line {block.line})"
        out.append(_violation("E127", message, lno, off, agent, kind))


@_rule("W163")
def _w163_first_message(agent: str, kind: str, lno: int, off: int, out: list[Violation]) -> None:
    if kind != "meta_init":
        # [V8.1-b] SHOULD: an agent's stream starts with meta_init
        out.append(_violation("W163", f"the agent's first message is {kind}, not meta_init", lno, off, agent, kind))


@_rule("E164")
def _e164_after_final(st: _Agent, agent: str, kind: str, lno: int, off: int, out: list[Violation]) -> None:
    if not st.after_final_reported:
        st.after_final_reported = True
        # [V8.1-c] meta_final is an agent's last message
        message = "message from an agent after its meta_final (later ones are not reported again)"
        out.append(_violation("E164", message, lno, off, agent, kind))


@_rule("E130")
def _e130_compaction_order(st: _Agent, agent: str, kind: str, lno: int, off: int, out: list[Violation]) -> None:
    """A block of ``kind`` opens while others of its agent are open: E130 if a compaction is involved."""
    if kind == "meta_compaction":
        # spec §8.1-b: a compaction falls between the agent's blocks, never inside one
        other, open_block = next(iter(st.open.items()))
        why = f"meta_compaction while the agent's {other} block (line {open_block.line}) is open"
    elif (compaction := st.open.get("meta_compaction")) is not None:
        why = f"{kind} opens while the agent's meta_compaction (line {compaction.line}) is open"
    else:
        return
    message = f"{why}; a compaction falls between the agent's blocks, never inside one"
    out.append(_violation("E130", message, lno, off, agent, kind))


@_rule("W129")
def _w129_split_control(agent: str, kind: str, lno: int, off: int, out: list[Violation]) -> None:
    # spec §10.2-c: under the seed profile a control envelope is one line
    message = (
        f"{kind} sent in more than one line; the seed profile sends it whole "
        "(clients written to the seed do not reassemble it)"
    )
    out.append(_violation("W129", message, lno, off, agent, kind))


@_rule("E162")
def _e162_meta_init_order(st: _Agent, first: bool, agent: str, lno: int, off: int, out: list[Violation]) -> None:
    if not first:
        # [V8.1-a] meta_init opens an agent's stream, once
        why = "a second meta_init" if st.meta_init else "meta_init after other messages of its agent"
        out.append(_violation("E162", f"{why}; meta_init is an agent's first message", lno, off, agent, "meta_init"))


@_rule("W165")
def _w165_unannounced_result(st: _Agent, wid: str, agent: str, lno: int, off: int, out: list[Violation]) -> None:
    _remember(st.answered, wid)
    if st.calls.pop(wid, 0) is not None:
        # [V8.1-d] SHOULD: a result answers an earlier call (a resumed stream may lack it)
        message = f"tool_result id {quote(wid)}: no earlier tool_call of this agent announced it"
        out.append(_violation("W165", message, lno, off, agent, "tool_result"))


@_rule("E168")
def _e168_call_repeated(st: _Agent, wid: str, agent: str, lno: int, off: int, out: list[Violation]) -> None:
    """A ``tool_call`` opens: a new call, the one edit of an unanswered call, or E168 (spec §4.6-a)."""
    if wid in st.answered or wid in st.edited:
        # [V4.6-a] a call is edited at most once, before its result
        why = "its tool_result has opened" if wid in st.answered else "it was edited already"
        message = (
            f"tool_call id {wid!r} repeats a call of this agent, and {why}; "
            "a repeated tool_call is the one edit of an unanswered call, right before its result"
        )
        out.append(_violation("E168", message, lno, off, agent, "tool_call"))
    elif wid in st.calls:
        _remember(st.edited, wid)  # the edit: the input the call ran with
    else:
        _remember(st.calls, wid)


@_rule("W166")
def _w166_unannounced_server_result(st: _Agent, wid: str, agent: str, lno: int, off: int, out: list[Violation]) -> None:
    if st.server_calls.pop(wid, 0) is not None:
        # [V8.1-d] ... and a server result an earlier server call
        message = f"server_tool_result id {quote(wid)}: no earlier server_tool_call of this agent"
        out.append(_violation("W166", message, lno, off, agent, "server_tool_result"))


@_rule("E122")
def _e122_image_outside(agent: str, lno: int, off: int, out: list[Violation]) -> None:
    # [V7.3-a] an image joins the open tool_result of its agent
    message = "tool_result_image with no open tool_result of its agent"
    out.append(_violation("E122", message, lno, off, agent, "tool_result_image"))


@_rule("E123")
def _e123_image_id(obj: dict[str, Any], block: _Block, agent: str, lno: int, off: int, out: list[Violation]) -> None:
    for field in ("id", "name"):
        value = _text_of(obj, field)
        expected = block.id if field == "id" else block.name
        if value is not None and value != expected:
            # [V7.3-b] ... with the same id and name
            message = (
                f"tool_result_image {field} {quote(value)} differs from {show(expected)} of the open tool_result "
                f"(line {block.line})"
            )
            out.append(_violation("E123", message, lno, off, agent, "tool_result_image"))


@_rule("E126")
def _e126_citation_without_text(agent: str, lno: int, off: int, out: list[Violation]) -> None:
    # [V7.4-a] a citation attaches to its agent's last completed text block
    message = "citation with no completed text block of its agent before it"
    out.append(_violation("E126", message, lno, off, agent, "citation"))


@_rule("W128")
def _w128_split_citations(agent: str, lno: int, off: int, out: list[Violation]) -> None:
    # [V5.4-a] SHOULD: one citation block per text block; final only on the last
    message = (
        "another citation block for a text block whose citations already ended with final: true; "
        "only the last citation of a text block carries final: true"
    )
    out.append(_violation("W128", message, lno, off, agent, "citation"))


@_rule("W161")
def _w161_no_done(lno: int, off: int, out: list[Violation]) -> None:
    # [V8.2-b] SHOULD: a complete stream ends with [DONE]
    out.append(_violation("W161", "the stream ends without [DONE] (after this line)", lno, off))


@_rule("E167")
def _e167_no_envelope(read: int, fmt: str | None, out: list[Violation]) -> None:
    # there is nothing that could be valid
    message = "the input holds no envelope and no [DONE]"
    if read:
        shown = fmt or "unknown"
        message = f"the input ({read} bytes, read as {shown}) holds no envelope and no [DONE]"
        if shown == "sse":
            message += "; no SSE `data:` field was found"
    out.append(_violation("E167", message, 1, 0))


# -- the payload rules: checked when a JSON block closes -------------------------------------


@_rule("E140")
def _e140_payload_not_json(
    payload: str, exc: msgspec.MsgspecError, kind: str, where: str, agent: str, lno: int, off: int, out: list[Violation]
) -> None:
    # [V7.5-a] the reassembled payload of these types is JSON
    lone = _lone_surrogate(payload)
    why = (
        _reason(exc)
        if lone is None
        else f"it holds an escaped lone surrogate {lone[1]} at character offset {lone[0]} (spec §6.4)"
    )
    out.append(_violation("E140", f"{kind} payload ({where}) is not JSON: {why}", lno, off, agent, kind))


@_rule("E141")
def _e141_payload_shape(
    value: object, kind: str, where: str, agent: str, lno: int, off: int, out: list[Violation]
) -> None:
    for problem in _SHAPES[kind](value):
        # [V7.5-b] ... of the shape the seed gives each type
        out.append(_violation("E141", f"{kind} payload ({where}): {problem}", lno, off, agent, kind))


def _announce_resumed(st: _Agent, value: dict[str, Any]) -> None:
    """spec envelope-v1 §8.4-a: a resumed response's meta_init announces the calls it answers."""
    resume = value.get("resume")
    if isinstance(resume, dict) and isinstance(resume.get("tool_use_ids"), list):
        for announced in resume["tool_use_ids"]:
            if isinstance(announced, str):
                _remember(st.calls, announced)


#: A check of a parsed payload: ``(value, kind, where, agent, lno, off, out)``.
_PayloadRule = Callable[[object, str, str, str, int, int, list[Violation]], None]


@_rule("W144")
def _w144_format(value: object, kind: str, _where: str, agent: str, lno: int, off: int, out: list[Violation]) -> None:
    fmt = _text_of(value, "format")
    if fmt is not None and fmt != "json":
        # spec §4.2-a: the stream is JSON envelopes; clients pick their parser from `format`
        origin = cast("dict[str, Any]", value).get("migrated_from")
        hint = (
            f" (the origin {quote(origin)} belongs in migrated_from, as it is)"
            if isinstance(origin, str)
            else '; a migrated stream keeps its origin in "migrated_from"'
        )
        message = (
            f'meta_init format {quote(fmt)} contradicts the stream, which is JSON envelopes: say "json"'
            f"{hint}; clients that pick their parser from format show nothing"
        )
        out.append(_violation("W144", message, lno, off, agent, kind))


@_rule("E142")
def _e142_agent_uuid(
    value: object, kind: str, _where: str, agent: str, lno: int, off: int, out: list[Violation]
) -> None:
    uuid = _text_of(value, "agent_uuid")
    if uuid is not None and uuid != agent:
        # [V4.2-a] meta_init describes the agent that sends it
        message = f"meta_init agent_uuid {quote(uuid)} differs from the envelope's agent {quote(agent)}"
        out.append(_violation("E142", message, lno, off, agent, kind))


@_rule("W143")
def _w143_error_shape(
    value: object, kind: str, where: str, agent: str, lno: int, off: int, out: list[Violation]
) -> None:
    if isinstance(value, dict) and not _error_shape(value):
        # [V4.13-a] SHOULD: the seed's flat shape or the API's nested one
        message = (
            f"error payload ({where}) has neither string `type` and `message` (the seed's shape) "
            "nor an `error` object with them (the API's)"
        )
        out.append(_violation("W143", message, lno, off, agent, kind))


#: Per type, the payload rules beyond its shape (E141), in the order they report.
_PAYLOAD_RULES: Final[dict[str, tuple[_PayloadRule, ...]]] = {
    "meta_init": (_w144_format, _e142_agent_uuid),
    "error": (_w143_error_shape,),
}


class _TypeOnly(msgspec.Struct, gc=False):
    type: str


_decode_type = msgspec.json.Decoder(_TypeOnly).decode


def _opens_response(text: str) -> bool:
    """Whether a line after ``[DONE]`` is a ``meta_init`` envelope (spec §8.5-a): a JSON object whose type is that."""
    if "meta_init" not in text or too_deep(text, MAX_NESTING_DEPTH) is not None:
        return False
    try:
        return _decode_type(text).type == "meta_init"
    except (msgspec.MsgspecError, UnicodeEncodeError):
        return False


def _error_shape(value: dict[str, Any]) -> bool:
    nested = value.get("error")
    target = nested if isinstance(nested, dict) else value
    return isinstance(target.get("type"), str) and isinstance(target.get("message"), str)


def _keys(value: object, spec: Mapping[str, tuple[tuple[type, ...], bool]], what: str) -> list[str]:
    """Problems of ``value`` against ``{key: (allowed JSON types, required)}``."""
    if not isinstance(value, dict):
        return [f"{what} must be a JSON object, got {_json_name(value)}"]
    problems: list[str] = []
    for key, (types, required) in spec.items():
        if key not in value:
            if required:
                problems.append(f"{what} lacks the required key `{key}`")
            continue
        item = value[key]
        if type(item) not in types:
            names = " or ".join("null" if t is type(None) else _JSON_NAMES[t] for t in types)
            problems.append(f"{what} key `{key}` must be {names}, got {_json_name(item)}")
    return problems


_S: Final = (str,)
_META_INIT: Final = {
    "format": (_S, True),
    "user_query": (_S, True),
    "agent_uuid": (_S, True),
    "model": (_S, True),
    "message_history": ((list,), False),
    "migrated_from": (_S, False),
    "run_id": (_S, False),
    "resume": ((dict,), False),
}
_NONE = type(None)
#: Required: the two keys every example has. The others are typed when present; see
#: spec/validation.md §V4 for why they are not required.
_META_FINAL: Final = {
    "stop_reason": (_S, True),
    "total_steps": ((int,), True),
    "conversation_history": ((list,), False),
    "generated_files": ((list, _NONE), False),
    "cost": ((dict, _NONE), False),
    "cumulative_usage": ((dict,), False),
    "compactions": ((list,), False),
}
#: spec §4.15: the compaction object (a meta_compaction payload, an item of meta_final's compactions).
_COMPACTION: Final = {
    "trigger": (_S, True),
    "pre_tokens": ((int,), True),
    "post_tokens": ((int,), False),
    "strategy": (_S, False),
    "messages_before": ((int,), False),
    "messages_after": ((int,), False),
}
_TRIGGERS: Final = ("auto", "manual")
_COUNTS: Final = ("pre_tokens", "post_tokens", "messages_before", "messages_after")


def _compaction_shape(value: object, what: str) -> list[str]:
    """Problems of one compaction object (spec §4.15): the key types, ``trigger``'s value, counts >= 0."""
    problems = _keys(value, _COMPACTION, what)
    if not isinstance(value, dict):
        return problems
    trigger = value.get("trigger")
    if isinstance(trigger, str) and trigger not in _TRIGGERS:
        problems.append(f'{what} key `trigger` must be "auto" or "manual", got {quote(trigger)}')
    for key in _COUNTS:
        count = value.get(key)
        if type(count) is int and count < 0:
            problems.append(f"{what} key `{key}` must be an integer >= 0, got {count}")
    return problems


#: spec §4.16: the keys every status object may carry, then each known kind's own
#: (``{key: (JSON types, required)}``); a kind not listed is checked for the common keys only.
_STATUS_COMMON: Final = {"kind": (_S, True), "message": (_S, False)}
_NUMBER: Final = (int, float)
_STATUS_KINDS: Final[dict[str, dict[str, tuple[tuple[type, ...], bool]]]] = {
    "tool_progress": {"tool_use_id": (_S, True), "name": (_S, True), "fraction": (_NUMBER, False)},
    "step_start": {"step": ((int,), True)},
    "step_finish": {
        "step": ((int,), True),
        "usage": ((dict,), True),
        "cost": ((dict, _NONE), False),
        "stop_reason": (_S, False),
    },
    "compaction": {"phase": (_S, True), "trigger": (_S, False)},
    "retry": {"attempt": ((int,), True), "delay": (_NUMBER, False)},
    "hook": {"event": (_S, True), "outcome": (_S, True), "hook": ((int,), False)},
    "mcp_server": {"state": (_S, True), "server": (_S, False)},
}
#: Keys whose value is one of a few words (spec §4.16).
_STATUS_WORDS: Final[dict[tuple[str, str], tuple[str, ...]]] = {
    ("compaction", "phase"): ("started", "finished", "failed"),
    ("mcp_server", "state"): ("connected", "failed"),
}

#: The kinds that count from 1, and the key that counts (spec §4.16).
_STATUS_COUNTERS: Final = {"step_start": "step", "step_finish": "step", "retry": "attempt"}


def _status_shape(value: object) -> list[str]:
    """Problems of a ``meta_status`` object (spec §4.16-a): ``kind``, then the kind's own keys."""
    problems = _keys(value, _STATUS_COMMON, "the object")
    if problems or not isinstance(value, dict):
        return problems
    kind = value["kind"]
    own = _STATUS_KINDS.get(kind)
    if own is None:
        return problems  # spec §4.16-b: a kind this version does not define is allowed
    what = f"the {kind} status"
    problems += _keys(value, own, what)
    for (of, key), words in _STATUS_WORDS.items():
        word = value.get(key)
        if of == kind and isinstance(word, str) and word not in words:
            problems.append(f"{what} key `{key}` must be one of {', '.join(words)}, got {quote(word)}")
    counter = _STATUS_COUNTERS.get(kind)
    count = value.get(counter) if counter else None
    if type(count) is int and count < 1:
        problems.append(f"{what} key `{counter}` must be an integer >= 1, got {count}")
    fraction = value.get("fraction")
    if (
        kind == "tool_progress"
        and isinstance(fraction, int | float)
        and type(fraction) is not bool
        and not 0 <= fraction <= 1
    ):
        problems.append(f"{what} key `fraction` must be between 0 and 1, got {fraction}")
    return problems


_FILE: Final = {"file_id": (_S, True), "filename": (_S, True), "storage_location": (_S, True)}
_PENDING: Final = {"tool_use_id": (_S, True), "name": (_S, True), "input": ((dict,), True)}


def _meta_final_shape(value: object) -> list[str]:
    problems = _keys(value, _META_FINAL, "the object")
    compactions = value.get("compactions") if isinstance(value, dict) else None
    if isinstance(compactions, list):
        # spec §4.14: under the seed profile the compactions travel here (§10.2-d)
        for i, item in enumerate(compactions):
            problems += _compaction_shape(item, f"compactions[{i}]")
    return problems


def _meta_files_shape(value: object) -> list[str]:
    problems = _keys(value, {"files": ((list,), True)}, "the object")
    if problems or not isinstance(value, dict):
        return problems
    for i, item in enumerate(value["files"]):
        problems += _keys(item, _FILE, f"files[{i}]")
    return problems


def _pending_shape(value: object) -> list[str]:
    if not isinstance(value, list):
        return [f"the payload must be a JSON array of pending tools, got {_json_name(value)}"]
    problems = []
    for i, item in enumerate(value):
        problems += _keys(item, _PENDING, f"[{i}]")
    return problems


def _object_shape(value: object) -> list[str]:
    """``error``: any object. (``tool_call``, ``server_tool_call``: ``_arguments_shape``.)"""
    return [] if isinstance(value, dict) else [f"the payload must be a JSON object, got {_json_name(value)}"]


def _arguments_shape(value: object) -> list[str]:
    return [] if isinstance(value, dict) else [f"the arguments must be a JSON object, got {_json_name(value)}"]


#: Per JSON type, the problems of its parsed payload against its shape (spec §4.x; validation.md §5.3).
_SHAPES: Final[dict[str, Callable[[object], list[str]]]] = {
    "meta_init": lambda value: _keys(value, _META_INIT, "the object"),
    "meta_final": _meta_final_shape,
    "meta_compaction": lambda value: _compaction_shape(value, "the object"),
    "meta_status": _status_shape,
    "meta_files": _meta_files_shape,
    "awaiting_frontend_tools": _pending_shape,
    "error": _object_shape,
    "tool_call": _arguments_shape,
    "server_tool_call": _arguments_shape,
}
assert frozenset(_SHAPES) == _JSON_TYPES


_SSE_FIELDS: Final = frozenset({b"data", b"event", b"id", b"retry"})
#: An LF, then a line the SSE line checks might report: not `data:` and not blank. (A
#: comment might: the checks read on past it when a CR ends it, as in ``: x\revent: y``.)
_OTHER_SSE_LINE: Final = re.compile(rb"\n(?!data:|\r?\n)")
#: The end of an SSE line: CRLF, CR or LF (WHATWG; spec §2.3-a).
_LINE_END: Final = re.compile(rb"\r\n?|\n")
#: A line of only spaces and tabs, ended by LF or CRLF: no event and no content in either format.
_BLANK_LF: Final = re.compile(rb"[ \t]*\r?\n")
_BLANK_LINES: Final = frozenset({b"\n", b"\r\n", b"\r"})


def _id_key(value: str) -> tuple[str, int, int, str]:
    """The order of SSE ids (spec §2.1-d): by the part before the last colon, then by the rest.

    The rest compares as a number when it is decimal digits (``run-7:10`` after
    ``run-7:9``), else as text, numbers first. An id with no colon is all rest.
    """
    prefix, _, rest = value.rpartition(":")
    if rest.isascii() and rest.isdigit():
        return (prefix, 0, int(rest), "")
    return (prefix, 1, 0, rest)


def _sse_field_of(head: bytes) -> tuple[bytes, bytes] | None:
    """The field name and value of an SSE line from its first bytes, or None for a comment or blank line.

    Only the first line of ``head`` is known to start a line (the bytes may run on past a CR).
    """
    for raw in head.splitlines():
        if not raw or raw[0] == 0x3A:
            continue
        name, _, value = raw.partition(b":")
        return name, value
    return None
