"""Permissions: the ``can_use_tool`` callback, asked after the PreToolUse hooks of every call.

Owns: what the callback is given (``ToolPermissionContext``) and may answer
(``PermissionAllow``, ``PermissionDeny``), and ``ask``, which calls it (spec
``spec/agent-ref.md`` §12.4). Does not own: what a denial does to the run (the agent:
an ``is_error`` result the model sees; with ``interrupt`` the run ends as
``interrupted``).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import scrub

__all__ = ["CanUseTool", "PermissionAllow", "PermissionDeny", "PermissionResult", "ToolPermissionContext", "ask"]

log = logging.getLogger("agent_ref")


@dataclass(frozen=True, slots=True)
class ToolPermissionContext:
    """What the callback knows besides the tool name and input.

    Attributes:
        agent_uuid: the agent asking.
        run_id: the run.
        tool_use_id: the call.
        reason: why the callback is asked besides the usual check: ``"repeat: ..."`` when
            the call repeats the same tool and input (loop detection, spec [R16.1-a]).
    """

    agent_uuid: str
    run_id: str
    tool_use_id: str
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class PermissionAllow:
    """Run the call, with ``updated_input`` instead of the model's input when given."""

    updated_input: Mapping[str, Any] | None = None


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
    except Exception as exc:
        message = scrub.public(f"{type(exc).__name__}: {exc}")[:500]
        log.warning("can_use_tool failed for %s (agent %s): %s", name, context.agent_uuid, message)
        return PermissionDeny(message=f"denied: the permission check failed ({message})"), message
    return answer, None
