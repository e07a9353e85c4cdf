"""``examples/fastapi_app.py`` on a real uvicorn: follow, drop the connection, resume with ``Last-Event-ID``.

Issue 26 §2: the example streams two interleaved agents (a parent and the helper it
spawns, linked by the helper's ``meta_init``, envelope-v1 §8.3.1) through
``envelope.delivery.asgi.Delivery``; a client dropped mid-stream gets every line once, in
order, and the joined stream passes the strict validator and rebuilds both agents.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import httpx2
import pytest
from examples.fastapi_app import CALL_ID, CHILD, PARENT, create_app, fake_model

from conftest import ROOT
from envelope import Reconstructor, tree
from envelope.delivery import DONE_LINE, FileJournal, MemoryJournal
from server_support import read_events, running
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

    from envelope import SSEEvent

PROMPT = "why is the sky blue"
EXAMPLE = ROOT / "examples" / "fastapi_app.py"


def _read_some(base: str, path: str, count: int) -> list[SSEEvent]:
    """Follow a stream for ``count`` events, then drop the connection."""
    got = b""
    with httpx2.Client(timeout=30) as client, client.stream("GET", base + path) as answer:
        assert answer.status_code == 200
        assert answer.headers["x-accel-buffering"] == "no"
        for chunk in answer.iter_bytes():
            got += chunk
            if len(read_events(got)) >= count:
                break
    return read_events(got)[:count]


def _resume(base: str, run_id: str, last: str) -> list[SSEEvent]:
    with httpx2.Client(timeout=30) as client:
        answer = client.get(f"{base}/streams/{run_id}", headers={"Last-Event-ID": last})
    assert answer.status_code == 200, answer.text
    return read_events(answer.content)


def _check_joined(run_id: str, events: list[SSEEvent]) -> None:
    """Every line once, in order, ids contiguous; strictly valid; two agents, the helper under the call."""
    assert [e.id for e in events] == [f"{run_id}:0:{n}" for n in range(len(events))]
    lines = [e.data.encode() for e in events]
    assert lines == list(fake_model(PROMPT, run_id))
    assert lines[-1] == DONE_LINE
    whole = b"".join(f"id: {e.id}\ndata: {e.data}\n\n".encode() for e in events)
    assert_valid(whole)
    rebuilt = Reconstructor()
    for line in lines:
        rebuilt.feed(line)
    transcript = rebuilt.transcript()
    assert transcript.done
    assert set(transcript.agents) == {PARENT, CHILD}
    roots = tree(transcript).roots
    assert [node.agent for node in roots] == [PARENT]
    assert [child.agent for child in roots[0].children] == [CHILD]
    child_text = "".join(b.content for b in transcript.agents[CHILD] if b.type == "text")
    assert child_text.strip() == f"The helper's answer to: {PROMPT}"
    helper = roots[0].children[0]
    assert (helper.parent_agent, helper.parent_tool_use_id, helper.orphan) == (PARENT, CALL_ID, False)
    # the two agents really interleave: the helper's lines sit between the parent's
    agents = [json.loads(line)["agent"] for line in lines[:-1]]
    first_child, last_child = agents.index(CHILD), len(agents) - 1 - agents[::-1].index(CHILD)
    assert PARENT in agents[first_child:last_child]


def test_drop_mid_stream_and_resume_gives_every_line_once() -> None:
    """Follow 6 events, drop, resume with the last id (while the model still writes): the rest, once each."""
    app = create_app(MemoryJournal(), pace=0.03)
    with running(app) as base:
        first = _read_some(base, f"/chat/run-a?prompt={PROMPT}", 6)
        assert first[-1].id == "run-a:0:5"
        rest = _resume(base, "run-a", first[-1].id)
        _check_joined("run-a", first + rest)
        with httpx2.Client(timeout=30) as client:  # the [DONE] id: nothing left (204)
            done = client.get(f"{base}/streams/run-a", headers={"Last-Event-ID": rest[-1].id})
            assert done.status_code == 204
            again = client.get(f"{base}/chat/run-a")  # the same run twice is refused, not interleaved
            assert again.status_code == 409


def test_resume_from_the_file_journal_after_a_restart(tmp_path: Path) -> None:
    """Drop after 4 events, stop the server once the run ended; a new process on the journal directory resumes it."""
    journal_dir = tmp_path / "journal"
    with running(create_app(FileJournal(journal_dir), pace=0.005)) as base:
        first = _read_some(base, f"/chat/run-b?prompt={PROMPT}", 4)
        deadline = time.monotonic() + 30
        log = journal_dir / "run-b.0.log"
        while not (log.exists() and log.read_bytes().endswith(DONE_LINE + b"\n")):
            assert time.monotonic() < deadline, "the run did not end within 30 s"
            time.sleep(0.02)
    with running(create_app(FileJournal(journal_dir))) as base:
        rest = _resume(base, "run-b", first[-1].id)
    _check_joined("run-b", first + rest)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_script_runs_as_documented(tmp_path: Path) -> None:
    """``python examples/fastapi_app.py --port P --journal-dir DIR`` serves; a dropped stream resumes from it."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--port", str(port), "--pace", "0.01", "--journal-dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx2.get(base + "/streams/none", timeout=2)
                break
            except httpx2.TransportError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the example did not start (exit {proc.poll()})")
                time.sleep(0.1)
        first = _read_some(base, f"/chat/run-c?prompt={PROMPT}", 3)
        _check_joined("run-c", first + _resume(base, "run-c", first[-1].id))
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        assert proc.stderr is not None
        proc.stderr.close()


def test_the_readme_shows_lines_of_the_example() -> None:
    """The README's "Resumable delivery" block is an excerpt of the example: each of its lines is in the file."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("\n## Resumable delivery for your server\n") :]
    block = section[section.index("\n```\n") + len("\n```\n") :]
    block = block[: block.index("```")]
    shown = [line.strip() for line in block.splitlines() if line.strip() and line.strip() != "..."]
    assert len(shown) >= 5
    assert len(block.splitlines()) < 30
    source = {line.strip() for line in EXAMPLE.read_text(encoding="utf-8").splitlines()}
    assert [line for line in shown if line not in source] == []
