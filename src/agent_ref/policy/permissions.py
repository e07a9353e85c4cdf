"""Permissions: modes, rules, the ``can_use_tool`` callback, and the data of a durable approval.

Owns: what the callback is given (``ToolPermissionContext``) and may answer
(``PermissionAllow``, ``PermissionDeny``), and ``ask``, which calls it (spec
``spec/agent-ref.md`` §12.4); the permission mode and rules (``PermissionMode``,
``PermissionRule``) and ``decide``, the pure decision they make for one call (§12.5);
the per-run state of both (``PermissionState``, serialisable) and how a subagent narrows
it (``PermissionNarrowing``, ``narrow``); the pending call awaiting a person's approval
(``PendingApproval``, its ``awaiting_frontend_tools`` marker) and the validation of the
answer (``parse_approval_answer``, §12.6). Pure code: no I/O. Does not own: what a denial
does to the run (the agent: an ``is_error`` result the model sees; with ``interrupt``
the run ends as ``interrupted``), nor where the state is stored (the agent's state).
"""

from __future__ import annotations

import inspect
import logging
import posixpath
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Final, Literal, get_args

import msgspec

from ..errors import ConfigError, StateError, ToolResultsError
from . import scrub

__all__ = [
    "APPROVAL_KEY",
    "PERMISSION_MODES",
    "CallKind",
    "CanUseTool",
    "PendingApproval",
    "PermissionAllow",
    "PermissionAsk",
    "PermissionDecision",
    "PermissionDeny",
    "PermissionMode",
    "PermissionNarrowing",
    "PermissionResult",
    "PermissionRule",
    "PermissionRuleError",
    "PermissionState",
    "PermitOutcome",
    "ToolPermissionContext",
    "approval_reason",
    "ask",
    "background_denial",
    "check_mode",
    "check_pattern",
    "decide",
    "default_mode",
    "narrow",
    "parse_approval_answer",
    "parse_rule",
    "pattern_matches",
    "resolve",
    "stricter",
]

log = logging.getLogger("agent_ref")

#: ``full``: run every call; ``auto``: the rules decide, a call no rule covers is asked;
#: ``ask``: every call not denied by a rule is asked ([R12.5-c]).
PermissionMode = Literal["full", "auto", "ask"]
#: The modes, least strict first ([R12.5-f]).
PERMISSION_MODES: Final[tuple[str, ...]] = get_args(PermissionMode)
#: What a rule does to the calls it matches.
RuleBehavior = Literal["allow", "deny", "ask"]
#: What kind of call is decided: a frontend call's own pause is its approval ([R12.5-d]).
CallKind = Literal["backend", "frontend", "subagent"]
#: The key of an ``awaiting_frontend_tools`` element that marks a call awaiting approval ([R12.6-a]).
APPROVAL_KEY: Final = "approval"

_RANK: Final = {mode: rank for rank, mode in enumerate(PERMISSION_MODES)}
_PATTERN_CHARS: Final = re.compile(r"[A-Za-z0-9_\-*?]+")
_MAX_PATTERN: Final = 256


class PermissionRuleError(ConfigError, ValueError):
    """A permission rule, mode or narrowing that cannot work; the message names the field."""


def check_pattern(pattern: object, where: str = "pattern") -> str:
    """Return ``pattern`` if it is a valid tool-name pattern, else raise naming ``where`` ([R12.5-a]).

    A pattern is a tool name in which ``*`` stands for any run of characters (none
    included) and ``?`` for exactly one; every other character is itself. Tool names hold
    letters, digits, ``_`` and ``-`` only, so anything else (``.``, ``[``, a space) is a
    mistake and refused rather than never matching.

    Raises:
        PermissionRuleError: naming ``where`` and the first bad character.
    """
    if not isinstance(pattern, str):
        raise PermissionRuleError(f"{where}: a tool-name pattern must be a string, not {type(pattern).__name__}")
    if not pattern or len(pattern) > _MAX_PATTERN:
        raise PermissionRuleError(
            f"{where}: a tool-name pattern has 1 to {_MAX_PATTERN} characters, not {len(pattern)}"
        )
    if not _PATTERN_CHARS.fullmatch(pattern):
        bad = next(c for c in pattern if not _PATTERN_CHARS.fullmatch(c))
        raise PermissionRuleError(
            f"{where}: {pattern!r} has {bad!r} at character {pattern.index(bad)}; a tool-name pattern holds "
            "letters, digits, '_', '-' and the wildcards '*' (any run) and '?' (one character)"
        )
    return pattern


@lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    """``*`` any run, ``?`` one character, everything else literal; the whole text must match."""
    parts = [".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern]
    return re.compile("".join(parts), re.DOTALL)


def pattern_matches(pattern: str, text: str) -> bool:
    """Whether glob ``pattern`` (``*``, ``?``) matches all of ``text``, case-sensitively ([R12.5-a])."""
    return _glob(pattern).fullmatch(text) is not None


def _value_forms(value: str) -> tuple[str, ...]:
    """The forms of an input value a condition is checked on ([R12.5-b]).

    A value that looks like an absolute path is checked both as given and normalised
    (``/a/./b/../c`` is ``/a/c``), so ``..`` can neither escape an allow nor slip past a deny.
    """
    if not value.startswith("/"):
        return (value,)
    normal = posixpath.normpath(value)
    return (value, normal) if normal != value else (value,)


@dataclass(frozen=True, slots=True)
class ToolPermissionContext:
    """What the callback knows besides the tool name and input.

    Attributes:
        agent_uuid: the agent asking.
        run_id: the run.
        tool_use_id: the call.
        reason: why the callback is asked besides the usual check: ``"repeat: ..."`` when
            the call repeats the same tool and input (loop detection, spec [R16.1-a]).
        permission: why the mode and rules ask about the call (``PermissionAsk.reason``),
            when they do ([R12.5-i]).
    """

    agent_uuid: str
    run_id: str
    tool_use_id: str
    reason: str | None = None
    permission: str | None = None


class PermissionRule(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Allow, deny or ask about the calls whose tool name (and input) match ([R12.5-a], [R12.5-b]).

    Attributes:
        behavior: ``allow``, ``deny`` or ``ask``.
        tool: a tool-name pattern (``check_pattern``), e.g. ``mcp__github__*``.
        input: conditions on the call's input, all of which must hold: top-level key →
            glob over that key's string value (e.g. ``{"path": "/memories/notes/*"}``).
            Empty: the tool name alone decides.
        command: a command prefix (``Bash(git status:*)``): the call's ``command`` is it or
            starts with it and a space ([WS3-b]); an allow covers no command with a shell
            operator, a deny or ask covers one any part of which it matches.
        path: a path glob (``Write(src/**)``, ``Edit(*.md)``) over the call's ``file_path``
            or ``path``, relative to ``root`` ([WS3-b]): ``**`` any directories, ``*`` and
            ``?`` within a name; a glob without ``/`` matches a name at any depth.
        root: the workspace the path glob is relative to (absolute); a path outside it is not matched.
    """

    behavior: RuleBehavior
    tool: str
    input: dict[str, str] = msgspec.field(default_factory=dict)
    command: str | msgspec.UnsetType = msgspec.UNSET
    path: str | msgspec.UnsetType = msgspec.UNSET
    root: str | msgspec.UnsetType = msgspec.UNSET

    def __post_init__(self) -> None:
        """Refuse a rule that cannot work, naming the field."""
        if self.behavior not in get_args(RuleBehavior):
            raise PermissionRuleError(f"behavior: must be 'allow', 'deny' or 'ask', not {self.behavior!r}")
        check_pattern(self.tool, "tool")
        if not isinstance(self.input, dict):
            raise PermissionRuleError(f"input: must be an object of key -> pattern, not {type(self.input).__name__}")
        for key, pattern in self.input.items():
            if not isinstance(key, str) or not key:
                raise PermissionRuleError(f"input: a key must be a non-empty string, not {key!r}")
            if not isinstance(pattern, str) or not pattern:
                raise PermissionRuleError(f"input.{key}: a value pattern must be a non-empty string, not {pattern!r}")

    def matches(self, tool_name: str, tool_input: Mapping[str, Any]) -> bool:
        """Whether the rule covers this call ([R12.5-b]: allow needs every form of a value to match, deny/ask one)."""
        if not pattern_matches(self.tool, tool_name):
            return False
        for key, pattern in self.input.items():
            value = tool_input.get(key)
            if not isinstance(value, str):
                return False
            hits = [pattern_matches(pattern, form) for form in _value_forms(value)]
            if not (all(hits) if self.behavior == "allow" else any(hits)):
                return False
        if isinstance(self.command, str) and not _command_matches(
            self.command, tool_input.get("command"), self.behavior
        ):
            return False
        if not isinstance(self.path, str):
            return True
        return _path_matches(self.path, self.root if isinstance(self.root, str) else "", tool_input)

    def describe(self) -> str:
        """The rule as a person reads it: ``deny mcp__github__* where path=/x/*``."""
        where = " and ".join(f"{k}={v}" for k, v in self.input.items())
        spec = f"({self.path})" if isinstance(self.path, str) else ""
        spec = f"({self.command}:*)" if isinstance(self.command, str) else spec
        return f"{self.behavior} {self.tool}{spec}" + (f" where {where}" if where else "")


#: Shell operators after which a command runs another: an allowed prefix does not cover them ([WS3-b]).
_SHELL_OPERATORS: Final = re.compile(r"&&|\|\||[;&|`\n<>()]|\$\(")
_RULE_TEXT: Final = re.compile(r"^([A-Za-z0-9_\-*?]+)(?:\((.*)\))?$", re.DOTALL)


def _command_matches(prefix: str, command: object, behavior: str) -> bool:
    """Whether a ``Bash(prefix:*)`` rule covers ``command`` ([WS3-b])."""
    if not isinstance(command, str):
        return False

    def covers(part: str) -> bool:
        part = part.strip()
        return part == prefix or part.startswith(prefix + " ")

    if behavior == "allow":
        return _SHELL_OPERATORS.search(command) is None and covers(command)
    return any(covers(part) for part in _SHELL_OPERATORS.split(command))


@lru_cache(maxsize=256)
def _path_glob(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            c = pattern[i]
            out.append("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c))
            i += 1
    return re.compile("".join(out), re.DOTALL)


def _path_matches(pattern: str, root: str, tool_input: Mapping[str, Any]) -> bool:
    """Whether a ``Tool(glob)`` rule covers the call's ``file_path`` (or ``path``) ([WS3-b])."""
    value = tool_input.get("file_path", tool_input.get("path"))
    if not isinstance(value, str) or "\x00" in value:
        return False
    base = root or "/"
    full = posixpath.normpath(posixpath.join(base, value))
    if root and full != root and not full.startswith(root.rstrip("/") + "/"):
        return False
    rel = posixpath.relpath(full, base) if root else full.lstrip("/")
    target = rel if "/" in pattern.strip("/") else rel.rsplit("/", 1)[-1]
    return _path_glob(pattern.strip("/") if "/" in pattern.strip("/") else pattern).fullmatch(target) is not None


def parse_rule(text: str, behavior: RuleBehavior, *, root: str | None = None) -> PermissionRule:
    """A rule from the SDK's text form: ``Read``, ``Bash(git status:*)``, ``Write(src/**)``, ``Edit(*.md)`` ([WS3-b]).

    ``Tool(prefix:*)`` matches a command prefix; any other ``Tool(glob)`` a path glob
    relative to ``root`` (the workspace); a bare name is the tool-name pattern alone.

    Raises:
        PermissionRuleError: a text that is none of these, naming it.
    """
    found = _RULE_TEXT.match(text.strip()) if isinstance(text, str) else None
    if found is None:
        raise PermissionRuleError(
            f"rule {text!r}: write a tool name, optionally with a command prefix or a path glob: "
            "'Read', 'Bash(git status:*)', 'Write(src/**)'"
        )
    name, spec = found.group(1), found.group(2)
    if spec is None:
        return PermissionRule(behavior=behavior, tool=name)
    if not spec.strip():
        raise PermissionRuleError(f"rule {text!r}: the parentheses are empty")
    if spec.endswith(":*"):
        return PermissionRule(behavior=behavior, tool=name, command=spec[:-2].strip())
    if root is None:
        return PermissionRule(behavior=behavior, tool=name, path=spec.strip())
    return PermissionRule(behavior=behavior, tool=name, path=spec.strip(), root=posixpath.normpath(root))


@dataclass(frozen=True, slots=True)
class PermissionAllow:
    """Run the call, with ``updated_input`` instead of the model's input when given.

    Attributes:
        updated_input: the input to run with instead of the model's.
        updated_permissions: rules to add for the rest of the run ([R12.5-g]), e.g. an
            ``allow`` of this tool so the same question is not asked again.
        updated_mode: the mode for the rest of the run; never less strict than the
            state's floor ([R12.5-g]).
    """

    updated_input: Mapping[str, Any] | None = None
    updated_permissions: Sequence[PermissionRule] = ()
    updated_mode: PermissionMode | None = None


@dataclass(frozen=True, slots=True)
class PermissionDeny:
    """Do not run the call; the model gets an ``is_error`` result with ``message``.

    Attributes:
        message: what the model is told.
        interrupt: also end the run (stop reason ``interrupted``) once the step's calls
            are answered.
    """

    message: str = "denied by the permission callback"
    interrupt: bool = False


PermissionResult = PermissionAllow | PermissionDeny
#: ``can_use_tool(tool_name, tool_input, context)``: sync or async.
CanUseTool = Callable[[str, dict[str, Any], ToolPermissionContext], PermissionResult | Awaitable[PermissionResult]]


async def ask(
    callback: CanUseTool, name: str, tool_input: Mapping[str, Any], context: ToolPermissionContext
) -> tuple[PermissionResult, str | None]:
    """Ask ``callback`` about one call.

    A callback that raises or answers something else denies the call (fail closed),
    and the failure text is returned for reporting ([R12.4-b]).

    Args:
        callback: the caller's ``can_use_tool``.
        name: the tool.
        tool_input: the input the call would run with.
        context: the call's context.

    Returns:
        The answer, and a failure message when the callback failed.
    """
    try:
        answer = callback(name, dict(tool_input), context)
        if inspect.isawaitable(answer):
            answer = await answer
        if not isinstance(answer, PermissionAllow | PermissionDeny):
            raise TypeError(f"can_use_tool must return PermissionAllow or PermissionDeny, not {type(answer).__name__}")
        if isinstance(answer, PermissionAllow):
            check_allow(answer)
    except Exception as exc:
        message = scrub.public(f"{type(exc).__name__}: {exc}")[:500]
        log.warning("can_use_tool failed for %s (agent %s): %s", name, context.agent_uuid, message)
        return PermissionDeny(message=f"denied: the permission check failed ({message})"), message
    return answer, None


def check_allow(answer: PermissionAllow) -> None:
    """Refuse an allow whose additions cannot work ([R12.5-g]); the message names the field.

    Raises:
        PermissionRuleError: ``updated_input`` not a mapping, a rule not a ``PermissionRule``,
            or an unknown mode.
    """
    if answer.updated_input is not None and not isinstance(answer.updated_input, Mapping):
        raise PermissionRuleError(f"updated_input: must be a mapping, not {type(answer.updated_input).__name__}")
    if isinstance(answer.updated_permissions, str | bytes | Mapping):
        raise PermissionRuleError("updated_permissions: must be a sequence of PermissionRule")
    for index, rule in enumerate(answer.updated_permissions):
        if not isinstance(rule, PermissionRule):
            raise PermissionRuleError(
                f"updated_permissions[{index}]: must be a PermissionRule, not {type(rule).__name__}"
            )
    if answer.updated_mode is not None and answer.updated_mode not in PERMISSION_MODES:
        raise PermissionRuleError(
            f"updated_mode: must be one of {', '.join(PERMISSION_MODES)}, not {answer.updated_mode!r}"
        )


@dataclass(frozen=True, slots=True)
class PermissionAsk:
    """The call needs an answer: ``can_use_tool`` if the agent has one, else a person's ([R12.5-d]).

    Attributes:
        reason: why it is asked (shown to whoever answers; recorded in the pending call).
        durable: with no callback, the run pauses for approval ([R12.6-a]); ``False`` for a
            frontend call, whose own pause is the person's approval.
        rule: the ``ask`` rule that asked, if one did.
    """

    reason: str
    durable: bool = True
    rule: PermissionRule | None = None


#: What ``decide`` answers for one call.
PermissionDecision = PermissionAllow | PermissionDeny | PermissionAsk


def _check_mode(mode: object, where: str = "mode") -> PermissionMode:
    if mode not in PERMISSION_MODES:
        raise PermissionRuleError(f"{where}: must be one of {', '.join(PERMISSION_MODES)}, not {mode!r}")
    return mode  # type: ignore[return-value]  # checked just above


def check_mode(mode: object, where: str = "mode") -> PermissionMode:
    """``mode`` if it is a ``PermissionMode``.

    Raises:
        PermissionRuleError: naming ``where`` and the modes.
    """
    return _check_mode(mode, where)


def stricter(a: PermissionMode, b: PermissionMode | None) -> PermissionMode:
    """The stricter of two modes (``full`` < ``auto`` < ``ask``); ``None`` is no constraint ([R12.5-f])."""
    if b is None:
        return a
    return a if _RANK[a] >= _RANK[b] else b


def default_mode(has_callback: bool) -> PermissionMode:
    """The mode of an agent that was given none ([R12.5-e]).

    ``ask`` when it has ``can_use_tool`` (the callback is asked about every call, as before
    modes existed) and ``full`` when it has not (every call runs, as before).
    """
    return "ask" if has_callback else "full"


def _first(
    rules: Sequence[PermissionRule], behavior: str, name: str, tool_input: Mapping[str, Any]
) -> PermissionRule | None:
    return next((r for r in rules if r.behavior == behavior and r.matches(name, tool_input)), None)


def decide(
    mode: PermissionMode,
    rules: Sequence[PermissionRule],
    tool_name: str,
    tool_input: Mapping[str, Any],
    *,
    kind: CallKind = "backend",
) -> PermissionDecision:
    """Decide one call from the mode and the rules; pure ([R12.5-c], [R12.5-d]).

    Precedence, whatever the rules' order: a matching ``deny`` denies in every mode; then
    ``full`` allows; ``ask`` asks; ``auto`` asks if an ``ask`` rule matches, allows if an
    ``allow`` rule does, and asks when no rule covers the call.

    Args:
        mode: the permission mode.
        rules: every rule in force (configured, inherited, added in the run).
        tool_name: the tool called.
        tool_input: the input the call would run with (after the PreToolUse hooks).
        kind: ``frontend`` for a call the browser runs (its ask is never durable).

    Returns:
        ``PermissionAllow()``, ``PermissionDeny(reason)`` or ``PermissionAsk(reason)``.
    """
    _check_mode(mode)
    denied = _first(rules, "deny", tool_name, tool_input)
    if denied is not None:
        return PermissionDeny(message=f"denied by the permission rule '{denied.describe()}'")
    if mode == "full":
        return PermissionAllow()
    durable = kind != "frontend"
    if mode == "ask":
        return PermissionAsk(reason=f"permission mode 'ask': every call to {tool_name} needs approval", durable=durable)
    asked = _first(rules, "ask", tool_name, tool_input)
    if asked is not None:
        return PermissionAsk(reason=f"the permission rule '{asked.describe()}' asks", durable=durable, rule=asked)
    if _first(rules, "allow", tool_name, tool_input) is not None:
        return PermissionAllow()
    return PermissionAsk(reason=f"no permission rule covers {tool_name}", durable=durable)


class PermissionState(msgspec.Struct, frozen=True, kw_only=True):
    """An agent's permissions for the current run, stored with its state ([R12.5-h]).

    The configured rules (the agent's options) are not stored: they are given again when
    the agent is loaded, like its tools. What the run changed is stored, so it holds after a
    pause and a resume in another process.

    Attributes:
        mode: the mode in force.
        floor: the least strict mode an answer may set (``full`` for a root agent; a
            child's own mode, so it never widens, [R12.5-f]).
        inherited: a child's copy of its parent's rules at spawn, with its narrowing's.
        session: rules added by ``allow`` answers during the run ([R12.5-g]).
    """

    mode: PermissionMode = "full"
    floor: PermissionMode = "full"
    inherited: tuple[PermissionRule, ...] = ()
    session: tuple[PermissionRule, ...] = ()

    def __post_init__(self) -> None:
        """Refuse an unknown mode, or a mode less strict than the floor."""
        _check_mode(self.mode, "mode")
        _check_mode(self.floor, "floor")
        if _RANK[self.mode] < _RANK[self.floor]:
            raise PermissionRuleError(f"mode: {self.mode!r} is less strict than the floor {self.floor!r}")
        for field in ("inherited", "session"):
            for index, rule in enumerate(getattr(self, field)):
                if not isinstance(rule, PermissionRule):
                    raise PermissionRuleError(f"{field}[{index}]: must be a PermissionRule, not {type(rule).__name__}")

    def rules(self, configured: Sequence[PermissionRule] = ()) -> tuple[PermissionRule, ...]:
        """Every rule in force: ``configured``, then inherited, then added in the run."""
        return (*configured, *self.inherited, *self.session)

    def decide(
        self,
        configured: Sequence[PermissionRule],
        tool_name: str,
        tool_input: Mapping[str, Any],
        *,
        kind: CallKind = "backend",
    ) -> PermissionDecision:
        """``decide`` with this state's mode and rules plus the agent's ``configured`` ones."""
        return decide(self.mode, self.rules(configured), tool_name, tool_input, kind=kind)

    def updated(self, answer: PermissionAllow) -> PermissionState:
        """The state after an ``allow`` answer: its rules added (once each), its mode set ([R12.5-g]).

        Raises:
            PermissionRuleError: the answer's additions are malformed, or its mode is less
                strict than the floor (a child may not widen, [R12.5-f]).
        """
        check_allow(answer)
        mode = self.mode if answer.updated_mode is None else answer.updated_mode
        if _RANK[mode] < _RANK[self.floor]:
            raise PermissionRuleError(f"updated_mode: {mode!r} is less strict than this agent's floor {self.floor!r}")
        added = list(self.session)
        for rule in answer.updated_permissions:
            if rule not in added:
                added.append(rule)
        return PermissionState(mode=mode, floor=self.floor, inherited=self.inherited, session=tuple(added))

    def to_json(self) -> bytes:
        """The state as JSON (``from_json`` reads it back equal)."""
        return msgspec.json.encode(self)

    @classmethod
    def from_json(cls, data: bytes | str) -> PermissionState:
        """Read a state written by ``to_json``.

        Raises:
            StateError: the text is not such a state; the message names the field.
        """
        try:
            return msgspec.json.decode(data, type=cls)
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            raise StateError(f"stored permission state: {exc}") from None


@dataclass(frozen=True, slots=True)
class PermissionNarrowing:
    """How a subagent's spec narrows what it inherits ([R12.5-f]); it can only narrow.

    Attributes:
        mode: a mode for the child; the stricter of it and the parent's is used.
        rules: ``deny`` or ``ask`` rules added for the child (an ``allow`` would widen
            and is refused).
    """

    mode: PermissionMode | None = None
    rules: Sequence[PermissionRule] = ()

    def __post_init__(self) -> None:
        """Refuse an ``allow`` rule or an unknown mode, naming the field."""
        if self.mode is not None:
            _check_mode(self.mode, "mode")
        for index, rule in enumerate(self.rules):
            if not isinstance(rule, PermissionRule):
                raise PermissionRuleError(f"rules[{index}]: must be a PermissionRule, not {type(rule).__name__}")
            if rule.behavior == "allow":
                raise PermissionRuleError(
                    f"rules[{index}]: {rule.describe()!r}: a subagent's narrowing may add deny and ask rules "
                    "only; an allow would widen what the parent permits"
                )


def narrow(
    parent: PermissionState, configured: Sequence[PermissionRule], narrowing: PermissionNarrowing | None = None
) -> PermissionState:
    """The state a child starts with: the parent's mode and every rule, narrowed ([R12.5-f]).

    Args:
        parent: the parent's state at the spawn.
        configured: the parent's configured rules (its options).
        narrowing: the child spec's narrowing, if any.

    Returns:
        A state whose mode is at least as strict as the parent's, whose floor is that
        mode, and whose inherited rules are all the parent's rules then the narrowing's.
    """
    narrowing = narrowing or PermissionNarrowing()
    mode = stricter(parent.mode, narrowing.mode)
    return PermissionState(mode=mode, floor=mode, inherited=(*parent.rules(configured), *narrowing.rules))


class PendingApproval(msgspec.Struct, kw_only=True):
    """A call waiting for a person's approval, as the paused agent stores it ([R12.6-a]).

    Attributes:
        tool_use_id: the call.
        name: the tool.
        input: the input it would run with (after the PreToolUse hooks).
        reason: why approval is needed (``PermissionAsk.reason``).
        agent: the subagent whose call it is, when not the paused agent's own (§13.5-b).
    """

    tool_use_id: str
    name: str
    input: dict[str, Any]
    reason: str
    agent: str | None = None

    def element(self) -> dict[str, Any]:
        """The call as an ``awaiting_frontend_tools`` element: a pending call plus the marker ([R12.6-a])."""
        item: dict[str, Any] = {"tool_use_id": self.tool_use_id, "name": self.name, "input": self.input}
        if self.agent is not None:
            item["agent"] = self.agent
        item[APPROVAL_KEY] = {"reason": self.reason}
        return item


def background_denial(name: str, reason: str) -> str:
    """The ``is_error`` result of a background task's call that needs approval ([AP3-a]).

    A background task has nobody to ask and cannot pause its parent's run, so the call is
    not run and the child's model is told why, with the reason it was asked about.
    """
    return (
        f"not run: {name} needs a person's approval ({reason}), and nobody can give it "
        "in a background task, which cannot pause the run"
    )


def approval_reason(element: Mapping[str, Any]) -> str | None:
    """For a consumer: the reason if an ``awaiting_frontend_tools`` element awaits approval, else ``None``.

    Raises:
        ValueError: the element has the marker but it is not ``{"reason": <string>}``.
    """
    marker = element.get(APPROVAL_KEY)
    if marker is None:
        return None
    if not isinstance(marker, Mapping) or not isinstance(marker.get("reason"), str):
        raise ValueError(f"{APPROVAL_KEY}: must be an object with a string 'reason', not {marker!r}")
    return str(marker["reason"])


#: The keys each approval answer may have ([R12.6-b]).
_ANSWER_KEYS: Final = {
    "approve": frozenset({"tool_use_id", "decision", "updated_input", "updated_permissions", "updated_mode"}),
    "deny": frozenset({"tool_use_id", "decision", "message", "interrupt"}),
}
_DEFAULT_DENIAL: Final = "not approved"


class _Bad:
    """Builds the ``ToolResultsError`` of one answer, naming the call and the field."""

    def __init__(self, pending: PendingApproval) -> None:
        self.where = f"the approval answer for {pending.tool_use_id} ({pending.name})"

    def __call__(self, field: str, text: str) -> ToolResultsError:
        return ToolResultsError(f"{self.where}: {field}: {text}", missing=[], unexpected=[], duplicated=[])


def parse_approval_answer(item: object, pending: PendingApproval) -> PermissionAllow | PermissionDeny:
    """Read the answer to a call awaiting approval ([R12.6-b], [R12.6-c]).

    ``{"tool_use_id", "decision": "approve"}`` with optional ``updated_input`` (an object:
    run with it instead), ``updated_permissions`` (rule objects) and ``updated_mode``; or
    ``{"tool_use_id", "decision": "deny"}`` with optional ``message`` and ``interrupt``.
    An answer without ``decision`` (a plain tool result from a client that does not know
    approvals) is a denial: only an explicit approval runs the call.

    Raises:
        ToolResultsError: the answer is malformed; the message names the call and the field.
    """
    bad = _Bad(pending)
    if not isinstance(item, Mapping):
        raise bad("answer", f"must be an object, not {type(item).__name__}")
    if item.get("tool_use_id") != pending.tool_use_id:
        raise bad("tool_use_id", f"must be {pending.tool_use_id!r}, not {item.get('tool_use_id')!r}")
    if "decision" not in item:
        content = item.get("content")
        said = f" ({scrub.public(content)[:200]})" if isinstance(content, str) and content else ""
        return PermissionDeny(message=f"{_DEFAULT_DENIAL}: the client sent a tool result, not a decision{said}")
    decision = item["decision"]
    if decision not in _ANSWER_KEYS:
        raise bad("decision", f"must be 'approve' or 'deny', not {decision!r}")
    extra = sorted(str(k) for k in set(item) - _ANSWER_KEYS[decision])
    if extra:
        allowed = ", ".join(sorted(_ANSWER_KEYS[decision]))
        raise bad(", ".join(extra), f"not a key of a {decision!r} answer (its keys: {allowed})")
    if decision == "deny":
        return _denial(item, bad)
    return _approval(item, bad)


def _denial(item: Mapping[str, Any], bad: _Bad) -> PermissionDeny:
    message = item.get("message", _DEFAULT_DENIAL)
    if not isinstance(message, str) or not message.strip():
        raise bad("message", f"must be a non-empty string, not {message!r}")
    interrupt = item.get("interrupt", False)
    if not isinstance(interrupt, bool):
        raise bad("interrupt", f"must be true or false, not {interrupt!r}")
    return PermissionDeny(message=message, interrupt=interrupt)


def _approval(item: Mapping[str, Any], bad: _Bad) -> PermissionAllow:
    updated_input = item.get("updated_input")
    if updated_input is not None:
        if not isinstance(updated_input, Mapping) or not all(isinstance(k, str) for k in updated_input):
            raise bad("updated_input", f"must be a JSON object, not {type(updated_input).__name__}")
        try:
            msgspec.json.encode(updated_input)
        except (TypeError, ValueError, msgspec.EncodeError) as exc:
            raise bad("updated_input", f"is not JSON: {exc}") from None
        updated_input = dict(updated_input)
    raw_rules = item.get("updated_permissions", [])
    if not isinstance(raw_rules, list):
        raise bad("updated_permissions", f"must be an array of rules, not {type(raw_rules).__name__}")
    rules: list[PermissionRule] = []
    for index, raw in enumerate(raw_rules):
        try:
            rules.append(msgspec.convert(raw, PermissionRule))
        except msgspec.ValidationError as exc:
            raise bad(f"updated_permissions[{index}]", str(exc).replace("`$", "`rule")) from None
    mode = item.get("updated_mode")
    if mode is not None and mode not in PERMISSION_MODES:
        raise bad("updated_mode", f"must be one of {', '.join(PERMISSION_MODES)}, not {mode!r}")
    return PermissionAllow(updated_input=updated_input, updated_permissions=tuple(rules), updated_mode=mode)


@dataclass(frozen=True, slots=True)
class PermitOutcome:
    """What ``resolve`` found for one call ([R12.5-i]).

    Attributes:
        answer: ``PermissionAllow`` (run, with its ``updated_input`` if any),
            ``PermissionDeny`` (do not run; ``interrupt`` ends the run), or a durable
            ``PermissionAsk`` (no callback answered: pause for a person, §12.6).
        state: the permission state after the answer's updates ([R12.5-g]).
        failure: the callback's failure text, to report as a ``hook_error`` ([R12.4-b]).
    """

    answer: PermissionDecision
    state: PermissionState
    failure: str | None = None


async def resolve(
    state: PermissionState,
    configured: Sequence[PermissionRule],
    tool_name: str,
    tool_input: Mapping[str, Any],
    context: ToolPermissionContext,
    callback: CanUseTool | None,
    *,
    kind: CallKind = "backend",
) -> PermitOutcome:
    """Decide one call, asking ``callback`` when the mode and rules ask ([R12.5-i]).

    A rule's deny is final (the callback is not asked). A call the rules ask about goes to
    ``callback`` (told why in ``context.permission``); with no callback, a durable ask is
    returned (the caller pauses) and a frontend call is allowed ([R12.5-d]). A loop-guard
    repeat (``context.reason``) puts an allowed call to the callback too, as before modes.
    An allow's updates are applied; updates the state refuses deny the call (fail closed).
    """
    decision = state.decide(configured, tool_name, tool_input, kind=kind)
    if isinstance(decision, PermissionDeny):
        return PermitOutcome(decision, state)
    asked = isinstance(decision, PermissionAsk)
    if callback is None or not (asked or context.reason is not None):
        if isinstance(decision, PermissionAsk) and not decision.durable:
            return PermitOutcome(PermissionAllow(), state)
        return PermitOutcome(decision, state)
    told = replace(context, permission=decision.reason if isinstance(decision, PermissionAsk) else None)
    answer, failed = await ask(callback, tool_name, tool_input, told)
    if isinstance(answer, PermissionDeny):
        return PermitOutcome(answer, state, failed)
    try:
        return PermitOutcome(answer, state.updated(answer))
    except PermissionRuleError as exc:
        message = str(exc)
        log.warning("can_use_tool answered an update that cannot apply for %s: %s", tool_name, message)
        return PermitOutcome(PermissionDeny(message=f"denied: the permission check failed ({message})"), state, message)
