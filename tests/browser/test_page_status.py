"""The page shows routine signals (envelope-v1 §4.16) as status lines, never as errors.

The conformance stream ``valid/meta_status.jsonl`` (progress, steps with usage and cost,
compaction, a retry, a failed hook, an MCP server, a kind of a later version) is replayed
by the server from a journal, as the page tests replay their fixtures; Debian's chromium
renders it (``conftest.py`` says when the tests skip).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_ref import MemoryStore, ScriptedModel
from agent_ref.server.app import create_app
from agent_ref.server.streams import MemoryJournal
from envelope import reconstruct
from server_support import running
from validating import assert_valid

ROOT = Path(__file__).resolve().parents[2]


def test_spec_04_16_page_shows_status_lines_not_errors(page: Any, tmp_path: Path) -> None:
    """[4.16-c]: each status is a line with role status (a step's start draws nothing); no error is drawn."""
    lines = (ROOT / "spec" / "conformance" / "valid" / "meta_status.jsonl").read_bytes().splitlines()
    assert_valid(lines)
    journal = MemoryJournal()
    for line in lines:
        journal.append("status-run", 0, line)
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, journal=journal)
    with running(app) as base:
        page.goto(base + "/#run=status-run")
        page.wait_for_selector("body[data-done='1']")
        page.screenshot(path=str(tmp_path / "status.png"), full_page=True)
        rebuilt = page.evaluate("() => window.agentRef.turns[0].responses[0].rebuilt.transcript()")
    assert rebuilt == reconstruct(lines).to_dict()
    assert page.locator(".block.error").count() == 0
    statuses = page.locator(".block.status[role='status']")
    kinds = [statuses.nth(i).get_attribute("data-kind") for i in range(statuses.count())]
    assert kinds == [
        "mcp_server",
        "tool_progress",
        "tool_progress",
        "step_finish",
        "compaction",
        "hook",
        "retry",
        "step_finish",
        "a_kind_of_a_later_version",
        "tool_progress",
    ]
    texts = statuses.all_text_contents()
    assert texts[1] == "count_slowly: 1 of 3"
    assert texts[3] == "step 1: 400 in / 20 out · $0.0015"
    assert texts[7] == "step 2: 500 in / 40 out"
    assert texts[8] == "a_kind_of_a_later_version: shown as its message"
