"""Stage 2, call the model: one API call with retries, streamed as envelopes (spec ``spec/agent-ref.md`` §6).

Owns: ``model_call`` (translating events, cut tool input [R1.3], usage and container;
compaction before it is the loop's own step, ``compaction.compact_before_call``, §15),
the discarded-attempt signal (§6.4) and closing blocks left open. Does not own: what the
turn means for the loop (``tool_step``, ``finish``). Functions take the run's context
(``RunContext``); ``model_call`` returns the turn (``Outcome``) for the loop to decide on.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envelope import DecodeError, Emitter
from envelope.anthropic import AnthropicTranslator

from ..models.pricing import cost_usd
from ..policy import scrub
from ..store.record import collect_files, field_of
from ..store.state import Usage, flat_usage
from .compaction import call_tokens
from .prepare import params as request_params
from .response import _ClientGone
from .retry import ApiFailure, IncompleteStreamError, classify

if TYPE_CHECKING:
    from .context import RunContext

log = logging.getLogger("agent_ref")


class RunFailed(Exception):
    """The model call failed for good (retries spent, or not retryable): the run ends ``error``."""

    def __init__(self, failure: ApiFailure, attempts: int) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.attempts = attempts


@dataclass(slots=True)
class Outcome:
    """A model call's turn: its content, the API's stop reason, and the calls whose input cannot be used."""

    content: list[dict[str, Any]]
    stop_reason: str
    bad_inputs: dict[str, str]  # tool_use id -> why its input cannot be used
    #: This call's own usage (``Usage``'s keys; envelope-v1 [4.16-d]'s ``step_finish``).
    usage: dict[str, int] = field(default_factory=dict)
    #: This call's price: ``{"model", "usd"}``, or ``None`` for a model with no price.
    cost: dict[str, Any] | None = None


def _track_tool_input(event: Any, starts: dict[int, tuple[str, str]], parts: dict[int, list[str]]) -> None:
    """Remember each tool_use block's id, name and raw input text (for a call cut by max_tokens)."""
    kind = field_of(event, "type")
    index = field_of(event, "index")
    if not isinstance(index, int):
        return
    if kind == "content_block_start":
        block = field_of(event, "content_block")
        if field_of(block, "type") == "tool_use":
            starts[index] = (str(field_of(block, "id") or ""), str(field_of(block, "name") or ""))
    elif kind == "content_block_delta" and index in starts:
        partial = field_of(field_of(event, "delta"), "partial_json")
        if isinstance(partial, str):
            parts.setdefault(index, []).append(partial)


def _bad_input_message(stop_reason: str) -> str:
    if stop_reason == "max_tokens":
        return "not run: the response reached max_tokens before this tool call was complete; call it again"
    # spec §1.3-a: the model sees why, and can call again (the API's own advice for this case).
    return "not run: the tool input was not valid JSON; call the tool again with a JSON object as its input"


async def _notify_retry(ctx: RunContext, failure: ApiFailure, attempt: int, wait: float) -> None:
    """``Notification`` (kind ``retry``) before the wait of a retry ([R12.7-e])."""
    text = f"model call attempt {attempt} failed ({failure.type}); retrying in {wait:.1f} s"
    status = {"kind": "retry", "attempt": attempt, "delay": round(wait, 3), "message": text, "error": failure.type}
    await ctx.send(ctx.status_envelope(status))  # envelope-v1 [4.16-c]: a retry is a status
    await ctx.fire("Notification", notification=text, notification_kind="retry")
    await ctx.report_hook_failures()


def step_start(ctx: RunContext, step: int) -> list[bytes]:
    """The ``step_start`` status of a step, sent before its model call (envelope-v1 [4.16-d])."""
    return ctx.status_envelope({"kind": "step_start", "step": step})


def step_finish(ctx: RunContext, step: int, outcome: Outcome, stop: str | None) -> list[bytes]:
    """The ``step_finish`` status of a step: its model call's usage and cost, and the API's stop reason.

    envelope-v1 [4.16-d]: ``usage`` is the step's own call (not the run's running total),
    ``cost`` its price in USD (``None`` for a model with no price); ``run_stop`` the run's
    stop reason when the step ends the response's steps.
    """
    payload: dict[str, Any] = {
        "kind": "step_finish",
        "step": step,
        "usage": outcome.usage,
        "cost": outcome.cost,
        "stop_reason": outcome.stop_reason,
    }
    if stop is not None:
        payload["run_stop"] = stop
    return ctx.status_envelope(payload)


