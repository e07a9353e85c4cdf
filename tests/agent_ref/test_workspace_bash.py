"""Bash in the workspace: wired into ``workspace=``, refused or unsandboxed as said, children, undo (spec §WS5)."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore
from agent_ref.cli.commands import main
from agent_ref.models.core import ReplayModel
from agent_ref.run.options import AgentOptions
from agent_ref.run.subagents import AgentSpec
from envelope import reconstruct
from sandbox_support import need_bwrap
from undo_support import tree
from workspace_support import replay_calls

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from validating import ValidatedSink

BASH_TOOLS = ["Bash", "BashOutput", "KillShell"]


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace cache under this test's directory, never the user's ``~/.cache``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    made = tmp_path / "ws"
    made.mkdir()
    return made


def _blocks(lines: list[bytes]) -> list[dict[str, Any]]:
    """Every block of every agent in the (validated) stream, in each agent's order."""
    agents = reconstruct(lines).to_dict()["agents"]
    return [block for agent in agents.values() for block in agent["blocks"]]


def _statuses(lines: list[bytes], kind: str) -> list[dict[str, Any]]:
    return [b["data"] for b in _blocks(lines) if b["type"] == "meta_status" and b["data"].get("kind") == kind]


def _results(lines: list[bytes], name: str) -> list[dict[str, Any]]:
    return [b for b in _blocks(lines) if b["type"] == "tool_result" and b.get("name") == name]


def _run(agent: Agent, prompt: str, sink: ValidatedSink) -> None:
    asyncio.run(agent.run(prompt, sink.append))


def _call(name: str, tool_input: dict[str, Any]) -> str:
    return f"call {name} with {json.dumps(tool_input)}"


def _hide_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "no-bwrap-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_spec_WS5_a_a_workspace_gives_bash_beside_the_file_tools(root: Path) -> None:
    """[WS5-a] `workspace=` adds Bash, BashOutput, KillShell after the five; `replace` makes them once again."""
    options = AgentOptions(workspace=root)
    names = [t.name for t in options.tools]
    assert names[-8:] == ["Read", "Write", "Edit", "Glob", "Grep", *BASH_TOOLS]
    again = options.replace(max_steps=3)
    assert [t.name for t in again.tools] == names  # rebuilt, not doubled
    assert {t.name for t in AgentOptions().tools}.isdisjoint(BASH_TOOLS)


def test_spec_WS5_a_bash_runs_in_the_sandbox_through_the_agent(
    root: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WS5-a] A scripted Bash call writes in the workspace, in bubblewrap (no host /home, no network stated)."""
    need_bwrap()
    agent = Agent(ScriptedModel(), workspace=root)
    sink = validated_sink()
    _run(agent, _call("Bash", {"command": "echo made > made.txt; ls /home 2>&1 | head -1"}), sink)
    (result,) = _results(list(sink), "Bash")
    assert (root / "made.txt").read_text() == "made\n"
    assert "[exit code 0]" in result["content"]
    assert "UNSANDBOXED" not in result["content"]
    assert _statuses(list(sink), "sandbox") == []  # a working sandbox needs no word


def test_spec_WS5_b_without_bwrap_bash_is_offered_and_refused_with_how_to_install(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WS5-b] bwrap hidden from PATH: Bash is still listed; the call is is_error naming apt-get; the stream says so once."""
    _hide_bwrap(tmp_path, monkeypatch)
    model = ReplayModel(replay_calls([("Bash", {"command": "touch ran"})]))
    agent = Agent(model, workspace=root)
    assert BASH_TOOLS[0] in [t.name for t in agent.options.tools]
    sink = validated_sink()
    _run(agent, "touch it", sink)
    (result,) = _results(list(sink), "Bash")
    sent = model.server.requests[1]["messages"][-1]["content"][0]  # what the model read
    assert sent["is_error"] is True
    assert result["content"].startswith("SandboxUnavailable: Bash is refused")
    assert "apt-get install bubblewrap" in result["content"]
    assert "--unsandboxed-bash" in result["content"]
    assert not (root / "ran").exists()
    (status,) = _statuses(list(sink), "sandbox")
    assert status["mode"] == "unavailable"
    assert "apt-get install bubblewrap" in status["message"]


def test_spec_WS5_b_the_unsandboxed_mode_is_stated_once_and_runs(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WS5-b] `unsandboxed_bash=True` with no bwrap: the command runs on the host; one meta_status says the mode."""
    _hide_bwrap(tmp_path, monkeypatch)
    agent = Agent(ScriptedModel(), workspace=root, unsandboxed_bash=True)
    bash = next(t for t in agent.options.tools if t.name == "Bash")
    assert "UNSANDBOXED" in bash.description
    sink = validated_sink()
    _run(agent, _call("Bash", {"command": "echo host > ran.txt"}) + " and " + _call("Bash", {"command": "true"}), sink)
    assert (root / "ran.txt").read_text() == "host\n"
    results = _results(list(sink), "Bash")
    assert len(results) == 2
    assert all("ran UNSANDBOXED" in r["content"] and "[exit code 0]" in r["content"] for r in results)
    (status,) = _statuses(list(sink), "sandbox")  # once per response, however many calls
    assert status["mode"] == "unsandboxed"
    assert "UNSANDBOXED" in status["message"]


def test_spec_WS5_b_the_seed_profile_carries_no_status(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WS5-b] Under `--profile seed` no meta_status is sent (envelope-v1 [10.2-e]); each result still says it."""
    _hide_bwrap(tmp_path, monkeypatch)
    agent = Agent(ScriptedModel(), workspace=root, unsandboxed_bash=True, profile="seed")
    sink = validated_sink()
    _run(agent, _call("Bash", {"command": "true"}), sink)
    assert _statuses(list(sink), "sandbox") == []
    (result,) = _results(list(sink), "Bash")
    assert "ran UNSANDBOXED" in result["content"]


