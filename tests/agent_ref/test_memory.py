"""The memory tool (issue 20 §4, spec/agent-ref.md §18): commands, hostile paths, bounds.

Each refusal is checked for its message (which path, what rule) and for its effect:
nothing changes inside the root, and nothing at all appears outside it.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from agent_ref import Agent, ScriptedModel
from agent_ref.errors import ConfigError
from agent_ref.tools import memory as mem
from agent_ref.tools.memory import MemoryFiles, MemoryToolError, memory_tool, parse_path
from agent_ref_support import blocks, run

if TYPE_CHECKING:
    from collections.abc import Callable

    from validating import ValidatedSink


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the root, with a secret the tool must never read, change or add to."""
    place = tmp_path / "outside"
    place.mkdir()
    (place / "secret.txt").write_text("top secret\n")
    return place


@pytest.fixture
def files(tmp_path: Path) -> MemoryFiles:
    return MemoryFiles(tmp_path / "root")


def snapshot(place: Path) -> dict[str, bytes | None]:
    """Every entry below ``place`` and its bytes (None for a directory or link), without following links."""
    found: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(place):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            rel = str(full.relative_to(place))
            found[rel] = full.read_bytes() if full.is_file() and not full.is_symlink() else None
    return found


def refused(files: MemoryFiles, match: str, **arguments: Any) -> str:
    with pytest.raises(MemoryToolError, match=match) as caught:
        files(**arguments)
    return str(caught.value)


# ---------------------------------------------------------------------- the commands


def test_spec_18_1_create_view_edit_insert_rename_delete(files: MemoryFiles) -> None:
    """[R18.1-a] The six commands, with the shapes of seed 001 §1.6 / Anthropic's memory tool."""
    assert files(command="view", path="/memories") == "/memories is empty."
    assert files(command="create", path="/memories/work/notes.md", file_text="# Notes\n- a\n") == (
        "Created /memories/work/notes.md (12 bytes)."
    )
    listing = files(command="view", path="/memories/")
    assert "-\t/memories/work/" in listing
    assert "12\t/memories/work/notes.md" in listing
    files(command="str_replace", path="/memories/work/notes.md", old_str="- a\n", new_str="- b\n")
    files(command="insert", path="/memories/work/notes.md", insert_line=0, insert_text="top")
    files(command="insert", path="/memories/work/notes.md", insert_line=3, new_str="end\n")  # the seed's field name
    assert files(command="view", path="/memories/work/notes.md") == (
        "/memories/work/notes.md, lines 1 to 4 of 4:\n     1\ttop\n     2\t# Notes\n     3\t- b\n     4\tend"
    )
    assert files(command="view", path="/memories/work/notes.md", view_range=[2, 3]).splitlines()[1:] == [
        "     2\t# Notes",
        "     3\t- b",
    ]
    assert files(command="view", path="/memories/work/notes.md", view_range=[4, -1]).endswith("     4\tend")
    files(command="rename", old_path="/memories/work", new_path="/memories/archive/2026")
    assert (Path(files.root) / "archive" / "2026" / "notes.md").read_text() == "top\n# Notes\n- b\nend\n"
    assert files(command="delete", path="/memories/archive") == "Deleted /memories/archive and everything in it."
    assert os.listdir(files.root) == []