async def model_call(ctx: RunContext, step: int, *, tool_choice_none: bool = False) -> Outcome:
    """One API call with retries; streams its envelopes; returns the turn (spec §6)."""
    run = ctx.run
    params = request_params(ctx, tool_choice_none)
    attempt = 0
    while True:
        attempt += 1
        call = _Attempt(AnthropicTranslator(ctx.agent_uuid, ctx.options.max_bytes, profile=ctx.options.profile))
        blocks_before = ctx.response.block_count()
        try:
            await traced_stream(ctx, params, call, attempt)
        except (asyncio.CancelledError, RunFailed, _ClientGone):
            raise
        except Exception as exc:
            failure = classify(exc)
            if failure.type == "internal_error":
                log.exception("model call failed with an unexpected error")
            else:
                log.warning("model call attempt %d failed: %s (%s)", attempt, failure.type, failure.message)
            retry = ctx.options.retry
            retrying = failure.transient and attempt < retry.max_attempts
            wait, source = retry.wait(attempt, failure)
            if call.sent:
                await close_open(ctx)
                blocks = ctx.response.block_count() - blocks_before
                await discard(ctx, blocks, step, attempt, failure, retrying, wait if retrying else None)
            elif retrying and source == "retry-after":
                # spec §6.2-b: a wait the API asked for is said in the stream, even before output.
                await discard(ctx, 0, step, attempt, failure, retrying, wait)
            if not retrying:
                raise RunFailed(failure, attempt) from None
            await _notify_retry(ctx, failure, attempt, wait)
            await retry.sleep(wait)
            continue
        # spec §11.2-a: the nested counters too; running totals, the later value wins.
        usage = {**call.usage, **call.translator.usage}
        ctx.context_tokens = call_tokens(usage)  # spec §15.1-a: the next threshold check
        ctx.add_usage(usage)
        run.steps += 1
        outcome = _turn(ctx, call)
        one = Usage()
        one.add(usage)
        outcome.usage = one.to_dict()
        usd = cost_usd(ctx.model.name, one, ctx.options.prices)
        outcome.cost = None if usd is None else {"model": ctx.model.name, "usd": usd}
        return outcome


@dataclass(slots=True)
class _Attempt:
    """One attempt's translator and what it saw of the stream."""

    translator: AnthropicTranslator
    sent: int = 0
    tool_starts: dict[int, tuple[str, str]] = field(default_factory=dict)
    tool_json: dict[int, list[str]] = field(default_factory=dict)
    bad: dict[int, str] = field(default_factory=dict)
    usage: dict[str, int] = field(default_factory=dict)


async def traced_stream(ctx: RunContext, params: dict[str, Any], call: _Attempt, attempt: int) -> None:
    """``_stream`` inside the attempt's ``chat`` span: the request, then its outcome or failure (spec §20.2-a)."""
    with ctx.tracing.model_call(model=ctx.model.name, attempt=attempt, max_tokens=params.get("max_tokens")) as span:
        span.record_request(params)
        try:
            await _stream(ctx, params, call)
        except (asyncio.CancelledError, RunFailed, _ClientGone):
            raise
        except Exception as exc:
            span.error(classify(exc).type)  # spec §20.2-b: the stage's classification
            raise
        if span.recording:
            translator = call.translator
            usage = {**call.usage, **translator.usage}
            one = Usage()
            one.add(usage)
            span.record_response(
                stop_reason=translator.stop_reason,
                usage=usage,
                response_model=translator.model,
                response_id=translator.message_id,
                cost_usd=cost_usd(ctx.model.name, one, ctx.options.prices),
            )


async def _stream(ctx: RunContext, params: dict[str, Any], call: _Attempt) -> None:
    """Stream one attempt's events as envelopes; a tool call whose input does not parse is shown with ``{}``."""
    translator = call.translator
    scrubber = scrub.event_scrubber()  # spec [SC2-a]: None when nothing is held (the fast path, [SC4-a])
    async for event in ctx.model.stream(params):
        for each in (event,) if scrubber is None else scrubber.feed(event):
            lines = _lines(ctx, call, each)
            if lines:
                call.sent += len(lines)
                await ctx.response.send(lines)
    translator.close()
    if translator.stop_reason is None:
        raise IncompleteStreamError("no message_delta with a stop_reason")


def _lines(ctx: RunContext, call: _Attempt, event: Any) -> list[bytes]:
    """One event into the translator: the lines it gives."""
    translator = call.translator
    _track_tool_input(event, call.tool_starts, call.tool_json)
    track_usage_and_container(ctx, event, call.usage)
    try:
        lines = translator.feed(event)
    except DecodeError:
        index = field_of(event, "index")
        if field_of(event, "type") != "content_block_stop" or not isinstance(index, int):
            raise
        call.bad[index] = "".join(call.tool_json.get(index, []))
        start = call.tool_starts.get(index, ("", ""))
        # The call was cut: show it with the input history records for it,
        # an empty object, so the stream stays valid (spec §1.3-b).
        lines = ctx.emitter.buffered("tool_call", "{}", id=start[0], name=start[1])
    return lines


