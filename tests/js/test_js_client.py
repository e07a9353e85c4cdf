"""The JS client (``connect()``, spec/server.md §7.3-§7.6) against a real ``agent-ref serve``.

``node --test`` runs ``tests/js/live/*.live.mjs`` with the server's URL and token: the
client's own tests, then the resume property (fast-check, fixed seeds: any chunking and
any cut connections give the undisturbed run). Each run the property made is then read
back here from the server, each response through the strict validator, and rebuilt by
the Python decoder: the transcript the JS client ended with must be Python's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from typing import TYPE_CHECKING, Any

from browser.page_support import stored_responses
from envelope import reconstruct
from js.js_support import HERE, TOKEN

if TYPE_CHECKING:
    from pathlib import Path


def _node_test(node: str, script: Path, base: str, env: dict[str, str] | None = None) -> str:
    """Run one live test file with ``node --test``; fail unless every test passed. Its TAP output."""
    result = subprocess.run(
        [node, "--test", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "ENVELOPE_TEST_SERVER": base, "ENVELOPE_TEST_TOKEN": TOKEN, **(env or {})},
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert re.search(r"^# fail 0$", result.stdout, re.MULTILINE), result.stdout[-3000:]
    return result.stdout


def _passed(tap: str) -> int:
    found = re.search(r"^# pass (\d+)$", tap, re.MULTILINE)
    assert found is not None, tap[-2000:]
    return int(found.group(1))


def _check_reported(base: str, report: Path) -> list[dict[str, Any]]:
    """Each run a node test noted: every response read back through the strict validator; a finished one rebuilt alike by Python."""
    runs: list[dict[str, Any]] = [json.loads(line) for line in report.read_text().splitlines()]
    for run in runs:
        responses = stored_responses(base, run["run_id"], run["responses"], token=TOKEN)  # strict validator
        if run["transcript"] is not None:
            assert run["transcript"] == reconstruct([line for response in responses for line in response]).to_dict()
    return runs


def test_spec_server_7_3_a_the_client_against_a_real_server(node: str, live_server: str, tmp_path: Path) -> None:
    """[S7.3-a] [S7.4-b] [S7.4-c] [S7.4-d] [S7.5-a]: auth, iterations, answers, backoff and what is retried, abort, id checks."""
    report = tmp_path / "runs.jsonl"
    tap = _node_test(node, HERE / "live" / "client.live.mjs", live_server, {"ENVELOPE_TEST_REPORT": str(report)})
    assert _passed(tap) == 8
    runs = _check_reported(live_server, report)
    # every run that reached the server (a refused token, a refused POST and an early abort did not)
    assert len(runs) == 7
    assert sum(run["transcript"] is not None for run in runs) == 3


def test_spec_server_7_4_a_any_chunking_and_cuts_give_python_s_transcript(
    node: str, npm_modules: Path, live_server: str, tmp_path: Path
) -> None:
    """[S7.4-a]: the property holds on three seeds, and each run it made is valid and rebuilt alike by Python."""
    assert (npm_modules / "fast-check").is_dir()
    report = tmp_path / "runs.jsonl"
    tap = _node_test(node, HERE / "live" / "resume.live.mjs", live_server, {"ENVELOPE_TEST_REPORT": str(report)})
    assert _passed(tap) == 4
    runs = _check_reported(live_server, report)
    assert len(runs) >= 24  # 3 seeds x 8 runs (nothing failed, so nothing shrunk)
    assert all(run["transcript"] is not None for run in runs)
    assert any(run["responses"] > 1 for run in runs)  # the answered pauses were part of it