def test_spec_18_1_insert_after_a_last_line_without_newline(files: MemoryFiles) -> None:
    """[R18.1-a] Inserting after a last line that has no newline keeps both lines whole."""
    files(command="create", path="/memories/a.txt", file_text="one")
    files(command="insert", path="/memories/a.txt", insert_line=1, insert_text="two")
    assert (Path(files.root) / "a.txt").read_text() == "one\ntwo\n"


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        ({"command": "fly", "path": "/memories"}, "command 'fly': the memory tool's commands are view, create"),
        ({"path": "/memories"}, "no command"),
        ({"command": ["view"], "path": "/memories"}, r"command '\['view'\]': the memory tool's commands"),
        ({"command": "create", "path": "/memories/b", "file_text": "\ud800"}, "file_text is not valid Unicode"),
        ({"command": "view", "path": "/memories/d", "view_range": [1, 2]}, "d: is a directory; view_range"),
        ({"command": "create", "path": "/memories/a"}, "create: missing file_text"),
        ({"command": "view", "path": "/memories", "file_text": "x"}, "view: does not take file_text"),
        ({"command": "rename", "old_path": "/memories/a"}, "rename: missing new_path"),
        ({"command": "create", "path": "/memories/a", "file_text": 5}, "file_text must be a string, got int"),
        ({"command": "view", "path": 7}, "path must be a string, got int"),
        ({"command": "insert", "path": "/memories/a", "insert_line": "1", "insert_text": "x"}, "must be an integer"),
        ({"command": "view", "path": "/memories/a", "view_range": [1]}, "view_range must be two integers"),
        ({"command": "view", "path": "/memories", "view_range": [1, 2]}, "is a directory; view_range"),
        ({"command": "create", "path": "/memories", "file_text": ""}, "is the memory directory itself"),
        ({"command": "delete", "path": "/memories/"}, "is the memory directory itself"),
        ({"command": "rename", "old_path": "/memories", "new_path": "/memories/x"}, "cannot be renamed"),
    ],
)
def test_spec_18_3_bad_arguments_are_clear_refusals(files: MemoryFiles, arguments: dict[str, Any], match: str) -> None:
    """[R18.3-a] A wrong command or argument is a refusal naming it; nothing the model sent is dropped."""
    files(command="create", path="/memories/a", file_text="x\n")
    (Path(files.root) / "d").mkdir()
    refused(files, match, **arguments)
    assert snapshot(Path(files.root)) == {"a": b"x\n", "d": None}


def test_spec_18_3_a_file_system_error_is_a_result_and_leaves_no_temporary_file(
    files: MemoryFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    """[R18.3-a] An OSError (here a full disk at the atomic replace) is a refusal naming the command and path."""
    files(command="create", path="/memories/a", file_text="x\n")

    def full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)  # the module calls os.replace
    refused(files, "^insert /memories/a: No space left on device$", command="insert", path="/memories/a",
            insert_line=0, insert_text="y")  # fmt: skip
    assert snapshot(Path(files.root)) == {"a": b"x\n"}  # the file as it was, the temporary file gone


def test_spec_18_3_edits_that_cannot_apply_change_nothing(files: MemoryFiles) -> None:
    """[R18.3-a] Ambiguous or missing old_str, a line out of range, an existing target: refused, file unchanged."""
    files(command="create", path="/memories/n.md", file_text="x\ny\nx\n")
    refused(files, r"old_str occurs 2 times \(lines 1, 3\); make it unique", command="str_replace",
            path="/memories/n.md", old_str="x", new_str="z")  # fmt: skip
    refused(files, "old_str does not occur", command="str_replace", path="/memories/n.md", old_str="q", new_str="z")
    refused(files, "old_str is empty", command="str_replace", path="/memories/n.md", old_str="", new_str="z")
    refused(files, r"insert_line 4 is out of range; the file has 3 lines \(0 to 3\)", command="insert",
            path="/memories/n.md", insert_line=4, insert_text="z")  # fmt: skip
    refused(files, "insert_line -1 is out of range", command="insert", path="/memories/n.md", insert_line=-1,
            insert_text="z")  # fmt: skip
    refused(files, "insert_text and new_str differ", command="insert", path="/memories/n.md", insert_line=0,
            insert_text="a", new_str="b")  # fmt: skip
    refused(files, "already exists", command="create", path="/memories/n.md", file_text="new")
    refused(files, r"view_range \[3, 2\] is out of range", command="view", path="/memories/n.md", view_range=[3, 2])
    refused(files, "no such file", command="view", path="/memories/none.md")
    refused(files, "no such directory", command="view", path="/memories/none/a.md")
    refused(files, "no such file or directory", command="delete", path="/memories/none.md")
    files(command="create", path="/memories/m.md", file_text="m")
    refused(files, r"already exists \(a file\); delete it first", command="rename", old_path="/memories/m.md",
            new_path="/memories/n.md")  # fmt: skip
    files(command="create", path="/memories/d/f", file_text="f")
    refused(files, "a directory cannot move into itself", command="rename", old_path="/memories/d",
            new_path="/memories/d/e")  # fmt: skip
    refused(files, "are the same", command="rename", old_path="/memories/d", new_path="/memories/d/")
    refused(files, "is not a directory", command="create", path="/memories/n.md/x", file_text="x")
    assert snapshot(Path(files.root)) == {"n.md": b"x\ny\nx\n", "m.md": b"m", "d": None, "d/f": b"f"}


