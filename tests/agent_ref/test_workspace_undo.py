"""Every change in the workspace undoable: per-step snapshots, undo, rewind, diff (spec agent-ref §WU1)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel, SQLiteStore
from agent_ref.cli.commands import main
from agent_ref.tools.core import tool
from agent_ref_support import meta
from undo_support import Tree, tree

if TYPE_CHECKING:
    from collections.abc import Callable

    from validating import ValidatedSink


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace cache under this test's directory, never the user's ``~/.cache``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def seed_workspace(root: Path, outside: Path) -> None:
    """A workspace with the awkward cases: binary, modes, an empty dir, links, a ``.git``."""
    (root / "gone" / "sub").mkdir(parents=True)
    (root / "gone" / "sub" / "x.txt").write_text("to be deleted\n")
    (root / "empty").mkdir()
    (root / "keep.txt").write_text("line one\nline two\n")
    (root / "bin.dat").write_bytes(bytes(range(256)))
    (root / "run.sh").write_text("echo hi\n")
    (root / "run.sh").chmod(0o644)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "link").symlink_to("keep.txt")
    outside.mkdir()
    (outside / "theirs.txt").write_text("not ours\n")
    (root / "out").symlink_to(outside)


@tool
def scribble(note: str) -> str:
    """Change the workspace without declaring it (plain open(), os calls)."""
    import shutil

    root = Path(os.environ["WS_ROOT"])
    with open(root / "keep.txt", "a") as f:
        f.write(f"{note}\n")
    (root / "new" / "deep").mkdir(parents=True)
    (root / "new" / "deep" / "file.txt").write_text("made in step 1\n")
    shutil.rmtree(root / "gone")
    (root / "run.sh").chmod(0o755)
    (root / "bin.dat").write_bytes(b"\x00\xff" * 100)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
    (root / "link").unlink()
    (root / "link").symlink_to("/etc/passwd")
    (root / "out" / "theirs.txt").write_text("written through a link, outside\n")
    return "scribbled"


@tool
def shell(code: str) -> str:
    """Run Python in a subprocess, in the workspace."""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=os.environ["WS_ROOT"], capture_output=True, text=True, check=False
    )
    return f"exit {done.returncode} {done.stderr[-200:]}"


SUBPROCESS = (
    "import os, pathlib; p = pathlib.Path('.'); (p / 'by_subprocess.txt').write_text('sub\\n'); "
    "os.rmdir('empty'); (p / 'keep.txt').write_text('rewritten by a subprocess\\n'); "
    "(p / 'new' / 'deep' / 'file.txt').unlink(); os.rmdir('new/deep'); (p / 'new' / 'deep').mkdir(); "
    "os.chmod('new/deep', 0o700)"
)


def run_two_steps(
    tmp_path: Path, validated_sink: Callable[..., ValidatedSink], monkeypatch: pytest.MonkeyPatch
) -> tuple[Agent, Path, Path, list[Tree], list[list[bytes]]]:
    """Step 1 a Python tool, step 2 a subprocess; the trees before, after 1, after 2 and each run's lines."""
    root, db = tmp_path / "ws", tmp_path / "agents.db"
    root.mkdir()
    seed_workspace(root, tmp_path / "outside")
    monkeypatch.setenv("WS_ROOT", str(root))
    agent = Agent(ScriptedModel(), tools=[scribble, shell], store=SQLiteStore(db), workspace=root)
    trees = [tree(root)]
    streams: list[list[bytes]] = []
    for prompt in ['call scribble with {"note": "added"}', f"call shell with {json.dumps({'code': SUBPROCESS})}"]:
        sink = validated_sink()
        asyncio.run(agent.run(prompt, sink.append))
        streams.append(list(sink))
        trees.append(tree(root))
    return agent, root, db, trees, streams