def test_spec_WS5_c_children_inherit_the_workspace_and_sandbox_mode(root: Path) -> None:
    """[WS5-c] `for_child`, foreground and background: the same workspace, the eight tools, the parent's mode."""
    store = SQLiteStore(":memory:")
    parent = AgentOptions(workspace=root, unsandboxed_bash=True, subagents={"w": AgentSpec(description="works")})
    for background in (False, True):
        child = parent.for_child(parent.subagents["w"], store, background=background)
        assert child.workspace == root
        assert child.unsandboxed_bash is True
        assert [t.name for t in child.tools][-8:] == ["Read", "Write", "Edit", "Glob", "Grep", *BASH_TOOLS]
        bash = next(t for t in child.tools if t.name == "Bash")
        assert "UNSANDBOXED" in bash.description
    plain = AgentOptions(subagents={"w": AgentSpec(description="works")})
    assert plain.for_child(plain.subagents["w"], store).workspace is None


def _child_task(task: str) -> str:
    """``task`` as the JSON string of a spawning call, its "call" spelled so the parent's script ignores it."""
    return json.dumps(task).replace("call ", "\\u0063all ")


def test_spec_WS5_c_a_child_reads_and_writes_the_parents_workspace_and_undo_restores(
    root: Path, tmp_path: Path, validated_sink: Callable[..., ValidatedSink], capsys: pytest.CaptureFixture[str]
) -> None:
    """[WS5-c] A subagent Reads and Writes in the parent's workspace; undoing the parent's step puts it back."""
    (root / "notes.txt").write_text("parent's\n")
    db = tmp_path / "agents.db"
    child_task = (
        _call("Read", {"file_path": "notes.txt"})
        + " and "
        + _call("Write", {"file_path": "child.txt", "content": "by the child\n"})
    )
    spawn = '{"agent": "worker", "task": ' + _child_task(child_task) + "}"
    agent = Agent(
        ScriptedModel(),
        workspace=root,
        store=SQLiteStore(db),
        subagents={"worker": AgentSpec(description="edits files")},
    )
    before = tree(root)
    sink = validated_sink()
    _run(agent, f"call spawn_subagent with {spawn}", sink)
    lines = list(sink)
    read = _results(lines, "Read")
    assert len(read) == 1, read  # the child's Read, not the parent's
    assert "parent's" in read[0]["content"]
    assert (root / "child.txt").read_text() == "by the child\n"
    assert len(reconstruct(lines).to_dict()["agents"]) == 2  # the parent and its child
    capsys.readouterr()
    assert main(["undo", agent.agent_uuid, "--to-step", "0", "--db", str(db)]) == 0
    assert tree(root) == before
    assert not (root / "child.txt").exists()


def test_spec_WS5_d_undo_restores_a_bash_made_change(
    root: Path, tmp_path: Path, validated_sink: Callable[..., ValidatedSink], capsys: pytest.CaptureFixture[str]
) -> None:
    """[WS5-d] Step 1 Bash rewrites a file and makes one; `agent-ref undo --to-step 0` restores the tree."""
    need_bwrap()
    (root / "kept.txt").write_text("original\n")
    db = tmp_path / "agents.db"
    agent = Agent(ScriptedModel(), workspace=root, store=SQLiteStore(db))
    before = tree(root)
    sink = validated_sink()
    _run(agent, _call("Bash", {"command": "echo changed > kept.txt && mkdir -p out && echo new > out/made.txt"}), sink)
    assert (root / "kept.txt").read_text() == "changed\n"
    assert (root / "out" / "made.txt").is_file()
    capsys.readouterr()
    assert main(["undo", agent.agent_uuid, "--to-step", "0", "--db", str(db)]) == 0
    assert tree(root) == before
    assert (root / "kept.txt").read_text() == "original\n"


def test_spec_WS5_b_a_child_states_the_inherited_mode_under_its_own_agent(
    root: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[WS5-b] [WS5-c] An unsandboxed parent's child runs Bash unsandboxed too, and says so once, as itself."""
    task = _child_task(_call("Bash", {"command": "echo child > c.txt"}))
    agent = Agent(ScriptedModel(), workspace=root, unsandboxed_bash=True, subagents={"w": AgentSpec(description="x")})
    sink = validated_sink()
    _run(agent, 'call spawn_subagent with {"agent": "w", "task": ' + task + "}", sink)
    assert (root / "c.txt").read_text() == "child\n"
    agents = reconstruct(list(sink)).to_dict()["agents"]
    modes = {
        uuid: [b["data"]["mode"] for b in a["blocks"] if b["type"] == "meta_status" and b["data"]["kind"] == "sandbox"]
        for uuid, a in agents.items()
    }
    assert len(modes) == 2
    assert all(found == ["unsandboxed"] for found in modes.values()), modes
    (result,) = _results(list(sink), "Bash")
    assert "ran UNSANDBOXED" in result["content"]
