"""Judging a recorded stream against the protocol: coded violations, never an exception.

Owns: ``Violation``, the code table (``CODES``: severity, spec section and meaning of
each code, which ``explain`` and ``spec/validation.md`` §4 read), the rules (``RULES``:
the one function that reports each code), ``Validator`` (envelope lines in, violations
out, incremental), ``StreamValidator`` (the bytes of a recording in, with recovery after
unreadable input), and ``validate``. The reason for each judgement call is in
``spec/validation.md`` §5; each rule cites the rule id it enforces (``[V…]`` ids are
that file's, ``§`` numbers are ``spec/envelope-v1.md``'s).

How a line meets the rules: ``Validator`` reads it (``_parse``), checks its fields and
bound, dispatches the type's line rules from ``_LINE_RULES``, and routes it to its block
(``_route``), where opening, continuing and closing meet the block and stream rules; a
closing JSON block's payload meets ``_SHAPES`` (E141) and ``_PAYLOAD_RULES``.
``StreamValidator`` only reads: it finds lines, SSE field lines and positions, and hands
them to the ``Validator``, which judges all of them (the SSE line rules W112, W113, W118
included).

Does not own: rebuilding content (``_reconstruct``; the validator keeps no text, only
the payloads it must parse), splitting bytes into lines (``StreamReader`` does; this
module only restarts it after an error), printing (``cli``).

Memory: a ``Validator`` holds, per agent, a handful of flags and the ids of tool calls
still waiting for their result (at most ``MAX_PENDING_IDS`` each); per open block, its
position and, for the types whose payload is JSON, the deltas so far (at most
``max_payload_bytes``). It never holds a closed block or the stream.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

import msgspec

from ._decoder import DONE_DATA, RawLine, StreamReader, _LineBatch
from ._depth import too_deep
from ._errors import DecodeError
from ._limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINE_BYTES, MAX_CODE_POINT_BYTES, MAX_NESTING_DEPTH
from ._types import ENVELOPE_TYPES, STREAMED_TYPES

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping, Sequence

__all__ = ["CODES", "RULES", "Profile", "Severity", "StreamValidator", "Validator", "Violation", "explain", "validate"]

#: ``"error"``: the stream breaks a MUST. ``"warning"``: suspicious, or a SHOULD.
Severity = Literal["error", "warning"]

#: Every code: ``code -> (severity, spec section, one-line meaning)``, the one table every
#: check, ``explain`` and ``spec/validation.md`` §4 read from (a test keeps that table, its
#: meanings included, equal to this one; the reasons are in validation.md §5).
CODES: Final[dict[str, tuple[Severity, str, str]]] = {
    # Input and line level (100-119)
    "E100": ("error", "2.3", "input is not valid UTF-8 (bytes), or a str line holds a lone surrogate"),
    "E101": ("error", "2.1", "line is not JSON"),
    "E102": ("error", "2.1", "line is JSON but not an object"),
    "E103": ("error", "3.1", "base field (type, agent, final, delta) missing, null or of the wrong JSON type"),
    "E104": ("error", "4.1", "unknown envelope type"),
    "E105": ("error", "3.4", "field the type does not allow"),
    "E106": ("error", "4.1", "type-specific field missing, null or of the wrong JSON type"),
    "E107": ("error", "6.1", "line over the bound, and the bound could have been kept"),
    "W108": ("warning", "6.5", "oversize line the bound could not avoid"),
    "E109": ("error", "2.3", "physical line over the reader's cap; skipped"),
    "E110": ("error", "2.3", "input ends inside an SSE line or event"),
    "E111": ("error", "2.1", "SSE event with more than one data line"),
    "W112": ("warning", "2.1", "SSE line that is no field the protocol uses (ignored)"),
    "W113": ("warning", "2.1", "SSE event named other than message"),
    "W114": ("warning", "4.5", "citation_type not one the seed or the API lists"),
    "W115": ("warning", "4.10", "server_tool_result name is not an API result block type"),
    "E116": ("error", "6.7", "line or payload nested deeper than MAX_NESTING_DEPTH (256)"),
    "E117": ("error", "6.4", "line holds an escaped lone surrogate (\\ud800 with no pair)"),
    "W118": ("warning", "2.1", "SSE id that does not increase on the id before it (reported once)"),
    "E119": ("error", "10.2", "meta_compaction under the seed profile, whose clients know only the seed's 13 types"),
    # Block level (120-139)
    "E120": ("error", "7.2", "block left open at the end of the stream"),
    "E121": ("error", "5.1", "final marker of a streamed block with a non-empty delta"),
    "E122": ("error", "7.3", "tool_result_image outside an open tool_result of its agent"),
    "E123": ("error", "7.3", "tool_result_image id or name differs from its tool_result"),
    "E124": ("error", "4.9", "tool_result_image with final: true"),
    "E125": ("error", "4.9", "tool_result_image with a non-empty delta"),
    "E126": ("error", "7.4", "citation with no completed text block of its agent before it"),
    "E127": ("error", "7.2", "buffered block whose id or name changes between its lines"),
    "W128": ("warning", "5.4", "citations of one text block split over several citation blocks"),
    "W129": ("warning", "10.2", "control envelope sent in more than one line (seed profile only)"),
    "E130": ("error", "8.1", "meta_compaction while another block of its agent is open, or a block opening inside it"),
    # Payload level (140-159)
    "E140": ("error", "7.5", "reassembled payload is not JSON"),
    "E141": ("error", "7.5", "payload JSON of the wrong shape (a required key missing, a key of the wrong type)"),
    "E142": ("error", "4.2", "meta_init agent_uuid differs from the envelope's agent"),
    "W143": ("warning", "4.13", "error payload has neither the seed's nor the API's shape"),
    "W144": ("warning", "4.2", 'meta_init format is not "json", which the stream is'),
    "W149": ("warning", "7.5", "payload too large to check (over max_payload_bytes)"),
    # Stream level (160-179)
    "E160": ("error", "8.2", "content after [DONE] (reported once; later lines are still checked)"),
    "W161": ("warning", "8.2", "stream ends without [DONE]"),
    "E162": ("error", "8.1", "meta_init is not the first message of its agent, or comes twice"),
    "W163": ("warning", "8.1", "agent's first message is not meta_init"),
    "E164": ("error", "8.1", "message from an agent after its meta_final (reported once per agent)"),
    "W165": ("warning", "8.1", "tool_result id no earlier tool_call of its agent announced"),
    "W166": ("warning", "8.1", "server_tool_result with no earlier server_tool_call of that id"),
    "E167": ("error", "2.1", "the input holds no envelope and no [DONE]"),
}


def explain(code: str) -> str:
    """What a code means, from ``CODES``: ``"E107 (error, spec §6.1): line over the bound, ..."``.

    For ``envelope validate --explain CODE``; the reasons behind each judgement are in
    ``spec/validation.md`` §5.

    Raises:
        KeyError: an unknown code.
    """
    severity, section, meaning = CODES[code.upper()]
    return f"{code.upper()} ({severity}, spec §{section}): {meaning}"


#: The profiles a stream can be judged by (spec §10): ``"default"`` keeps the bound on every
#: type; ``"seed"`` sends the control types whole (one line, whatever its length).
Profile = Literal["default", "seed"]
#: The control types the seed profile sends whole (spec §10.2-a).
SEED_WHOLE_TYPES: Final = frozenset(
    {"meta_init", "meta_files", "error", "awaiting_frontend_tools", "meta_final", "meta_compaction"}
)
#: Types the seed profile's clients do not know: the types added after the seed (spec §10.2-d).
SEED_UNKNOWN_TYPES: Final = frozenset({"meta_compaction"})

#: Ids of calls still waiting for a result, per agent and kind. A stream with more
#: outstanding calls than this loses the oldest, which can only cause a false W165/W166.
MAX_PENDING_IDS: Final = 4096

_KNOWN_TYPES: Final = frozenset(ENVELOPE_TYPES)
_BASE: Final = (("type", str), ("agent", str), ("final", bool), ("delta", str))
_BASE_NAMES: Final = frozenset(name for name, _ in _BASE)
_TOOL_EXTRAS: Final[dict[str, tuple[type, bool]]] = {"id": (str, True), "name": (str, True)}
#: Per type: extra field -> (JSON type, required). spec §4.2-§4.14.
_EXTRAS: Final[dict[str, dict[str, tuple[type, bool]]]] = {
    "meta_init": {},
    "thinking": {},
    "text": {},
    "citation": {
        "citation_type": (str, True),
        "document_index": (int, False),
        "document_title": (str, False),
        "start_char_index": (int, False),
        "end_char_index": (int, False),
        "start_page_number": (int, False),
        "end_page_number": (int, False),
        "url": (str, False),
        "title": (str, False),
    },
    "tool_call": _TOOL_EXTRAS,
    "server_tool_call": _TOOL_EXTRAS,
    "tool_result": _TOOL_EXTRAS,
    "tool_result_image": {**_TOOL_EXTRAS, "src": (str, True), "media_type": (str, True)},
    "server_tool_result": _TOOL_EXTRAS,
    "awaiting_frontend_tools": {},
    "meta_files": {},
    "error": {},
    "meta_final": {},
    "meta_compaction": {},
}
_SECTION: Final[dict[str, str]] = {t: f"4.{i + 2}" for i, t in enumerate(ENVELOPE_TYPES)}
#: The seed's three citation types and the two more the API sends (`content_block_location`,
#: `search_result_location`), which the adapter carries (spec §4.5, anthropic-adapter A3.3-c).
_CITATION_TYPES: Final = frozenset(
    {"char_location", "page_location", "web_search_result_location", "content_block_location", "search_result_location"}
)
#: Types whose reassembled delta is JSON the validator parses (spec §7.5).
_JSON_TYPES: Final = frozenset(
    {
        "meta_init",
        "meta_final",
        "meta_files",
        "error",
        "awaiting_frontend_tools",
        "tool_call",
        "server_tool_call",
        "meta_compaction",
    }
)
_ATOMIC: Final = frozenset({"citation", "tool_result_image"})
#: Per type: every field it may carry (the base ones and its extras), for the common case.
_ALLOWED: Final[dict[str, frozenset[str]]] = {t: _BASE_NAMES | frozenset(x) for t, x in _EXTRAS.items()}
#: Types whose blocks carry an id and a name on every line (spec §7.2).
_ID_TYPES: Final = frozenset(t for t, extras in _EXTRAS.items() if "id" in extras)
#: Types with line checks of their own (``Validator._type_checks``).
_CHECKED: Final = frozenset({"citation", "server_tool_result", "tool_result_image"})
#: Types whose lines ``Validator._run`` may check inline (the rest always take ``feed``'s path;
#: ``meta_compaction`` is rare and has its order rule, spec §8.1-b).
_INLINE_TYPES: Final = _KNOWN_TYPES - _CHECKED - {"meta_compaction"}
_JSON_NAMES: Final[dict[type, str]] = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    list: "an array",
    dict: "an object",
}
_decode_json = msgspec.json.decode
_encode_json = msgspec.json.encode


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


def _json_name(value: object) -> str:
    if value is None:
        return "null"
    return _JSON_NAMES.get(type(value), type(value).__name__)


class Violation(msgspec.Struct, frozen=True, kw_only=True):
    """One broken rule, where it was found.

    Attributes:
        code: the stable code, ``E1xx`` (error) or ``W1xx`` (warning); see ``CODES``.
        severity: ``"error"`` or ``"warning"``.
        line: 1-based physical line of the input where the envelope or SSE event starts
            (for a block, the line that opened it; for the end of the stream, the last line).
        offset: 0-based byte offset of that line in the input.
        agent: the envelope's ``agent``, when it has a usable one.
        type: the envelope's ``type``, when it has a usable one.
        message: one sentence.
        section: the spec section of the rule (``spec/envelope-v1.md``).
        column: 1-based byte column inside the line, when the fault is at a known byte.
    """

    code: str
    severity: Severity
    line: int
    offset: int
    agent: str | None
    type: str | None
    message: str
    section: str
    column: int = 1

    def __str__(self) -> str:
        # spec/cli.md C8-a: the 0-based offset labelled as such (it is the line's, not the column's)
        return (
            f"line {self.line}, column {self.column} (the line at byte offset {self.offset}): "
            f"{self.code} {self.message} (spec §{self.section})"
        )

    def to_dict(self) -> dict[str, object]:
        """The machine form: ``code, severity, line, offset, agent, type, message``."""
        return {
            "code": self.code,
            "severity": self.severity,
            "line": self.line,
            "offset": self.offset,
            "agent": self.agent,
            "type": self.type,
            "message": self.message,
        }


def _violation(
    code: str,
    message: str,
    line: int,
    offset: int,
    agent: str | None = None,
    type: str | None = None,
    column: int = 1,
) -> Violation:
    severity, section, _ = CODES[code]
    return Violation(
        code=code,
        severity=severity,
        line=line,
        offset=offset,
        agent=agent,
        type=type,
        message=message,
        section=section,
        column=column,
    )


# -- the rules: one function per code ---------------------------------------------------
#
# Every code of ``CODES`` is reported by exactly one function, registered here under its
# code with ``@_rule``; nothing else calls ``_violation`` (a test reads this module's
# source to hold that). The checks that only look at one line or one payload are
# dispatched by type from ``_LINE_RULES`` and ``_PAYLOAD_RULES`` below; the rest are
# called where the line's flow through the stream meets them (a block opening or
# closing, the end of the stream), and most of those are ``Validator`` methods because
# they read or update per-stream state.

_F = TypeVar("_F", bound="Callable[..., None]")

#: code -> the one function that reports it. Filled by ``@_rule``; the severity, section
#: and meaning of each code are in ``CODES``.
RULES: Final[dict[str, Callable[..., None]]] = {}


def _rule(code: str) -> Callable[[_F], _F]:
    """Register the function that reports ``code`` (one per code)."""
    if code not in CODES or code in RULES:
        raise AssertionError(f"{code}: not in CODES, or registered twice")

    def register(check: _F) -> _F:
        RULES[code] = check
        return check

    return register


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
    out.append(_violation("E104", f"unknown envelope type {kind!r}", lno, off, agent, None))


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
        message = f"field `{name}` is not allowed on a {kind} envelope (§{section})"
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


#: The checks of one line of a known type (routing aside): ``(obj, kind, final, delta, lno, off, agent, out)``.
_LineRule = Callable[[dict[str, Any], str, object, str, int, int, "str | None", list[Violation]], None]


@_rule("W114")
def _w114_citation_type(
    obj: dict[str, Any],
    kind: str,
    _final: object,
    _delta: str,
    lno: int,
    off: int,
    agent: str | None,
    out: list[Violation],
) -> None:
    ctype = obj.get("citation_type")
    if isinstance(ctype, str) and ctype not in _CITATION_TYPES:
        # [V4.5-a] SHOULD be one of the seed's three citation types or the API's two more
        message = f"citation_type {ctype!r} is not one of {', '.join(sorted(_CITATION_TYPES))}"
        out.append(_violation("W114", message, lno, off, agent, kind))


@_rule("W115")
def _w115_result_name(
    obj: dict[str, Any],
    kind: str,
    _final: object,
    _delta: str,
    lno: int,
    off: int,
    agent: str | None,
    out: list[Violation],
) -> None:
    rname = obj.get("name")
    if isinstance(rname, str) and not rname.endswith("_tool_result"):
        # [V4.10-a] name is the API's result block type, e.g. web_search_tool_result
        message = (
            f"server_tool_result name {rname!r} is not an API result block type "
            "(those end in `_tool_result`, e.g. web_search_tool_result)"
        )
        out.append(_violation("W115", message, lno, off, agent, kind))


@_rule("E121")
def _e121_marker_delta(
    _obj: dict[str, Any],
    kind: str,
    final: object,
    delta: str,
    lno: int,
    off: int,
    agent: str | None,
    out: list[Violation],
) -> None:
    if final is True and delta:
        # [V5.1-a] a streamed block's final marker carries an empty delta
        message = f"final marker of a {kind} block has a non-empty delta ({len(delta)} characters)"
        out.append(_violation("E121", message, lno, off, agent, kind))


@_rule("E124")
def _e124_image_final(
    _obj: dict[str, Any],
    kind: str,
    final: object,
    _delta: str,
    lno: int,
    off: int,
    agent: str | None,
    out: list[Violation],
) -> None:
    if final is True:
        # [V4.9-a] an image never closes anything; the tool_result marker does
        message = "tool_result_image has final: true; images always carry false"
        out.append(_violation("E124", message, lno, off, agent, kind))


@_rule("E125")
def _e125_image_delta(
    _obj: dict[str, Any],
    kind: str,
    _final: object,
    delta: str,
    lno: int,
    off: int,
    agent: str | None,
    out: list[Violation],
) -> None:
    if delta:
        # [V4.9-a] ... and carries no text
        out.append(_violation("E125", "tool_result_image has a non-empty delta", lno, off, agent, kind))


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

    __slots__ = ("begun", "id", "line", "name", "offset", "parts", "size", "unchecked")

    def __init__(self, line: int, offset: int, id: object, name: object, keep: bool, begun: bool = False) -> None:
        self.line = line
        self.offset = offset
        self.id = id
        self.name = name
        self.parts: list[str] | None = [] if keep else None
        self.size = 0
        self.unchecked = False  # W149 reported; deltas no longer kept
        self.begun = begun  # a continuation's block that may have opened before its first line [V2.1-e]


class _Agent:
    """Per-agent flags (spec §8.1) and the open blocks of the agent, by type."""

    __slots__ = (
        "after_final_reported",
        "calls",
        "carried",
        "citations_closed",
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
        # [V2.1-e] In a continuation, an agent whose first line is not meta_init started
        # before it (``carried``); ``seen`` holds the types of its lines so far: the first
        # block of each other type may have opened before the continuation's first line.
        self.carried = False
        self.seen: set[str] | None = None


def _remember(pending: dict[str, None], id: str) -> None:
    pending[id] = None
    if len(pending) > MAX_PENDING_IDS:
        del pending[next(iter(pending))]


class Validator:
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
        "_agents",
        "_closed",
        "_continuation",
        "_count",
        "_done",
        "_done_reported",
        "_id_reported",
        "_last",
        "_last_id",
        "_next_offset",
        "_open_count",
        "_plain",
        "_refused",
        "_unknown_seen",
        "_unreadable_seen",
        "_whole_types",
        "max_bytes",
        "max_payload_bytes",
        "profile",
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
        self.max_bytes: Final = max_bytes
        self.max_payload_bytes: Final = max_payload_bytes
        self.profile: Final = profile
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
        except UnicodeDecodeError as exc:
            message = f"invalid UTF-8 at column {exc.start + 1} ({exc.reason})"
            _e100_not_utf8(message, lno, off, out, exc.start + 1)
            return
        self._line(text, len(data), lno, off, out)

    # Over 60 lines on purpose: this is the hot loop of the batch path, with the common
    # line's checks inlined so that a valid line costs one decode and no call; splitting
    # it into functions would add calls per line (the speed it exists for). Every line it
    # does not take goes to _slow, and a property test compares it with feed line by line.
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
        for k, line in enumerate(data):
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
                lno, off = where(k)
                if final:
                    self._closed_block(st, agent, kind, delta, lno, off, out)
                    continue
                block = _Block(lno, off, wid, wname, kind in json_types)
                st.open[kind] = block
                self._open_count += 1
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
                rule(obj, kind, final, raw_delta, lno, off, agent, out)
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
            rule(obj, v_type, final, delta, lno, off, v_agent, out)
        if v_agent is None or type(final) is not bool:
            return  # no block to route the line to; the line-level violations say why
        self._route(obj, v_agent, v_type, final, delta, lno, off, out)

    @_rule("E119")
    def _e119_unknown_to_profile(self, kind: str, lno: int, off: int, agent: str | None, out: list[Violation]) -> None:
        # spec §10.2-d: the seed profile's clients know only the seed's 13 types
        message = (
            f"{kind} under the {self.profile} profile, whose clients know only the seed's 13 types; "
            "a seed-profile producer puts compactions in meta_final's `compactions`"
        )
        out.append(_violation("E119", message, lno, off, agent, kind))

    def _next_response(self, out: list[Violation]) -> None:
        """A recording's next response starts: end this one (E120 per open block), start afresh."""
        self._e120_unclosed(out)
        self._agents.clear()  # in place: the batch loop (_run) holds this dict
        self._continuation = False  # [V2.1-e] a next response starts at its own start
        self._open_count = 0
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
        elif kind in _ID_TYPES:
            _e127_id_changes(block, obj.get("id"), obj.get("name"), agent, kind, lno, off, out)
        if block.parts is not None and delta:
            self._collect(block, block.parts, agent, kind, delta, out)
        if final:
            del st.open[kind]
            self._open_count -= 1
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
            _remember(st.calls, wid)
        elif kind == "server_tool_call":
            _remember(st.server_calls, wid)
        elif st.carried:  # [V2.1-e] its call may be before the continuation: answered, not judged
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
        elif final:
            del st.open["citation"]
            self._open_count -= 1
        if final and st.has_text:
            st.citations_closed = True

    # -- what the stream wrapper feeds: SSE field lines, refused lines, the end --------------

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
        shown = name[:40].decode("utf-8", "replace")
        message = (
            f"SSE line with field {shown!r} is ignored (not data, event, id or retry); "
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
            f"SSE id {text[:40]!r} does not increase on the id before it ({last[:40]!r}); a client "
            "resuming with Last-Event-ID could miss or repeat events (later ones are not reported)"
        )
        out.append(_violation("W118", message, lno, off))

    def _unreadable(self, message: str, lno: int, off: int, column: int, out: list[Violation]) -> None:
        """A line the reader refused, where the wrapper found it: E100 (not UTF-8) or E109 (over its cap)."""
        self._unreadable_seen = True
        message += "; skipped to the next line"
        if "UTF-8" in message:  # the reader has no codes of its own; its two refusals differ so
            _e100_not_utf8(message, lno, off, out, column)
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


