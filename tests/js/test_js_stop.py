"""``run.stop()`` of the JS client against a real server process (spec server §1.4, §7.4-c).

The server is ``tests/faults/kill_support.py``'s: SQLite, a file journal, a scripted model
that holds a ``[hold]`` call until a gate file (never made here; its wait is bounded). node
runs ``tests/js/live/stop.live.mjs``; each run it made is read back through the strict
validator and rebuilt alike by Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from faults.kill_support import Server
from js.js_support import HERE
from js.test_js_client import _check_reported, _node_test, _passed

if TYPE_CHECKING:
    from pathlib import Path


def test_spec_server_7_4_c_stop_from_node(node: str, tmp_path: Path) -> None:
    """[S7.4-c] [S1.4-a] [S1.4-b]: stop() mid-call and at a pause, from node; every stream valid."""
    report = tmp_path / "runs.jsonl"
    with Server(tmp_path / "agents.db", gate=tmp_path / "never", entered=tmp_path / "entered") as server:
        tap = _node_test(node, HERE / "live" / "stop.live.mjs", server.base, {"ENVELOPE_TEST_REPORT": str(report)})
        assert _passed(tap) == 2
        runs = _check_reported(server.base, report)
    assert [run["responses"] for run in runs] == [1, 2]
    assert all(run["transcript"] is not None for run in runs)
