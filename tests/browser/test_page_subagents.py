"""Real subagents on the page (spec/server.md §6.2-a, §6.3-b): a real ``agent-ref serve`` run with
the demo subagents, no hand-built input.

The server is a process started as ``agent-ref serve --subagents demo`` (``agent_server.py``),
the embedded model spawns one researcher per topic, and the researcher whose task says
"confirm" pauses the whole run on the frontend ``confirm`` tool. The page must draw each
child inside the call that spawned it, exactly where Python's ``envelope.tree`` puts it
(envelope-v1 §8.3.1), mark the paused child as waiting, and end equal to the stored
streams, which the strict validator reads.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import TYPE_CHECKING, Any

from browser.agent_server import agent_serve
from browser.page_support import ask, page_transcripts, run_id, stored_responses
from envelope import reconstruct, tree

if TYPE_CHECKING:
    from pathlib import Path

#: Two researchers; the second one's task says "confirm", so it calls the frontend confirm tool.
ONE_PAUSES = "Research tides and volcanoes (confirm first) in parallel"
#: The picture of the page on the docs' server page (one canonical file); the screenshot test writes it when
#: this variable names it: ``AGENT_REF_SCREENSHOT=src/agent_ref/server/web/screenshot.png``.
SCREENSHOT_ENV = "AGENT_REF_SCREENSHOT"


def _nesting(lines: list[bytes]) -> list[tuple[str, str, str]]:
    """(parent, spawning call, child) for every nested agent, as Python's ``envelope.tree`` reads the stream."""
    out: list[tuple[str, str, str]] = []

    def walk(node: dict[str, Any]) -> None:
        for block in node["blocks"]:
            for child in block.get("agents", []):
                out.append((node["agent"], block["id"], child["agent"]))
                walk(child)

    for root in tree(reconstruct(lines)).to_dict()["agents"]:
        walk(root)
    return out


def _assert_nested_as_python(page: Any, lines: list[bytes]) -> list[tuple[str, str, str]]:
    expected = _nesting(lines)
    assert expected, "the run spawned no subagent"
    for parent, call, child in expected:
        inside = f".agent[data-agent='{parent}'] [data-tool-use-id='{call}'] > .children > .agent[data-agent='{child}']"
        assert page.locator(inside).count() == 1, (parent, call, child)
    assert page.locator(".agents > .agent").count() == 1  # only the root at the top: no child left as a sibling
    return expected


def test_spec_server_6_2_a_real_subagents_nest_inside_their_calls_and_the_paused_child_waits(
    page: Any, tmp_path: Path
) -> None:
    """[S6.2-a] [S6.3-b] [S6.3-a]: each researcher inside its spawn call; the one on ``confirm`` waits, not runs; confirmed, it ends."""
    with agent_serve(tmp_path / "agents.db") as base:
        ask(page, base, ONE_PAUSES)
        dialog = page.locator("#confirm-dialog")
        dialog.wait_for(state="visible")
        run = run_id(page)
        (paused,) = stored_responses(base, run, 1)
        root = json.loads(paused[0])["agent"]
        (pause,) = [
            json.loads(x) for x in paused if x != b"[DONE]" and json.loads(x)["type"] == "awaiting_frontend_tools"
        ]
        (asked,) = json.loads(pause["delta"])
        waiting = asked["agent"]  # the child whose confirm the run waits for
        assert waiting != root
        page.wait_for_function("() => window.agentRef.turns[0].responses[0].rebuilt.done")  # all of the paused response
        nested = _assert_nested_as_python(page, paused)
        assert len(nested) == 2
        assert waiting in {child for _, _, child in nested}
        other = next(child for _, _, child in nested if child != waiting)
        child_badge = page.locator(f".agent[data-agent='{waiting}'] > .agent-head .badge")
        assert child_badge.inner_text() == "waiting for you"  # not "running"
        assert page.locator(f".agent[data-agent='{waiting}']").get_attribute("data-state") == "waiting"
        card = page.locator(f".agent[data-agent='{waiting}'] [data-tool-use-id='{asked['tool_use_id']}']")
        assert card.locator(".tool-result.pending").inner_text() == "waiting for your answer"
        assert page.locator(f".agent[data-agent='{other}'] > .agent-head .badge").inner_text() == "end_turn"
        assert page.locator(f".agent[data-agent='{root}'] > .agent-head .badge").inner_text() == "waiting for you"
        assert page.locator("#confirm-who").text_content() == f"A subagent ({waiting[:8]}) asks you"
        assert "volcanoes (confirm first)" in page.locator("#confirm-question").inner_text()
        page.screenshot(path=str(tmp_path / "subagent-paused.png"))
        dialog.locator("button.confirm").click()
        page.wait_for_selector("body[data-done='1']")
        page.screenshot(path=str(tmp_path / "subagents-done.png"), full_page=True)
        stored = stored_responses(base, run, 2)
    assert page_transcripts(page) == [reconstruct(lines).to_dict() for lines in stored]
    _assert_nested_as_python(page, stored[0] + stored[1])
    assert page.locator(f".agent[data-agent='{waiting}'] > .agent-head .badge").inner_text() == "end_turn"
    assert card.locator(".tool-result").inner_text().strip().endswith("yes")
    assert page.locator(f".agent[data-agent='{root}'] > .agent-head .badge").inner_text() == "end_turn"
    assert page.locator("[role=alert]:visible").count() == 0


