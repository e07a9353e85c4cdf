"""Helpers for the agent_ref tests: run an agent into a list, read streams back, apply discards."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, TypeVar

from agent_ref import RetryPolicy
from envelope import SSEReader, reconstruct
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Coroutine

#: The envelope types, in order, of the embedded model's calculator run ("What is 5 + (10 * 2)?"):
#: each of its two steps between its step_start and step_finish statuses (envelope-v1 [4.16-d]).
CALCULATOR_RUN_TYPES = [
    "meta_init",
    "meta_status",
    "thinking",
    "text",
    "tool_call",
    "tool_result",
    "meta_status",
    "meta_status",
    "thinking",
    "text",
    "meta_status",
    "meta_final",
]


async def _no_sleep(_: float) -> None:
    return None


def fast_retry(attempts: int = 4) -> RetryPolicy:
    """A retry policy that never really sleeps (backoff is configurable; tests stay fast)."""
    return RetryPolicy(max_attempts=attempts, base_delay=0.001, max_delay=0.002, sleep=_no_sleep)


def drop(line: bytes) -> None:
    """A sink that ignores what it gets."""


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run one agent coroutine to its end."""
    return asyncio.run(coro)


def envelopes(lines: list[bytes]) -> list[dict[str, Any]]:
    """The decoded envelopes of a stream (``[DONE]`` left out)."""
    return [json.loads(line) for line in lines if line != b"[DONE]"]


def types(lines: list[bytes]) -> list[str]:
    """The envelope types in order, consecutive repeats collapsed (one entry per run of lines)."""
    out: list[str] = []
    for env in envelopes(lines):
        if not out or out[-1] != env["type"] or env["type"] not in ("text", "thinking"):
            out.append(env["type"])
    collapsed: list[str] = []
    for kind in out:
        if collapsed and collapsed[-1] == kind and kind in ("text", "thinking"):
            continue
        collapsed.append(kind)
    return collapsed


def blocks(lines: list[bytes]) -> list[dict[str, Any]]:
    """The rebuilt blocks of the single agent of a stream, discard signals left out.

    The codec's reconstructor applies the discarded-attempt rule (spec/envelope-v1.md
    §7.7): the blocks a failed attempt sent are already gone; the signal's own ``error``
    block stays there, and is left out here so a retried run compares equal to a clean one.
    """
    transcript = reconstruct(lines).to_dict()
    (agent,) = transcript["agents"].values()
    return [b for b in agent["blocks"] if not _is_discard_signal(b)]


def _is_discard_signal(block: dict[str, Any]) -> bool:
    data = block.get("data")
    return block["type"] == "error" and isinstance(data, dict) and data.get("type") == "attempt_discarded"


def meta(lines: list[bytes], kind: str) -> dict[str, Any]:
    """The JSON data of the last ``kind`` block (meta_init, meta_final, error...)."""
    found = [b for b in reconstruct(lines).to_dict()["agents"].popitem()[1]["blocks"] if b["type"] == kind]
    assert found, f"no {kind} block"
    data = found[-1]["data"]
    assert isinstance(data, dict | list)
    return data  # type: ignore[return-value]  # a list only for awaiting_frontend_tools


def split_responses(lines: list[bytes]) -> list[list[bytes]]:
    """A run log's lines cut into responses, each ending with ``[DONE]`` (spec/agent-ref.md §9.2-a).

    Lines after the last ``[DONE]`` form a last, unterminated response (which the strict
    validator then rejects, as it should).
    """
    out: list[list[bytes]] = [[]]
    for line in lines:
        out[-1].append(line)
        if line == b"[DONE]":
            out.append([])
    return [r for r in out if r]


def sse_lines(stdout: str | bytes) -> list[bytes]:
    """The data lines of framed SSE output (a CLI's stdout), ``[DONE]`` included."""
    reader = SSEReader()
    data = stdout.encode() if isinstance(stdout, str) else stdout
    events = reader.feed(data)
    reader.close()
    return [e.data.encode() for e in events]


def assert_valid_responses(lines: list[bytes], *, max_bytes: int = 2048) -> list[list[bytes]]:
    """Validate each response of a run log strictly; return them. Each must end with ``[DONE]``."""
    responses = split_responses(lines)
    assert responses, "no response at all"
    for response in responses:
        assert response[-1] == b"[DONE]", "a response does not end with [DONE]"
        assert_valid(response, max_bytes=max_bytes)
    return responses


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The text blocks of the user turns of ``messages`` (API form), in order."""
    return [
        b["text"]
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "text"
    ]
