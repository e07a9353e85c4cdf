"""Issue 39's done-when: two users, each sees only their own runs, through the clients a user has.

One ``agent-ref serve --jwt-secret-file F`` started as a user starts it (scripted model, the
default); alice and bob hold HS256 tokens minted here with PyJWT. Each starts a run, then:
the project's JS client in node reads alice's run whole with her token and gets bob's reading
of it refused exactly as an absent id; ``/agui`` (its input and events through
``ag-ui-protocol``'s models) and ``/api/chat`` (also through the AI SDK's ``DefaultChatTransport``
and ``readUIMessageStream``, from tests/interop's pinned packages) with one shared thread id
give two agents; ``GET /agents`` and ``GET /agent/runs`` list each user's own. Every stream
obtained goes through the strict validator.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from browser.page_support import stored_responses
from envelope import reconstruct
from interop.test_clients import node as interop_node  # noqa: F401 (a fixture: node with the pinned clients)
from js.js_support import ROOT, tool
from principals_support import absent_id, as_absent, bearer, mint
from serve_cli_support import agent_ref_serve
from server_support import get, post
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator

    import httpx2

#: The node side: the JS client reads one run as its owner, then the same id and an absent one as another user.
READ = """
const { connect, HTTPError } = await import(process.env.CLIENT);
const { BASE, RUN, ABSENT, OWNER, OTHER } = process.env;
const as = (token) => ({ Authorization: `Bearer ${token}` });
const own = connect(`${BASE}/agent/runs/${RUN}/stream`, { headers: as(OWNER) });
const events = [];
for await (const event of own.events()) events.push(event);
async function refused(id) {
  const run = connect(`${BASE}/agent/runs/${id}/stream`, { headers: as(OTHER), retries: 0 });
  try {
    for await (const _ of run.events());
    return { read: true };
  } catch (e) {
    if (!(e instanceof HTTPError)) throw e;
    return { status: e.status, body: e.body };
  }
}
const out = { events, transcript: own.transcript(), foreign: await refused(RUN), absent: await refused(ABSENT) };
console.log(JSON.stringify(out));
"""
#: The node side (cwd tests/interop): the AI SDK's own ``DefaultChatTransport`` posts a chat, ``readUIMessageStream`` reads it.
CHAT = """
const { DefaultChatTransport, readUIMessageStream } = await import("ai");
const { BASE, TOKEN, TEXT } = process.env;
const runs = [];
const fetching = async (url, init) => {
  const answer = await fetch(url, init);
  runs.push(answer.headers.get("x-run-id"));
  return answer;
};
const transport = new DefaultChatTransport({
  api: `${BASE}/api/chat`,
  headers: { Authorization: `Bearer ${TOKEN}` },
  fetch: fetching,
});
const messages = [{ id: "m1", role: "user", parts: [{ type: "text", text: TEXT }] }];
const stream = await transport.sendMessages({ chatId: "c-ai-shared", messages, trigger: "submit-message" });
let message = null;
for await (const m of readUIMessageStream({ stream, terminateOnError: true })) message = m;
console.log(JSON.stringify({ message, runs }));
"""
ALICE_SAYS = "alice-only-words: What is 2 + 2?"
BOB_SAYS = "bob-only-words: What is 3 + 3?"


@dataclass(frozen=True)
class Walk:
    """The server, both users' tokens, and the run each started with ``POST /agent/run``."""

    base: str
    alice: str
    bob: str
    alice_run: str
    bob_run: str


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Walk]:
    """``agent-ref serve --jwt-secret-file``, alice's run and bob's run, each answer strictly valid."""
    where = tmp_path_factory.mktemp("walk")
    secret = secrets.token_hex(32).encode()
    (where / "jwt.secret").write_bytes(secret + b"\n")
    flags = ("--db", str(where / "a.db"), "--jwt-secret-file", str(where / "jwt.secret"))
    alice, bob = mint(secret, "alice"), mint(secret, "bob")
    with agent_ref_serve(*flags) as base:
        runs = []
        for token, prompt in ((alice, ALICE_SAYS), (bob, BOB_SAYS)):
            answer = post(base, "/agent/run", {"prompt": prompt}, headers=bearer(token))
            assert answer.status_code == 200, answer.text
            assert_valid(answer.content)
            runs.append(answer.headers["x-run-id"])
        yield Walk(base, alice, bob, runs[0], runs[1])


