"""Hostile requests (issue 24 cases 3 and 5; spec/server.md §5.1-d, §5.3-a).

- Every value of a body is checked before anything is claimed or stored: a lone
  surrogate anywhere (``prompt``, a tool result's content, a key) or a number past
  ``MAX_NUMBER_CHARS`` (a 5,000-digit integer was a plain-text 500 with a traceback) is a
  JSON 4xx naming the field, and the agent is untouched (a paused one stays paused and
  takes the right answer afterwards).
- ``Host``: only the allowed names (loopback by default, plus what ``serve`` binds and
  ``allowed_hosts``) are answered; any other is 421, before any run starts.
"""

from __future__ import annotations

import json
import socket
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.errors import StateError
from agent_ref.server.app import LOOPBACK_HOSTS, MAX_NUMBER_CHARS, create_app, serve
from server_support import data_lines, post, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator

CONFIRM = "Please confirm: delete the temp files"
BIG = "9" * 5000


def _post_raw(base: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> httpx2.Response:
    with httpx2.Client(timeout=30) as client:
        return client.post(base + path, content=body, headers={"content-type": "application/json", **(headers or {})})


def _awaiting(raw: bytes) -> list[dict[str, Any]]:
    for line in data_lines(raw):
        if line != b"[DONE]" and json.loads(line)["type"] == "awaiting_frontend_tools":
            pending: list[dict[str, Any]] = json.loads(json.loads(line)["delta"])
            return pending
    raise AssertionError("no awaiting_frontend_tools in the stream")


@pytest.fixture
def paused() -> Iterator[tuple[str, MemoryStore, str, str]]:
    """A server with one agent paused on ``confirm``: (base, store, agent_uuid, tool_use_id)."""
    store = MemoryStore()
    with running(create_app(store=store, model_factory=ScriptedModel)) as base:
        first = post(base, "/agent/run", {"prompt": CONFIRM})
        assert_valid(first.content)
        (pending,) = _awaiting(first.content)
        yield base, store, first.headers["x-agent-uuid"], pending["tool_use_id"]


def _refused(r: httpx2.Response, status: int, field: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["field"] == field
    assert r.json()["error"]["message"]
    assert "Traceback" not in r.text


def test_spec_server_5_1_d_lone_surrogates_are_refused_naming_the_field(
    paused: tuple[str, MemoryStore, str, str],
) -> None:
    """[S5.1-d]: ``\\ud800`` in prompt, in a tool result's content (string or block) or in a key: 422, agent untouched."""
    base, store, agent, tool_use_id = paused
    before = store._states[agent]
    cases: list[tuple[str, bytes, str]] = [
        ("/agent/run", b'{"prompt": "hi \\ud800 there"}', "$.prompt"),
        ("/agent/run", b'{"prompt": "\\udfff", "agent_uuid": "%s"}' % agent.encode(), "$.prompt"),
        (
            "/agent/tool_results",
            b'{"agent_uuid": "%s", "tool_results": [{"tool_use_id": "%s", "content": "y\\ud800"}]}'
            % (agent.encode(), tool_use_id.encode()),
            "$.tool_results[0].content",
        ),
        (
            "/agent/tool_results",
            b'{"agent_uuid": "%s", "tool_results": [{"tool_use_id": "%s", "content": '
            b'[{"type": "text", "text": "ok"}, {"type": "text", "text": "\\udc00"}]}]}'
            % (agent.encode(), tool_use_id.encode()),
            "$.tool_results[0].content[1].text",
        ),
        ("/agent/run", b'{"prompt": "hi", "\\ud800": 1}', "$"),
    ]
    for path, body, field in cases:
        r = _post_raw(base, path, body)
        _refused(r, 422, field)
        assert "surrogate" in r.json()["error"]["message"]
    assert store._states[agent] == before  # still paused, same version: nothing claimed or stored
    assert len(store._states) == 1  # and no new agent
    ok = post(
        base,
        "/agent/tool_results",
        {"agent_uuid": agent, "tool_results": [{"tool_use_id": tool_use_id, "content": "yes"}]},
    )
    assert ok.status_code == 200
    assert_valid(ok.content)


def test_spec_server_5_1_d_numbers_past_a_sane_size_are_refused_naming_the_field(
    paused: tuple[str, MemoryStore, str, str],
) -> None:
    """[S5.1-d]: a 5,000-digit integer (was a plain-text 500), a huge float, NaN: a JSON 4xx with the field."""
    base, store, agent, tool_use_id = paused
    before = store._states[agent]
    cases: list[tuple[str, bytes, int, str]] = [
        ("/agent/run", b'{"prompt": %s}' % BIG.encode(), 422, "$.prompt"),
        ("/agent/run", b'{"prompt": "hi", "x": [1, %s]}' % BIG.encode(), 422, "$.x[1]"),
        ("/agent/run", BIG.encode(), 422, "$"),
        ("/agent/run", b'{"prompt": 1e999}', 422, "$.prompt"),
        ("/agent/run", b'{"prompt": NaN}', 400, "$.prompt"),
        (
            "/agent/tool_results",
            b'{"agent_uuid": "%s", "tool_results": [{"tool_use_id": "%s", "content": "y", "is_error": %s}]}'
            % (agent.encode(), tool_use_id.encode(), BIG.encode()),
            422,
            "$.tool_results[0].is_error",
        ),
    ]
    for path, body, status, field in cases:
        _refused(_post_raw(base, path, body), status, field)
    assert store._states[agent] == before
    assert len(store._states) == 1
    # a number of sane size is still only a type error, as before
    _refused(_post_raw(base, "/agent/run", b'{"prompt": %s}' % ("9" * MAX_NUMBER_CHARS).encode()), 422, "$.prompt")


def test_spec_server_5_3_a_other_host_headers_are_misdirected() -> None:
    """[S5.3-a]: Host attacker.example (DNS rebinding) is 421 before any run; loopback names are answered."""
    store = MemoryStore()
    with running(create_app(store=store, model_factory=ScriptedModel)) as base, httpx2.Client(timeout=30) as client:
        port = base.rsplit(":", 1)[1]
        for host in (
            f"attacker.example:{port}",
            "attacker.example",
            f"127.0.0.2:{port}",
            f"[::2]:{port}",
            "localhost.:1",
        ):
            for method, path in (("POST", "/agent/run"), ("GET", "/"), ("GET", "/agent/runs/abc/stream")):
                r = client.request(method, base + path, json={"prompt": "hi"}, headers={"host": host})
                assert r.status_code == 421, (host, path, r.status_code)
                assert r.json()["error"]["type"] == "misdirected_request"
        assert not store._states  # no run started
        with socket.create_connection(("127.0.0.1", int(port)), timeout=30) as raw:  # HTTP/1.0 may omit Host
            raw.sendall(b"GET / HTTP/1.0\r\n\r\n")
            answer = b""
            while chunk := raw.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 400"), answer[:80]
        assert b'"invalid_host"' in answer
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "LOCALHOST", f"[::1]:{port}"):
            r = client.post(base + "/agent/run", json={"prompt": "hi"}, headers={"host": host})
            assert r.status_code == 200, host
            assert_valid(r.content)


def test_spec_server_5_3_a_allowed_hosts_replace_the_default() -> None:
    """[S5.3-a]: ``allowed_hosts`` names the hosts answered (port aside); ``"*"`` answers any."""
    assert set(LOOPBACK_HOSTS) == {"127.0.0.1", "localhost", "::1"}
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, allowed_hosts=["agent.example", "[fd00::1]"])
    with running(app) as base, httpx2.Client(timeout=30) as client:
        assert client.get(base + "/", headers={"host": "agent.example:8080"}).status_code == 200
        assert client.get(base + "/", headers={"host": "[fd00::1]:1"}).status_code == 200
        assert client.get(base + "/").status_code == 421  # 127.0.0.1 is no longer in the list
    anyhost = create_app(store=MemoryStore(), model_factory=ScriptedModel, allowed_hosts=["*"])
    with running(anyhost) as base, httpx2.Client(timeout=30) as client:
        assert client.get(base + "/", headers={"host": "whatever.example"}).status_code == 200
    with pytest.raises(ValueError, match="not a host"):
        create_app(store=MemoryStore(), model_factory=ScriptedModel, allowed_hosts=["a:b:c]"])


