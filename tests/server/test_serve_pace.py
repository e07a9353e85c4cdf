"""``agent-ref serve --pace SECONDS``: the model waits before each event it streams (spec server PC-a).

The pace is checked as an order and a count (one wait before each event, none after
the last), never as a duration. The served run's stream goes through the strict validator.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import subprocess
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import ScriptedModel
from agent_ref.cli.serve import PacedModel, paced
from cli_support import SCRIPT, clean_env, serve_refusal, start_serve, stop_serve, strict_envelopes

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

PARAMS: dict[str, Any] = {
    "model": "scripted",
    "max_tokens": 256,
    "messages": [{"role": "user", "content": "What is 5 + (10 * 2)?"}],
}


def post_json(host: str, port: int, path: str, body: object) -> tuple[int, bytes]:
    """POST JSON; the status and the whole body (an SSE response is read to its end)."""
    conn = http.client.HTTPConnection(host, port, timeout=120)
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


async def _events(model: Any) -> list[Any]:
    stream: AsyncIterator[Any] = model.stream(dict(PARAMS))
    return [event async for event in stream]


def test_spec_server_pc_a_one_wait_before_each_event() -> None:
    """Each event of the wrapped model comes after exactly one wait of the pace, in order [PC-a]."""
    log: list[object] = []

    async def sleep(seconds: float) -> None:
        log.append(("wait", seconds))

    async def run() -> tuple[list[Any], list[Any]]:
        bare = await _events(ScriptedModel())
        model = PacedModel(ScriptedModel(), 0.25, sleep=sleep)

        async def logged() -> list[Any]:
            out = []
            async for event in model.stream(dict(PARAMS)):
                log.append(("event", event.type))
                out.append(event)
            return out

        return bare, await logged()

    bare, paced_events = asyncio.run(run())
    assert len(bare) > 3  # a turn of several events, or the order below says little
    assert [e.type for e in paced_events] == [e.type for e in bare]  # the same answer, only later
    assert log == [x for e in bare for x in (("wait", 0.25), ("event", e.type))]


def test_spec_server_pc_a_everything_but_the_stream_is_the_models() -> None:
    """The paced model keeps the wrapped one's name and its check of request options; 0 is no wrapper [PC-a]."""
    inner = ScriptedModel(name="claude-sonnet-4-5")
    model = PacedModel(inner, 1.0)
    assert model.name == "claude-sonnet-4-5"
    assert model.check_request_options == inner.check_request_options
    assert paced(ScriptedModel, 0) is ScriptedModel
    made = paced(ScriptedModel, 0.5)()
    assert isinstance(made, PacedModel)
    assert made.seconds == 0.5


def test_spec_server_pc_a_pace_is_in_help() -> None:
    """``agent-ref serve --help`` documents ``--pace`` [PC-a]."""
    done = subprocess.run(
        [str(SCRIPT), "serve", "--help"], capture_output=True, text=True, env=clean_env(), timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "--pace SECONDS" in text
    assert "press Stop" in text


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_spec_server_pc_a_bad_pace_is_refused_before_listening(tmp_path: Path, value: str) -> None:
    """A pace that is no number of seconds is one line naming ``--pace``, exit 2 [PC-a]."""
    done = serve_refusal(tmp_path, "--pace", value)
    assert done.stderr.startswith("--pace: error:"), done.stderr


def test_spec_server_pc_a_a_paced_server_streams_a_valid_run(tmp_path: Path) -> None:
    """``serve --pace`` runs the offline model paced: the whole answer, strictly valid, its model named [PC-a]."""
    proc, host, port = start_serve(tmp_path, "--pace", "0.01")
    try:
        status, body = post_json(host, port, "/agent/run", {"prompt": "What is 5 + (10 * 2)?"})
    finally:
        stop_serve(proc)
    assert status == 200
    envelopes = strict_envelopes(body, tmp_path)
    init = json.loads(str(envelopes[0]["delta"]))
    assert init["model"] == "scripted"
    final = json.loads(str(envelopes[-1]["delta"]))
    assert final["stop_reason"] == "end_turn"
