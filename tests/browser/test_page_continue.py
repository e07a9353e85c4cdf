"""The page follows a run whose server died into the run's continuation (spec server [CN2-b]).

Two ``tests/faults/checkpoint_serve_process.py`` servers in checkpoint mode on one
PostgreSQL schema: A runs a two-step tool run and holds between the steps; the page is
opened on B at ``#run=ID`` (the run's latest response, A's, followed through the shared
journal). A is killed with SIGKILL; B finds its writer dead once A's lease (2 s) runs out,
closes the response (``lost``, no ``meta_final``) and continues the run itself, its model
waiting for a gate the test opens only once the page shows the continuation: the page reads
it live, in the same turn. Debian's chromium renders it (``conftest.py`` says when the tests
skip); every response the server holds passes the strict validator.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from browser.page_support import page_transcripts, stored_responses
from envelope import reconstruct
from fault_support import Reader, checkpoint_held, wait_until
from faults.test_checkpoint_serve import BETWEEN, Serve, wait_for_file

if TYPE_CHECKING:
    from pathlib import Path


def test_spec_cn2_b_the_page_follows_a_dead_run_into_its_continuation(
    page: Any, pg_schema_url: str, tmp_path: Path
) -> None:
    """[CN2-b]: one turn shows A's response closed ``lost``, then B's continuation to its end."""
    calls, entered, gate = tmp_path / "calls.txt", tmp_path / "entered", tmp_path / "gate"
    b = Serve(pg_schema_url, "--calls", str(calls), "--gate", str(gate))
    a = Serve(pg_schema_url, "--calls", str(calls), "--entered", str(entered), "--hold", "model")
    try:
        writer = Reader("POST", a.base + "/agent/run", json={"prompt": BETWEEN})
        writer.wait_open()
        wait_for_file(entered, a)
        wait_until(
            lambda: checkpoint_held(pg_schema_url, writer.headers["x-agent-uuid"], "model"),
            "the held run's checkpoint in the store",
        )
        run_id = writer.headers["x-run-id"]
        page.goto(f"{b.base}/#run={run_id}")
        page.wait_for_function(
            "() => (window.agentRef.turns[0]?.responses[0]?.rebuilt.transcript().agents"
            " && Object.values(window.agentRef.turns[0].responses[0].rebuilt.transcript().agents)[0]"
            "?.blocks.some(b => b.type === 'tool_result'))"
        )
        a.kill()
        page.wait_for_function("() => window.agentRef.turns[0].responses.length === 2", timeout=40_000)
        assert page.evaluate("() => document.body.dataset.done") is None  # still reading: the model waits
        gate.touch()
        page.wait_for_selector("body[data-done='1']", timeout=40_000)
        page.screenshot(path=str(tmp_path / "continued.png"), full_page=True)
        responses = stored_responses(b.base, run_id, 2)  # strict validator
        errors = page.locator(".block.error").all_text_contents()
        text = page.locator(".turn").first.inner_text()
    finally:
        a.stop()
        b.stop()
    assert page_transcripts(page) == [reconstruct(r).to_dict() for r in responses]
    assert len(errors) == 1
    assert errors[0].startswith("lost: ")
    assert "in the next response" in errors[0]
    assert "note gave: noted second" in text
    assert sorted(calls.read_text().split()) == ["first", "second"]
