"""kill -9 of a SQLite-backed server process, and what the tests check after (issue 24 §Deliver).

Two halves:

- a server process, ``python kill_support.py DB --gate FILE --entered FILE``: ``create_app``
  on 127.0.0.1 port 0 with a SQLite store and a file journal beside it, as ``agent-ref
  serve`` does, its URL printed on stdout. Its ``calculator`` waits for the gate file
  (``tests/serve_launcher.py``); its scripted model *holds* any call whose latest user
  turn carries ``HOLD`` (in a prompt, or in a tool result's content), after the call's
  first text delta, until the gate file exists: so a test can kill the process in the
  middle of a model call, of a first run or of a resume. The model touches ``--entered``
  when it starts holding. Every wait is bounded (``serve_launcher.GATE_WAIT``).
- the test side: start and kill that process (our own child, by its pid), read a stream
  until a line, and the checks every kill test makes: a replay that ends and validates,
  a history without an orphaned ``tool_use``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2

from agent_ref import ScriptedModel, SQLiteStore
from agent_ref.server.app import create_app, serve
from agent_ref.server.streams import FileJournal
from agent_ref.tools.demo import confirm
from serve_launcher import GATE_WAIT, gated_calculator, parser
from validating import violations

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

#: A call whose latest user turn holds this text is held mid-stream until the gate opens.
HOLD = "[hold]"
#: Bound on starting a server process and on each request a test makes (seconds): a hang
#: guard, not a speed claim, so sized for a loaded 2-core machine (20 s was once too little).
START_TIMEOUT = 60.0
REQUEST_TIMEOUT = 20.0
HERE = Path(__file__).resolve().parent


class HoldingModel(ScriptedModel):
    """The scripted model, holding a marked call after its first text delta until ``gate`` exists."""

    def __init__(self, gate: Path | None, entered: Path | None) -> None:
        """See the module docstring."""
        super().__init__()
        self.gate = gate
        self.entered = entered

    async def stream(self, params: dict[str, Any]) -> AsyncIterator[Any]:
        """See ``Model.stream``; holds once per marked call."""
        held = not _marked(params.get("messages", []))
        async for event in super().stream(params):
            yield event
            if not held and getattr(event, "type", "") == "content_block_delta":
                held = True
                if self.entered is not None:
                    self.entered.touch()
                deadline = time.monotonic() + GATE_WAIT
                while self.gate is not None and not self.gate.exists() and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)


def _marked(messages: list[dict[str, Any]]) -> bool:
    """Whether the latest user turn carries ``HOLD`` in a text or a tool result's content."""
    if not messages or messages[-1].get("role") != "user":
        return False
    content = messages[-1].get("content")
    return HOLD in json.dumps(content, ensure_ascii=False)


def main() -> None:
    """Serve until killed (the server half)."""
    made = parser("db", "serve a holding scripted agent on SQLite")
    made.add_argument("--entered", default=None, help="touched when the model starts holding")
    args = made.parse_args()
    gate = Path(args.gate) if args.gate else None
    entered = Path(args.entered) if args.entered else None
    app = create_app(
        store=SQLiteStore(args.db),
        model_factory=lambda: HoldingModel(gate, entered),
        tools=[gated_calculator(gate), confirm],
        journal=FileJournal(f"{args.db}.streams"),
    )

    def ready(url: str) -> None:
        sys.stdout.write(url + "\n")
        sys.stdout.flush()

    serve(app, "127.0.0.1", 0, ready=ready)


# ---------------------------------------------------------------------- the test side


class Server:
    """One server process on ``db``; ``kill()`` is SIGKILL to our own child, by its pid."""

    def __init__(self, db: Path, gate: Path | None = None, entered: Path | None = None) -> None:
        """Start it and wait (bounded) for its URL."""
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
        command = [sys.executable, str(HERE / "kill_support.py"), str(db)]
        if gate is not None:
            command += ["--gate", str(gate)]
        if entered is not None:
            command += ["--entered", str(entered)]
        #: What the process wrote to stderr, once stopped.
        self.stderr = ""
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.base = self._url()

    def _url(self) -> str:
        assert self.proc.stdout is not None
        lines: list[str] = []

        def read() -> None:
            assert self.proc.stdout is not None
            lines.append(self.proc.stdout.readline())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(START_TIMEOUT)
        url = lines[0].strip() if lines else ""
        if not url.startswith("http://127.0.0.1:"):
            self.stop()
            raise AssertionError(f"the server did not start: {url!r} {self.stderr}")
        return url.rstrip("/")

    def kill(self) -> None:
        """SIGKILL, and wait for it (bounded)."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(START_TIMEOUT)
        self.stop()

    def stop(self) -> None:
        """SIGTERM (SIGKILL after a bound) and close the pipes; keep what it wrote to stderr."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, self.stderr = self.proc.communicate(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, self.stderr = self.proc.communicate(timeout=10)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()


