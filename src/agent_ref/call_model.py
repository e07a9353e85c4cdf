"""Stage 2, call the model: one API call with retries, streamed as envelopes (spec ``spec/agent-ref.md`` §6).

Owns: ``model_call`` (compaction first, §15; translating events, cut tool input [R1.3],
usage and container),
the discarded-attempt signal (§6.4) and closing blocks left open. Does not own: what the
turn means for the loop (``tool_step``, ``finish``). Functions take the ``Agent`` as
``self``: ``Agent`` binds them as its methods.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from envelope import DecodeError, Emitter
from envelope.anthropic import AnthropicTranslator

from .compaction import compact_before_call, record_call_tokens
from .pricing import cost_usd
from .response import _ClientGone, _Response
from .retry import ApiFailure, IncompleteStreamError, classify
from .state import flat_usage

if TYPE_CHECKING:
    from .agent import Agent

log = logging.getLogger("agent_ref")


class _RunFailed(Exception):
    def __init__(self, failure: ApiFailure, attempts: int) -> None:
        super().__init__(failure.message)
        self.failure = failure
        self.attempts = attempts


@dataclass(slots=True)
class _Outcome:
    content: list[dict[str, Any]]
    stop_reason: str
    bad_inputs: dict[str, str]  # tool_use id -> why its input cannot be used


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _track_tool_input(event: Any, starts: dict[int, tuple[str, str]], parts: dict[int, list[str]]) -> None:
    """Remember each tool_use block's id, name and raw input text (for a call cut by max_tokens)."""
    kind = _field(event, "type")
    index = _field(event, "index")
    if not isinstance(index, int):
        return
    if kind == "content_block_start":
        block = _field(event, "content_block")
        if _field(block, "type") == "tool_use":
            starts[index] = (str(_field(block, "id") or ""), str(_field(block, "name") or ""))
    elif kind == "content_block_delta" and index in starts:
        partial = _field(_field(event, "delta"), "partial_json")
        if isinstance(partial, str):
            parts.setdefault(index, []).append(partial)


def _bad_input_message(stop_reason: str) -> str:
    if stop_reason == "max_tokens":
        return "not run: the response reached max_tokens before this tool call was complete; call it again"
    # spec §1.3-a: the model sees why, and can call again (the API's own advice for this case).
    return "not run: the tool input was not valid JSON; call the tool again with a JSON object as its input"


async def model_call(self: Agent, response: _Response, step: int, *, tool_choice_none: bool = False) -> _Outcome:
    """One API call with retries; streams its envelopes (spec §6)."""
    run = self.state.run
    assert run is not None
    await compact_before_call(self, response)  # spec §15: before each call, never inside a block
    params = self._params(tool_choice_none)
    attempt = 0
    while True:
        attempt += 1
        translator = AnthropicTranslator(self.agent_uuid, self.max_bytes, profile=self.profile)
        blocks_before = response.block_count()
        sent = 0
        tool_starts: dict[int, tuple[str, str]] = {}
        tool_json: dict[int, list[str]] = {}
        bad: dict[int, str] = {}
        call_usage: dict[str, int] = {}
        try:
            async for event in self.model.stream(params):
                _track_tool_input(event, tool_starts, tool_json)
                self._track_usage_and_container(event, call_usage)
                try:
                    lines = translator.feed(event)
                except DecodeError:
                    index = _field(event, "index")
                    if _field(event, "type") != "content_block_stop" or not isinstance(index, int):
                        raise
                    bad[index] = "".join(tool_json.get(index, []))
                    start = tool_starts.get(index, ("", ""))
                    # The call was cut: show it with the input history records for it,
                    # an empty object, so the stream stays valid (spec §1.3-b).
                    lines = self._emitter.buffered("tool_call", "{}", id=start[0], name=start[1])
                if lines:
                    sent += len(lines)
                    await response.send(lines)
            translator.close()
            if translator.stop_reason is None:
                raise IncompleteStreamError("no message_delta with a stop_reason")
        except (asyncio.CancelledError, _RunFailed, _ClientGone):
            raise
        except Exception as exc:
            failure = classify(exc)
            if failure.type == "internal_error":
                log.exception("model call failed with an unexpected error")
            else:
                log.warning("model call attempt %d failed: %s (%s)", attempt, failure.type, failure.message)
            retrying = failure.transient and attempt < self.retry.max_attempts
            wait, source = self.retry.wait(attempt, failure)
            if sent:
                await self._close_open(response)
                await self._discard(
                    response,
                    response.block_count() - blocks_before,
                    step,
                    attempt,
                    failure,
                    retrying,
                    wait if retrying else None,
                )
            elif retrying and source == "retry-after":
                # spec §6.2-b: a wait the API asked for is said in the stream, even before output.
                await self._discard(response, 0, step, attempt, failure, retrying, wait)
            if not retrying:
                raise _RunFailed(failure, attempt) from None
            await self.retry.sleep(wait)
            continue
        # spec §11.2-a: the nested counters too; running totals, the later value wins.
        usage = {**call_usage, **translator.usage}
        record_call_tokens(self, usage)  # spec §15.1-a: the next threshold check
        run.usage.add(usage)
        self.state.usage.add(usage)
        run.cost_usd = cost_usd(self.model.name, run.usage, self.prices)
        run.steps += 1
        content = translator.finalize()
        bad_inputs: dict[str, str] = {}
        reason = translator.stop_reason or "end_turn"
        ids = {block.get("id") for block in content if block.get("type") == "tool_use"}
        for index in sorted(bad):
            tool_id, tool_name = tool_starts.get(index, ("", ""))
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
        self._collect_files(content)
        return _Outcome(content=content, stop_reason=reason, bad_inputs=bad_inputs)


def track_usage_and_container(self: Agent, event: Any, usage: dict[str, int]) -> None:
    """Keep a call's usage (nested counters included) and the container the API reports."""
    kind = _field(event, "type")
    if kind == "message_start":
        message = _field(event, "message")
        usage.update(flat_usage(_field(message, "usage")))
        container = _field(message, "container")
    elif kind == "message_delta":
        usage.update(flat_usage(_field(event, "usage")))
        container = _field(_field(event, "delta"), "container")
    else:
        return
    container_id = _field(container, "id")
    if isinstance(container_id, str) and container_id:
        self.state.container_id = container_id


async def discard(
    self: Agent,
    response: _Response,
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
    await response.send(self._emitter.buffered("error", json.dumps(payload, ensure_ascii=False)))


async def close_open(self: Agent, response: _Response, *, every_agent: bool = False) -> None:
    """Close every block left open on the wire, so a discard or an abort leaves no dangling block.

    With ``every_agent`` (an abort, a failure), the blocks of subagents streaming into this
    response are closed too: a cancelled child sends nothing more (spec §13.7-a).
    """
    transcript = response.checker.transcript()
    agents = list(transcript.agents) if every_agent else [self.agent_uuid]
    for agent in agents:
        emitter = self._emitter if agent == self.agent_uuid else Emitter(agent, self.max_bytes, profile=self.profile)
        blocks = {(b.type, b.id): b for b in transcript.agents.get(agent, ()) if not b.complete}
        for kind, block_id in list(blocks):
            if kind in ("text", "thinking"):
                await response.send([emitter.end(kind)])  # type: ignore[arg-type]  # narrowed above
            elif kind in ("tool_call", "server_tool_call", "tool_result", "server_tool_result"):
                block = blocks[(kind, block_id)]
                await response.send(
                    emitter.buffered(kind, "", id=block.id or "", name=block.name or "")  # type: ignore[arg-type]  # narrowed above
                )