@_rule("W113")
def _w113_named_event(name: bytes, lno: int, off: int, out: list[Violation]) -> None:
    if name not in (b"", b"message"):
        # [V2.1-a] EventSource.onmessage sees only unnamed and `message` events
        shown = name.decode("utf-8", "replace")
        message = (
            f"SSE event named {shown!r}: EventSource delivers it to onmessage only when it is unnamed or `message`"
        )
        out.append(_violation("W113", message, lno, off))


@_rule("E127")
def _e127_id_changes(
    block: _Block, wid: object, wname: object, agent: str, kind: str, lno: int, off: int, out: list[Violation]
) -> None:
    if wid != block.id or wname != block.name:
        # [V7.2-a] a buffered block keeps its id and name on every line
        field, was, now = ("id", block.id, wid) if wid != block.id else ("name", block.name, wname)
        message = f"{field} {now!r} differs from {was!r} of the open {kind} block (opened on line {block.line})"
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
    if st.calls.pop(wid, 0) is not None:
        # [V8.1-d] SHOULD: a result answers an earlier call (a resumed stream may lack it)
        message = f"tool_result id {wid!r}: no earlier tool_call of this agent announced it"
        out.append(_violation("W165", message, lno, off, agent, "tool_result"))


@_rule("W166")
def _w166_unannounced_server_result(st: _Agent, wid: str, agent: str, lno: int, off: int, out: list[Violation]) -> None:
    if st.server_calls.pop(wid, 0) is not None:
        # [V8.1-d] ... and a server result an earlier server call
        message = f"server_tool_result id {wid!r}: no earlier server_tool_call of this agent"
        out.append(_violation("W166", message, lno, off, agent, "server_tool_result"))


