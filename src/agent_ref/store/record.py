"""Stage 5, record the turn: the conversation history and the files server tools produced.

Owns: appending turns with roles kept alternating (spec ``spec/agent-ref.md`` [R1.2-b]),
the files list (§5.6), and reading calls and final text out of history. Does not own:
saving (``store/core.py``). Functions take the stored state (``AgentState``) or the run
(``RunState``) they change.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..tools.core import ToolCallRequest

if TYPE_CHECKING:
    from .state import AgentState, RunState

log = logging.getLogger("agent_ref")


def append_user(state: AgentState, blocks: list[dict[str, Any]]) -> None:
    """Append a user turn to the context and the run's history, merged into a trailing user turn
    in both, so roles keep alternating and the history records the turn as the API saw it
    (a message sent during a run joins the tool results it was sent with: spec [SF3-a])."""
    messages = state.messages
    run = state.run
    assert run is not None
    for turns in (messages, run.history):
        if turns and turns[-1].get("role") == "user" and isinstance(turns[-1].get("content"), list):
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": "user", "content": list(blocks)})


def append_assistant(state: AgentState, content: list[dict[str, Any]]) -> None:
    """Append an assistant turn to the context and the run's history (one message object in both)."""
    run = state.run
    assert run is not None
    message = {"role": "assistant", "content": content}
    state.messages.append(message)
    run.history.append(message)


def collect_files(run: RunState, content: list[dict[str, Any]]) -> None:
    """Files produced by server tools (code execution): every ``file_id`` in their results (spec §5.6).

    They belong to the run in progress (``RunState.files``): saved with a pause, reported
    by the response that ends the run, and gone with it (spec §5.6-c).
    """
    for block in content:
        if str(block.get("type", "")).endswith("_tool_result"):
            for file_id in _file_ids(block.get("content")):
                if all(f["file_id"] != file_id for f in run.files):
                    # spec §5.6-b: the agent does not download files, so the Files API id is
                    # the only name it knows, and the file stays where the API keeps it.
                    run.files.append(
                        {"file_id": file_id, "filename": file_id, "storage_location": files_api_path(file_id)}
                    )


def files_api_path(file_id: str) -> str:
    """Where a file produced by a server tool lives: its download path in the Files API (spec §5.6-b)."""
    return f"/v1/files/{file_id}/content"


def _file_ids(value: object) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        file_id = value.get("file_id")
        if isinstance(file_id, str):
            found.append(file_id)
        for item in value.values():
            found.extend(_file_ids(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_file_ids(item))
    return found


def tool_uses(content: list[dict[str, Any]]) -> list[ToolCallRequest]:
    """The ``tool_use`` blocks of an assistant turn, as calls."""
    return [
        ToolCallRequest(id=str(b.get("id")), name=str(b.get("name")), input=dict(b.get("input") or {}))
        for b in content
        if b.get("type") == "tool_use"
    ]


def last_text(history: list[dict[str, Any]]) -> str:
    """The text of the last assistant message of ``history``."""
    for message in reversed(history):
        if message.get("role") == "assistant":
            return "".join(
                str(b.get("text", ""))
                for b in message.get("content", [])
                if isinstance(b, dict) and b.get("type") == "text"
            )
    return ""


def field_of(obj: Any, name: str) -> Any:
    """``obj[name]`` of a dict, or ``obj.name`` of an SDK object (``None`` when absent): API events come as either."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def add_prompt_context(state: AgentState, before: str | None, after: str | None) -> None:
    """Hooks' context around the run's prompt, in its user turn: ``before`` it and ``after`` it ([R12.7-b]).

    Called before the run's first model call, while the prompt's turn is the last one of the
    context and of the run's history.
    """
    run = state.run
    assert run is not None
    turns = (state.messages[-1]["content"], run.history[-1]["content"])
    starts = (max(run.base_tail, 0), 0)  # the prompt may have been merged into a trailing user turn
    for content, start in zip(turns, starts, strict=True):
        if after:
            content.append({"type": "text", "text": after})
        if before:
            content.insert(start, {"type": "text", "text": before})


def take_back_prompt(state: AgentState) -> None:
    """Remove the run's prompt from the context and the history: a blocked prompt is not kept ([R12.7-g])."""
    run = state.run
    assert run is not None
    if run.base_tail >= 0:
        del state.messages[-1]["content"][run.base_tail :]
    elif run.base_messages >= 0:
        del state.messages[run.base_messages :]
    run.history.clear()
