"""The JavaScript decoder (spec/server.md §7), run with node from pytest.

``node --test tests/js/`` runs the node-side tests (golden ``blocks.json``, refusals,
the SSE reader); the differential test here runs ``tests/js/transcript.mjs`` on every
golden stream and every conformance case and compares with the Python reconstructor:
the same transcript where Python rebuilds one, a refusal where Python refuses.
Node is required: missing in CI is a failure; elsewhere the tests skip saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from envelope import EnvelopeError, Reconstructor, StreamReader

ROOT = Path(__file__).resolve().parents[2]
DECODER = ROOT / "js" / "envelope-decoder.mjs"
SERVED = ROOT / "src" / "agent_ref" / "web" / "envelope-decoder.mjs"
CASES = sorted(
    [*ROOT.glob("fixtures/golden/*/input.sse"), *ROOT.glob("fixtures/golden/*/envelopes.jsonl")]
    + [p for p in ROOT.glob("spec/conformance/*/*") if p.suffix in (".sse", ".jsonl")]
)


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node is not installed; CI must run the JS decoder tests (scripts/system-deps installs it)")
        pytest.skip("NODE IS NOT INSTALLED: the JavaScript decoder tests did not run (apt-get install nodejs)")
    return node


def _python_transcript(path: Path) -> dict[str, Any]:
    reader = StreamReader("sse" if path.suffix == ".sse" else "jsonl")
    rebuilt = Reconstructor()
    try:
        for line in reader.feed(path.read_bytes()):
            rebuilt.feed(line)
        for line in reader.close():
            rebuilt.feed(line)
    except EnvelopeError as exc:
        return {"error": str(exc)}
    return rebuilt.transcript().to_dict()


def test_spec_server_7_1_a_node_test_runner_passes() -> None:
    """[S7.1-a] [S7.2-a]: ``node --test tests/js/`` passes, and ran tests."""
    result = subprocess.run(
        [_node(), "--test", str(ROOT / "tests" / "js")], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    passed = re.search(r"^# pass (\d+)$", result.stdout, re.MULTILINE)
    assert passed is not None, result.stdout[-2000:]
    assert int(passed.group(1)) >= 20, result.stdout[-2000:]
    assert re.search(r"^# fail 0$", result.stdout, re.MULTILINE)


def test_spec_server_7_1_b_the_published_file_is_the_served_file() -> None:
    """[S7.1-a]: ``js/envelope-decoder.mjs`` and the page's copy are one file."""
    assert DECODER.read_bytes() == SERVED.read_bytes()


@pytest.mark.parametrize("path", CASES, ids=[str(p.relative_to(ROOT)) for p in CASES])
def test_spec_server_7_1_c_js_and_python_rebuild_the_same(path: Path) -> None:
    """[S7.1-a]: both sides of the language border give the same transcript, or both refuse."""
    result = subprocess.run(
        [_node(), str(ROOT / "tests" / "js" / "transcript.mjs"), str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    js = json.loads(result.stdout)
    python = _python_transcript(path)
    if "error" in python or "error" in js:
        assert ("error" in python) == ("error" in js), f"python: {python.get('error')}\njs: {js.get('error')}"
    else:
        assert js == python
