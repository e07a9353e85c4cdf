"""The JS client follows a dead response into its continuation, against real server processes (spec server [CN2-b]).

Server A (``tests/faults/checkpoint_serve_process.py``, checkpoints on) is killed with
SIGKILL between steps of a run; server B starts on the same SQLite file and continues the
run by itself (spec server [CN1-a]), its model waiting for a gate file. node runs
``tests/js/live/continue.live.mjs``: it follows response 0 (closed ``lost``, no
``meta_final``), reads on into response 1, and opens the gate once it reads the
continuation's ``meta_init``: the continuation is read live. Each response is read back
through the strict validator and rebuilt alike by Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from faults.test_checkpoint_serve import BETWEEN, Serve, start_and_kill
from js.js_support import HERE
from js.test_js_client import _check_reported, _node_test, _passed

if TYPE_CHECKING:
    from pathlib import Path


def test_spec_cn2_b_the_client_reads_a_dead_response_on_into_its_continuation(node: str, tmp_path: Path) -> None:
    """[CN2-b]: ``connect(.../stream?response=0)`` ends with the continuation's ``meta_final``, not at the dead ``[DONE]``."""
    db, gate, report = tmp_path / "agents.db", tmp_path / "gate", tmp_path / "runs.jsonl"
    run_id, _, calls, _ = start_and_kill(str(db), tmp_path, BETWEEN, "model")
    b = Serve(str(db), "--calls", str(calls), "--gate", str(gate))
    try:
        env = {"ENVELOPE_TEST_RUN": run_id, "ENVELOPE_TEST_GATE": str(gate), "ENVELOPE_TEST_REPORT": str(report)}
        tap = _node_test(node, HERE / "live" / "continue.live.mjs", b.base, env)
        assert _passed(tap) == 1
        runs = _check_reported(b.base, report)
    finally:
        b.stop()
    assert [run["responses"] for run in runs] == [2]
    assert runs[0]["transcript"] is not None
    assert sorted(calls.read_text().split()) == ["first", "second"]
