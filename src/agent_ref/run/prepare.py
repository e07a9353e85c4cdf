"""Stage 1, prepare the request: the parameters of a model call and the ``meta_init`` payload.

Owns: ``params`` (spec ``spec/agent-ref.md`` §11.1) and ``meta_init`` (§7, §8.4 of the
envelope spec; ``parent_agent``/``parent_tool_use_id`` for a subagent, §8.3.1). Does not
own: sending anything. Functions take the run's context (``RunContext``) and return
what they build.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from ..tools.memory_store import with_memory
from .subagents import spawn_tool_definition

if TYPE_CHECKING:
    from ..store.state import RunState
    from .context import RunContext

log = logging.getLogger("agent_ref")


def params(ctx: RunContext, tool_choice_none: bool) -> dict[str, Any]:
    """The keyword arguments of one ``messages.create(stream=True)`` call (spec §11.1)."""
    options = ctx.options
    # spec §11.1-a: the caller's request options first; the keys the agent owns are set after.
    params: dict[str, Any] = dict(options.request_options)
    if ctx.state.container_id and "container" not in params:
        params["container"] = ctx.state.container_id  # spec §11.1-c
    params |= {
        "model": ctx.model.name,
        "max_tokens": options.max_tokens,
        "messages": ctx.state.messages,
    }
    system = with_memory(options.system, ctx.run.memory_context)  # spec §21.5-a: the system prompt only
    if options.output is not None:
        # spec §17.1-a: the schema is in the system prompt.
        system = (system + "\n\n" if system else "") + options.output.instruction()
    if system:
        params["system"] = system
    tools = [t.definition() for t in ctx.tools.values()] + [dict(t) for t in options.server_tools]
    if options.subagents:
        tools.append(spawn_tool_definition(options.subagents))
    if tools:
        params["tools"] = tools
        if tool_choice_none:
            params["tool_choice"] = {"type": "none"}
    if options.thinking_budget:
        params["thinking"] = {"type": "enabled", "budget_tokens": options.thinking_budget}
    return params


def meta_init(ctx: RunContext, run: RunState, *, resume: bool = False, answers: list[str] | None = None) -> str:
    """The ``meta_init`` payload of a response of ``run``; a resumed one announces the calls it answers.

    ``answers``: the ``tool_use`` ids a resumed response answers (envelope spec §8.4-a);
    by default the pending frontend calls.
    """
    meta: dict[str, Any] = {
        "format": "json",
        "user_query": run.user_query,
        "agent_uuid": ctx.agent_uuid,
        "model": ctx.model.name,
        "run_id": run.run_id,
    }
    if ctx.parent is not None:
        # envelope spec §8.3.1: how a decoder nests this agent under the call that spawned it.
        meta["parent_agent"], meta["parent_tool_use_id"] = ctx.parent.agent_uuid, ctx.parent.tool_use_id
    if resume:
        meta["resume"] = {
            "step": ctx.state.current_step + 1,
            "response": run.responses - 1,
            "tool_use_ids": answers if answers is not None else [p.tool_use_id for p in ctx.state.pending_frontend],
        }
    if ctx.options.stream_history:
        meta["message_history"] = ctx.state.messages
    return json.dumps(meta, ensure_ascii=False)