def _sse(events: list[dict[str, Any]], response: int) -> bytes:
    """The SSE bytes of one response from the events the JS client yielded (``id`` and ``data`` kept)."""
    out = []
    for event in events:
        if event["response"] == response:
            out.append((f"id: {event['id']}\n" if event.get("id") else "") + f"data: {event['data']}\n\n")
    return "".join(out).encode()


def test_the_js_client_reads_alices_run_and_bob_gets_it_as_absent(walk: Walk) -> None:
    """[OW1-b] through js/envelope-client.mjs in node: alice reads her run whole; bob's read is the absent id's 404."""
    absent = absent_id()
    done = subprocess.run(
        [tool("node"), "--input-type=module", "-e", READ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={
            **os.environ,
            "CLIENT": (ROOT / "js" / "index.mjs").as_uri(),
            "BASE": walk.base,
            "RUN": walk.alice_run,
            "ABSENT": absent,
            "OWNER": walk.alice,
            "OTHER": walk.bob,
        },
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    responses = sorted({event["response"] for event in seen["events"]})
    assert responses == [0], responses  # one response, read to its end
    assert_valid(_sse(seen["events"], 0))
    stored = stored_responses(walk.base, walk.alice_run, 1, token=walk.alice)  # strict validator inside
    assert seen["transcript"] == reconstruct(stored[0]).to_dict()
    assert ALICE_SAYS in json.dumps(seen["transcript"])
    assert seen["foreign"]["status"] == seen["absent"]["status"] == 404
    assert seen["absent"]["body"]["error"]["type"] == "unknown_run"
    assert json.dumps(seen["foreign"]["body"]).replace(walk.alice_run, "ID") == json.dumps(
        seen["absent"]["body"]
    ).replace(absent, "ID")


def _listed(walk: Walk, token: str) -> tuple[set[str], set[str]]:
    """The run ids of ``GET /agent/runs`` and the agent ids of ``GET /agents`` as ``token``'s holder."""
    runs = get(walk.base, "/agent/runs", headers=bearer(token))
    agents = get(walk.base, "/agents", headers=bearer(token))
    assert runs.status_code == agents.status_code == 200, (runs.text, agents.text)
    return {r["run_id"] for r in runs.json()["runs"]}, {a["agent_uuid"] for a in agents.json()["agents"]}


def _agent_of(walk: Walk, token: str, run_id: str) -> str:
    """The agent of ``run_id`` as ``GET /agent/runs`` tells ``token``'s holder (failing when it is not listed)."""
    runs = {
        r["run_id"]: str(r["agent_uuid"]) for r in get(walk.base, "/agent/runs", headers=bearer(token)).json()["runs"]
    }
    assert run_id in runs, (run_id, sorted(runs))
    return runs[run_id]


def test_the_lists_show_each_user_only_their_own(walk: Walk) -> None:
    """[OW2-a]: ``GET /agents`` and ``GET /agent/runs`` as alice hold her run and not bob's, and the reverse."""
    alice_runs, alice_agents = _listed(walk, walk.alice)
    bob_runs, bob_agents = _listed(walk, walk.bob)
    assert walk.alice_run in alice_runs
    assert walk.bob_run in bob_runs
    assert not alice_runs & bob_runs
    assert not alice_agents & bob_agents
    assert alice_agents
    assert bob_agents


def _thread_pair(walk: Walk, path: str, make: Any) -> list[httpx2.Response]:
    """One shared thread id: two agents, each answer valid, bob's answer holds nothing of alice's words."""
    mine = post(walk.base, path, make(ALICE_SAYS), headers=bearer(walk.alice))
    theirs = post(walk.base, path, make(BOB_SAYS), headers=bearer(walk.bob))
    assert mine.status_code == theirs.status_code == 200, (mine.text, theirs.text)
    for answer, token in ((mine, walk.alice), (theirs, walk.bob)):
        stored_responses(walk.base, answer.headers["x-run-id"], 1, token=token)  # strict validator inside
    alice_agent = _agent_of(walk, walk.alice, mine.headers["x-run-id"])
    bob_agent = _agent_of(walk, walk.bob, theirs.headers["x-run-id"])
    assert alice_agent != bob_agent
    assert "alice-only-words" in mine.text
    assert "alice-only-words" not in theirs.text
    bob_later = post(walk.base, path, make(BOB_SAYS), headers=bearer(walk.bob))
    assert bob_later.status_code == 200, bob_later.text
    assert "alice-only-words" not in bob_later.text
    assert _agent_of(walk, walk.bob, bob_later.headers["x-run-id"]) == bob_agent
    return [mine, theirs, bob_later]


def _run_input(text: str) -> dict[str, Any]:
    """An AG-UI ``RunAgentInput`` made by ``ag-ui-protocol``'s own model, on the thread both users name."""
    from ag_ui.core import RunAgentInput, UserMessage

    user = UserMessage(id="u1", role="user", content=text)
    made = RunAgentInput(
        thread_id="t-shared", run_id="r1", state={}, messages=[user], tools=[], context=[], forwarded_props={}
    )
    body: dict[str, Any] = made.model_dump(by_alias=True, exclude_none=True)
    return body


def _agui_texts(answer: httpx2.Response) -> str:
    """Every event of an ``/agui`` answer parsed by ``ag-ui-protocol``'s models; the text they carry."""
    from ag_ui.core import Event
    from pydantic import TypeAdapter

    from envelope import SSEReader

    adapter: TypeAdapter[Any] = TypeAdapter(Event)
    reader = SSEReader()
    events = [adapter.validate_json(e.data) for e in [*reader.feed(answer.content), *reader.close()]]
    assert events
    assert events[0].type == "RUN_STARTED"
    return json.dumps([e.model_dump(by_alias=True, exclude_none=True) for e in events])


def _chat(text: str) -> dict[str, Any]:
    """A ``useChat`` body as the AI SDK's transport posts it, on the chat id both users name."""
    message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": "c-shared", "messages": [message], "trigger": "submit-message"}


def test_agui_one_thread_id_is_two_agents(walk: Walk) -> None:
    """[OW1-c] ``/agui``: alice's thread and bob's same thread id are two agents; bob never sees her words."""
    mine, theirs, later = _thread_pair(walk, "/agui", _run_input)
    assert "alice-only-words" in _agui_texts(mine)
    assert "alice-only-words" not in _agui_texts(theirs) + _agui_texts(later)
    assert "bob-only-words" in _agui_texts(theirs)


def test_chat_one_chat_id_is_two_agents(walk: Walk) -> None:
    """[OW1-c] ``/api/chat``: alice's chat and bob's same chat id are two agents; bob never sees her words."""
    _thread_pair(walk, "/api/chat", _chat)


def test_bob_cannot_follow_alices_run_by_its_id(walk: Walk) -> None:
    """[OW1-b] over HTTP: bob's GET of alice's run id is the absent id's answer, byte for byte."""
    unknown = absent_id()
    refused = get(walk.base, f"/agent/runs/{walk.alice_run}/stream", headers=bearer(walk.bob))
    absent = get(walk.base, f"/agent/runs/{unknown}/stream", headers=bearer(walk.bob))
    as_absent(refused, walk.alice_run, absent, unknown)
    assert absent.status_code == 404


def _ai_chat(node: str, walk: Walk, token: str, text: str) -> tuple[str, str]:
    """One chat turn through the AI SDK's client code: the message it rebuilt (as JSON) and the run id."""
    done = subprocess.run(
        [node, "--input-type=module", "-e", CHAT],
        cwd=ROOT / "tests" / "interop",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "BASE": walk.base, "TOKEN": token, "TEXT": text},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    (run_id,) = seen["runs"]
    assert seen["message"] is not None
    stored_responses(walk.base, run_id, 1, token=token)  # strict validator inside
    return json.dumps(seen["message"]), run_id


def test_chat_through_the_ai_sdk_one_chat_id_is_two_agents(interop_node: str, walk: Walk) -> None:  # noqa: F811
    """[OW1-c] ``/api/chat`` through ``ai``'s ``DefaultChatTransport``: one chat id, two agents, none of her words for bob."""
    mine, alice_run = _ai_chat(interop_node, walk, walk.alice, ALICE_SAYS)
    theirs, bob_run = _ai_chat(interop_node, walk, walk.bob, BOB_SAYS)
    assert _agent_of(walk, walk.alice, alice_run) != _agent_of(walk, walk.bob, bob_run)
    assert "alice-only-words" in mine
    assert "alice-only-words" not in theirs
    assert "bob-only-words" in theirs
