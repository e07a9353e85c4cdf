"""The validator's code table and registry: what each code means, and who reports it.

Owns ``CODES`` (severity, spec section and meaning of each code; ``explain`` and
``spec/validation.md`` §4 read it), ``Violation`` and ``_violation`` (the one way a
violation is built), the ``RULES`` registry that ``@_rule`` fills (one function per
code, defined in ``_validator_rules``, ``_validator_blocks`` and ``_validator_lines``),
the profiles, and the per-type field tables the rules and the line machine share.

Does not own: any rule (each is beside the state it reads), reading lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal, TypeVar

import msgspec

from ._types import ENVELOPE_TYPES

if TYPE_CHECKING:
    from collections.abc import Callable

    pass


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
    "E119": (
        "error",
        "10.2",
        "meta_compaction or meta_status under the seed profile, whose clients know only the seed's 13 types",
    ),
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
    "E168": ("error", "4.6", "tool_call repeating an id of its agent whose call is answered or already edited"),
    "E169": ("error", "2.3", "SSE retry: value of more than MAX_RETRY_DIGITS (10) digits; skipped"),
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
    {"meta_init", "meta_files", "error", "awaiting_frontend_tools", "meta_final", "meta_compaction", "meta_status"}
)
#: Types the seed profile's clients do not know: the types added after the seed (spec §10.2-d, §10.2-e).
SEED_UNKNOWN_TYPES: Final = frozenset({"meta_compaction", "meta_status"})

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
    "meta_status": {},
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
        "meta_status",
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
#: ``meta_compaction`` is rare and has its order rule, spec §8.1-b; ``meta_status`` is refused
#: under the seed profile, spec §10.2-e, which only ``feed``'s path reports).
_INLINE_TYPES: Final = _KNOWN_TYPES - _CHECKED - {"meta_compaction", "meta_status"}
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
