"""The page shows a compaction (envelope-v1 §4.15) as a small marker, not as content or an error.

The conformance stream ``valid/meta_compaction.jsonl`` (two compactions of one agent, one
of a second agent) is replayed by the server from a journal, as the page tests replay
their fixtures; Debian's chromium renders it (``conftest.py`` says when the tests skip).
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
AGENT = "0b6f5a4e-1c2d-4e3f-8a9b-0c1d2e3f4a5b"


def test_spec_04_15_page_shows_context_compacted_markers(page: Any, tmp_path: Path) -> None:
    """[4.15-a]: each compaction is a "context compacted (N tokens)" marker in its place; no error, no text."""
    lines = (ROOT / "spec" / "conformance" / "valid" / "meta_compaction.jsonl").read_bytes().splitlines()
    assert_valid(lines)
    journal = MemoryJournal()
    for line in lines:
        journal.append("compaction-run", 0, line)
    app = create_app(store=MemoryStore(), model_factory=ScriptedModel, journal=journal)
    with running(app) as base:
        page.goto(base + "/#run=compaction-run")
        page.wait_for_selector("body[data-done='1']")
        page.screenshot(path=str(tmp_path / "compaction.png"), full_page=True)
        rebuilt = page.evaluate("() => window.agentRef.turns[0].responses[0].rebuilt.transcript()")
    assert rebuilt == reconstruct(lines).to_dict()
    markers = page.locator(f".agent[data-agent='{AGENT}'] .compaction")
    assert markers.all_text_contents() == [
        "context compacted (160000 tokens → 12000)",
        "context compacted (0 tokens)",
    ]
    assert markers.nth(0).get_attribute("data-trigger") == "auto"
    assert page.locator(".compaction").count() == 3  # the second agent's one too
    assert page.locator(".block.error").count() == 0
    # in its place: after the first text, before the second
    order = page.locator(f".agent[data-agent='{AGENT}'] .blocks > *").evaluate_all(
        "els => els.map(e => e.classList.contains('compaction') ? 'C' : e.textContent.slice(0, 4))"
    )
    assert order[:3] == ["Read", "C", "Part"]