# ---------------------------------------------------------------------- hostile paths


HOSTILE: list[tuple[str, str]] = [
    ("/memories/../outside/secret.txt", "cannot use '.' or '..'"),
    ("/memories/a/../../outside", "cannot use '.' or '..'"),
    ("/memories/..", "cannot use '.' or '..'"),
    ("/memories/./a", "cannot use '.' or '..'"),
    ("/etc/passwd", "outside the memory directory"),
    ("/memoriesX/a", "outside the memory directory"),
    ("memories/a", "outside the memory directory"),
    ("a.md", "outside the memory directory"),
    ("", "outside the memory directory"),
    (".", "outside the memory directory"),
    ("//memories/a", "outside the memory directory"),
    ("/memories//a", r"empty name \('//'\)"),
    ("/memories/a//", r"empty name \('//'\)"),
    ("/memories//", r"empty name \('//'\)"),  # was taken for the root: found by the property test
    ("/memories/a\x00b", "NUL byte at character 11"),
    ("/memories/\x00", "NUL byte"),
    ("/memories/a\nb", "control character U\\+000A"),
    ("/memories/a\x7fb", "control character U\\+007F"),
    ("/memories\\..\\outside", "backslash"),
    ("\\memories\\a", "backslash"),
    ("C:\\memories\\a", "backslash"),
    ("/memories/a\\..\\..\\x", "backslash"),
    ("/memories/" + "a" * 256, "name of 256 bytes; the limit is 255"),
    ("/memories/" + "é" * 128, "name of 256 bytes; the limit is 255"),
    ("/memories" + "/a" * 17, "17 names deep; the limit is 16"),
    ("/memories/" + "a/" * 600, "characters long; the limit is 1,024"),
    ("/memories/\ud800", "lone surrogate"),
]


@pytest.mark.parametrize(("path", "match"), HOSTILE)
@pytest.mark.parametrize("command", ["view", "create", "str_replace", "insert", "delete", "rename_from", "rename_to"])
def test_spec_18_2_hostile_paths_are_refused_by_every_command(
    files: MemoryFiles, outside: Path, command: str, path: str, match: str
) -> None:
    """[R18.2-a] `..`, absolute paths, NUL, control characters, Windows separators, long names: refused."""
    files(command="create", path="/memories/a", file_text="a\n")
    table: dict[str, dict[str, Any]] = {
        "view": {"path": path},
        "create": {"path": path, "file_text": "pwned"},
        "str_replace": {"path": path, "old_str": "top", "new_str": "pwned"},
        "insert": {"path": path, "insert_line": 0, "insert_text": "pwned"},
        "delete": {"path": path},
        "rename_from": {"old_path": path, "new_path": "/memories/b"},
        "rename_to": {"old_path": "/memories/a", "new_path": path},
    }
    arguments = table[command]
    before_root, before_outside = snapshot(Path(files.root)), snapshot(outside)
    message = refused(files, match, command=command.split("_")[0] if "rename" in command else command, **arguments)
    assert len(message) < 400  # a long path is shown shortened, never whole
    assert snapshot(Path(files.root)) == before_root
    assert snapshot(outside) == before_outside