def test_spec_server_5_3_a_serve_adds_the_bound_address_and_its_allowed_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """[S5.3-a]: ``serve(..., allowed_hosts=...)`` answers the bound address and the names given, nothing else."""
    import uvicorn

    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, allowed_hosts=[])
    served: list[str] = []
    monkeypatch.setattr(uvicorn.Server, "run", lambda *_args, **_kwargs: served.append("ran"))
    serve(app, "127.0.0.1", 0, ready=served.append, allowed_hosts=["agent.test"])
    assert served[-1] == "ran"
    assert app.state.allowed_hosts == {"127.0.0.1", "agent.test"}
    monkeypatch.undo()
    with running(app) as base, httpx2.Client(timeout=30) as client:
        assert client.get(base + "/").status_code == 200  # 127.0.0.1, the bound address
        assert client.get(base + "/", headers={"host": "agent.test"}).status_code == 200
        assert client.get(base + "/", headers={"host": "localhost"}).status_code == 421  # the default was replaced


class _BrokenStore(MemoryStore):
    """A store whose reads fail, with a message that names the database (as SQLite's and psycopg's do)."""

    async def load(self, agent_uuid: str) -> Any:
        del agent_uuid  # every read fails
        raise StateError("cannot open the agent database /srv/secret/agents.db: disk I/O error")


def test_spec_server_5_1_e_store_failure_is_a_json_500_that_names_no_database() -> None:
    """[S5.1-e]: a store that fails while an agent is loaded is a 500 whose text stays in the log
    (it was a 404 ``unknown_agent`` carrying the database's path)."""
    with running(create_app(store=_BrokenStore(), model_factory=ScriptedModel)) as base:
        for path, body in (
            ("/agent/run", {"prompt": "hi", "agent_uuid": "a1"}),
            ("/agent/tool_results", {"agent_uuid": "a1", "tool_results": [{"tool_use_id": "t", "content": "x"}]}),
        ):
            r = post(base, path, body)
            assert r.status_code == 500, r.text
            assert r.headers["content-type"] == "application/json"
            assert r.json()["error"]["type"] == "internal_error"
            assert "secret" not in r.text
            assert "agents.db" not in r.text
