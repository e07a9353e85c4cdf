"""``envelope.client`` against real servers, each started as its users start it (issue 42 item 2).

- ``agent-ref serve`` (the console script, the offline scripted model), reached through a
  TCP proxy of the test that cuts the connections it is told to after so many bytes: the
  client follows a run through two forced disconnects and answers its frontend tool; the
  same server's ``/agui`` and ``/api/chat`` read through the converters.
- ``python examples/fastapi_app.py``: a stream of ``envelope.delivery`` resumed at its own
  ``/streams/{run_id}`` (``resume=``) after a cut.
- ``python tests/client/agui_server.py``: an agent written with the ``ag-ui-protocol``
  package; the client's transcript equals what ``AguiToEnvelope`` makes of the same bytes.

Every stream is checked by the strict validator, and every transcript against one read
without the client (the server's replay, the example's lines, the converter's output).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from browser.agent_server import serving
from cli_support import start_serve, stop_serve
from conftest import ROOT
from envelope import encode, reconstruct
from envelope.client import Backoff, connect_sync
from envelope.interop.agui import AguiToEnvelope
from fault_support import wait_until
from proxy_support import CuttingProxy
from server_support import data_lines, get, read_events
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from envelope import Envelope

CONFIRM = "Please confirm: delete the temp files"
FAST = Backoff(initial=0.0, factor=1.0, maximum=0.0, retries=5)
AGUI_SERVER = ROOT / "tests" / "client" / "agui_server.py"
EXAMPLE = ROOT / "examples" / "fastapi_app.py"


@pytest.fixture
def agent_ref(tmp_path: Path) -> Iterator[str]:
    """``agent-ref serve --port 0`` (the console script, offline model): its base URL."""
    proc, host, port = start_serve(tmp_path)
    try:
        yield f"http://{host}:{port}"
    finally:
        stop_serve(proc)


def _split(envelopes: list[Envelope], first: int) -> list[list[bytes]]:
    lines = [encode(e) for e in envelopes]
    return [[*lines[:first], b"[DONE]"], [*lines[first:], b"[DONE]"]]


def test_agent_ref_serve_through_two_forced_disconnects_and_a_frontend_tool(agent_ref: str) -> None:
    """[CL2-a] [CL3-a] the first response is cut twice (the POST's body, then the resumption's); the tool is answered."""
    host, port = agent_ref.removeprefix("http://").rsplit(":", 1)
    proxy = CuttingProxy(host, int(port), [1000, 900])
    envelopes: list[Envelope] = []
    try:
        with connect_sync(f"http://127.0.0.1:{proxy.port}/agent/run", body={"prompt": CONFIRM}, backoff=FAST) as run:
            for env in run:
                envelopes.append(env)
                if run.pending is not None:
                    run.answer([{"tool_use_id": t["tool_use_id"], "content": "yes"} for t in run.pending])
            run_id, done = run.run_id, run.done
            transcript = run.transcript.to_dict()
    finally:
        proxy.close()
    assert proxy.made == 2
    heads = proxy.requests()
    resumed = [h for h in heads if h.startswith(f"get /agent/runs/{run_id}/stream")]
    assert len(resumed) == 2
    assert all(f"last-event-id: {run_id}:0:" in h for h in resumed)
    assert [h.split(" ", 2)[1] for h in heads if h.startswith("post")] == ["/agent/run", "/agent/tool_results"]
    assert done
    assert run_id is not None
    # the server's own replay of both responses, read without the client
    replays = [get(agent_ref, f"/agent/runs/{run_id}/stream", params={"response": str(n)}).content for n in (0, 1)]
    for replay in replays:
        assert_valid(replay)
    lines = [data_lines(r) for r in replays]
    assert transcript == reconstruct([*lines[0], *lines[1]]).to_dict()
    for response in _split(envelopes, len(lines[0]) - 1):
        assert_valid(response)
    blocks = transcript["agents"][next(iter(transcript["agents"]))]["blocks"]
    assert blocks[-1]["data"]["stop_reason"] == "end_turn"


def test_agent_ref_serves_agui_and_ui_message_streams_to_the_client(agent_ref: str) -> None:
    """[CL4-a] the same server's /agui (told by RUN_STARTED) and /api/chat (told by its header), through the converters."""
    agui_input = {
        "threadId": "thread-1",
        "runId": "run-1",
        "messages": [{"id": "u1", "role": "user", "content": "What is 5 + (10 * 2)?"}],
        "tools": [],
        "context": [],
        "state": None,
        "forwardedProps": None,
    }
    with connect_sync(agent_ref + "/agui", body=agui_input) as run:
        envelopes = list(run)
        assert (run.protocol, run.done) == ("agui", True)
        agui_text = _texts(run.transcript.to_dict())
    assert_valid([*(encode(e) for e in envelopes), b"[DONE]"])
    chat = {
        "id": "chat-1",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "What is 5 + (10 * 2)?"}]}],
    }
    with connect_sync(agent_ref + "/api/chat", body=chat) as run:
        envelopes = list(run)
        assert (run.protocol, run.done) == ("vercel", True)
        chat_text = _texts(run.transcript.to_dict())
    assert_valid([*(encode(e) for e in envelopes), b"[DONE]"])
    assert agui_text == chat_text
    assert any("25" in text for text in agui_text)


