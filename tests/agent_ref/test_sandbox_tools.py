"""Bash, BashOutput and KillShell as tools: inputs, refusal, output bound, progress, background runs (spec §SB1, §SB4, §SB5)."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent_ref import Agent, ScriptedModel
from agent_ref.tools.core import Tool, ToolCallRequest, ToolContextBase, ToolOutcome, run_tools
from agent_ref.tools.sandbox import MAX_TIMEOUT_MS, BoundedOutput, bash_tools
from agent_ref.tools.sandbox import jail as jail_module
from agent_ref_support import fast_retry, run
from envelope import Emitter
from sandbox_support import need_bwrap, processes_with
from validating import assert_valid

AGENT = "agent-sb"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def _by_name(tools: list[Tool]) -> dict[str, Tool]:
    return {t.name: t for t in tools}


async def _call(tools: dict[str, Tool], name: str, tool_input: dict[str, Any], lines: list[bytes]) -> ToolOutcome:
    async def send(group: list[bytes]) -> None:
        lines.extend(group)

    call = ToolCallRequest(id=f"toolu_{uuid.uuid4().hex[:8]}", name=name, input=tool_input)
    base = ToolContextBase(agent_uuid=AGENT, run_id="run-1", progress_interval=0)
    [done] = await run_tools([call], tools, Emitter(AGENT), send, context=base)
    return done


def test_sb1_a_the_inputs_are_the_sdks() -> None:
    """Bash {command, timeout, description, run_in_background}; BashOutput {bash_id, filter}; KillShell {shell_id} [SB1-a]."""
    tools = _by_name(bash_tools(Path(tempfile.gettempdir())))
    assert list(tools) == ["Bash", "BashOutput", "KillShell"]
    bash = tools["Bash"].input_schema
    assert set(bash["properties"]) == {"command", "timeout", "description", "run_in_background"}
    assert bash["required"] == ["command"]
    assert tools["BashOutput"].input_schema["required"] == ["bash_id"]
    assert set(tools["BashOutput"].input_schema["properties"]) == {"bash_id", "filter"}
    assert tools["KillShell"].input_schema["required"] == ["shell_id"]
    assert "600000" in bash["properties"]["timeout"]["description"]
    lines: list[bytes] = []
    too_long = asyncio.run(_call(tools, "Bash", {"command": "true", "timeout": MAX_TIMEOUT_MS + 1}, lines))
    assert too_long.is_error
    assert f"timeout must be from 1 to {MAX_TIMEOUT_MS} ms, got {MAX_TIMEOUT_MS + 1}" in too_long.text
    with pytest.raises(ValueError, match="is not a directory"):
        bash_tools(Path("/nonexistent-agent-ref-dir"))


def test_sb1_b_without_bwrap_bash_is_refused_with_how_to_install_it(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PATH without bwrap: the call is an error naming `apt-get install bubblewrap` and the opt-in; nothing ran [SB1-b]."""
    monkeypatch.setenv("PATH", str(workspace))  # no bwrap there
    tools = _by_name(bash_tools(workspace))
    lines: list[bytes] = []
    done = asyncio.run(_call(tools, "Bash", {"command": "touch ran"}, lines))
    assert done.is_error
    assert "Bash is refused: bubblewrap (bwrap) is not on PATH" in done.text
    assert "apt-get install bubblewrap" in done.text
    assert "--unsandboxed-bash" in done.text
    assert not (workspace / "ran").exists()


