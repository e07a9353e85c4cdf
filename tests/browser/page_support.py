"""What the browser tests share besides fixtures: asking, and reading back what the page and the server hold."""

from __future__ import annotations

from typing import Any

from server_support import data_lines, get
from validating import assert_valid


def page_transcripts(page: Any) -> list[dict[str, Any]]:
    """Each response's transcript as the page rebuilt it (JSON round trip)."""
    result: list[dict[str, Any]] = page.evaluate(
        "() => window.agentRef.turns.flatMap(t => t.responses.map(r => r.rebuilt.transcript()))"
    )
    return result


def stored_responses(base: str, run_id: str, count: int, token: str | None = None) -> list[list[bytes]]:
    """The run's first ``count`` responses as the server replays them, each through the strict validator."""
    out = []
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    for index in range(count):
        r = get(base, f"/agent/runs/{run_id}/stream", params={"response": str(index)}, headers=headers)
        assert r.status_code == 200
        assert_valid(r.content)
        out.append(data_lines(r.content))
    return out


def ask(page: Any, base: str, prompt: str) -> None:
    """Open the page and send ``prompt`` as a user does."""
    page.goto(base + "/")
    page.wait_for_selector("body[data-ready='true']")
    page.fill("#prompt", prompt)
    page.click("#send")


def run_id(page: Any) -> str:
    """The run id the page learnt from its first response."""
    found: str = page.evaluate("() => window.agentRef.turns[0].responses[0].runId")
    assert found
    return found
