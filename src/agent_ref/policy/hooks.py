"""Hooks: the events of seed 004's timeline that a library agent has, and how they are run.

Owns: the hook event names (``HookEvent``), what a hook receives (``HookInput``) and may
answer (``HookDecision``), matchers by tool-name pattern with a per-hook timeout
(``HookMatcher``), and ``run_hooks``, which calls the hooks of one event in the order they
were given and turns a hook that raises or overruns into a reported failure (spec
``spec/agent-ref.md`` §12). Does not own: *where* each event fires (the stages of
``agent.py``), the permission callback (``policy/permissions.py``), or what a failure looks like
on the stream (the agent sends it as an ``error`` envelope, [R12.3-a]).

A hook is a plain callable, sync or async: ``hook(HookInput) -> HookDecision | None``.
``None`` means "continue". What each event reads of a decision is in ``EVENT_ACTIONS``
([R12.7-a]); other events fire for observation and their decision is ignored ([R12.2-a]).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import inspect
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from ..errors import ConfigError
from . import scrub
from .permissions import check_pattern, pattern_matches

__all__ = [
    "EVENT_ACTIONS",
    "HOOK_EVENTS",
    "MATCHER_EVENTS",
    "MAX_STOP_CONTINUATIONS",
    "Hook",
    "HookDecision",
    "HookEntry",
    "HookEvent",
    "HookFailure",
    "HookInput",
    "HookMatcher",
    "check_hooks",
    "child_hooks",
    "keep_going",
    "run_hooks",
]

log = logging.getLogger("agent_ref")

HookEvent = Literal[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "SubagentStart",
    "SubagentStop",
    "PreCompact",
    "Notification",
    "Stop",
    "SessionEnd",
]
#: Every event, in the order of seed 004's timeline.
HOOK_EVENTS: Final[tuple[str, ...]] = get_args(HookEvent)
#: The events told a tool name, on which a ``HookMatcher`` may have a pattern other than ``*`` ([R12.8-a]).
MATCHER_EVENTS: Final = ("PreToolUse", "PostToolUse", "PostToolUseFailure", "SubagentStart", "SubagentStop")
#: How many times ``Stop`` hooks may keep one run going ([R12.7-d]).
MAX_STOP_CONTINUATIONS: Final = 3

HookAction = Literal["continue", "modify", "block", "abort_all", "keep_going"]
#: What each event reads of a decision ([R12.7-a]); every other answer is ignored.
EVENT_ACTIONS: Final[Mapping[str, frozenset[str]]] = {
    "PreToolUse": frozenset({"modify", "block", "abort_all"}),
    "PreCompact": frozenset({"block"}),
    "UserPromptSubmit": frozenset({"block", "context"}),
    "SessionStart": frozenset({"context"}),
    "Stop": frozenset({"keep_going"}),
}


@dataclass(frozen=True, slots=True)
class HookInput:
    """What a hook is told.

    Attributes:
        event: the event.
        agent_uuid: the agent the event belongs to.
        run_id: the run.
        prompt: the user's text (``UserPromptSubmit``, ``SessionStart``).
        tool_name: the tool (tool events) or the subagent's name (subagent events).
        tool_use_id: the call's id (tool and subagent events).
        tool_input: the call's input as it will run (tool events).
        result: the result text (``PostToolUse``, ``PostToolUseFailure``, ``SubagentStop``).
        stop_reason: how the run ended (``Stop``, ``SessionEnd``, ``SubagentStop``).
        trigger: ``auto`` or ``manual`` (``PreCompact``).
        pre_tokens: the context's size in tokens before compacting (``PreCompact``).
        subagent_uuid: the child's agent id (``SubagentStart``, ``SubagentStop``).
        transcript: the child's messages of its run (``SubagentStop``), as the API has them.
        notification: what is notified (``Notification``), e.g. "approval needed for delete".
        notification_kind: ``approval``, ``frontend_tools`` or ``retry`` (``Notification``).
        stop_continuations: how many times ``Stop`` hooks already kept this run going (``Stop``).
    """

    event: HookEvent
    agent_uuid: str
    run_id: str
    prompt: str | None = None
    tool_name: str | None = None
    tool_use_id: str | None = None
    tool_input: Mapping[str, Any] = field(default_factory=dict)
    result: str | None = None
    stop_reason: str | None = None
    trigger: str | None = None
    pre_tokens: int | None = None
    subagent_uuid: str | None = None
    transcript: Sequence[Mapping[str, Any]] = ()
    notification: str | None = None
    notification_kind: str | None = None
    stop_continuations: int = 0


@dataclass(frozen=True, slots=True)
class HookDecision:
    """What a hook answers. ``None`` from a hook is ``HookDecision()`` (continue).

    Attributes:
        action: ``"continue"``; ``"modify"`` (``PreToolUse``: run the call with
            ``updated_input``); ``"block"`` (``PreToolUse``: do not run it; the model
            gets an ``is_error`` result with ``message``; ``PreCompact``: skip this
            compaction; ``UserPromptSubmit``: refuse the prompt); ``"abort_all"``
            (``PreToolUse``: run neither this call nor the step's others, and end the run);
            ``"keep_going"`` (``Stop``: do not stop; ``message`` is the reason the model is given).
        updated_input: the input to run with, for ``"modify"``.
        message: why, for ``"block"``, ``"abort_all"`` and ``"keep_going"``.
        additional_context: text added to the model's context (``UserPromptSubmit``,
            ``SessionStart``), with any action but ``block``.
    """

    action: HookAction = "continue"
    updated_input: Mapping[str, Any] | None = None
    message: str = ""
    additional_context: str | None = None

    def __post_init__(self) -> None:
        """Refuse a decision that cannot mean anything (the hook that made it fails, [R12.3-a])."""
        if self.action not in get_args(HookAction):
            raise ValueError(
                f"HookDecision.action: must be one of {', '.join(get_args(HookAction))}, not {self.action!r}"
            )
        if self.updated_input is not None and not isinstance(self.updated_input, Mapping):
            raise TypeError(f"HookDecision.updated_input: must be a mapping, not {type(self.updated_input).__name__}")
        if not isinstance(self.message, str):
            raise TypeError(f"HookDecision.message: must be a string, not {type(self.message).__name__}")
        if self.additional_context is not None and not isinstance(self.additional_context, str):
            raise TypeError(
                f"HookDecision.additional_context: must be a string, not {type(self.additional_context).__name__}"
            )


#: A hook: sync or async, given the event's input.
Hook = Callable[[HookInput], HookDecision | Awaitable[HookDecision | None] | None]


@dataclass(frozen=True, slots=True)
class HookMatcher:
    """Hooks that fire only for tool names matching ``pattern``, each within ``timeout`` ([R12.8-a]).

    Attributes:
        pattern: a tool-name pattern as for permission rules (``*`` any run, ``?`` one
            character), e.g. ``mcp__github__*``; ``*`` matches every call (and is the only
            pattern allowed on events with no tool name).
        hooks: the hooks, run in order.
        timeout: seconds each hook may take ([R12.8-b]); ``None``: the caller's default.
    """

    pattern: str = "*"
    hooks: Sequence[Hook] = ()
    timeout: float | None = None

    def __post_init__(self) -> None:
        """Refuse a bad pattern, a non-callable hook or a bad timeout, naming the field."""
        check_pattern(self.pattern, "HookMatcher.pattern")
        if isinstance(self.hooks, str | bytes) or not isinstance(self.hooks, Sequence):
            raise ConfigError(f"HookMatcher.hooks: must be a sequence of hooks, not {type(self.hooks).__name__}")
        for index, hook in enumerate(self.hooks):
            if not callable(hook):
                raise ConfigError(f"HookMatcher.hooks[{index}]: must be callable, not {type(hook).__name__}")
        _check_timeout(self.timeout, "HookMatcher.timeout")

    def matches(self, tool_name: str | None) -> bool:
        """Whether the hooks fire for ``tool_name`` (``None``, an event with no tool: only ``*``)."""
        return self.pattern == "*" if tool_name is None else pattern_matches(self.pattern, tool_name)


#: One item of an event's list: a hook, or a matcher of hooks.
HookEntry = Hook | HookMatcher


def _check_timeout(timeout: object, where: str) -> None:
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not math.isfinite(timeout) or timeout <= 0:
        raise ConfigError(f"{where}: must be a positive number of seconds or None, not {timeout!r}")


def check_hooks(hooks: Mapping[str, Sequence[HookEntry]], timeout: float | None = None) -> None:
    """Refuse hooks that cannot work, naming the event and the position ([R12.1-b], [R12.8-a]).

    Raises:
        ConfigError: an unknown event; an entry neither callable nor a ``HookMatcher``; a
            matcher with a pattern other than ``*`` on an event with no tool name; a bad
            default ``timeout``.
    """
    _check_timeout(timeout, "hook timeout")
    unknown = sorted(set(hooks) - set(HOOK_EVENTS))
    if unknown:
        raise ConfigError(f"unknown hook events: {', '.join(unknown)}; known: {', '.join(HOOK_EVENTS)}")
    for event, entries in hooks.items():
        for index, entry in enumerate(entries):
            if isinstance(entry, HookMatcher):
                if entry.pattern != "*" and event not in MATCHER_EVENTS:
                    raise ConfigError(
                        f"hooks[{event!r}][{index}]: a matcher's pattern {entry.pattern!r} needs a tool name; "
                        f"{event} has none (use '*'; patterns work on {', '.join(MATCHER_EVENTS)})"
                    )
            elif not callable(entry):
                raise ConfigError(
                    f"hooks[{event!r}][{index}]: must be a hook or a HookMatcher, not {type(entry).__name__}"
                )


def child_hooks(hooks: Mapping[str, Sequence[HookEntry]]) -> dict[str, list[HookEntry]]:
    """The hooks a subagent runs: its parent's, without ``SessionStart``/``SessionEnd`` ([R12.7-f])."""
    return {event: list(entries) for event, entries in hooks.items() if event not in ("SessionStart", "SessionEnd")}