def test_spec_18_2_a_long_path_is_shown_shortened() -> None:
    """[R18.2-a] The message names the path, cut to a readable length, control characters escaped."""
    with pytest.raises(MemoryToolError) as caught:
        parse_path("/memories/" + "x" * 5000)
    assert str(caught.value).startswith("path '/memories/xxxx")
    assert "…" in str(caught.value)
    assert len(str(caught.value)) < 250
    with pytest.raises(MemoryToolError, match=r"'/memories/a\\nb'"):
        parse_path("/memories/a\nb")


def test_spec_18_2_unicode_names_and_one_trailing_slash_are_fine(files: MemoryFiles) -> None:
    """[R18.2-a] Non-ASCII names up to 255 bytes work; '/memories/x/' is the directory x."""
    name = "é" * 127  # 254 bytes
    files(command="create", path=f"/memories/d/{name}", file_text="ok")
    assert f"/memories/d/{name}" in files(command="view", path="/memories/d/")
    assert parse_path("/memories/a/") == ("a",)
    assert parse_path("/memories" + "/a" * 16) == ("a",) * 16


def link_out(files: MemoryFiles, outside: Path) -> None:
    """Links inside the root pointing out: to a directory, to a file, and a dangling one."""
    root = Path(files.root)
    (root / "to_dir").symlink_to(outside)
    (root / "to_file").symlink_to(outside / "secret.txt")
    (root / "dangling").symlink_to(outside / "not-yet.txt")
    (root / "real").mkdir()
    (root / "real" / "up").symlink_to("../..")


@pytest.mark.parametrize(
    ("arguments", "match"),
    [
        ({"command": "view", "path": "/memories/to_file"}, "to_file: is a symbolic link"),
        ({"command": "view", "path": "/memories/to_dir"}, "to_dir: is a symbolic link"),
        ({"command": "view", "path": "/memories/to_dir/secret.txt"}, "to_dir: is a symbolic link"),
        ({"command": "view", "path": "/memories/real/up/outside/secret.txt"}, "real/up: is a symbolic link"),
        ({"command": "create", "path": "/memories/to_dir/new.txt", "file_text": "x"}, "to_dir: is a symbolic"),
        ({"command": "create", "path": "/memories/dangling", "file_text": "x"}, "already exists"),
        ({"command": "create", "path": "/memories/to_file", "file_text": "x"}, "already exists"),
        ({"command": "str_replace", "path": "/memories/to_file", "old_str": "top", "new_str": "x"}, "symbolic"),
        ({"command": "insert", "path": "/memories/to_file", "insert_line": 0, "insert_text": "x"}, "symbolic"),
        ({"command": "delete", "path": "/memories/to_dir/secret.txt"}, "to_dir: is a symbolic link"),
        ({"command": "rename", "old_path": "/memories/to_dir/secret.txt", "new_path": "/memories/s"}, "symbolic"),
        ({"command": "rename", "old_path": "/memories/real", "new_path": "/memories/to_dir/x"}, "symbolic"),
    ],
)
def test_spec_18_2_links_inside_the_root_are_never_followed(
    files: MemoryFiles, outside: Path, arguments: dict[str, Any], match: str
) -> None:
    """[R18.2-b] A symbolic link in the root pointing out is refused wherever it is on the path."""
    link_out(files, outside)
    before = snapshot(outside)
    refused(files, match, **arguments)
    assert snapshot(outside) == before