def test_readme_screenshot_nested_children_a_paused_child_and_the_newest_output_in_view(
    page: Any, tmp_path: Path
) -> None:
    """[S6.2-a] [S6.3-b] [S6.5-a]: the docs' picture of the page, checked before it is taken.

    A finished run with two nested researchers, then a second run whose researcher waits
    on ``confirm``; the page, taller than the window, has followed to the newest output,
    which sits above the docked question. Then the question is answered and both runs
    must equal their stored, validated streams.
    """
    page.set_viewport_size({"width": 1100, "height": 1000})
    with agent_serve(tmp_path / "agents.db") as base:
        ask(page, base, "Research tides and volcanoes in parallel")
        page.wait_for_selector("body[data-done='1']")
        page.fill("#prompt", "Research coral reefs and glaciers (confirm first) in parallel")
        page.click("#send")
        page.locator("#confirm-dialog").wait_for(state="visible")
        second = page.locator(".turn").nth(1)
        paused = second.locator(".agent.child[data-state='waiting']")
        paused.wait_for()
        page.wait_for_function("() => window.agentRef.turns[1].responses[0].rebuilt.done")
        page.wait_for_timeout(100)  # the last frame drawn and followed
        assert (
            page.evaluate("() => document.scrollingElement.scrollHeight - innerHeight") > 500
        )  # taller than the window
        assert page.evaluate("() => document.scrollingElement.scrollHeight - innerHeight - scrollY") <= 2
        waiting_card = paused.locator(".tool-result.pending")
        box = waiting_card.bounding_box()
        assert box is not None
        panel_top = page.evaluate("() => document.querySelector('#confirm-dialog').getBoundingClientRect().top")
        assert 0 < box["y"] + box["height"] <= panel_top  # the newest output, in view above the question
        assert page.locator(".turn").nth(0).locator(".spawn .agent.child").count() == 2
        assert second.locator(".spawn .agent.child").count() == 2
        shot = tmp_path / "page.png"
        page.screenshot(path=str(shot))
        target = os.environ.get(SCREENSHOT_ENV)
        if target:
            shutil.copyfile(shot, target)
        page.locator("#confirm-dialog button.confirm").click()
        page.wait_for_selector("body[data-done='2']")
        runs = page.evaluate("() => window.agentRef.turns.map(t => t.responses[0].runId)")
        stored = stored_responses(base, runs[0], 1) + stored_responses(base, runs[1], 2)
    assert page_transcripts(page) == [reconstruct(lines).to_dict() for lines in stored]
