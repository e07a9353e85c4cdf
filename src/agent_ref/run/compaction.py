"""Context compaction: the ``Compactor`` protocol, seed 001's summarising compactor, a trimmer.

Owns: what a compactor is given (``CompactionRequest``) and returns (a new API context),
the two compactors (``SummarizingCompactor``: seed 001 §1.3's pipeline;
``ToolResultTrimmer``: old ``tool_result`` contents replaced by a placeholder), the
seed's token formula (``call_tokens``), the structural check every compacted context
must pass (``context_problems``), and the agent stage that runs them before a model
call (``compact_before_call``, called by ``loop.steps`` before ``model_call``, with the run's
``RunContext``): PreCompact hooks,
the compactor, the boundary on the stream (spec ``spec/agent-ref.md`` §15).
Does not own: the stored history (never compacted: ``RunState.history`` and the run
records keep every turn; only ``AgentState.messages``, the context sent to the API,
is replaced), or the envelope type of the boundary (``meta_compaction``, the codec's).

Compactors never change the messages they are given: they return new lists (the
context and the stored history share message objects).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, runtime_checkable

from ..policy import scrub
from ..policy.hooks import HookInput, run_hooks
from ..store import sessions
from ..store.record import field_of
from ..store.state import flat_usage
from .prepare import params as request_params
from .retry import classify

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from .context import RunContext

__all__ = [
    "DEFAULT_COMPACTION_THRESHOLD",
    "SUMMARY_PROMPT",
    "CompactionRequest",
    "Compactor",
    "SummarizingCompactor",
    "ToolResultTrimmer",
    "call_tokens",
    "context_problems",
]

log = logging.getLogger("agent_ref")

#: Seed 001 §1.2: ``context_token_threshold`` defaults to 100,000 tokens.
DEFAULT_COMPACTION_THRESHOLD: Final = 100_000

#: Seed 001 §1.4, the default summary prompt, word for word.
SUMMARY_PROMPT: Final = """You have been working on the task described above but have not yet \
completed it. Write a continuation summary that will allow you (or another instance of yourself) \
to resume work efficiently in a future context window where the conversation history will be \
replaced with this summary.

Your summary should be structured, concise, and actionable. Include:

1. TASK OVERVIEW
   - The user's core request and success criteria
   - Any clarifications or constraints they specified
2. CURRENT STATE
   - What has been completed so far
   - Files created, modified, or analyzed (with paths if relevant)
   - Key outputs or artifacts produced
3. IMPORTANT DISCOVERIES
   - Technical constraints or requirements uncovered
   - Decisions made and their rationale
   - Errors encountered and how they were resolved
   - What approaches were tried that didn't work (and why)
4. NEXT STEPS
   - Specific actions needed to complete the task
   - Any blockers or open questions to resolve
   - Priority order if multiple steps remain
5. CONTEXT TO PRESERVE
   - User preferences or style requirements
   - Domain-specific details that aren't obvious
   - Any promises made to the user

Be concise but complete—err on the side of including information that would prevent \
duplicate work or repeated mistakes.