def client() -> httpx2.Client:
    """A loopback client with every wait bounded."""
    return httpx2.Client(timeout=REQUEST_TIMEOUT)


class OpenStream:
    """A POST whose SSE answer the test reads in steps, across a kill of the server.

    Every read is bounded: ``REQUEST_TIMEOUT`` without data, ``GATE_WAIT`` in all.
    """

    def __init__(self, base: str, path: str, body: dict[str, Any]) -> None:
        """Open the stream (the status must be 200)."""
        self._stack = contextlib.ExitStack()
        http = self._stack.enter_context(client())
        self.response = self._stack.enter_context(http.stream("POST", base + path, json=body))
        assert self.response.status_code == 200, self.response.read()
        self.headers = self.response.headers
        self._chunks = self.response.iter_raw()
        self.raw = b""

    def read_until(self, needle: bytes, also: Path | None = None) -> None:
        """Read until a whole event holding ``needle`` has come (and ``also`` exists)."""
        deadline = time.monotonic() + GATE_WAIT
        while not (needle in self.raw and self.raw.endswith(b"\n\n") and (also is None or also.exists())):
            assert time.monotonic() < deadline, "the awaited line never came"
            try:
                self.raw += next(self._chunks)
            except StopIteration:
                raise AssertionError(f"the stream ended before {needle!r}: {self.raw[-300:]!r}") from None

    def read_to_end(self) -> None:
        """Read until the stream ends; a connection cut by a killed server ends it too."""
        with contextlib.suppress(httpx2.TransportError):
            for chunk in self._chunks:
                self.raw += chunk

    def whole_events(self) -> bytes:
        """What came, up to the last whole event (a kill may cut the next one)."""
        end = self.raw.rfind(b"\n\n")
        return self.raw[: end + 2] if end >= 0 else b""

    def close(self) -> None:
        """Close the connection."""
        self._stack.close()


def wait_for(path: Path) -> None:
    """Wait (bounded) until ``path`` exists."""
    deadline = time.monotonic() + GATE_WAIT
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


def envelopes(lines: list[bytes], kind: str) -> list[Any]:
    """The JSON payloads of the ``kind`` envelopes (one line each) of ``lines``."""
    return [json.loads(json.loads(x)["delta"]) for x in lines if x != b"[DONE]" and json.loads(x)["type"] == kind]


def assert_closed_and_valid(raw: bytes) -> None:
    """A whole response: ends with ``[DONE]`` and validates strictly, E140 aside (spec server §3.3-a)."""
    events = [e for e in raw.split(b"\n\n") if e.strip()]
    assert events, raw
    assert events[-1].endswith(b"data: [DONE]"), raw[-200:]
    codes = [v.code for v in violations(raw)]
    assert set(codes) <= {"E140"}, codes


def assert_no_orphans(messages: list[dict[str, Any]]) -> None:
    """Every ``tool_use`` is answered by a ``tool_result`` in the next message (the API refuses otherwise)."""
    for i, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") != "assistant" or not isinstance(content, list):
            continue
        uses = {b["id"] for b in content if b.get("type") == "tool_use"}
        if not uses:
            continue
        answer = messages[i + 1].get("content") if i + 1 < len(messages) else None
        assert isinstance(answer, list), f"tool_use {uses} has no answer"
        answered = {b.get("tool_use_id") for b in answer if b.get("type") == "tool_result"}
        assert uses <= answered, f"tool_use {uses - answered} has no tool_result"


def stored(db: Path, agent_uuid: str) -> Any:
    """The agent's state as the database holds it now."""
    return asyncio.run(SQLiteStore(db).load(agent_uuid))


if __name__ == "__main__":
    main()
