"""Loop detection (seed 003's doom loop): the same tool with the same input N times in a row.

Owns: counting a call's streak (``streak``) from the run's history, and what a repeat
does (spec ``spec/agent-ref.md`` §16): with a ``can_use_tool`` callback, the callback is
asked with a ``reason`` saying it is a repeat; without one, the call is not run and the
run stops with ``loop_detected``. Does not own: the permission callback itself
(``policy/permissions.py``) or routing the calls (``run/tool_step.py``, which calls ``check``).

The streak is read from ``RunState.history`` (the run's own turns, never compacted), so
it survives a pause and a resume in another process, and needs no state of its own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from ..store.state import RunState
    from ..tools.core import ToolCallRequest
    from .options import AgentOptions

__all__ = ["DEFAULT_LOOP_LIMIT", "STOP_LOOP_DETECTED", "check", "refusal", "streak"]

#: Seed 003 does not give N; the issue's default. ``Agent(loop_limit=None)`` turns the guard off.
DEFAULT_LOOP_LIMIT: Final = 3
#: The stop reason of a run the guard stopped (spec [R5.1-a], [R16.1-b]).
STOP_LOOP_DETECTED: Final = "loop_detected"


def _key(name: object, tool_input: object) -> tuple[str, str]:
    """A call's identity: its tool and its input as canonical JSON (key order does not matter)."""
    return str(name), json.dumps(tool_input, sort_keys=True, ensure_ascii=False, default=str)


def streak(history: Sequence[Mapping[str, Any]], call_id: str) -> int:
    """How many calls in a row, ending with ``call_id``, had its tool and input (1: no repeat).

    The calls are every ``tool_use`` of the history's assistant turns, in order; a call
    with another tool or input breaks the streak ([R16.1-a]). 0 when ``call_id`` is not there.
    Read backwards from the newest turn and stopped at the first different call, so a
    check costs the streak's length, not the run's.
    """
    key: tuple[str, str] | None = None
    count = 0
    for block in _calls_newest_first(history):
        if key is None:
            if str(block.get("id")) == call_id:
                key, count = _key(block.get("name"), block.get("input")), 1
        elif _key(block.get("name"), block.get("input")) == key:
            count += 1
        else:
            break
    return count


def _calls_newest_first(history: Sequence[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    for message in reversed(history):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            for block in reversed(content):
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    yield block


def check(options: AgentOptions, run: RunState | None, call: ToolCallRequest) -> str | None:
    """Before a call is routed: the reason it is a repeat, or ``None`` (spec [R16.1-a]).

    The caller decides what a repeat does: with a ``can_use_tool`` callback, the callback is
    asked with this reason; without one, the call is answered with ``refusal(reason)`` and
    the run ends ``loop_detected`` ([R16.1-b]).
    """
    if options.loop_limit is None or run is None:
        return None
    count = streak(run.history, call.id)
    if count < options.loop_limit:
        return None
    return (
        f"repeat: {call.name} was called with the same input {count} times in a row "
        f"(loop detection, limit {options.loop_limit})"
    )


def refusal(reason: str) -> str:
    """The ``is_error`` text of a repeat that is not run: the run stops here ([R16.1-b])."""
    return "not run: " + reason + "; the run stops here"
