"""A run with a child, paused in one process and resumed in another, is one connected trace (spec §20.3-a)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import ROOT

SCRIPT = Path(__file__).with_name("trace_process.py")


def half(*args: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_pause_in_one_process_resume_in_another_is_one_tree_R20_3_a() -> None:
    """[R20.3-a] every span of both processes is in one trace whose only root is the first run span."""
    paused = half("pause")
    traceparent = paused["traceparent"]
    assert isinstance(traceparent, str)
    resumed = half("resume", traceparent)
    spans = paused["spans"] + resumed["spans"]
    by_id = {s["span"]: s for s in spans}
    request = next(s for s in resumed["spans"] if s["name"] == "POST /agent/resume")
    tree = [s for s in spans if s is not request]
    assert len({s["trace"] for s in tree}) == 1
    roots = [s for s in tree if s["parent"] is None]
    assert [r["name"] for r in roots] == ["invoke_agent"]
    for span in tree:  # every other span reaches the root through parents recorded in one process or the other
        seen = span
        while seen["parent"] is not None:
            seen = by_id[seen["parent"]]
        assert seen is roots[0]
    resumed_run = next(s for s in resumed["spans"] if s["name"] == "invoke_agent")
    assert resumed_run["parent"] == roots[0]["span"] == traceparent.split("-")[2]
    assert set(resumed_run["links"]) == {roots[0]["span"], request["span"]}
    child = next(s for s in paused["spans"] if s["name"] == "invoke_agent helper")
    assert by_id[child["parent"]]["name"] == "execute_tool spawn_subagent"