def test_sb1_b_a_bwrap_that_cannot_sandbox_is_probed_once_and_refused(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `bwrap` that fails its probe (as in a container without user namespaces) refuses, and is run once [SB1-b]."""
    fake = workspace.parent / "bin"
    fake.mkdir()
    count = workspace.parent / "probes"
    (fake / "bwrap").write_text(
        f"#!/bin/sh\necho x >> {count}\necho 'No permissions to create new namespace' >&2\nexit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    monkeypatch.setattr(jail_module, "_probed", {})
    tools = _by_name(bash_tools(workspace))
    for _ in range(2):
        done = asyncio.run(_call(tools, "Bash", {"command": "touch ran"}, []))
        assert done.is_error
        assert "cannot make a sandbox here: No permissions to create new namespace" in done.text
        assert "apt-get install bubblewrap" in done.text
    assert count.read_text() == "x\n"  # probed once, then cached
    assert not (workspace / "ran").exists()


def test_sb1_c_the_unsandboxed_mode_runs_on_the_host_and_says_so(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """unsandboxed=True runs without bwrap: the host's /tmp is seen, and the result is marked UNSANDBOXED [SB1-c]."""
    fd, planted = tempfile.mkstemp(prefix="agent-ref-host-", dir="/tmp")
    os.close(fd)
    monkeypatch.setenv("PATH", str(workspace))  # no bwrap: the opt-in alone makes it run
    try:
        tools = _by_name(bash_tools(workspace, unsandboxed=True))
        assert "UNSANDBOXED" in tools["Bash"].description
        done = asyncio.run(_call(tools, "Bash", {"command": f"ls {planted}"}, []))
    finally:
        os.unlink(planted)
    assert not done.is_error
    assert planted in done.text
    assert "[ran UNSANDBOXED: no bubblewrap" in done.text


def test_sb4_a_a_huge_output_keeps_its_head_and_tail_and_says_what_was_cut(workspace: Path) -> None:
    """`seq 1 200000`: the first and last numbers kept, the note counts the bytes and lines left out [SB4-a]."""
    need_bwrap()
    tools = _by_name(bash_tools(workspace, max_output_bytes=4000))
    done = asyncio.run(_call(tools, "Bash", {"command": "seq 1 200000"}, []))
    whole = "".join(f"{n}\n" for n in range(1, 200001))
    head, rest = done.text.split("\n[agent-ref: output cut: ", 1)
    note, tail = rest.split("]\n", 1)
    assert whole.startswith(head)
    tail_output = tail.removesuffix("\n[exit code 0]")
    assert whole.rstrip("\n").endswith(tail_output)
    assert tail_output.endswith("200000")
    omitted = len(whole) - len(head) - len(tail_output) - 1  # the tail's last newline is the result's
    cut_lines = whole.count("\n") - head.count("\n") - tail_output.count("\n") - 1
    assert note == f"{omitted:,} bytes ({cut_lines:,} lines) omitted of {len(whole):,} bytes"
    assert len(done.text.encode()) < 4000 + 200


def test_sb4_a_the_bound_cuts_on_code_points_and_replaces_bad_bytes_visibly() -> None:
    """Bytes that are not UTF-8 become U+FFFD; a cut never splits a character [SB4-a]."""
    out = BoundedOutput(300)
    out.feed(b"ok \xff\xfe done\n")
    assert out.text() == "ok \ufffd\ufffd done\n"
    many = BoundedOutput(300)
    for _ in range(500):
        many.feed("é".encode())  # two bytes each, fed one character at a time
    text = many.text()
    assert "\ufffd" not in text
    head, _, tail = text.partition("\n[agent-ref: output cut: ")
    assert set(head) == {"é"}
    assert set(tail.split("]\n", 1)[1]) == {"é"}
    assert many.total_bytes == 1000


def test_sb4_b_output_streams_as_progress_before_the_result(workspace: Path) -> None:
    """The command waits until the test has seen its first line as progress: an ordering proof [SB4-b]."""
    need_bwrap()
    tools = _by_name(bash_tools(workspace))
    command = "echo first-line; while [ ! -e go ]; do sleep 0.02; done; echo second-line"
    seen: list[bytes] = []

    async def go() -> ToolOutcome:
        async def send(group: list[bytes]) -> None:
            for line in group:
                seen.append(line)
                env = json.loads(line)
                if env["type"] == "meta_status" and json.loads(env["delta"])["message"] == "first-line":
                    (workspace / "go").touch()

        call = ToolCallRequest(
            id="toolu_p", name="Bash", input={"command": command, "timeout": 30_000, "description": "wait"}
        )
        base = ToolContextBase(agent_uuid=AGENT, run_id="run-1", progress_interval=0)
        [done] = await run_tools([call], tools, Emitter(AGENT), send, context=base)
        return done

    done = asyncio.run(go())
    assert "timed out" not in done.text
    assert done.text == "first-line\nsecond-line\n[exit code 0]"
    kinds = [json.loads(line)["type"] for line in seen]
    assert kinds.index("meta_status") < kinds.index("tool_result")


def test_sb4_b_a_one_megabyte_line_through_the_agent_is_strictly_valid(workspace: Path) -> None:
    """A 1 MB single line: the result is bounded, every envelope line within the bound (the validating tee) [SB4-b]."""
    need_bwrap()
    command = "head -c 1048576 /dev/zero | tr '\\0' x; echo"
    prompt = "call Bash with " + json.dumps({"command": command, "description": "a long line"})
    agent = Agent(ScriptedModel(), tools=bash_tools(workspace), retry=fast_retry())
    lines: list[bytes] = []
    run(agent.run(prompt, lines.append))
    assert_valid(lines)
    results = [json.loads(line) for line in lines if line != b"[DONE]" and json.loads(line)["type"] == "tool_result"]
    text = "".join(r["delta"] for r in results)
    assert text.startswith("xxxx")
    assert "[agent-ref: output cut: " in text
    assert "omitted of 1,048,577 bytes]" in text
    assert text.endswith("[exit code 0]")
    assert len(text) < 40_000
    assert max(len(line) for line in lines) <= 2048


def test_sb5_a_background_run_output_and_kill(workspace: Path) -> None:
    """run_in_background gives an id; BashOutput reads new output (with a filter); KillShell ends the tree [SB5-a] [SB5-b]."""
    need_bwrap()
    tools = _by_name(bash_tools(workspace))
    marker = f"{uuid.uuid4().int % 100000}"
    command = f"echo ready; echo noise; touch started; while [ ! -e stop ]; do sleep 0.02; done; echo after; sleep 320.{marker}"

    async def go() -> list[str]:
        said: list[str] = []
        started = await _call(tools, "Bash", {"command": command, "run_in_background": True}, [])
        said.append(started.text)
        key = started.text.split(" as ", 1)[1].split(";", 1)[0]
        while not (workspace / "started").exists():
            await asyncio.sleep(0.02)  # the loop must run for the job's reader; waits on the file it makes
        first = await _call(tools, "BashOutput", {"bash_id": key, "filter": "^rea"}, [])
        while "ready" not in first.text:  # the reader may not have read it yet: read again
            first = await _call(tools, "BashOutput", {"bash_id": key, "filter": "^rea"}, [])
        said.append(first.text)
        (workspace / "stop").touch()
        while not processes_with(f"sleep 320.{marker}"):
            await asyncio.sleep(0.02)
        reads = [(await _call(tools, "BashOutput", {"bash_id": key}, [])).text]
        while "after" not in "".join(reads):
            reads.append((await _call(tools, "BashOutput", {"bash_id": key}, [])).text)
        said.append("".join(reads))
        said.append((await _call(tools, "KillShell", {"shell_id": key}, [])).text)
        said.append((await _call(tools, "BashOutput", {"bash_id": key}, [])).text)
        said.append((await _call(tools, "KillShell", {"shell_id": "bash_99"}, [])).text)
        bad = await _call(tools, "BashOutput", {"bash_id": key, "filter": "("}, [])
        said.append(bad.text)
        return said

    started, first, second, killed, after, unknown, bad = asyncio.run(go())
    assert started.startswith("started in the background as bash_1")
    assert first == "ready\n[running]"
    assert "after" in second
    assert "ready" not in second  # only what is new
    assert second.endswith("[running]")
    assert killed == "bash_1 killed: killed"
    assert after == "[killed]"
    assert processes_with(f"sleep 320.{marker}") == []
    assert "no background command 'bash_99' (known: bash_1)" in unknown
    assert "filter '(' is not a regular expression" in bad


def test_sb1_d_the_agent_runs_bash_with_the_scripted_model(workspace: Path) -> None:
    """Bash as one of AgentOptions.tools, driven by the scripted model; the stream is strictly valid [SB1-d]."""
    need_bwrap()
    (workspace / "data.txt").write_text("alpha\nbeta\n")
    prompt = "call Bash with " + json.dumps({"command": "wc -l data.txt && pwd"})
    model = ScriptedModel()
    agent = Agent(model, tools=bash_tools(workspace), retry=fast_retry())
    lines: list[bytes] = []
    run(agent.run(prompt, lines.append))
    assert_valid(lines)
    texts = [json.loads(line) for line in lines if line != b"[DONE]"]
    answer = "".join(e["delta"] for e in texts if e["type"] == "text")
    assert f"Bash gave: 2 data.txt\n{workspace.resolve()}\n[exit code 0]" in answer


def test_sb1_b_the_sandbox_tests_fail_in_ci_when_bwrap_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bwrap the sandbox tests skip loudly, and under CI=true they fail instead [SB1-b]."""
    monkeypatch.setenv("PATH", "/nonexistent-agent-ref-dir")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must run the sandbox tests"):
        need_bwrap()
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="SANDBOX TESTS DID NOT RUN: bubblewrap"):
        need_bwrap()