@dataclass(frozen=True, slots=True)
class HookFailure:
    """A hook that raised or overran: reported on the stream and in the log, never a crash ([R12.3-a]).

    Attributes:
        event: the event whose hook failed.
        index: the hook's position in that event's list (a matcher's hooks counted one by one).
        message: ``ExceptionType: text``, scrubbed of held secrets.
    """

    event: str
    index: int
    message: str


def _flatten(
    entries: Sequence[HookEntry], tool_name: str | None, timeout: float | None
) -> list[tuple[int, Hook, float | None]]:
    """The hooks that fire, with their position ([R12.3-a]) and time limit ([R12.8-b])."""
    out: list[tuple[int, Hook, float | None]] = []
    index = 0
    for entry in entries:
        if isinstance(entry, HookMatcher):
            fires = entry.matches(tool_name)
            for hook in entry.hooks:
                if fires:
                    out.append((index, hook, entry.timeout if entry.timeout is not None else timeout))
                index += 1
        else:
            out.append((index, entry, timeout))
            index += 1
    return out


async def _in_daemon_thread(hook: Hook, data: HookInput) -> object:
    """Run a blocking hook in a thread of its own that nothing waits for, so it can be left ([R12.8-b])."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[object] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: object, error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(value)

    def target() -> None:
        try:
            value, error = context.run(hook, data), None
        except BaseException as exc:
            value, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=target, name=f"hook-{getattr(hook, '__name__', 'hook')}", daemon=True).start()
    return await future


async def _call(hook: Hook, data: HookInput, timeout: float | None) -> HookDecision | None:
    """One hook's answer, within ``timeout``; raises what the hook raised, or ``TimeoutError``."""
    if timeout is None:
        answer: object = hook(data)
        if inspect.isawaitable(answer):
            answer = await answer
    else:
        method = vars(type(hook)).get("__call__")  # an object whose __call__ is async
        is_async = inspect.iscoroutinefunction(hook) or inspect.iscoroutinefunction(method)
        try:
            async with asyncio.timeout(timeout):
                answer = await hook(data) if is_async else await _in_daemon_thread(hook, data)  # type: ignore[misc]
                if inspect.isawaitable(answer):
                    answer = await answer
        except TimeoutError:
            raise TimeoutError(f"the hook did not answer within {timeout:g} s") from None
    if answer is not None and not isinstance(answer, HookDecision):
        raise TypeError(f"a hook must return HookDecision or None, not {type(answer).__name__}")
    return answer


