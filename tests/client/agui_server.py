"""A small AG-UI agent written with the ``ag-ui-protocol`` package, served as its users serve one.

``POST /agent`` takes a ``RunAgentInput`` and answers with the SSE of ``EventEncoder``: a
step, reasoning, a text message in several deltas (quotes, backslashes, a non-BMP
character), a backend tool call with its result, a frontend tool call the run leaves
pending, and ``RUN_FINISHED`` naming it. Every id comes from the input, so the same input
gives the same bytes. Run it::

    python tests/client/agui_server.py [--port 0] [--events N]

It prints ``serving on http://127.0.0.1:PORT/`` on stderr once it listens. ``--events N``
adds N more text deltas (the benchmark's longer stream).
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import TYPE_CHECKING

import uvicorn
from ag_ui.core import (
    BaseEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

if TYPE_CHECKING:
    from collections.abc import Iterator

DELTAS = ["The sum ", 'is "25" ', "(5 + 10 \\* 2) ", "\U0001f600 ", "and I will ask you to confirm."]


def events(run: RunAgentInput, extra: int = 0) -> Iterator[BaseEvent]:
    """The events of one run of ``run``."""
    thread, rid = run.thread_id, run.run_id
    text, think, calc, ask = f"{rid}-text", f"{rid}-think", f"{rid}-calc", f"{rid}-confirm"
    yield RunStartedEvent(thread_id=thread, run_id=rid)
    yield StepStartedEvent(step_name="answer")
    yield ReasoningStartEvent(message_id=think + ".span")
    yield ReasoningMessageStartEvent(message_id=think, role="reasoning")
    yield ReasoningMessageContentEvent(message_id=think, delta="Add first, then ask.")
    yield ReasoningMessageEndEvent(message_id=think)
    yield ReasoningEndEvent(message_id=think + ".span")
    yield ToolCallStartEvent(tool_call_id=calc, tool_call_name="calculator")
    yield ToolCallArgsEvent(tool_call_id=calc, delta='{"expression": ')
    yield ToolCallArgsEvent(tool_call_id=calc, delta='"5 + (10 * 2)"}')
    yield ToolCallEndEvent(tool_call_id=calc)
    yield ToolCallResultEvent(message_id=f"{rid}-result", tool_call_id=calc, content="25")
    yield TextMessageStartEvent(message_id=text, role="assistant")
    for delta in DELTAS:
        yield TextMessageContentEvent(message_id=text, delta=delta)
    for n in range(extra):
        yield TextMessageContentEvent(message_id=text, delta=f" more {n}")
    yield TextMessageEndEvent(message_id=text)
    yield ToolCallStartEvent(tool_call_id=ask, tool_call_name="confirm", parent_message_id=text)
    yield ToolCallArgsEvent(tool_call_id=ask, delta='{"question": "Is 25 right?"}')
    yield ToolCallEndEvent(tool_call_id=ask)
    yield StepFinishedEvent(step_name="answer")
    yield RunFinishedEvent(thread_id=thread, run_id=rid, outcome=RunFinishedSuccessOutcome(pending_tool_call_ids=[ask]))


def create_app(extra: int = 0) -> FastAPI:
    """The app: ``POST /agent`` runs the agent on a ``RunAgentInput``."""
    app = FastAPI(title="a small AG-UI agent")

    @app.post("/agent")
    async def agent(run: RunAgentInput, request: Request) -> StreamingResponse:
        encoder = EventEncoder(accept=request.headers.get("accept", "text/event-stream"))
        body = (encoder.encode(event) for event in events(run, extra))
        return StreamingResponse(body, media_type=encoder.get_content_type())

    return app


def main() -> None:
    """``python agui_server.py [--host H] [--port P] [--events N]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--events", type=int, default=0, help="this many more text deltas")
    args = parser.parse_args()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    host, port = sock.getsockname()[:2]
    print(f"serving on http://{host}:{port}/", file=sys.stderr, flush=True)
    server = uvicorn.Server(uvicorn.Config(create_app(args.events), log_level="warning"))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
