"""Running subagents: spawn a child into the parent's response, pause with it, resume it in any process.

Owns: building a child agent from its ``AgentSpec`` (``new_child``, ``make_child``,
spec ``spec/agent-ref.md`` §13.2-a), running it to its end or its pause (``spawn``,
§13.3, §13.4), and the parent's side of a resume (``load_paused_children``,
``resume_children``, §13.5-c) and of an abandon (``abandon_children``, §13.5-d).
Does not own: the spawning tool's definition and input (``run/subagents.py``), routing a
step's calls (``run/tool_step.py``), the child's side of a pause (``finish.save_paused``:
its state saved, nothing sent, §13.5-a), or the ends of the parent's response
(``run/finish.py``). Functions take the parent's ``RunContext``, or the stored state and
what they need to build children; a child is used only through ``ChildAgent``
(``context.py``: the part of ``Agent``'s public API the run uses).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import StateError
from ..policy import scrub
from ..policy.permissions import narrow
from ..store.state import PendingCall, PendingChild
from ..tools.core import ToolCallRequest, ToolOutcome, error_outcome, outcome
from .context import ParentLink
from .finish import STOP_ABORTED, STOP_AWAITING, STOP_ERROR, STOP_INTERRUPTED, AgentResult
from .response import _ClientGone

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..models.core import Model
    from ..store.core import Store
    from ..store.state import AgentState
    from .context import ChildAgent, RunContext
    from .options import AgentOptions
    from .subagents import AgentSpec

log = logging.getLogger("agent_ref")


@dataclass(frozen=True, slots=True)
class ChildPaused:
    """A child that stopped on frontend calls: the parent's step pauses with it (spec §13.5-a).

    Attributes:
        child: the record the parent keeps.
        calls: the child's pending calls, each naming the child as its ``agent``.
    """

    child: PendingChild
    calls: list[PendingCall]


#: Builds a child agent from its spec (and its stored id, to load a paused one).
ChildFactory = Callable[["AgentSpec", "str | None"], "ChildAgent"]


def new_child(
    new_agent: Callable[..., ChildAgent],
    model: Model,
    options: AgentOptions,
    store: Store,
    spec: AgentSpec,
    *,
    agent_uuid: str | None = None,
    background: bool = False,
) -> ChildAgent:
    """A child configured by ``spec``, the rest inherited from the parent's ``options`` (spec §13.2-a).

    A background child gets no frontend tools: nobody waits for it, so it cannot pause (§14.5).
    """
    child_options = options.for_child(spec, store, agent_uuid=agent_uuid, background=background)
    return new_agent(spec.model or model, options=child_options)


def make_child(ctx: RunContext, spec: AgentSpec, *, background: bool = False) -> ChildAgent:
    """A new child of the agent running ``ctx`` (spec §13.2-a); its permissions narrow the parent's (§12.5-f)."""
    child = new_child(ctx.new_agent, ctx.model, ctx.options, ctx.store, spec, background=background)
    child.state.permissions = narrow(ctx.state.permissions, ctx.options.permission_rules, spec.permissions)
    child.state.principal = ctx.state.principal  # spec server [OW1-a]: a child is its parent's owner's
    return child


def nest(ctx: RunContext, child: ChildAgent, tool_use_id: str, name: str | None = None) -> None:
    """Make ``child`` (``name`` in the parent's subagents) stream into this response under the call ``tool_use_id``.

    Spec §13.3; the name is its run span's (§20.2-a).
    """
    child.parent = ParentLink(agent_uuid=ctx.agent_uuid, tool_use_id=tool_use_id, response=ctx.response, name=name)


async def spawn(
    ctx: RunContext, call: ToolCallRequest, name: str, spec: AgentSpec, task: str
) -> ToolOutcome | ChildPaused:
    """Run one child into the response: its final answer as the call's outcome, or its pause (spec §13)."""
    child = make_child(ctx, spec)
    nest(ctx, child, call.id, name)
    await ctx.fire(
        "SubagentStart", tool_name=name, tool_use_id=call.id, tool_input=call.input, subagent_uuid=child.agent_uuid
    )
    try:
        result = await child.run(task, ctx.response.send_one)
    except (asyncio.CancelledError, _ClientGone):
        raise
    except Exception as exc:  # spec §13.4-a: a child that cannot run is an is_error result
        log.exception("subagent %s could not run", name)
        return error_outcome(ctx.emitter, call, scrub.public(f"subagent {name} failed: {exc}")[:500])
    return await _ended(ctx, call, name, child, result)


async def _ended(
    ctx: RunContext, call: ToolCallRequest, name: str, child: ChildAgent, result: AgentResult
) -> ToolOutcome | ChildPaused:
    if result.stop_reason == STOP_AWAITING:
        # spec §13.5-a: the child's state is saved; the parent's step pauses with it.
        record = PendingChild(tool_use_id=call.id, name=name, agent_uuid=child.agent_uuid)
        calls = [
            PendingCall(
                tool_use_id=p.tool_use_id, name=p.name, input=p.input, agent=child.agent_uuid, approval=p.approval
            )
            for p in result.pending_frontend_tools
        ]
        return ChildPaused(child=record, calls=calls)
    await ctx.fire(
        "SubagentStop",
        tool_name=name,
        tool_use_id=call.id,
        result=result.final_text,
        stop_reason=result.stop_reason,
        subagent_uuid=child.agent_uuid,  # [R12.7-e]
        transcript=[dict(m) for m in result.conversation_history],
    )
    if result.stop_reason in (STOP_ERROR, STOP_ABORTED, STOP_INTERRUPTED):
        why = result.error or result.stop_reason
        return error_outcome(ctx.emitter, call, f"subagent {name} ({child.agent_uuid}) failed: {why}")
    return outcome(ctx.emitter, call, result.final_text)


