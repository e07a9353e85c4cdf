"""Benchmark: each OpenAI translator against the SDK's own accumulation of the same stream.

Owns: two streams made once (a Chat Completions call of many small content deltas and
tool call fragments; a Responses call of reasoning summary, text and function call
deltas), parsed once into the SDK's typed objects as its client does, and timed two ways
in one ``group`` per API: the SDK's accumulation (``ChatCompletionStreamState.handle_chunk``,
``ResponseStreamState.handle_event``: what ``.stream()`` runs per event) and the
translator's ``feed`` on the same objects, their rounds alternated. The goal (issue 42 §3): the translator costs
no more than the accumulation it rides on, a ratio <= 1. ``ratios()`` gives both ratios
from one run. Not a test: no assertion on time; the smoke test checks the inputs.

Run: ``python -m pytest benchmarks/bench_openai.py --benchmark-only``, or
``python -m benchmarks.bench_openai`` for the ratios alone (needs the ``openai`` extra).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

import pytest

from envelope.openai import ChatTranslator, ResponsesTranslator

AGENT = "7a3c1e5b-9d2f-4b6a-8c0e-1f3a5b7d9c2e"
#: Characters per text delta, about what the APIs send.
DELTA_SIZE = 20
WORDS = ["alpha", "beta", 'quo"te', "naïve", "line\nbreak", "tab\t", "🏔", "x" * 12]


def _text(chars: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    text = ""
    while len(text) < chars:
        text += rng.choice(WORDS) + " "
    return [text[i : i + DELTA_SIZE] for i in range(0, len(text), DELTA_SIZE)]


def chat_chunks(chars: int = 200_000, seed: int = 5) -> list[dict[str, Any]]:
    """One Chat Completions call as wire chunks: ``chars`` of content, then two tool calls in fragments."""
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "gpt-4.1-mini"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    out += [chunk({"content": piece}) for piece in _text(chars, seed)]
    for index in (0, 1):
        head = {"index": index, "id": f"call_{index}", "type": "function", "function": {"name": "f", "arguments": ""}}
        out.append(chunk({"tool_calls": [head]}))
        args = json.dumps({"rows": _text(chars // 20, seed + index)})
        out += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": args[i : i + DELTA_SIZE]}}]})
            for i in range(0, len(args), DELTA_SIZE)
        ]
    out.append(chunk({}, "tool_calls"))
    return out


def responses_events(chars: int = 200_000, seed: int = 7) -> list[dict[str, Any]]:
    """One Responses call as wire events: a reasoning summary, ``chars`` of text, a function call."""
    response = {"id": "resp_bench", "object": "response", "created_at": 0, "model": "o4-mini", "output": []}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {"id": "rs", "type": "reasoning", "summary": []},
        },
    ]
    summary = _text(chars // 10, seed)
    events += [
        {
            "type": "response.reasoning_summary_text.delta",
            "item_id": "rs",
            "output_index": 0,
            "summary_index": 0,
            "delta": p,
        }
        for p in summary
    ]
    done = {"type": "summary_text", "text": "".join(summary)}
    events += [
        {
            "type": "response.reasoning_summary_part.done",
            "item_id": "rs",
            "output_index": 0,
            "summary_index": 0,
            "part": done,
        },
        {
            "type": "response.output_item.done",
            "output_index": 0,
            "item": {"id": "rs", "type": "reasoning", "summary": [done]},
        },
    ]
    message = {"id": "msg", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": "", "annotations": []}
    events += [
        {"type": "response.output_item.added", "output_index": 1, "item": message},
        {"type": "response.content_part.added", "item_id": "msg", "output_index": 1, "content_index": 0, "part": part},
    ]
    text = _text(chars, seed + 1)
    events += [
        {
            "type": "response.output_text.delta",
            "item_id": "msg",
            "output_index": 1,
            "content_index": 0,
            "delta": p,
            "logprobs": [],
        }
        for p in text
    ]
    final = {**part, "text": "".join(text)}
    events += [
        {"type": "response.content_part.done", "item_id": "msg", "output_index": 1, "content_index": 0, "part": final},
        {
            "type": "response.output_item.done",
            "output_index": 1,
            "item": {**message, "status": "completed", "content": [final]},
        },
    ]
    call = {
        "id": "fc",
        "type": "function_call",
        "call_id": "call_r",
        "name": "f",
        "arguments": "",
        "status": "in_progress",
    }
    args = json.dumps({"rows": _text(chars // 20, seed + 2)})
    events.append({"type": "response.output_item.added", "output_index": 2, "item": call})
    events += [
        {
            "type": "response.function_call_arguments.delta",
            "item_id": "fc",
            "output_index": 2,
            "delta": args[i : i + 20],
        }
        for i in range(0, len(args), DELTA_SIZE)
    ]
    completed = {**call, "arguments": args, "status": "completed"}
    events.append({"type": "response.output_item.done", "output_index": 2, "item": completed})
    output = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    events.append({"type": "response.completed", "response": {**response, "status": "completed", "output": output}})
    return events


def typed_chat(chunks: list[dict[str, Any]]) -> list[Any]:
    """The chunks as the SDK's client builds them (``construct_type``, no validation)."""
    from openai._models import construct_type
    from openai.types.chat import ChatCompletionChunk

    return [construct_type(type_=ChatCompletionChunk, value=c) for c in chunks]