Wrap your summary in <summary></summary> tags."""

#: The header seed 001 sends with the summary request.
COMPACTION_HEADER: Final = {"X-Stainless-Helper": "compaction"}

Trigger = Literal["auto", "manual"]
Messages = list[dict[str, Any]]


class CompactionError(Exception):
    """A compactor could not compact (its summary call failed, or it produced nothing).

    The agent reports it as a ``meta_status`` of kind ``compaction``, phase ``failed``
    (envelope-v1 §4.16), and goes on with the context as it was (spec [R15.4-a]).
    """


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """What a compactor is given.

    Attributes:
        messages: a copy of the API context (ends with a user turn in a run).
        tokens: the context's size by seed 001's formula (``call_tokens``), or an estimate.
        trigger: ``auto`` (over the threshold) or ``manual`` (``Agent.compact()``).
        summarize: makes one summary call through the agent's model with these messages
            and returns its text (raises ``CompactionError``).
    """

    messages: Messages
    tokens: int
    trigger: Trigger
    summarize: Callable[[Messages], Awaitable[str]]


@runtime_checkable
class Compactor(Protocol):
    """Decides nothing about *when* (the agent compares ``threshold``); makes a new context.

    Attributes:
        strategy: the name the boundary reports (``meta_compaction.strategy``).
        threshold: auto compaction happens when the context reaches this many tokens.
    """

    strategy: str
    threshold: int

    async def compact(self, request: CompactionRequest) -> Messages | None:
        """A new context for ``request.messages``, or ``None`` when there is nothing to compact.

        It must keep roles alternating and leave no ``tool_result`` without its
        ``tool_use`` (``context_problems`` of the result is empty), and must not change
        ``request.messages``.

        Raises:
            CompactionError: it tried and failed.
        """
        ...


def call_tokens(usage: Mapping[str, int]) -> int:
    """Seed 001 §1.2: input + cache creation + cache read + output tokens of one call."""
    return sum(
        int(usage.get(k, 0) or 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    )


def estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """A rough size when no call has measured the context yet: 4 characters of JSON a token."""
    return len(json.dumps(messages, ensure_ascii=False, default=str)) // 4


def _blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def context_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """What makes ``messages`` an invalid API context; empty when it is valid.

    Checked: the first turn is the user's, roles alternate, every ``tool_result`` answers
    a ``tool_use`` of the assistant turn just before it, and every ``tool_use`` of an
    assistant turn that has a next turn is answered there (spec [R1.2-b]).
    """
    problems: list[str] = []
    for i, message in enumerate(messages):
        role = message.get("role")
        want = "user" if i % 2 == 0 else "assistant"
        if role != want:
            problems.append(f"message {i}: role {role!r}, expected {want!r} (roles must alternate, user first)")
        if role != "user":
            continue
        asked = {str(b.get("id")) for b in _blocks(messages[i - 1]) if b.get("type") == "tool_use"} if i else set()
        answered = {str(b.get("tool_use_id")) for b in _blocks(message) if b.get("type") == "tool_result"}
        for orphan in sorted(answered - asked):
            problems.append(f"message {i}: tool_result {orphan} answers no tool_use of the turn before")
        for unanswered in sorted(asked - answered):
            problems.append(f"message {i}: tool_use {unanswered} of the turn before has no tool_result")
    return problems


def summary_request(messages: Sequence[Mapping[str, Any]], prompt: str = SUMMARY_PROMPT) -> Messages:
    """Seed 001 §1.3 steps 2 and 3: the messages of the summary call.

    A trailing assistant turn loses its ``tool_use`` blocks (they would need results the
    agent does not have yet; the API would refuse them), and is dropped when nothing else
    is left. The summary prompt is then added as a user turn, or appended to a trailing
    user turn so roles keep alternating.
    """
    out = [copy.deepcopy(dict(m)) for m in messages]
    if out and out[-1].get("role") == "assistant":
        kept = [b for b in _blocks(out[-1]) if b.get("type") != "tool_use"]
        if kept:
            out[-1]["content"] = kept
        else:
            out.pop()
    ask = {"type": "text", "text": prompt}
    if out and out[-1].get("role") == "user":
        out[-1]["content"] = [*_blocks(out[-1]), ask]
    else:
        out.append({"role": "user", "content": [ask]})
    return out


@dataclass(slots=True)
class SummarizingCompactor:
    """Seed 001 §1.3: the whole context replaced by a summary the model writes.

    Args:
        threshold: compact when the context reaches this many tokens (seed default 100,000).
        summary_prompt: the prompt of the summary call (seed 001 §1.4 by default).

    The new context is one user turn: the summary's text, then the blocks of the context's
    trailing user turn that are not ``tool_result`` (a run's new prompt, so that
    compacting before a run's first call does not fold the question into the summary);
    ``tool_result`` blocks are not kept, their calls are gone (spec [R15.2-a]).
    """

    threshold: int = DEFAULT_COMPACTION_THRESHOLD
    summary_prompt: str = SUMMARY_PROMPT
    strategy: str = "summarise"

    async def compact(self, request: CompactionRequest) -> Messages | None:
        """See ``Compactor.compact``."""
        if not request.messages:
            return None
        text = await request.summarize(summary_request(request.messages, self.summary_prompt))
        if not text.strip():
            raise CompactionError("the summary call returned no text")
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}]
        last = request.messages[-1]
        if last.get("role") == "user":
            blocks += [copy.deepcopy(b) for b in _blocks(last) if b.get("type") != "tool_result"]
        return [{"role": "user", "content": blocks}]


#: What a trimmed tool result says instead of its content.
TRIMMED: Final = "[tool result trimmed by context compaction: {n} characters]"
_TRIMMED_HEAD: Final = TRIMMED.split("{", 1)[0]


@dataclass(slots=True)
class ToolResultTrimmer:
    """Old ``tool_result`` contents replaced by a short placeholder; no model call.

    Args:
        threshold: compact when the context reaches this many tokens.
        keep_recent: the most recent tool results kept whole.

    Every message and block stays where it was (so roles and call/result pairs are
    untouched); only the ``content`` of older results changes (``is_error`` kept).
    """

    threshold: int = DEFAULT_COMPACTION_THRESHOLD
    keep_recent: int = 2
    strategy: str = "trim_tool_results"

    async def compact(self, request: CompactionRequest) -> Messages | None:
        """See ``Compactor.compact``; ``None`` when no result is old and long enough to trim."""
        spots = [
            (i, j)
            for i, message in enumerate(request.messages)
            if message.get("role") == "user"
            for j, block in enumerate(_blocks(message))
            if block.get("type") == "tool_result"
        ]
        old = spots[: max(0, len(spots) - self.keep_recent)]
        out = [copy.deepcopy(dict(m)) for m in request.messages]
        changed = False
        for i, j in old:
            blocks = _blocks(out[i])
            block = blocks[j]
            content = block.get("content", "")
            if isinstance(content, str) and content.startswith(_TRIMMED_HEAD):
                continue  # trimmed before
            size = len(json.dumps(content, ensure_ascii=False))
            placeholder = TRIMMED.format(n=size)
            if size <= len(placeholder):
                continue
            blocks[j] = {**block, "content": placeholder}
            out[i]["content"] = blocks
            changed = True
        return out if changed else None


# ------------------------------------------------------------------- the agent stage


def context_tokens(ctx: RunContext) -> int:
    """The context's size: the last call's usage by seed 001's formula, else an estimate ([R15.1-a])."""
    if ctx.context_tokens is not None:
        return ctx.context_tokens
    return estimate_tokens(ctx.state.messages)


async def compact_before_call(ctx: RunContext) -> None:
    """Before a model call: compact when asked to or over the threshold (spec §15)."""
    compactor: Compactor | None = ctx.manual_compaction or ctx.options.compactor
    messages = ctx.state.messages
    if compactor is None or not messages or messages[-1].get("role") != "user":
        return  # [R15.1-b]: a pause_turn continuation is sent back as it is
    trigger: Trigger = "manual" if ctx.manual_compaction is not None else "auto"
    tokens = context_tokens(ctx)
    if trigger == "auto" and tokens < compactor.threshold:
        return
    ctx.manual_compaction = None
    if await _blocked(ctx, trigger, tokens):
        return
    request = CompactionRequest(
        messages=copy.deepcopy(messages),
        tokens=tokens,
        trigger=trigger,
        summarize=lambda msgs: summarize(ctx, msgs),
    )
    # envelope-v1 [4.16-c]: a compaction is a status (seed 004's "compacting"), then its boundary
    await ctx.send(ctx.status_envelope({"kind": "compaction", "phase": "started", "trigger": trigger}))
    try:
        new = await compactor.compact(request)
        if new is not None and context_problems(new):
            raise CompactionError("the compactor broke the context: " + "; ".join(context_problems(new)[:3]))
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception as exc:
        # [R15.4-a]: the run goes on with the context it had; the stream says why.
        message = scrub.public(str(exc) if isinstance(exc, CompactionError) else f"{type(exc).__name__}: {exc}")
        log.warning("agent %s: compaction failed: %s", ctx.agent_uuid, message)
        failed = {"kind": "compaction", "phase": "failed", "message": message[:500], "trigger": trigger}
        await ctx.send(ctx.status_envelope(failed))
        return
    if new is not None:
        await _replace_context(ctx, new, trigger, tokens, compactor.strategy)
    else:  # the compactor found nothing to do: the started status still ends
        await ctx.send(ctx.status_envelope({"kind": "compaction", "phase": "finished", "trigger": trigger}))


async def _blocked(ctx: RunContext, trigger: Trigger, tokens: int) -> bool:
    """[R15.2-b]: the PreCompact hooks run first; whether one blocked this compaction."""
    hooks = ctx.options.hooks.get("PreCompact", [])
    if not hooks:
        return False
    data = HookInput(
        event="PreCompact",
        agent_uuid=ctx.agent_uuid,
        run_id=ctx.run.run_id,
        trigger=trigger,
        pre_tokens=tokens,
    )
    decision, _ = await run_hooks(hooks, data, ctx.hook_failures, timeout=ctx.options.hook_timeout)
    await ctx.report_hook_failures()
    return decision.action == "block"


async def _replace_context(ctx: RunContext, new: Messages, trigger: Trigger, tokens: int, strategy: str) -> None:
    """Put the compacted context in place, keep the boundary, and send it (spec §15.2)."""
    run = ctx.run
    old = ctx.state.messages
    before = len(old)
    ctx.state.messages = new
    sessions.mark_compaction(ctx.state, run.run_id, ctx.step, old)  # [HY3-a]: where a rewind places steps from
    ctx.context_tokens = None  # the next call measures the new context
    if run.base_messages >= 0:
        # [R15.5-a]: the compacted context is the base a lost run is rolled back to (§10.2-b).
        run.base_messages = len(new)
        run.base_tail = len(_blocks(new[-1])) if new and new[-1].get("role") == "user" else -1
    boundary: dict[str, Any] = {
        "trigger": trigger,
        "pre_tokens": tokens,
        "strategy": strategy,
        "messages_before": before,
        "messages_after": len(new),
    }
    ctx.compactions.append(boundary)
    if ctx.options.profile != "seed":
        # [R15.2-c]: the boundary on the stream, between blocks (no block is open here).
        await ctx.send(ctx.emitter.buffered(BOUNDARY_TYPE, json.dumps(boundary, ensure_ascii=False)))


#: The envelope type of the boundary (envelope spec §4.15).
BOUNDARY_TYPE: Final = "meta_compaction"


async def summarize(ctx: RunContext, messages: Messages) -> str:
    """One summary call through the agent's model (seed 001 §1.3 step 4); its text.

    The call lists the agent's tools with ``tool_choice: none`` (the API wants tools
    declared when the history has tool calls, and the answer must be text); its usage
    and cost count in the run's, but it is not a step, and it is not streamed ([R15.2-d]).

    Raises:
        CompactionError: the call failed.
    """
    params = request_params(ctx, True)
    params["messages"] = messages
    params["extra_headers"] = {**dict(params.get("extra_headers") or {}), **COMPACTION_HEADER}
    texts: list[str] = []
    usage: dict[str, int] = {}
    try:
        async for event in ctx.model.stream(params):
            kind = field_of(event, "type")
            if kind == "message_start":
                usage.update(flat_usage(field_of(field_of(event, "message"), "usage")))
            elif kind == "message_delta":
                usage.update(flat_usage(field_of(event, "usage")))
            elif kind == "content_block_delta":
                delta = field_of(event, "delta")
                if field_of(delta, "type") == "text_delta":
                    texts.append(str(field_of(delta, "text") or ""))
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception as exc:
        failure = classify(exc)
        raise CompactionError(f"the summary call failed: {failure.type}: {failure.message}") from None
    finally:
        ctx.add_usage(usage)
    return scrub.held_text("".join(texts))  # spec [SC1-c]: the summary becomes the stored context