async def load_paused_children(
    state: AgentState, subagents: Mapping[str, AgentSpec], child_of: ChildFactory
) -> list[tuple[PendingChild, ChildAgent]]:
    """The paused children of the paused step, from the store, checked before anything changes (§13.5-c).

    A child whose resume died with its process (an expired lease) is put back to its pause
    first (§10.2-b).

    Raises:
        StateError: a child's name is no longer registered, it is not in the store, or it is
            no longer paused on the calls the parent recorded.
    """
    loaded: list[tuple[PendingChild, ChildAgent]] = []
    for pending in state.pending_children:
        spec = subagents.get(pending.name)
        if spec is None:
            raise StateError(
                f"agent {state.agent_uuid} paused with subagent {pending.name!r} ({pending.agent_uuid}), "
                f"which this agent does not register; pass the same subagents as the run had"
            )
        child = child_of(spec, pending.agent_uuid)
        stored = await child.store.load(pending.agent_uuid)
        if stored is None:
            raise StateError(f"subagent {pending.name} ({pending.agent_uuid}) is not in the store")
        child.state = stored
        if stored.status == "running":
            await child.recover()
        expected = [p.tool_use_id for p in state.pending_frontend if p.agent == pending.agent_uuid]
        have = [p.tool_use_id for p in stored.pending_frontend]
        if stored.status != "awaiting_frontend_tools" or have != expected:
            raise StateError(
                f"subagent {pending.name} ({pending.agent_uuid}) is no longer paused on "
                f"{', '.join(expected)} (status {stored.status}); nothing was changed"
            )
        loaded.append((pending, child))
    return loaded


async def resume_children(
    ctx: RunContext,
    children: Sequence[tuple[PendingChild, ChildAgent]],
    results: Sequence[Mapping[str, Any]],
    owners: Mapping[str, str | None],
) -> tuple[dict[str, ToolOutcome], list[ChildPaused]]:
    """Continue each paused child in ``response`` with its results, concurrently (spec §13.5-c).

    ``owners`` maps each pending call id to the agent whose call it is (``None``: the parent's).

    Each child that ends gives its spawning call's outcome (sent after the child's
    ``meta_final``); a child that pauses again is returned to pause the parent again.
    """
    by_child: dict[str, list[Mapping[str, Any]]] = {}
    for item in results:
        owner = owners.get(str(item.get("tool_use_id")))
        if owner is not None:
            by_child.setdefault(owner, []).append(item)

    async def one(pending: PendingChild, child: ChildAgent) -> ToolOutcome | ChildPaused:
        nest(ctx, child, pending.tool_use_id, pending.name)
        call = ToolCallRequest(id=pending.tool_use_id, name="spawn_subagent", input={})
        try:
            result = await child.continue_with_tool_results(by_child.get(pending.agent_uuid, []), ctx.response.send_one)
        except (asyncio.CancelledError, _ClientGone):
            raise
        except Exception as exc:  # spec §13.4-a
            log.exception("subagent %s could not resume", pending.name)
            return error_outcome(ctx.emitter, call, scrub.public(f"subagent {pending.name} failed: {exc}")[:500])
        done = await _ended(ctx, call, pending.name, child, result)
        if isinstance(done, ToolOutcome):
            ctx.answered[call.id] = done.block
            await ctx.send(done.lines)
        return done

    ended = await asyncio.gather(*(one(p, c) for p, c in children))
    outcomes: dict[str, ToolOutcome] = {}
    paused: list[ChildPaused] = []
    for (pending, _), done in zip(children, ended, strict=True):
        if isinstance(done, ChildPaused):
            paused.append(done)
        else:
            outcomes[pending.tool_use_id] = done
            call = ToolCallRequest(id=pending.tool_use_id, name="spawn_subagent", input={})
            await ctx.fire_post_tool(call, done)
    return outcomes, paused


async def abandon_children(
    state: AgentState, subagents: Mapping[str, AgentSpec], child_of: ChildFactory, reason: str
) -> dict[str, str]:
    """Abandon the paused children of an abandoned run (spec §13.5-d); the text for each spawning call.

    Each child's run is closed ``abandoned`` in the store (its closing response goes to its
    own log). A child that cannot be closed is logged; the parent's call is answered anyway.
    """
    texts: dict[str, str] = {}
    for pending in state.pending_children:
        spec = subagents.get(pending.name)
        text = f"abandoned: subagent {pending.name} ({pending.agent_uuid}) was paused; {reason}"
        texts[pending.tool_use_id] = text
        if spec is None:
            continue
        try:
            child = child_of(spec, pending.agent_uuid)
            stored = await child.store.load(pending.agent_uuid)
            if stored is not None and stored.status != "idle":
                child.state = stored
                await child.abandon(reason=reason)
        except Exception:
            log.exception("could not abandon subagent %s (%s)", pending.name, pending.agent_uuid)
    return texts