@_rule("E122")
def _e122_image_outside(agent: str, lno: int, off: int, out: list[Violation]) -> None:
    # [V7.3-a] an image joins the open tool_result of its agent
    message = "tool_result_image with no open tool_result of its agent"
    out.append(_violation("E122", message, lno, off, agent, "tool_result_image"))


@_rule("E123")
def _e123_image_id(obj: dict[str, Any], block: _Block, agent: str, lno: int, off: int, out: list[Violation]) -> None:
    for field in ("id", "name"):
        value = obj.get(field)
        expected = block.id if field == "id" else block.name
        if isinstance(value, str) and value != expected:
            # [V7.3-b] ... with the same id and name
            message = (
                f"tool_result_image {field} {value!r} differs from {expected!r} of the open tool_result "
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
    fmt = value.get("format") if isinstance(value, dict) else None
    if isinstance(fmt, str) and fmt != "json":
        # spec §4.2-a: the stream is JSON envelopes; clients pick their parser from `format`
        origin = cast("dict[str, Any]", value).get("migrated_from")
        hint = (
            f" (the origin {origin!r} belongs in migrated_from, as it is)"
            if isinstance(origin, str)
            else '; a migrated stream keeps its origin in "migrated_from"'
        )
        message = (
            f'meta_init format {fmt!r} contradicts the stream, which is JSON envelopes: say "json"'
            f"{hint}; clients that pick their parser from format show nothing"
        )
        out.append(_violation("W144", message, lno, off, agent, kind))


@_rule("E142")
def _e142_agent_uuid(
    value: object, kind: str, _where: str, agent: str, lno: int, off: int, out: list[Violation]
) -> None:
    uuid = value.get("agent_uuid") if isinstance(value, dict) else None
    if isinstance(uuid, str) and uuid != agent:
        # [V4.2-a] meta_init describes the agent that sends it
        message = f"meta_init agent_uuid {uuid!r} differs from the envelope's agent {agent!r}"
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
        problems.append(f'{what} key `trigger` must be "auto" or "manual", got {trigger!r}')
    for key in _COUNTS:
        count = value.get(key)
        if type(count) is int and count < 0:
            problems.append(f"{what} key `{key}` must be an integer >= 0, got {count}")
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
    "meta_files": _meta_files_shape,
    "awaiting_frontend_tools": _pending_shape,
    "error": _object_shape,
    "tool_call": _arguments_shape,
    "server_tool_call": _arguments_shape,
}
assert frozenset(_SHAPES) == _JSON_TYPES


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


