"""A FastAPI app that streams two interleaved agents resumably (``envelope.delivery.asgi``).

A tiny fake model (no key, no network) answers ``GET /chat/{run_id}?prompt=...``: a
parent agent calls a helper, and the helper (a child agent, linked to the call by its
``meta_init``, envelope-v1 §8.3.1) streams its answer while the parent goes on writing;
their envelopes interleave on one response. ``Delivery`` journals every line before it
is sent, gives each event an id, sends keep-alives and the no-buffering headers; a
client whose connection drops gets the rest from ``GET /streams/{run_id}`` with
``Last-Event-ID``, every line once.

Run it (``pip install fastapi`` and the ``asgi`` extra)::

    python examples/fastapi_app.py --port 8000 [--journal-dir DIR]
    curl -N 'http://127.0.0.1:8000/chat/run-1?prompt=why+is+the+sky+blue'
    curl -N -H 'Last-Event-ID: run-1:0:7' http://127.0.0.1:8000/streams/run-1
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import TYPE_CHECKING

import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse, Response

from envelope import Emitter
from envelope.delivery import DONE_LINE, RUN_ID_PATTERN, FileJournal, Journal, MemoryJournal
from envelope.delivery.asgi import Delivery

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator

PARENT, CHILD, CALL_ID = "planner", "helper", "call_1"


def _meta(agent: str, prompt: str, run_id: str, **link: str) -> str:
    return json.dumps(
        {"format": "json", "user_query": prompt, "agent_uuid": agent, "model": "fake", "run_id": run_id, **link}
    )


def _final(steps: int) -> str:
    return json.dumps({"stop_reason": "end_turn", "total_steps": steps, "cumulative_usage": {}})


def fake_model(prompt: str, run_id: str) -> Iterator[bytes]:
    """The lines of one run: a parent and the helper it spawns, interleaved line by line."""
    parent, child = Emitter(PARENT, 2048), Emitter(CHILD, 2048)  # one emitter per agent
    yield from parent.buffered("meta_init", _meta(PARENT, prompt, run_id))
    yield from parent.buffered("tool_call", json.dumps({"question": prompt}), id=CALL_ID, name="ask_helper")
    link = {"parent_agent": PARENT, "parent_tool_use_id": CALL_ID}  # envelope-v1 §8.3.1: where the helper hangs
    yield from child.buffered("meta_init", _meta(CHILD, prompt, run_id, **link))
    answer = [f"{word} " for word in f"The helper's answer to: {prompt}".split()]
    notes = [f"{word} " for word in ("While", "the", "helper", "works,", "the", "planner", "drafts", "a", "reply.")]
    for n in range(max(len(answer), len(notes))):  # both agents stream at once
        if n < len(answer):
            yield from child.streamed("text", answer[n])
        if n < len(notes):
            yield from parent.streamed("text", notes[n])
    yield child.end("text")
    yield from child.buffered("meta_final", _final(1))
    yield parent.end("text")
    yield from parent.buffered("tool_result", "".join(answer).strip(), id=CALL_ID, name="ask_helper")
    yield from parent.buffered("meta_final", _final(2))
    yield DONE_LINE


def create_app(journal: Journal, *, pace: float = 0.05, keepalive_seconds: float = 15.0) -> FastAPI:
    """The app: ``GET /chat/{run_id}`` streams a run; ``GET /streams/{run_id}`` resumes it.

    Args:
        journal: where ``Delivery`` writes every line before sending it.
        pace: seconds the fake model takes per line.
        keepalive_seconds: silence before a ``: keep-alive`` comment.
    """
    delivery = Delivery(journal, keepalive_seconds=keepalive_seconds)
    app = FastAPI(title="envelope delivery example")

    async def model(prompt: str, run_id: str) -> AsyncIterator[bytes]:
        for line in fake_model(prompt, run_id):
            await asyncio.sleep(pace)  # a real model awaits its next token here
            yield line

    @app.get("/chat/{run_id}")
    async def chat(run_id: str, prompt: str = "hello") -> Response:
        if not RUN_ID_PATTERN.fullmatch(run_id) or journal.responses(run_id) or (run_id, 0) in delivery.live:
            return JSONResponse({"error": {"type": "run_exists", "message": "use a new run id"}}, status_code=409)
        return delivery.stream(run_id, model(prompt, run_id))  # ids, journal, keep-alives

    app.router.routes.append(delivery.route("/streams/{run_id}"))  # Last-Event-ID: the rest, once
    app.state.delivery = delivery
    return app


def main() -> None:
    """``python examples/fastapi_app.py [--host H] [--port P] [--journal-dir DIR]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--journal-dir", help="keep the journal in files here (default: in memory)")
    parser.add_argument("--pace", type=float, default=0.05, help="seconds per line of the fake model")
    args = parser.parse_args()
    journal: Journal = FileJournal(args.journal_dir) if args.journal_dir else MemoryJournal()
    uvicorn.run(create_app(journal, pace=args.pace), host=args.host, port=args.port)


if __name__ == "__main__":
    main()
