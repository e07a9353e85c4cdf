"""Hooks: the events of seed 004's timeline that a library agent has, and how they are run.

Owns: the hook event names (``HookEvent``), what a hook receives (``HookInput``) and may
answer (``HookDecision``), and ``run_hooks``, which calls the hooks of one event in the
order they were given and turns a hook that raises into a reported failure (spec
``spec/agent-ref.md`` §12). Does not own: *where* each event fires (the stages of
``agent.py``), the permission callback (``permissions.py``), or what a failure looks like
on the stream (the agent sends it as an ``error`` envelope, [R12.3-a]).

A hook is a plain callable, sync or async: ``hook(HookInput) -> HookDecision | None``.
``None`` means "continue". Only ``PreToolUse`` reads ``modify`` and ``block``, and
``PreCompact`` reads ``block`` (skip this compaction, [R15.2-b]); other events fire for
observation and their decision is ignored ([R12.2-a]).
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from . import scrub

__all__ = ["HOOK_EVENTS", "Hook", "HookDecision", "HookEvent", "HookFailure", "HookInput", "run_hooks"]

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
    "Stop",
    "SessionEnd",
]
#: Every event, in the order of seed 004's timeline.
HOOK_EVENTS: Final[tuple[str, ...]] = get_args(HookEvent)


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


@dataclass(frozen=True, slots=True)
class HookDecision:
    """What a hook answers. ``None`` from a hook is ``HookDecision()`` (continue).

    Attributes:
        action: ``"continue"``; ``"modify"`` (``PreToolUse``: run the call with
            ``updated_input``); ``"block"`` (``PreToolUse``: do not run it; the model
            gets an ``is_error`` result with ``message``; ``PreCompact``: skip this
            compaction).
        updated_input: the input to run with, for ``"modify"``.
        message: why, for ``"block"``.
    """

    action: Literal["continue", "modify", "block"] = "continue"
    updated_input: Mapping[str, Any] | None = None
    message: str = ""


#: The events whose hooks may answer ``block`` (PreToolUse: [R12.2-b]; PreCompact: [R15.2-b]).
_DECIDING: Final = ("PreToolUse", "PreCompact")

#: A hook: sync or async, given the event's input.
Hook = Callable[[HookInput], HookDecision | Awaitable[HookDecision | None] | None]


@dataclass(frozen=True, slots=True)
class HookFailure:
    """A hook that raised: reported on the stream and in the log, never a crash ([R12.3-a]).

    Attributes:
        event: the event whose hook raised.
        index: the hook's position in that event's list.
        message: ``ExceptionType: text``, scrubbed of held secrets.
    """

    event: str
    index: int
    message: str


async def run_hooks(
    hooks: Sequence[Hook], data: HookInput, failures: list[HookFailure]
) -> tuple[HookDecision, Mapping[str, Any]]:
    """Call ``hooks`` in order; return the decision that stands and the input as modified.

    A ``modify`` replaces the input the later hooks see; the first ``block`` stops the
    chain ([R12.2-b]). A hook that raises is logged and appended to ``failures``; for
    ``PreToolUse`` it blocks the call (fail closed), for other events the chain goes on
    ([R12.3-a]).

    Args:
        hooks: the event's hooks, in order.
        data: what they are told.
        failures: where failures are appended.

    Returns:
        The standing decision (``continue``, ``modify`` or ``block``) and the tool input
        after every ``modify``.
    """
    current: Mapping[str, Any] = data.tool_input
    modified = False
    for index, hook in enumerate(hooks):
        told = dataclasses.replace(data, tool_input=dict(current))
        try:
            answer = hook(told)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None and not isinstance(answer, HookDecision):
                raise TypeError(f"a hook must return HookDecision or None, not {type(answer).__name__}")
        except Exception as exc:
            message = scrub.public(f"{type(exc).__name__}: {exc}")[:500]
            log.warning("%s hook %d of agent %s failed: %s", data.event, index, data.agent_uuid, message)
            failures.append(HookFailure(event=data.event, index=index, message=message))
            if data.event == "PreToolUse":
                return HookDecision(action="block", message=f"blocked: a PreToolUse hook failed ({message})"), current
            continue
        if answer is None or data.event not in _DECIDING:
            continue
        if answer.action == "block":
            return answer, current
        if data.event != "PreToolUse":
            continue
        if answer.action == "modify" and answer.updated_input is not None:
            current = dict(answer.updated_input)
            modified = True
    return HookDecision(action="modify" if modified else "continue", updated_input=current), current