# -- bytes of a recording --------------------------------------------------------------

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


class StreamValidator:
    """Checks the bytes of a recording (SSE capture or JSON lines): ``feed(bytes)``, ``close()``.

    Splits the input with ``StreamReader`` and hands each envelope line, each SSE field
    line and each refusal of the reader, with its position, to a ``Validator``, which
    judges them; this class names no code. Input the reader cannot read (invalid UTF-8, a
    line over ``max_line_bytes``) is reported at its line, and checking resumes after the
    line's end with a fresh reader whose positions are shifted to the whole input.

    Speed: recovery needs the reader fed one physical line at a time, which costs as
    much as the checks themselves. So the complete lines of a chunk go to the reader in
    one call whenever it provably cannot raise on them and no SSE line check would
    speak (``_whole_ok``); only other spans go line by line. That call is
    ``StreamReader.feed_batch``, and its lines go to the validator's batch loop
    (``Validator._run``, as ``feed_many``): the read path's pair, ``feed_batch`` and
    ``Reconstructor.feed_many``, with the checks in place of the rebuilding. The
    findings are the same either way (property tests compare the paths on damaged input).

    Attributes:
        validator: the line validator (its ``max_bytes`` is the bound).
        format: the input format once detected (``"sse"`` or ``"jsonl"``).
    """

    __slots__ = (
        "_base_line",
        "_base_offset",
        "_clean",
        "_closed",
        "_cr_end",
        "_drop_lf",
        "_format",
        "_head",
        "_held",
        "_held_size",
        "_jl_line",
        "_jl_start",
        "_line_no",
        "_line_start",
        "_max_line",
        "_offset",
        "_pending_line",
        "_quiet",
        "_reader",
        "_skipping",
        "format",
        "validator",
    )

    def __init__(
        self,
        format: Literal["auto", "sse", "jsonl"] = "auto",
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        profile: Profile = "default",
        continuation: bool = False,
    ) -> None:
        """Create a validator for one recording.

        Args:
            format: the input format, or ``"auto"`` to detect it from the first byte.
            max_bytes: the bound on one envelope line (spec §6.1).
            max_line_bytes: the reader's cap on one physical line (spec §2.3).
            profile: the profile to judge by, ``"default"`` or ``"seed"`` (spec §10).
            continuation: the recording's first response resumes one whose start it does
                not hold, as a server answers ``Last-Event-ID`` (``Validator``, [V2.1-e]).

        Raises:
            ValueError: an unknown profile.
        """
        self.validator: Final = Validator(max_bytes=max_bytes, profile=profile, continuation=continuation)
        self._format: Literal["auto", "sse", "jsonl"] = format
        self.format: Literal["sse", "jsonl"] | None = None if format == "auto" else format
        self._max_line = max_line_bytes
        self._reader = StreamReader(format, max_line_bytes=max_line_bytes)
        self._base_line = 0  # the current reader's line 1 is input line _base_line + 1
        self._base_offset = 0
        self._offset = 0  # input offset of the next byte fed
        # The input line at self._offset and where it starts. Lines end as the reader
        # ends them: LF in JSON lines; CR, LF or CRLF in SSE (and before detection).
        self._line_no = 1
        self._line_start = 0
        # Before detection only: the same, counting LF alone (what JSON lines will count).
        self._jl_line = 1
        self._jl_start = 0
        self._head = b""  # the first bytes of the current line (for the SSE field checks)
        self._held: list[bytes] = []  # the current line's bytes not yet fed to the reader
        self._held_size = 0
        self._skipping = False  # after an unreadable line: drop bytes up to its line end
        self._cr_end = False  # the last line ended in CR: an LF next is the rest of a CRLF
        self._drop_lf = False  # ... and the reader restarted after it: drop that LF here
        self._clean = True  # the reader was fed nothing, or only one LF (see _absorb)
        self._pending_line = 0  # the unreadable line being skipped
        self._quiet = 0  # an input offset where the reader held no event (see _whole_ok)
        self._closed = False

    def feed(self, chunk: bytes) -> list[Violation]:
        """Consume bytes of the recording; return the violations they reveal.

        Raises:
            DecodeError: ``feed()`` after ``close()``.
        """
        if self._closed:
            raise DecodeError("feed() after close()")
        out: list[Violation] = []
        # The line that began in an earlier chunk, and the one this chunk leaves open,
        # go through the reference path (_feed_by_line). The complete lines between them go to
        # the reader in one call when no line among them can make the reader raise or
        # the SSE line checks speak (_whole_ok); otherwise line by line, as before. Both
        # give the same violations: tests/validator property
        # test_fast_path_equals_line_by_line.
        first = chunk.find(b"\n")
        if first < 0:
            if chunk:
                self._feed_by_line(chunk, out)
            return out
        self._feed_by_line(chunk[: first + 1], out)
        start = first + 1
        last = chunk.rfind(b"\n")
        if last > first and chunk[start] == 0x0A:
            # A blank line next (it ends the SSE event the first line was part of): on
            # its own too, so the span can start with an event, as the reader's batch
            # path needs (StreamReader.feed_batch).
            self._feed_by_line(b"\n", out)
            start += 1
        if last >= start:
            if self._whole_ok(chunk, start, last + 1):
                self._whole(chunk[start : last + 1], out)
            else:
                self._feed_by_line(chunk[start : last + 1], out)
        if last + 1 < len(chunk):
            self._feed_by_line(chunk[last + 1 :], out)
        return out

    def _whole_ok(self, chunk: bytes, start: int, stop: int) -> bool:
        """Whether ``chunk[start:stop]`` (complete lines, from a line start) may go to the reader whole.

        It may when the reader cannot raise on it and no line of it is one the SSE line
        checks report: then the reader gives the same lines in one call as line by line,
        and nothing else happens between them. The reader raises only on invalid UTF-8
        (ruled out by decoding the span), on a line over ``max_line_bytes`` (the span is
        no longer) and on an event's data over it (the data of the event in progress came
        after the last point where no event was, ``_quiet``, so the bytes since then bound it).
        A lone CR ends an SSE line the LF count would miss, so an SSE span with one takes
        the line-by-line path, which counts it.
        """
        if self._skipping or self.format is None or self._reader.format is None or self._cr_end:
            return False
        size = stop - start
        if size > self._max_line:
            return False
        sse = self.format == "sse"
        if sse and self._offset - self._quiet + size > self._max_line:
            return False
        span = memoryview(chunk)[start:stop]
        if (
            sse
            and chunk.find(b"\r", start, stop) >= 0
            and chunk.count(b"\r", start, stop) != chunk.count(b"\r\n", start, stop)
        ):
            return False
        if not chunk.isascii():
            try:
                str(span, "utf-8")
            except UnicodeDecodeError:
                return False
        if sse:
            # Lines other than `data:`, comments and blank ones: check them as _feed_by_line would.
            quiet = self.validator._sse_quiet
            search = _OTHER_SSE_LINE.search
            at = start - 1  # chunk[start - 1] is the LF that ends the line before
            end = stop - 1
            ids: list[bytes] = []
            while (found := search(chunk, at)) is not None and (at := found.start()) < end:
                line_end = chunk.find(b"\n", at + 1)
                field = _sse_field_of(chunk[at + 1 : min(line_end + 1, at + 257)])
                if field is not None:
                    if field[0] == b"id":
                        ids.append(field[1].removeprefix(b" "))
                    elif not quiet(*field):
                        return False
                at += 1
            if ids and not self.validator._ids_quiet(ids, chunk.find(b"[DONE]", start, stop) >= 0):
                return False
        return True

    def _whole(self, lines_bytes: bytes, out: list[Violation]) -> None:
        """Complete lines, cleared by ``_whole_ok``, to the reader in one call and to the batch loop.

        The lines come from ``feed_batch``; an event of several data lines (only in a
        batch of ``str`` lines) needs its E111 right after its own findings, so such a
        batch goes line by line through ``_text``; any other goes to ``Validator._run``.
        """
        at = self._offset
        size = len(lines_bytes)
        self._offset = at + size
        base_line = self._base_line
        base_offset = self._base_offset
        # feed_batch returns its _LineBatch, typed as the Sequence[RawLine] it also is
        batch = cast("_LineBatch", self._reader.feed_batch(lines_bytes))
        data = batch.data
        if data and type(data[0]) is str and any("\n" in x for x in data):
            # An SSE event of several data lines (E111): its violation follows the line's own.
            event = self.validator._event
            for raw in batch:
                event(raw.data, raw.line + base_line, raw.offset + base_offset, out)
        elif data:
            position = batch.position

            def where(index: int) -> tuple[int, int]:
                at = position(index)
                return (at.line or 0) + base_line, (at.offset or 0) + base_offset

            self.validator._run(data, where, out)
        self._line_no += lines_bytes.count(b"\n")
        self._line_start = self._offset
        if self.format == "sse":
            # The last blank line ends any event: no event data is held past it.
            # (LF LF and LF CR LF hold one; so does a span opening with LF or CR LF, since
            # the line before it ended in LF.)
            lf = lines_bytes.rfind(b"\n\n")
            crlf = lines_bytes.rfind(b"\n\r\n")
            if lf >= 0 or crlf >= 0:
                self._quiet = at + max(lf + 2, crlf + 3)
            elif lines_bytes[0] == 0x0A:
                self._quiet = at + 1
            elif lines_bytes.startswith(b"\r\n"):
                self._quiet = at + 2

    def _feed_by_line(self, piece: bytes, out: list[Violation]) -> None:
        """The reference path: ``piece`` one line at a time, each with its line end.

        Each call of the reader then completes at most one line, so when it raises, the
        fault is in that line and every event before it has been returned: what is
        found cannot depend on how the input was chunked (issue 12 §3). The line ends
        are the reader's: LF in JSON lines; CR, LF or CRLF in SSE and before detection.
        """
        n = len(piece)
        start = 0
        while start < n:
            if self.format == "jsonl":
                end = piece.find(b"\n", start)
            else:
                found = _LINE_END.search(piece, start)
                end = -1 if found is None else found.end() - 1
            stop = n if end < 0 else end + 1
            self._segment(piece[start:stop], out)
            start = stop

    def _ends_line(self, segment: bytes) -> bool:
        last = segment[-1]
        return last == 0x0A or (last == 0x0D and self.format != "jsonl")

    def _segment(self, segment: bytes, out: list[Violation]) -> None:
        """Bytes of one line, up to and including its line end if they have it."""
        at = self._offset
        self._offset += len(segment)
        crlf_rest = False  # the LF of a CRLF split across chunks: it ends no new line
        if self._cr_end:
            self._cr_end = False
            crlf_rest = segment == b"\n"
            if crlf_rest and self._drop_lf:
                # the reader restarted after the CR: the LF went with the unreadable line
                self._drop_lf = False
                self._base_offset += 1
                self._quiet = self._line_start = self._jl_start = self._offset
                return
        self._drop_lf = False
        if self._skipping:
            if self._ends_line(segment) and not crlf_rest:
                self._restart(segment[-1] == 0x0D)
            return
        if not crlf_rest and len(self._head) < 256:
            self._head += segment[: 256 - len(self._head)]
        taken = self._take(segment, at)
        if taken is None:
            return
        segment, line_at = taken
        if not crlf_rest and self.format is None and self._clean and _BLANK_LF.fullmatch(segment):
            self._absorb()
            return
        self._clean = False
        detected = self.format is None
        try:
            lines = self._reader.feed(segment)
        except DecodeError as exc:
            self._set_format()
            self._unreadable(exc, segment, line_at, out)
            return
        self._set_format()
        if detected and self.format is None and segment[-1] == 0x0A:
            self._jl_line += 1
            self._jl_start = self._offset
        self._check_lines(lines, out)
        if crlf_rest:
            if self._quiet == at:
                self._quiet = self._offset
            self._line_start = self._offset
            return
        if self._ends_line(segment):
            if line_at == self._line_start and segment in _BLANK_LINES:
                self._quiet = self._offset  # a blank line: no event in progress after it
            if self.format == "sse":
                self._check_sse_line(out)
            self._line_no += 1
            self._line_start = self._offset
            self._head = b""
            self._cr_end = segment[-1] == 0x0D

    def _check_lines(self, lines: list[RawLine], out: list[Violation]) -> None:
        """The reader's lines, at their positions in the whole input, to the line validator."""
        event = self.validator._event
        for raw in lines:
            event(raw.data, raw.line + self._base_line, raw.offset + self._base_offset, out)

    def _take(self, segment: bytes, at: int) -> tuple[bytes, int] | None:
        """The bytes to feed the reader now and the offset they start at, or None while held.

        Part of a line is held here until its line end (or until it is over the cap, when
        the reader must see it to refuse it), so the reader is fed each line once however
        small the chunks (issue 18 §1).
        """
        if not self._ends_line(segment) and self._held_size + len(segment) <= self._max_line:
            self._held.append(segment)
            self._held_size += len(segment)
            return None
        line_at = at - self._held_size
        if self._held:
            self._held.append(segment)
            segment = b"".join(self._held)
            self._held = []
            self._held_size = 0
        return segment, line_at

    def _set_format(self) -> None:
        """Take the format once the reader has detected it; JSON lines count lines by LF alone."""
        if self.format is None and self._reader.format is not None:
            self.format = self._reader.format
            if self.format == "jsonl":
                self._line_no, self._line_start = self._jl_line, self._jl_start

    def _absorb(self) -> None:
        """A blank line before the format is known: restart the reader after it, holding only its LF.

        The reader would otherwise keep every leading blank line until the first byte of
        content and look at all of them again per line (issue 18 §1). Blank lines carry
        no event in either format; the one LF the fresh reader is fed keeps a byte order
        mark after them from counting as the input's first bytes, as for the reader
        that saw them all.
        """
        self._base_line = self._line_no - 1
        self._base_offset = self._offset - 1
        self._reader = StreamReader("auto", max_line_bytes=self._max_line)
        self._reader.feed(b"\n")
        self._line_no += 1
        self._line_start = self._jl_start = self._offset
        self._jl_line += 1
        self._quiet = self._offset
        self._head = b""

    def _check_sse_line(self, out: list[Violation]) -> None:
        """The field line just ended, to the validator's SSE line rules (W112, W113, W118)."""
        head = self._head.removeprefix(b"\xef\xbb\xbf") if self._line_start == 0 else self._head
        field = _sse_field_of(head)
        if field is not None:
            self.validator._sse_field(field[0], field[1], self._line_no, self._line_start, out)

    def _unreadable(self, exc: DecodeError, segment: bytes, at: int, out: list[Violation]) -> None:
        where = exc.position
        line = self._line_no if where.line is None else where.line + self._base_line
        err_at = at if where.offset is None else where.offset + self._base_offset
        line_start = self._line_start if line == self._line_no else err_at
        self.validator._unreadable(exc.message, line, line_start, max(1, err_at - line_start + 1), out)
        # [V2.3-a] resume after the end of the unreadable line (the reader's line end: CR
        # counts in SSE) with a fresh reader; the event it was part of is lost with it.
        self._pending_line = line
        self._skipping = True
        if self._ends_line(segment):
            self._restart(segment[-1] == 0x0D)

    def _restart(self, after_cr: bool) -> None:
        self._skipping = False
        self._base_line = self._pending_line
        self._base_offset = self._offset
        self._quiet = self._offset
        fmt: Literal["auto", "sse", "jsonl"] = self.format or self._format
        self._reader = StreamReader(fmt, max_line_bytes=self._max_line)
        self._clean = True
        self._line_no = self._jl_line = self._base_line + 1
        self._line_start = self._jl_start = self._offset
        self._head = b""
        self._cr_end = self._drop_lf = after_cr

    def close(self) -> list[Violation]:
        """Signal the end of the recording; return the last violations.

        Raises:
            DecodeError: ``close()`` twice.
        """
        if self._closed:
            raise DecodeError("close() called twice")
        self._closed = True
        out: list[Violation] = []
        if self._held and not self._skipping:
            held = b"".join(self._held)
            self._held = []
            try:
                self._reader.feed(held)  # no line end: it completes no line
            except DecodeError as exc:
                self._set_format()
                self._unreadable(exc, held, self._offset - self._held_size, out)
            self._set_format()
        if not self._skipping:
            try:
                lines = self._reader.close()
            except DecodeError as exc:
                where = exc.position
                line = self._line_no if where.line is None else where.line + self._base_line
                offset = self._line_start if where.offset is None else where.offset + self._base_offset
                _e110_truncated(exc.message, line, offset, out)
                lines = []
            for raw in lines:
                out += self.validator.feed(
                    RawLine(raw.data, raw.line + self._base_line, raw.offset + self._base_offset)
                )
            if self._head and self.format == "sse":
                self._check_sse_line(out)
        out += self.validator._end(self._offset, self.format)
        return out