def _turn(ctx: RunContext, call: _Attempt) -> Outcome:
    """The finished attempt's turn, with every call whose input cannot be used named (spec §1.3)."""
    translator = call.translator
    content = translator.finalize()
    bad_inputs: dict[str, str] = {}
    reason = translator.stop_reason or "end_turn"
    ids = {block.get("id") for block in content if block.get("type") == "tool_use"}
    for index in sorted(call.bad):
        tool_id, tool_name = call.tool_starts.get(index, ("", ""))
        if tool_id and tool_id not in ids:
            # spec §1.3-a/b: the adapter leaves a tool_use with unreadable input out of its
            # message; history keeps it with ``{}``, as the stream showed it, and answers it.
            block = {"type": "tool_use", "id": tool_id, "name": tool_name, "input": {}}
            content.insert(min(index, len(content)), block)
            bad_inputs[tool_id] = _bad_input_message(reason)
    for index, block in enumerate(content):
        if block.get("type") != "tool_use":
            continue
        if block.get("input") is None or not isinstance(block.get("input"), dict):
            block["input"] = {}
            bad_inputs[str(block.get("id"))] = _bad_input_message(reason)
        elif reason == "max_tokens" and index == len(content) - 1:
            # spec §1.3-a: the last block of a max_tokens turn may be cut even if it parsed.
            bad_inputs[str(block.get("id"))] = _bad_input_message(reason)
    collect_files(ctx.run, content)
    return Outcome(content=content, stop_reason=reason, bad_inputs=bad_inputs)


def track_usage_and_container(ctx: RunContext, event: Any, usage: dict[str, int]) -> None:
    """Keep a call's usage (nested counters included) and the container the API reports."""
    kind = field_of(event, "type")
    if kind == "message_start":
        message = field_of(event, "message")
        usage.update(flat_usage(field_of(message, "usage")))
        container = field_of(message, "container")
    elif kind == "message_delta":
        usage.update(flat_usage(field_of(event, "usage")))
        container = field_of(field_of(event, "delta"), "container")
    else:
        return
    container_id = field_of(container, "id")
    if isinstance(container_id, str) and container_id:
        ctx.state.container_id = container_id


async def discard(
    ctx: RunContext,
    blocks: int,
    step: int,
    attempt: int,
    failure: ApiFailure,
    retrying: bool,
    wait: float | None,
) -> None:
    """The discarded-attempt signal (spec §6.4): one ``error`` envelope naming how many blocks to drop."""
    payload: dict[str, Any] = {
        "type": "attempt_discarded",
        "message": "the model call failed after partial output; the blocks above from this attempt are void",
        "discard_blocks": blocks,
        "step": step,
        "attempt": attempt,
        "retrying": retrying,
        "error": {"type": failure.type, "message": failure.message},
    }
    if wait is not None:
        payload["wait_seconds"] = round(wait, 3)  # spec §6.2-b
    if failure.retry_after is not None:
        payload["retry_after_seconds"] = round(failure.retry_after, 3)
    await ctx.send(ctx.error_envelope(payload))


async def close_open(ctx: RunContext, *, every_agent: bool = False) -> None:
    """Close every block left open on the wire, so a discard or an abort leaves no dangling block.

    With ``every_agent`` (an abort, a failure), the blocks of subagents streaming into this
    response are closed too: a cancelled child sends nothing more (spec §13.7-a).
    """
    response = ctx.response
    transcript = response.checker.transcript()
    agents = list(transcript.agents) if every_agent else [ctx.agent_uuid]
    for agent in agents:
        emitter = (
            ctx.emitter
            if agent == ctx.agent_uuid
            else Emitter(agent, ctx.options.max_bytes, profile=ctx.options.profile)
        )
        blocks = {(b.type, b.id): b for b in transcript.agents.get(agent, ()) if not b.complete}
        for kind, block_id in list(blocks):
            if kind in ("text", "thinking"):
                await response.send([emitter.end(kind)])  # type: ignore[arg-type]  # narrowed above
            elif kind in ("tool_call", "server_tool_call", "tool_result", "server_tool_result"):
                block = blocks[(kind, block_id)]
                await response.send(
                    emitter.buffered(kind, "", id=block.id or "", name=block.name or "")  # type: ignore[arg-type]  # narrowed above
                )
