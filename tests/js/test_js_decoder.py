"""The JavaScript decoder (spec/server.md §7), run with node from pytest.

``node --test tests/js/`` runs the node-side tests (golden ``blocks.json``, refusals,
the SSE reader); the differential test here runs ``tests/js/transcript.mjs`` on every
golden stream and every conformance case and compares with the Python reconstructor:
the same transcript where Python rebuilds one, a refusal where Python refuses.
Node is required: missing in CI is a failure; elsewhere the tests skip saying so.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_ref import Agent, MemoryStore, ScriptedModel, default_tools
from agent_ref.run.subagents import demo_subagents
from agent_ref.server.app import create_app
from envelope import EnvelopeError, Reconstructor, StreamReader, tree
from server_support import get, running
from validating import assert_valid

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.parametrize("name", ["envelope-decoder.mjs", "envelope-client.mjs"])
def test_spec_server_7_1_b_the_published_file_is_the_served_file(name: str) -> None:
    """[S7.1-a]: the package's module (``js/``, the source) and the page's copy are the same bytes, and real files."""
    source, served = ROOT / "js" / name, ROOT / "src" / "agent_ref" / "server" / "web" / name
    assert not source.is_symlink(), "npm pack leaves symlinks out: js/ holds the real file"
    assert not served.is_symlink(), "the wheel must hold the real file: src/agent_ref/server/web/ holds a copy"
    assert source.read_bytes() == served.read_bytes(), f"edit js/{name}, then run scripts/sync-web-js"


def test_spec_server_6_1_a_every_module_the_page_imports_is_served_as_it_is() -> None:
    """[S6.1-a] [S7.1-a]: each relative import of the page's modules is served under /static/, byte for byte."""
    web = ROOT / "src" / "agent_ref" / "server" / "web"
    wanted: set[str] = set()
    todo = ["app.js"]
    while todo:
        name = todo.pop()
        for found in re.findall(r'^import [^;]*? from "\./([\w.-]+)";$', (web / name).read_text(), re.MULTILINE):
            if found not in wanted:
                wanted.add(found)
                todo.append(found)
    assert wanted == {"envelope-decoder.mjs", "envelope-client.mjs"}
    with running(create_app(store=MemoryStore(), model_factory=ScriptedModel)) as base:
        for name in sorted(wanted):
            answer = get(base, f"/static/{name}")
            assert answer.status_code == 200, name
            assert answer.headers["content-type"].startswith("text/javascript"), name
            assert answer.content == (web / name).read_bytes(), name


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


def _agent_lines(prompt: str) -> list[bytes]:
    """A real run of the reference agent with the demo subagents: every response (a pause answered "yes"), back to back."""
    store = MemoryStore()
    config: dict[str, Any] = {"tools": default_tools(), "subagents": demo_subagents()}
    agent = Agent(ScriptedModel(), store=store, **config)
    lines: list[bytes] = []
    result = asyncio.run(agent.run(prompt, lines.append))
    while result.stop_reason == "awaiting_frontend_tools":
        pause = [json.loads(x) for x in lines if x != b"[DONE]" and json.loads(x)["type"] == "awaiting_frontend_tools"]
        answers = [{"tool_use_id": p["tool_use_id"], "content": "yes"} for p in json.loads(pause[-1]["delta"])]
        start = len(lines)
        result = asyncio.run(agent.continue_with_tool_results(answers, lines.append))
        assert_valid(lines[start:])
    assert_valid(lines[: lines.index(b"[DONE]") + 1])
    return lines


def _link(agent: str, parent: str, call: Any) -> list[str]:
    meta = {"format": "json", "parent_agent": parent, "parent_tool_use_id": call}
    return [json.dumps({"type": "meta_init", "agent": agent, "final": True, "delta": json.dumps(meta)})]


def _call(agent: str, call: str) -> list[str]:
    return [
        json.dumps(
            {"type": "tool_call", "agent": agent, "final": True, "delta": "{}", "id": call, "name": "spawn_subagent"}
        )
    ]