def _failed(data: HookInput, index: int, exc: Exception, failures: list[HookFailure]) -> str:
    message = scrub.public(f"{type(exc).__name__}: {exc}")[:500]
    log.warning("%s hook %d of agent %s failed: %s", data.event, index, data.agent_uuid, message)
    failures.append(HookFailure(event=data.event, index=index, message=message))
    return message


async def run_hooks(
    hooks: Sequence[HookEntry], data: HookInput, failures: list[HookFailure], *, timeout: float | None = None
) -> tuple[HookDecision, Mapping[str, Any]]:
    """Call ``hooks`` in order; return the decision that stands and the input as modified.

    A ``modify`` replaces the input the later hooks see; the first ``block``, ``abort_all``
    or ``keep_going`` the event reads stops the chain ([R12.2-b], [R12.7-a]). Contexts added
    by the hooks are joined, in order, by a blank line ([R12.7-b]). A hook that raises or
    overruns its timeout is logged and appended to ``failures``; for ``PreToolUse`` it
    blocks the call (fail closed), for other events the chain goes on ([R12.3-a], [R12.8-b]).
    Matchers fire only for a matching ``data.tool_name`` ([R12.8-a]).

    Args:
        hooks: the event's hooks and matchers, in order.
        data: what they are told.
        failures: where failures are appended.
        timeout: each hook's time limit unless its matcher sets one; ``None``: none.

    Returns:
        The standing decision and the tool input after every ``modify``.
    """
    current: Mapping[str, Any] = data.tool_input
    modified = False
    reads = EVENT_ACTIONS.get(data.event, frozenset())
    contexts: list[str] = []
    for index, hook, limit in _flatten(hooks, data.tool_name, timeout):
        try:
            answer = await _call(hook, dataclasses.replace(data, tool_input=dict(current)), limit)
        except Exception as exc:
            message = _failed(data, index, exc, failures)
            if data.event == "PreToolUse":
                return HookDecision(action="block", message=f"blocked: a PreToolUse hook failed ({message})"), current
            continue
        if answer is None:
            continue
        if answer.additional_context and "context" in reads and answer.action != "block":
            contexts.append(answer.additional_context)
        if answer.action not in reads:
            continue
        if answer.action in ("block", "abort_all", "keep_going"):
            return answer, current
        if answer.updated_input is not None:  # modify, read by PreToolUse only
            current = dict(answer.updated_input)
            modified = True
    action: HookAction = "modify" if modified else "continue"
    return HookDecision(action=action, updated_input=current, additional_context="\n\n".join(contexts) or None), current


def keep_going(decision: HookDecision, stop_reason: str, continuations: int) -> str | None:
    """The reason to keep a run going after its ``Stop`` hooks, or ``None`` to stop ([R12.7-d]).

    Only a run the model ended (``end_turn``) can be kept going, at most
    ``MAX_STOP_CONTINUATIONS`` times: a limit (steps, budget, loop) is not the hook's to lift,
    and a hook that always says "keep going" must not run forever.

    Args:
        decision: the standing decision of the ``Stop`` hooks.
        stop_reason: why the loop decided to stop.
        continuations: how many times this run was already kept going.
    """
    if decision.action != "keep_going" or stop_reason != "end_turn" or continuations >= MAX_STOP_CONTINUATIONS:
        return None
    return decision.message.strip() or "a Stop hook asked to keep going"