def test_spec_WU1_a_undeclared_writes_and_a_subprocess_are_undone(
    tmp_path: Path,
    validated_sink: Callable[..., ValidatedSink],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """[WU1-a] [WU1-c] A plain tool and a subprocess change the tree; undo puts back bytes, modes, links, dirs."""
    agent, root, db, trees, _ = run_two_steps(tmp_path, validated_sink, monkeypatch)
    assert trees[0] != trees[1] != trees[2]
    assert trees[2]["by_subprocess.txt"] == ("file", 0o644 & ~_umask(), b"sub\n")
    assert main(["undo", agent.agent_uuid, "--to-step", "1", "--db", str(db)]) == 0
    assert tree(root) == trees[1]
    assert "steps undone: 2" in capsys.readouterr().err
    assert main(["undo", agent.agent_uuid, "--to-step", "0", "--db", str(db)]) == 0
    assert tree(root) == trees[0]  # every byte, mode, link, empty and deleted directory, and .git/HEAD
    assert (tmp_path / "outside" / "theirs.txt").read_text() == "written through a link, outside\n"  # [WU1-e]
    assert os.readlink(root / "link") == "keep.txt"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_spec_WU1_f_each_step_summarised_in_meta_final(
    tmp_path: Path, validated_sink: Callable[..., ValidatedSink], monkeypatch: pytest.MonkeyPatch
) -> None:
    """[WU1-f] meta_final.workspace_steps says each step's file step, run step, counts and paths."""
    _, _, _, _, streams = run_two_steps(tmp_path, validated_sink, monkeypatch)
    first: list[dict[str, Any]] = meta(streams[0], "meta_final")["workspace_steps"]
    assert len(first) == 1
    assert first[0]["step"] == 1
    assert first[0]["run_step"] == 1
    assert "+ new/deep/file.txt" in first[0]["paths"]
    assert "- gone/sub/x.txt" in first[0]["paths"]
    assert "~ run.sh" in first[0]["paths"]
    assert (first[0]["added"], first[0]["removed"]) == (3, 3)  # new, new/deep, the file; gone, sub, x.txt
    second = meta(streams[1], "meta_final")["workspace_steps"]
    assert [s["step"] for s in second] == [2]
    assert "+ by_subprocess.txt" in second[0]["paths"]
    assert "- empty" in second[0]["paths"]


def test_spec_WU1_c_undo_refuses_a_file_changed_since(
    tmp_path: Path,
    validated_sink: Callable[..., ValidatedSink],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """[WU1-c] A file changed outside the agent since the snapshot refuses the whole undo, naming it."""
    agent, root, db, _, _ = run_two_steps(tmp_path, validated_sink, monkeypatch)
    (root / "by_subprocess.txt").write_text("the user's edit\n")
    before = tree(root)
    assert main(["undo", agent.agent_uuid, "--to-step", "0", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "by_subprocess.txt: changed since it was recorded; nothing was restored" in err
    assert err.count("\n") == 1
    assert tree(root) == before


def test_spec_WU1_g_diff_prints_each_steps_unified_diff(
    tmp_path: Path,
    validated_sink: Callable[..., ValidatedSink],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """[WU1-g] `agent-ref diff AGENT --step N`: text as unified diff; binary, modes, links, dirs one line."""
    agent, root, db, _, _ = run_two_steps(tmp_path, validated_sink, monkeypatch)
    capsys.readouterr()
    assert main(["diff", agent.agent_uuid, "--step", "1", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    keep = root / "keep.txt"
    assert f"--- a{keep}\n+++ b{keep}\n@@ -1,2 +1,3 @@\n line one\n line two\n+added\n" in out
    assert f"Binary files a{root / 'bin.dat'} and b{root / 'bin.dat'} differ (256 -> 200 bytes)\n" in out
    assert f"diff {root / 'run.sh'}\nold mode 0644\nnew mode 0755\n" in out
    assert f"diff {root / 'link'}\nsymbolic link to keep.txt -> symbolic link to /etc/passwd\n" in out
    assert f"diff {root / 'gone'}\ndirectory mode {_dir_mode()} -> absent\n" in out
    assert "+++ /dev/null" in out
    assert "-to be deleted\n" in out
    assert f"--- /dev/null\n+++ b{root / 'new' / 'deep' / 'file.txt'}\n@@ -0,0 +1 @@\n+made in step 1\n" in out
    assert "theirs.txt" not in out  # outside the workspace, reached only through a link
    assert main(["diff", agent.agent_uuid, "--step", "2", "--db", str(db)]) == 0
    assert "+rewritten by a subprocess\n" in capsys.readouterr().out
    assert main(["diff", agent.agent_uuid, "--step", "3", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "no recorded file change at step 3 (steps recorded: 1, 2)" in err
    assert err.count("\n") == 1


def _dir_mode() -> str:
    return f"{0o777 & ~_umask():04o}"


def test_spec_WU1_h_rewind_restores_the_workspace(
    tmp_path: Path,
    validated_sink: Callable[..., ValidatedSink],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """[WU1-h] `agent-ref rewind --to-step 0` takes the workspace back with the history; --help says so."""
    agent, root, db, trees, _ = run_two_steps(tmp_path, validated_sink, monkeypatch)
    assert main(["rewind", agent.agent_uuid, "--to-step", "0", "--db", str(db)]) == 0
    assert tree(root) == trees[0]
    assert "file steps undone: 1, 2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["rewind", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Files are not reverted" not in text
    assert "files the agent changed after that point" in text