def test_spec_18_2_deleting_a_link_removes_the_link_not_its_target(files: MemoryFiles, outside: Path) -> None:
    """[R18.2-b] delete acts on the link itself (unlinkat); a directory's delete never follows one inside it."""
    link_out(files, outside)
    before = snapshot(outside)
    files(command="delete", path="/memories/to_dir")
    files(command="delete", path="/memories/real")  # holds a link to ../..
    assert snapshot(outside) == before
    listing = files(command="view", path="/memories")
    assert "/memories/to_file (symbolic link, not followed)" in listing
    assert "real" not in listing


def test_spec_18_2_a_fifo_is_refused_without_blocking(files: MemoryFiles) -> None:
    """[R18.2-b] A special file (a FIFO nobody writes to) is refused, not opened and waited on."""
    os.mkfifo(Path(files.root) / "pipe")
    refused(files, "pipe: is a special file, not a file", command="view", path="/memories/pipe")


def test_spec_18_2_a_symlink_swapped_in_during_calls_never_leads_outside(files: MemoryFiles, outside: Path) -> None:
    """[R18.2-b] The race: another thread keeps swapping a directory of the root for a link out.

    Every call either works inside the root or is refused; nothing appears outside it and
    the secret there is never read. Bounded: 300 rounds, no timing.
    """
    root = Path(files.root)
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            for make in ("dir", "link"):
                target = root / "d"
                try:
                    if target.is_symlink() or target.is_file():
                        target.unlink()
                    elif target.is_dir():
                        for child in target.iterdir():
                            child.unlink()
                        target.rmdir()
                    if make == "dir":
                        target.mkdir()
                    else:
                        target.symlink_to(outside)
                except OSError:
                    pass

    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    seen: list[str] = []
    try:
        for i in range(300):
            for arguments in (
                {"command": "create", "path": f"/memories/d/f{i}", "file_text": "pwned"},
                {"command": "view", "path": "/memories/d/secret.txt"},
                {"command": "insert", "path": "/memories/d/secret.txt", "insert_line": 0, "insert_text": "pwned"},
                {"command": "delete", "path": "/memories/d/secret.txt"},
            ):
                try:
                    seen.append(files(**arguments))
                except MemoryToolError as exc:
                    seen.append(str(exc))
    finally:
        stop.set()
        swapper.join()
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert not any("top secret" in text for text in seen)


def test_spec_18_2_a_root_that_is_a_file_is_a_config_error(tmp_path: Path) -> None:
    """[R18.2-c] The caller's root must be a directory; one is made when missing."""
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is not a directory"):
        memory_tool(tmp_path / "file")
    made = memory_tool(tmp_path / "a" / "b")
    assert made.name == "memory"
    assert (tmp_path / "a" / "b").is_dir()


# ---------------------------------------------------------------------- bounds


def test_spec_18_4_file_size_is_bounded(files: MemoryFiles) -> None:
    """[R18.4-a] A file over MAX_FILE_BYTES cannot be made, grown, or read."""
    big = "x" * (mem.MAX_FILE_BYTES + 1)
    refused(files, r"file_text is 100,001 bytes; the limit is 100,000", command="create", path="/memories/a",
            file_text=big)  # fmt: skip
    files(command="create", path="/memories/a", file_text="x" * mem.MAX_FILE_BYTES)
    refused(files, "would be 100,002 bytes", command="insert", path="/memories/a", insert_line=0, insert_text="y")
    (Path(files.root) / "huge").write_bytes(b"y" * (mem.MAX_FILE_BYTES + 10))  # put there by someone else
    refused(files, "huge: is 100,010 bytes; the limit is 100,000", command="view", path="/memories/huge")
    (Path(files.root) / "binary").write_bytes(b"ok\xff")
    refused(files, r"binary: is not UTF-8 text \(byte 2\)", command="view", path="/memories/binary")