#: Streams built by hand for the rules real runs never exercise (spec §8.3.1-c).
EDGE_TREES: dict[str, list[str]] = {
    "orphan_parent_absent": [*_link("c", "nobody", "t1")],
    "orphan_call_absent": [*_call("p", "t1"), *_link("c", "p", "t2")],
    "orphan_self": [*_call("a", "t1"), *_link("a", "a", "t1")],
    "cycle": [
        *_call("a", "ta"),
        *_call("b", "tb"),
        *_link("a", "b", "tb"),
        *_link("b", "a", "ta"),
        *_link("d", "a", "ta"),
    ],
    "two_children_one_call": [*_call("p", "t1"), *_call("p", "t2"), *_link("c1", "p", "t1"), *_link("c2", "p", "t1")],
    "bad_key": [*_call("p", "t1"), *_link("c", "p", 7)],
    "empty_key": [*_call("p", "t1"), *_link("c", "", "t1")],
    "too_deep": [line for i in range(70) for line in (*_call(f"a{i}", f"t{i}"), *_link(f"a{i + 1}", f"a{i}", f"t{i}"))],
}


def _tree_both(tmp_path: Path, lines: list[bytes] | list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(JS, Python) agent trees of one stream; ``{"error": ...}`` where a side refuses."""
    raw = [x.encode() if isinstance(x, str) else x for x in lines]
    path = tmp_path / "stream.jsonl"
    path.write_bytes(b"\n".join(raw) + b"\n")
    result = subprocess.run(
        [_node(), str(ROOT / "tests" / "js" / "transcript.mjs"), "--tree", str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    rebuilt = Reconstructor()
    try:
        for line in raw:
            rebuilt.feed(line)
        python = tree(rebuilt.transcript()).to_dict()
    except EnvelopeError as exc:
        python = {"error": str(exc)}
    js: dict[str, Any] = json.loads(result.stdout)
    return js, python


@pytest.mark.parametrize(
    "prompt", ["Research tides and volcanoes in parallel", "Research tides and volcanoes (confirm first) in parallel"]
)
def test_spec_8_3_1_js_tree_nests_a_real_subagent_run_as_python_does(tmp_path: Path, prompt: str) -> None:
    """[8.3.1-a] [8.3.1-b] [S7.1-a]: the JS ``tree`` reads the agent's ``parent_agent``/``parent_tool_use_id`` as Python's does."""
    js, python = _tree_both(tmp_path, _agent_lines(prompt))
    assert js == python
    (root,) = python["agents"]  # both children nested, none left at the top
    spawns = [b for b in root["blocks"] if b["type"] == "tool_call" and b["name"] == "spawn_subagent"]
    assert [len(b.get("agents", [])) for b in spawns] == [1, 1]


@pytest.mark.parametrize("name", sorted(EDGE_TREES))
def test_spec_8_3_1_c_js_tree_orphans_cycles_and_refusals_as_python(tmp_path: Path, name: str) -> None:
    """[8.3.1-c]: orphans, self links, cycles stay roots marked ``orphan``; bad keys and depth are refused on both sides."""
    js, python = _tree_both(tmp_path, EDGE_TREES[name])
    refused = name in ("bad_key", "empty_key", "too_deep")
    assert ("error" in python) == refused, python
    assert ("error" in js) == refused, js
    if not refused:
        assert js == python
        if name != "two_children_one_call":
            assert any(node.get("orphan") for node in python["agents"])


_HEAD = '{"type":"text","agent":"11111111-1111-1111-1111-111111111111","final":false,"delta":'
#: Lines at the edge of what the decoder reads (spec §7.5, §6.4): numbers JSON.parse makes
#: infinite or keeps finite (in unknown members, which both sides ignore, and in a payload, given
#: raw), surrogate escapes lone or paired, in values and in keys. The JS decoder skips its walk
#: over the parsed envelope when the line's text cannot hold a lone surrogate: both sides must
#: still accept and refuse the same lines, and rebuild the same transcript.
_EDGES = {
    "exponent_overflows": _HEAD + '"x","n":1e400}',
    "exponent_just_over": _HEAD + '"x","n":1.8e308}',
    "exponent_just_under": _HEAD + '"x","n":1.7e308}',
    "exponent_negative": _HEAD + '"x","n":1e-400}',
    "digits_overflow_short_exponent": _HEAD + '"x","n":' + "9" * 215 + "e99}",
    "digits_finite": _HEAD + '"x","n":' + "9" * 250 + "}",
    "digits_overflow": _HEAD + '"x","n":' + "9" * 320 + "}",
    "two_digit_exponent": _HEAD + '"x","n":1e99}',
    "lone_surrogate_value": _HEAD + '"\\ud800"}',
    "lone_surrogate_upper_case": _HEAD + '"\\uDC00"}',
    "paired_surrogates": _HEAD + '"\\uD83D\\uDE00"}',
    "lone_surrogate_key": _HEAD + '"x","\\udbff":1}',
    "lone_surrogate_unknown_member": _HEAD + '"x","note":["\\udbff"]}',
    "overflow_in_the_payload": '{"type":"tool_call","agent":"11111111-1111-1111-1111-111111111111","final":true,"delta":"{\\"n\\":1e400}","id":"t","name":"f"}',
    "escaped_backslash_then_u": _HEAD + '"\\\\ud800"}',
    # the JS decoder checks a flat envelope's strings one by one, and walks one with an object member
    "lone_surrogate_after_an_object_member": _HEAD + '"x","meta":{"a":1},"z":"\\ud800"}',
    "lone_surrogate_in_a_nested_key": _HEAD + '"x","meta":{"k\\udc00":1}}',
    "lone_surrogate_in_a_proto_member": _HEAD + '"x","__proto__":"\\ud800"}',
    "lone_surrogate_in_a_tool_call_id": '{"type":"tool_call","agent":"a","final":true,"delta":"{}","id":"\\ud800","name":"f"}',
    "paired_surrogates_nested": _HEAD + '"x","meta":{"\\ud83d\\ude42":["\\ud83d\\ude42"]}}',
}


@pytest.mark.parametrize("name", sorted(_EDGES))
def test_spec_7_5_js_and_python_accept_and_refuse_the_same_edges(tmp_path: Path, name: str) -> None:
    """[S7.1-a], spec §7.5: the decoder's text test never lets a line through that Python refuses."""
    path = tmp_path / f"{name}.jsonl"
    done = '{"type":"text","agent":"11111111-1111-1111-1111-111111111111","final":true,"delta":""}'
    path.write_text(_EDGES[name] + "\n" + done + "\n", encoding="utf-8")
    result = subprocess.run(
        [_node(), str(ROOT / "tests" / "js" / "transcript.mjs"), str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    js = json.loads(result.stdout)
    python = _python_transcript(path)
    assert ("error" in js) == ("error" in python), f"python: {python.get('error')}\njs: {js.get('error')}"
    if "error" not in python:
        assert js == python


def test_spec_jd1_a_b_the_fast_path_decides_as_the_build_before_it(node: str, npm_modules: Path) -> None:
    """[JD1-a] [JD1-b]: on random streams (fast-check, fixed seeds) the decoder returns, refuses and rebuilds as the copy before."""
    assert (npm_modules / "fast-check").is_dir()
    result = subprocess.run(
        [node, "--test", str(ROOT / "tests" / "js" / "decoder.property.mjs")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    passed = re.search(r"^# pass (\d+)$", result.stdout, re.MULTILINE)
    assert passed is not None, result.stdout[-2000:]
    assert int(passed.group(1)) == 6, result.stdout[-2000:]
    assert re.search(r"^# fail 0$", result.stdout, re.MULTILINE)


def test_spec_jd1_a_the_benchmark_stream_rebuilds_as_python_does(tmp_path: Path) -> None:
    """[JD1-a]: the stream the JS decoder is timed on (most lines on its fast path) gives Python's transcript."""
    from benchmarks.delivery import bench_lines

    lines = bench_lines(3000, agents=4)
    assert_valid(lines)
    path = tmp_path / "bench.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = subprocess.run(
        [_node(), str(ROOT / "tests" / "js" / "transcript.mjs"), str(path)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    js = json.loads(result.stdout)
    assert "error" not in js, js
    assert js == _python_transcript(path)
    assert sum(len(agent["blocks"]) for agent in js["agents"].values()) > 100
