"""A FastAPI app that streams two interleaved agents resumably, each run to its own user (``envelope.delivery.asgi``).

A tiny fake model (no key, no network) answers ``POST /chat?prompt=...``: a parent agent
calls a helper, and the helper (a child agent, linked to the call by its ``meta_init``,
envelope-v1 §8.3.1) streams its answer while the parent goes on writing; their
envelopes interleave on one response. ``Delivery`` journals every line before it is
sent, gives each event an id, sends keep-alives and the no-buffering headers.

Per-user replay in a few lines: the ``POST`` checks the app's own user (a bearer token
of ``DEMO_USERS`` here; your login there), starts the run and answers a *resume link*,
``/streams/RUN?token=...``, signed for that run's stream only and short-lived
(``envelope.delivery.mint``); ``GET /streams/{run_id}`` accepts it (``query_token``) and
nothing else, so a browser's ``EventSource`` (which cannot send an ``Authorization``
header) follows the stream and reconnects with ``Last-Event-ID``, every line once.
``POST /chat/{run_id}/link`` gives the run's owner a fresh link before the old one
expires. No journal call is made on the event loop (``Delivery`` makes them off it).

Run it (``pip install fastapi`` and the ``asgi`` extra)::

    python examples/fastapi_app.py --port 8000 [--journal-dir DIR] [--link-key-file FILE]
    curl -X POST -H 'Authorization: Bearer alice-demo-token' 'http://127.0.0.1:8000/chat?prompt=why+is+the+sky+blue'
    curl -N 'http://127.0.0.1:8000/streams/RUN?token=TOKEN'  # the "stream" it answered
    curl -N -H 'Last-Event-ID: RUN:0:7' 'http://127.0.0.1:8000/streams/RUN?token=TOKEN'
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import secrets
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from envelope import Emitter
from envelope.delivery import DONE_LINE, MIN_KEY_BYTES, FileJournal, Journal, MemoryJournal, mint, query_token
from envelope.delivery.asgi import Delivery

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator, Mapping

PARENT, CHILD, CALL_ID = "planner", "helper", "call_1"

#: The demo's users, by bearer token. Yours come from your login; these only on loopback.
DEMO_USERS = {"alice-demo-token": "alice", "bob-demo-token": "bob"}


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


def user_of(request: Request, users: Mapping[str, str]) -> str | None:
    """The app's own user check: ``Authorization: Bearer TOKEN`` of a known user, else ``None``."""
    header = request.headers.get("authorization", "")
    if not header.startswith("Bearer "):
        return None
    given = header.removeprefix("Bearer ").encode()
    found = [name for token, name in users.items() if hmac.compare_digest(token.encode(), given)]
    return found[0] if found else None


# Over 60 lines on purpose: the whole app in one function, read top to bottom as the README shows it.
def create_app(
    journal: Journal,
    *,
    users: Mapping[str, str] = DEMO_USERS,
    link_key: bytes | None = None,
    link_ttl: int = 300,
    pace: float = 0.05,
    keepalive_seconds: float = 15.0,
    hold_until: Path | None = None,
) -> FastAPI:
    """The app: ``POST /chat`` starts a run for its user; ``GET /streams/{run_id}?token=`` streams and resumes it.

    Args:
        journal: where ``Delivery`` writes every line before sending it.
        users: bearer token to user name (the app's own login, here a table).
        link_key: the key resume links are signed with (at least 16 bytes); a random
            one by default, so links die with the process.
        link_ttl: seconds a resume link lives.
        pace: seconds the fake model takes per line.
        keepalive_seconds: silence before a ``: keep-alive`` comment.
        hold_until: for tests: after its first line the model waits until this file exists.
    """
    key = link_key or secrets.token_bytes(32)
    delivery = Delivery(journal, keepalive_seconds=keepalive_seconds, authorize=query_token(key))
    owners: dict[str, str] = {}  # run -> user; a real app keeps it in its database

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await delivery.recover()  # close what a killed process left open (off the loop)
        yield
        await delivery.aclose()

    app = FastAPI(title="envelope delivery example", lifespan=lifespan)

    async def model(prompt: str, run_id: str) -> AsyncIterator[bytes]:
        for n, line in enumerate(fake_model(prompt, run_id)):
            while n == 1 and hold_until is not None and not hold_until.exists():
                await asyncio.sleep(0.01)  # held: the test reads the first event meanwhile
            await asyncio.sleep(pace)  # a real model awaits its next token here
            yield line

    def link(request: Request, run_id: str) -> dict[str, str | int]:
        stream = f"/streams/{run_id}?token={mint(key, run_id, ttl=link_ttl)}"  # this run's stream, nothing else
        url = str(request.base_url).rstrip("/") + stream  # Host and X-Forwarded-Proto as the proxy sent them
        return {"run_id": run_id, "stream": stream, "url": url, "expires_in": link_ttl}

    @app.post("/chat")
    async def chat(request: Request, prompt: str = "hello") -> Response:
        user = user_of(request, users)
        if user is None:
            return JSONResponse({"error": {"type": "unauthorized", "message": "log in"}}, status_code=401)
        run_id = f"run-{secrets.token_hex(8)}"  # the server's id: nobody learns another's runs by a 409
        owners[run_id] = user
        delivery.start(run_id, model(prompt, run_id))  # ids, journal (off the loop), keep-alives
        return JSONResponse(link(request, run_id), status_code=201)

    @app.post("/chat/{run_id}/link")
    async def refresh(request: Request, run_id: str) -> Response:
        user = user_of(request, users)
        if user is None or owners.get(run_id) != user:  # another's run is as unknown as none
            return JSONResponse({"error": {"type": "unknown_run", "message": "no such run"}}, status_code=404)
        return JSONResponse(link(request, run_id))

    app.router.routes.append(delivery.route("/streams/{run_id}"))  # ?token= of this run; Last-Event-ID: the rest
    app.state.delivery = delivery
    return app


def main() -> None:
    """``python examples/fastapi_app.py [--host H] [--port P] [--journal-dir DIR] [--link-key-file FILE]``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--journal-dir", help="keep the journal in files here (default: in memory)")
    parser.add_argument("--link-key-file", type=Path, help="sign resume links with this file's bytes (default: random)")
    parser.add_argument("--link-ttl", type=int, default=300, help="seconds a resume link lives")
    parser.add_argument("--pace", type=float, default=0.05, help="seconds per line of the fake model")
    parser.add_argument(
        "--hold-until", type=Path, help="for tests: hold the model after its first line until FILE exists"
    )
    args = parser.parse_args()
    journal: Journal = FileJournal(args.journal_dir) if args.journal_dir else MemoryJournal()
    key = args.link_key_file.read_bytes().strip() if args.link_key_file else None
    if key is not None and len(key) < MIN_KEY_BYTES:
        parser.error(f"--link-key-file: a key of at least {MIN_KEY_BYTES} bytes, not {len(key)}")
    app = create_app(journal, link_key=key, link_ttl=args.link_ttl, pace=args.pace, hold_until=args.hold_until)
    uvicorn.run(app, host=args.host, port=args.port)


if __name__ == "__main__":
    main()
