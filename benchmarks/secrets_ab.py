"""The held-secret scan per text delta (spec [SC4-a]): the delta path bare, and with secrets held, in one process.

Run: ``python -m benchmarks.secrets_ab``. One message of ``--count`` text deltas (token
sized, ``benchmarks.inputs.deltas``) goes as Messages events into the
``AnthropicTranslator`` (events to envelope lines, the agent's delta path), timed four
ways alternated round by round (``benchmarks.steps``): ``bare`` (nothing held: no
scrubber, the agent's fast path), ``key held`` (the ``EventScrubber`` holding one API-key
sized value, every real deployment), ``4 held`` (key, auth token, server token and one
``secrets=`` value) and ``4 held, present`` (the same, with a held value written into
one delta in a hundred, so the marker path runs too). It checks first that ``key held``
sends the same text as ``bare`` when no held value occurs (cut differently: a delta's
tail that could begin the key waits for the next), and that no held value is in any
line. Prints each candidate's median per-round CPU ratio to ``bare`` and quartiles.
Does not own: the scrubber (``agent_ref.policy.scrub``) or the translator.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from agent_ref.policy.scrub import EventScrubber
from envelope.anthropic import AnthropicTranslator

from .inputs import AGENTS, deltas
from .steps import alternate, print_ratios

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

#: Held values shaped like what a deployment holds (none occurs in ``deltas``' text).
KEY = "sk-ant-api03-" + "Q7f" * 30
HELD = (KEY, "auth-tok-" + "9x" * 16, "srv-Tok3n-9f8e7d6c5b4a", "tenant-secret-42-abcdef")


def events(pieces: Sequence[str]) -> list[dict[str, Any]]:
    """One assistant message whose one text block arrives as ``pieces``, as Messages events."""
    start: dict[str, Any] = {"id": "msg_bench", "type": "message", "role": "assistant", "model": "bench", "content": []}
    start |= {"stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}
    return [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}} for p in pieces),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]


def delta_path(stream: list[dict[str, Any]], held: Sequence[str]) -> Callable[[], list[bytes]]:
    """The agent's per-event path: the scrubber (when something is held), then the translator."""

    def run() -> list[bytes]:
        translator = AnthropicTranslator(AGENTS[0], 2048)
        scrubber = EventScrubber(list(held)) if held else None
        out: list[bytes] = []
        for event in stream:
            for each in (event,) if scrubber is None else scrubber.feed(event):
                out += translator.feed(each)
        translator.close()
        return out

    return run


def text_of(lines: list[bytes]) -> str:
    """The text the ``text`` envelopes of ``lines`` carry, joined."""
    found = (json.loads(line) for line in lines)
    return "".join(env["delta"] for env in found if env.get("type") == "text")


def main(argv: list[str] | None = None) -> int:
    """Parse the options, check the candidates agree, time them, print the ratios."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.secrets_ab", description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2_000, help="text deltas in the message (default: 2000)")
    parser.add_argument("--rounds", type=int, default=30, help="alternated rounds (default: 30)")
    args = parser.parse_args(argv)
    pieces = deltas(args.count, 20)
    present = [p + HELD[i % len(HELD)] if i % 100 == 50 else p for i, p in enumerate(pieces)]
    plain, with_values = events(pieces), events(present)
    candidates = {
        "bare": delta_path(plain, ()),
        "key held": delta_path(plain, HELD[:1]),
        "4 held": delta_path(plain, HELD),
        "4 held, present": delta_path(with_values, HELD),
    }
    if text_of(candidates["bare"]()) != text_of(candidates["key held"]()) or not text_of(candidates["bare"]()):
        print("secrets_ab: the key-held path changed lines that hold no held value", file=sys.stderr)
        return 1
    sent = b"".join(candidates["4 held, present"]())
    if any(value.encode() in sent for value in HELD):
        print("secrets_ab: a held value reached a line", file=sys.stderr)
        return 1
    times = alternate(candidates, args.rounds)
    header = f"held-secret scan, {args.count} text deltas, events to lines; CPU time per round, to bare"
    print_ratios(header, times, "bare")
    return 0


if __name__ == "__main__":
    sys.exit(main())
