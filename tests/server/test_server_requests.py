"""Request checks and auth (spec/server.md §5): every bad request gets a 4xx JSON answer, no run starts."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import httpx2
import pytest

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import ServerConfig, create_app
from server_support import get, running
from validating import assert_valid

if TYPE_CHECKING:
    from collections.abc import Iterator

BAD_BODIES: list[tuple[bytes, dict[str, str], int, str]] = [
    (b'{"prompt": "hi"}', {"content-type": "text/plain"}, 415, "unsupported_media_type"),
    (b'{"prompt": "hi"', {}, 400, "invalid_json"),
    (b'{"prompt": "\xff"}', {}, 400, "invalid_json"),
    (b"[" * 300_000 + b"]" * 300_000, {}, 413, "body_too_large"),
    (b"[" * 20_000 + b"]" * 20_000, {}, 400, "invalid_json"),
    (b'["hi"]', {}, 422, "invalid_request"),
    (b"{}", {}, 422, "invalid_request"),
    (b'{"prompt": 5}', {}, 422, "invalid_request"),
    (b'{"prompt": "   "}', {}, 422, "invalid_request"),
    (b'{"prompt": null}', {}, 422, "invalid_request"),
    (b'{"prompt": "hi", "agent_uuid": 5}', {}, 422, "invalid_request"),
    (b'{"prompt": "hi", "agent_uuid": "../x"}', {}, 422, "invalid_request"),
    (b'{"prompt": "hi", "model": "opus"}', {}, 422, "invalid_request"),
    (json.dumps({"prompt": "x" * 40_000}).encode(), {}, 422, "invalid_request"),
]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, MemoryStore]]:
    """One server for the refusal cases (none of them may create an agent)."""
    store = MemoryStore()
    with running(create_app(store=store, model_factory=ScriptedModel)) as base:
        yield base, store


def _post_raw(base: str, path: str, body: bytes, headers: dict[str, str]) -> httpx2.Response:
    with httpx2.Client(timeout=30) as client:
        return client.post(base + path, content=body, headers={"content-type": "application/json", **headers})


@pytest.mark.parametrize(
    ("body", "headers", "status", "kind"), BAD_BODIES, ids=[f"{s}-{k}-{i}" for i, (_, _, s, k) in enumerate(BAD_BODIES)]
)
def test_spec_server_5_1_a_bad_run_bodies_are_refused(
    served: tuple[str, MemoryStore], body: bytes, headers: dict[str, str], status: int, kind: str
) -> None:
    """[S5.1-a]: wrong media type, bad JSON or UTF-8, too large, too deep, wrong types, unknown fields."""
    base, store = served
    r = _post_raw(base, "/agent/run", body, headers)
    assert r.status_code == status
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["type"] == kind
    assert r.json()["error"]["message"]
    assert "Traceback" not in r.text
    assert not store._states  # no agent was created or claimed


def test_spec_server_5_1_b_content_length_over_the_limit_is_refused_before_reading() -> None:
    """[S5.1-b]: a declared Content-Length over the limit is refused without reading the body."""
    config = ServerConfig(max_body_bytes=100)
    with running(create_app(store=MemoryStore(), model_factory=ScriptedModel, config=config)) as base:
        r = _post_raw(base, "/agent/run", json.dumps({"prompt": "x" * 200}).encode(), {})
        assert r.status_code == 413
        ok = _post_raw(base, "/agent/run", b'{"prompt": "hi"}', {})
        assert ok.status_code == 200
        assert_valid(ok.content)


BAD_RESULTS: list[tuple[Any, str]] = [
    ({"tool_results": []}, "$.agent_uuid"),
    ({"agent_uuid": "a", "tool_results": {}}, "$.tool_results"),
    ({"agent_uuid": "a", "tool_results": []}, "$.tool_results"),
    ({"agent_uuid": "a", "tool_results": ["x"]}, "$.tool_results[0]"),
    ({"agent_uuid": "a", "tool_results": [{"content": "x"}]}, "$.tool_results[0].tool_use_id"),
    ({"agent_uuid": "a", "tool_results": [{"tool_use_id": "t", "content": 5}]}, "$.tool_results[0].content"),
    (
        {"agent_uuid": "a", "tool_results": [{"tool_use_id": "t", "content": "x", "is_error": "no"}]},
        "$.tool_results[0].is_error",
    ),
    ({"agent_uuid": "a", "tool_results": [{"tool_use_id": "t", "content": "x"}] * 65}, "$.tool_results"),
]


@pytest.mark.parametrize(("body", "where"), BAD_RESULTS, ids=[w for _, w in BAD_RESULTS])
def test_spec_server_5_1_c_bad_tool_results_bodies_name_the_field(
    served: tuple[str, MemoryStore], body: Any, where: str
) -> None:
    """[S5.1-c]: each shape error of a resume names its field."""
    r = _post_raw(served[0], "/agent/tool_results", json.dumps(body).encode(), {})
    assert r.status_code == 422
    assert r.json()["error"]["field"] == where


def test_spec_server_5_2_a_bearer_token_guards_every_agent_endpoint() -> None:
    """[S5.2-a]: with a token, /agent/... needs it (401 otherwise, no run); the page itself is public."""
    store = MemoryStore()
    app = create_app(store=store, model_factory=ScriptedModel, config=ServerConfig(token="s3cret-token"))
    with running(app) as base, httpx2.Client(timeout=30) as client:
        for headers in (
            {},
            {"authorization": "Bearer wrong"},
            {"authorization": "Basic s3cret-token"},
            {"authorization": "Bearer s3cret-toke"},
        ):
            for method, path in (
                ("POST", "/agent/run"),
                ("POST", "/agent/tool_results"),
                ("GET", "/agent/runs/abc/stream"),
            ):
                r = client.request(method, base + path, json={"prompt": "hi"}, headers=headers)
                assert r.status_code == 401, (headers, path)
                assert r.headers["www-authenticate"].startswith("Bearer")
                assert r.json()["error"]["type"] == "unauthorized"
        assert not store._states
        ok = client.post(base + "/agent/run", json={"prompt": "hi"}, headers={"authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200
        assert_valid(ok.content)
        assert get(base, "/").status_code == 200


def test_spec_server_5_2_b_token_from_option_or_environment() -> None:
    """[S5.2-a]: ``--token`` wins over ``AGENT_REF_TOKEN``; an empty value means no token."""
    from agent_ref.cli.serve import resolve_token

    assert resolve_token("a", {"AGENT_REF_TOKEN": "b"}) == "a"
    assert resolve_token(None, {"AGENT_REF_TOKEN": "b"}) == "b"
    assert resolve_token(None, {}) is None
    assert resolve_token("", {"AGENT_REF_TOKEN": "b"}) is None
