"""Stage 1, prepare the request: the parameters of a model call and the ``meta_init`` payload.

Owns: ``params`` (spec ``spec/agent-ref.md`` §11.1) and ``meta_init`` (§7, §8.4 of the
envelope spec; ``parent_agent``/``parent_tool_use_id`` for a subagent, §8.3.1). Does not
own: sending anything. Functions take the ``Agent`` as ``self``: ``Agent`` binds them as
its methods.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from .subagents import spawn_tool_definition

if TYPE_CHECKING:
    from .agent import Agent
    from .state import RunState

log = logging.getLogger("agent_ref")


def params(self: Agent, tool_choice_none: bool) -> dict[str, Any]:
    # spec §11.1-a: the caller's request options first; the keys the agent owns are set after.
    params: dict[str, Any] = dict(self.request_options)
    if self.state.container_id and "container" not in params:
        params["container"] = self.state.container_id  # spec §11.1-c
    params |= {
        "model": self.model.name,
        "max_tokens": self.max_tokens,
        "messages": self.state.messages,
    }
    system = self.system
    if self._output is not None:
        # spec §17.1-a: the schema is in the system prompt.
        system = (system + "\n\n" if system else "") + self._output.instruction()
    if system:
        params["system"] = system
    tools = [t.definition() for t in self.tools.values()] + self.server_tools
    if self.subagents:
        tools.append(spawn_tool_definition(self.subagents))
    if tools:
        params["tools"] = tools
        if tool_choice_none:
            params["tool_choice"] = {"type": "none"}
    if self.thinking_budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
    return params


def meta_init(self: Agent, run: RunState, *, resume: bool = False) -> str:
    meta: dict[str, Any] = {
        "format": "json",
        "user_query": run.user_query,
        "agent_uuid": self.agent_uuid,
        "model": self.model.name,
        "run_id": run.run_id,
    }
    if self._parent is not None:
        # envelope spec §8.3.1: how a decoder nests this agent under the call that spawned it.
        meta["parent_agent"], meta["parent_tool_use_id"] = self._parent
    if resume:
        meta["resume"] = {
            "step": self.state.current_step + 1,
            "response": run.responses - 1,
            "tool_use_ids": [p.tool_use_id for p in self.state.pending_frontend],
        }
    if self.stream_history:
        meta["message_history"] = self.state.messages
    return json.dumps(meta, ensure_ascii=False)