def test_spec_18_4_entries_and_total_bytes_are_bounded(files: MemoryFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    """[R18.4-a] The number of files and directories, and their total bytes, are bounded."""
    monkeypatch.setattr(mem, "MAX_ENTRIES", 3)
    monkeypatch.setattr(mem, "MAX_TOTAL_BYTES", 10)
    files(command="create", path="/memories/a", file_text="12345")
    files(command="create", path="/memories/b", file_text="1234")
    refused(files, "would hold 11 bytes; the limit is 10", command="create", path="/memories/c", file_text="12")
    refused(files, "would hold 11 bytes", command="str_replace", path="/memories/a", old_str="1", new_str="xyz")
    files(command="create", path="/memories/c", file_text="1")
    refused(files, r"full \(3 files and directories, the limit\)", command="create", path="/memories/d",
            file_text="")  # fmt: skip
    refused(files, "full", command="create", path="/memories/e/f", file_text="")  # the directory counts too
    files(command="delete", path="/memories/c")
    refused(files, "full", command="create", path="/memories/x/y/z", file_text="x")
    assert sorted(os.listdir(files.root)) == ["a", "b"]  # a refused create made no directory
    refused(files, "full", command="rename", old_path="/memories/a", new_path="/memories/x/y/a")
    assert sorted(os.listdir(files.root)) == ["a", "b"]  # nor a refused rename
    files(command="create", path="/memories/d", file_text="")
    assert sorted(os.listdir(files.root)) == ["a", "b", "d"]


def test_spec_18_4_view_output_is_bounded_and_says_so(files: MemoryFiles) -> None:
    """[R18.4-a] A view longer than MAX_VIEW_CHARS is cut at a line, with a note on how to see the rest."""
    text = "".join(f"line {i:05} " + "w" * 60 + "\n" for i in range(1200))
    files(command="create", path="/memories/long.md", file_text=text)
    shown = files(command="view", path="/memories/long.md")
    assert len(shown) <= mem.MAX_VIEW_CHARS
    assert shown.splitlines()[-1].startswith("[output cut at 20,000 characters: ")
    assert "pass view_range to see the rest" in shown
    tail = files(command="view", path="/memories/long.md", view_range=[1199, -1])
    assert "line 01199" in tail
    for i in range(120):
        files(command="create", path=f"/memories/dir/{'n' * 200}{i:03}", file_text="")
    listing = files(command="view", path="/memories")
    assert len(listing) <= mem.MAX_VIEW_CHARS
    assert listing.splitlines()[-1].endswith("rows; view a subdirectory to see less]")


def test_spec_18_4_a_huge_directory_is_listed_in_part(files: MemoryFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    """[R18.4-a] A directory with more entries than MAX_ENTRIES (made by someone else) is listed in part."""
    monkeypatch.setattr(mem, "MAX_ENTRIES", 5)
    for i in range(9):
        (Path(files.root) / f"f{i}").write_text("x")
    listing = files(command="view", path="/memories")
    assert listing.splitlines()[-1] == "(more than 5 entries; the rest are not listed)"
    refused(files, "full", command="create", path="/memories/new", file_text="")


# ---------------------------------------------------------------------- in the agent


def test_spec_18_3_errors_are_tool_results_not_crashes(
    tmp_path: Path, outside: Path, validated_sink: Callable[..., ValidatedSink]
) -> None:
    """[R18.3-a] Through the agent, a refused call is an is_error result and the run goes on."""
    tool = memory_tool(tmp_path / "root")
    assert tool.fn is not None
    sink = validated_sink()
    agent = Agent(ScriptedModel(), tools=[tool])
    # The scripted model views /memories first; seed a link out there to show it is listed, not followed.
    (tmp_path / "root" / "out").symlink_to(outside)
    result = run(agent.run("Remember that the launch code is 1234.", sink.append))
    assert result.stop_reason == "end_turn"
    results = [b for b in blocks(sink) if b["type"] == "tool_result"]
    assert "/memories/out (symbolic link, not followed)" in results[0]["content"]
    assert (tmp_path / "root" / "notes.md").read_text() == "# Notes\n- the launch code is 1234\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