def typed_responses(events: list[dict[str, Any]]) -> list[Any]:
    from openai._models import construct_type
    from openai.types.responses import ResponseStreamEvent

    return [construct_type(type_=ResponseStreamEvent, value=e) for e in events]


def sdk_chat(chunks: list[Any]) -> Any:
    """What ``chat.completions.stream()`` runs per chunk: the SDK's accumulation."""
    from openai.lib.streaming.chat import ChatCompletionStreamState

    state: Any = ChatCompletionStreamState()
    for chunk in chunks:
        state.handle_chunk(chunk)
    return state.get_final_completion()


def sdk_responses(events: list[Any]) -> Any:
    from openai import omit
    from openai.lib.streaming.responses._responses import ResponseStreamState

    state: Any = ResponseStreamState(input_tools=omit, text_format=omit)
    for event in events:
        state.handle_event(event)
    return state._completed_response


def ours_chat(chunks: list[Any]) -> int:
    t = ChatTranslator(AGENT)
    n = sum(len(t.feed(c)) for c in chunks)
    return n + len(t.finish())


def ours_responses(events: list[Any]) -> int:
    t = ResponsesTranslator(AGENT)
    n = sum(len(t.feed(e)) for e in events)
    return n + len(t.finish())


def _alternated(ours: Any, sdk: Any, arg: Any, rounds: int) -> float:
    """``ours``'s time / ``sdk``'s on ``arg``, best of ``rounds`` each, the two alternated round by round."""
    best = [float("inf"), float("inf")]
    for n in range(rounds):
        for who in (0, 1) if n % 2 == 0 else (1, 0):  # neither always runs on a warmer machine
            start = time.perf_counter()
            (ours, sdk)[who](arg)
            best[who] = min(best[who], time.perf_counter() - start)
    return best[0] / best[1]


def ratios(chars: int = 200_000, rounds: int = 5) -> dict[str, float]:
    """Translator time / SDK accumulation time on the same typed objects, best of ``rounds`` alternated, one run."""
    chat, resp = typed_chat(chat_chunks(chars)), typed_responses(responses_events(chars))
    return {
        "chat": _alternated(ours_chat, sdk_chat, chat, rounds),
        "responses": _alternated(ours_responses, sdk_responses, resp, rounds),
    }


@pytest.mark.parametrize("who", ["sdk", "translator"])
def test_chat(benchmark: Any, who: str) -> None:
    chunks = typed_chat(chat_chunks())
    benchmark.group = "openai: chat completions, 200 KB in 20-char deltas + 2 tool calls"
    benchmark(sdk_chat if who == "sdk" else ours_chat, chunks)


@pytest.mark.parametrize("who", ["sdk", "translator"])
def test_responses(benchmark: Any, who: str) -> None:
    events = typed_responses(responses_events())
    benchmark.group = "openai: responses, 200 KB text + summary + a function call"
    benchmark(sdk_responses if who == "sdk" else ours_responses, events)


def main(argv: list[str] | None = None) -> int:
    """Print each translator's time as a ratio to the SDK's own accumulation, one line per API."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_openai",
        description="Each OpenAI stream translator's time as a ratio to the SDK's own accumulation of the "
        "same typed events (Chat Completions, Responses), best of ROUNDS alternated, in one run.",
    )
    parser.add_argument("--chars", type=int, default=200_000, help="characters of text streamed (default 200,000)")
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds of each; the best is kept (default 5)")
    args = parser.parse_args(argv)
    for api, ratio in ratios(args.chars, args.rounds).items():
        print(f"{api}: translator / SDK accumulation = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
