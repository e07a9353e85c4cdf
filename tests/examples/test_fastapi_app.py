"""``examples/fastapi_app.py`` on a real uvicorn: start a run as its user, follow its link, drop, resume.

Issue 26 §2: the example streams two interleaved agents (a parent and the helper it
spawns, linked by the helper's ``meta_init``, envelope-v1 §8.3.1) through
``envelope.delivery.asgi.Delivery``; a client dropped mid-stream gets every line once, in
order, and the joined stream passes the strict validator and rebuilds both agents.
Issue 39 item 4: the run belongs to the user who started it; its resume link (``?token=``)
is the only way to its stream. Issue 38 case 3: no journal call on the event loop.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import httpx2
from examples.fastapi_app import CALL_ID, CHILD, DEMO_USERS, PARENT, create_app, fake_model

from conftest import ROOT
from envelope import Reconstructor, tree
from envelope.delivery import DONE_LINE, FileJournal, MemoryJournal, mint
from fault_support import wait_until
from server_support import read_events, running
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

    from envelope import SSEEvent

PROMPT = "why is the sky blue"
EXAMPLE = ROOT / "examples" / "fastapi_app.py"
ALICE, BOB = (f"Bearer {token}" for token in DEMO_USERS)
KEY = b"the example's link key, 32 bytes"


def _start(base: str, user: str = ALICE) -> dict[str, Any]:
    """``POST /chat`` as ``user``: the run's id and resume link."""
    answer = httpx2.post(f"{base}/chat", params={"prompt": PROMPT}, headers={"Authorization": user}, timeout=30)
    assert answer.status_code == 201, answer.text
    link: dict[str, Any] = answer.json()
    assert link["stream"].startswith(f"/streams/{link['run_id']}?token=")
    return link


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


def _resume(base: str, path: str, last: str) -> list[SSEEvent]:
    with httpx2.Client(timeout=30) as client:
        answer = client.get(base + path, headers={"Last-Event-ID": last})
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
    """Follow 6 events of the link, drop, resume with the last id (while the model still writes): the rest, once each."""
    app = create_app(MemoryJournal(), pace=0.03)
    with running(app) as base:
        link = _start(base)
        first = _read_some(base, link["stream"], 6)
        run = link["run_id"]
        assert first[-1].id == f"{run}:0:5"
        rest = _resume(base, link["stream"], first[-1].id)
        _check_joined(run, first + rest)
        with httpx2.Client(timeout=30) as client:  # the [DONE] id: nothing left (204)
            done = client.get(base + link["stream"], headers={"Last-Event-ID": rest[-1].id})
            assert done.status_code == 204


def test_spec_delivery_7_2_a_each_run_to_its_own_user() -> None:
    """[D6.2-b] [D7.2-a]: a link opens its run only; another user's run is 404 as none is; a refreshed link works."""
    with running(create_app(MemoryJournal(), link_key=KEY, pace=0.001)) as base, httpx2.Client(timeout=30) as client:
        alice, bob = _start(base, ALICE), _start(base, BOB)
        alice_token = alice["stream"].split("token=")[1]
        assert client.post(f"{base}/chat").status_code == 401  # no user
        assert client.post(f"{base}/chat", headers={"Authorization": "Bearer nobody"}).status_code == 401
        on_bobs = client.get(f"{base}/streams/{bob['run_id']}", params={"token": alice_token})
        unknown = client.get(f"{base}/streams/run-unknown", params={"token": mint(KEY, "run-unknown", ttl=60)})
        assert on_bobs.status_code == unknown.status_code == 404  # the same answer as a run that is not there
        assert on_bobs.text.replace(bob["run_id"], "run-unknown") == unknown.text
        header_only = client.get(
            f"{base}/streams/{alice['run_id']}", headers={"Authorization": f"Bearer {alice_token}"}
        )
        assert (header_only.status_code, header_only.json()["error"]["type"]) == (401, "token_missing")
        stolen = client.post(f"{base}/chat/{alice['run_id']}/link", headers={"Authorization": BOB})
        none = client.post(f"{base}/chat/run-none/link", headers={"Authorization": BOB})
        assert (stolen.status_code, stolen.content) == (none.status_code, none.content) == (404, none.content)
        fresh = client.post(f"{base}/chat/{alice['run_id']}/link", headers={"Authorization": ALICE})
        assert fresh.status_code == 200
        assert fresh.json()["url"] == base + fresh.json()["stream"]
        whole = client.get(base + fresh.json()["stream"])
    assert whole.status_code == 200
    _check_joined(alice["run_id"], read_events(whole.content))


class _OnLoopWatch(FileJournal):
    """A file journal that records, for each call, whether it ran on an event loop."""

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self.on_loop: list[str] = []
        self.calls = 0

    def _note(self, name: str) -> None:
        self.calls += 1
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self.on_loop.append(name)

    def append(self, run_id: str, response: int, line: bytes) -> None:
        self._note("append")
        super().append(run_id, response, line)

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        self._note("read")
        return super().read(run_id, response)

    def responses(self, run_id: str) -> int:
        self._note("responses")
        return super().responses(run_id)

    def unfinished(self) -> list[tuple[str, int]]:
        self._note("unfinished")
        return super().unfinished()


def test_no_journal_call_on_the_event_loop(tmp_path: Path) -> None:
    """Issue 38 case 3 [D3.6-a]: start, follow, drop, resume, refresh: every journal call ran off the loop."""
    journal = _OnLoopWatch(tmp_path / "journal")
    with running(create_app(journal, pace=0.005)) as base:
        link = _start(base)
        first = _read_some(base, link["stream"], 3)
        rest = _resume(base, link["stream"], first[-1].id)
        _check_joined(link["run_id"], first + rest)
        httpx2.post(f"{base}/chat/{link['run_id']}/link", headers={"Authorization": ALICE}, timeout=30)
    assert journal.calls > len(first + rest)  # every line appended, then read back
    assert journal.on_loop == []


def test_resume_from_the_file_journal_after_a_restart(tmp_path: Path) -> None:
    """Drop after 4 events, stop the server once the run ended; a new process on the journal and key resumes it."""
    journal_dir = tmp_path / "journal"
    with running(create_app(FileJournal(journal_dir), link_key=KEY, pace=0.005)) as base:
        link = _start(base)
        first = _read_some(base, link["stream"], 4)
        log = journal_dir / f"{link['run_id']}.0.log"
        wait_until(lambda: log.exists() and log.read_bytes().endswith(DONE_LINE + b"\n"), "the run's end")
    with running(create_app(FileJournal(journal_dir), link_key=KEY)) as base:
        rest = _resume(base, link["stream"], first[-1].id)
    _check_joined(link["run_id"], first + rest)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_script_runs_as_documented(tmp_path: Path) -> None:
    """``python examples/fastapi_app.py --port P --journal-dir DIR`` serves; a dropped stream resumes from it."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--port", str(port), "--pace", "0.01", "--journal-dir", str(tmp_path / "j")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def answers() -> bool:
            assert proc.poll() is None, f"the example exited ({proc.returncode})"
            try:
                httpx2.get(base + "/streams/none", timeout=2)
            except httpx2.TransportError:
                return False
            return True

        wait_until(answers, "the example's start", timeout=60)
        link = _start(base)
        first = _read_some(base, link["stream"], 3)
        _check_joined(link["run_id"], first + _resume(base, link["stream"], first[-1].id))
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