def _texts(transcript: dict[str, Any]) -> list[str]:
    return [b["content"] for a in transcript["agents"].values() for b in a["blocks"] if b["type"] == "text"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def fastapi_example(tmp_path: Path) -> Iterator[str]:
    """``python examples/fastapi_app.py --port P --journal-dir DIR`` as its docstring runs it: the base URL."""
    port = _free_port()
    command = [sys.executable, str(EXAMPLE), "--port", str(port), "--pace", "0.005", "--journal-dir", str(tmp_path)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert proc.poll() is None, f"the example exited ({proc.returncode})"
        try:
            httpx2.get(base + "/streams/none", timeout=2)
        except httpx2.TransportError:
            return False
        return True

    try:
        wait_until(up, "the example to listen", timeout=60)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_the_fastapi_example_is_resumed_at_its_own_route(fastapi_example: str) -> None:
    """[CL2-a] resume= names the example's /streams/{run_id}; a cut body is resumed there, every line once.

    The example gives each run to its user: ``POST /chat`` (the user's bearer token) answers
    the run's resume link, and the client follows that link, resumed at the same link.
    """
    from examples.fastapi_app import fake_model

    prompt = "why is the sky blue"
    with httpx2.Client(timeout=30) as client:
        started = client.post(
            fastapi_example + "/chat", params={"prompt": prompt}, headers={"authorization": "Bearer alice-demo-token"}
        )
    assert started.status_code == 201, started.text
    run_id, stream = started.json()["run_id"], started.json()["stream"]
    host, port = fastapi_example.removeprefix("http://").rsplit(":", 1)
    proxy = CuttingProxy(host, int(port), [1200])
    try:
        url = f"http://127.0.0.1:{proxy.port}{stream}"
        with connect_sync(url, resume=url.replace(run_id, "{run_id}"), backoff=FAST) as run:
            envelopes = list(run)
            assert run.done
            transcript = run.transcript.to_dict()
    finally:
        proxy.close()
    assert proxy.made == 1
    streamed = [h for h in proxy.requests() if h.startswith(f"get /streams/{run_id}?token=")]
    assert len(streamed) == 2  # the first read and one resume
    assert "last-event-id" not in streamed[0]
    assert f"last-event-id: {run_id}:0:" in streamed[1]
    expected = list(fake_model(prompt, run_id))
    assert [encode(e) for e in envelopes] == expected[:-1]
    assert_valid(expected)
    assert transcript == reconstruct(expected).to_dict()


@pytest.fixture
def agui_server() -> Iterator[str]:
    """``python tests/client/agui_server.py --port 0``: the base URL it prints."""
    with serving([sys.executable, str(AGUI_SERVER), "--port", "0"]) as base:
        yield base


def test_an_agent_written_with_ag_ui_protocol_reads_as_its_conversion(agui_server: str) -> None:
    """[CL4-b] the client's transcript is what AguiToEnvelope makes of the same bytes, fetched without the client."""
    body = {
        "threadId": "t-1",
        "runId": "r-1",
        "messages": [{"id": "u1", "role": "user", "content": "What is 5 + (10 * 2)?"}],
        "tools": [{"name": "confirm", "description": "ask the user", "parameters": {"type": "object"}}],
        "context": [],
        "state": None,
        "forwardedProps": None,
    }
    with connect_sync(agui_server + "/agent", body=body) as run:
        envelopes = list(run)
        assert run.protocol == "agui"
        pending = run.pending
        transcript = run.transcript.to_dict()
    with httpx2.Client(timeout=30) as client:
        raw = client.post(agui_server + "/agent", json=body, headers={"accept": "text/event-stream"}).content
    converter = AguiToEnvelope()
    reference = [line for event in read_events(raw) for line in converter.feed(event.data)] + converter.close()
    assert_valid(reference)
    assert_valid([*(encode(e) for e in envelopes), b"[DONE]"])
    assert transcript == reconstruct(reference).to_dict()
    assert [encode(e) for e in envelopes] == reference[:-1]
    assert pending == [{"tool_use_id": "r-1-confirm", "name": "confirm", "input": {"question": "Is 25 right?"}}]
    text = "".join(_texts(transcript))
    assert '"25"' in text
    assert "\U0001f600" in text
    assert json.loads(json.dumps(transcript)) == transcript
