"""Workspace confinement: no path string, link, hard link or special file reaches outside the root (spec §WS1)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_ref.tools.workspace import Workspace, WorkspaceError, files, search


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with links planted to a sibling directory ``outside`` holding a secret."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n")
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("print('hi')\n")
    (root / "up").symlink_to(outside)
    (root / "src" / "up2").symlink_to("../../outside")
    (root / "secret_link.txt").symlink_to(outside / "secret.txt")
    (root / "null").symlink_to("/dev/null")
    return root, outside


def test_spec_WS1_a_paths_outside_are_refused(tree: tuple[Path, Path]) -> None:
    """[WS1-a] `..`, absolute paths outside, NULs and overlong names are refused with the path named."""
    root, outside = tree
    ws = Workspace.at(root)
    for path, why in [
        ("../outside/secret.txt", "'..' is not allowed"),
        ("src/../../outside/secret.txt", "'..' is not allowed"),
        (str(outside / "secret.txt"), "outside the workspace"),
        (str(root) + "x/a.py", "outside the workspace"),
        ("src/a\x00.py", "NUL"),
        ("a" * 300, "longer than 255 bytes"),
        ("/" + "a/" * 3000, "at most 4096 characters"),
    ]:
        with pytest.raises(WorkspaceError, match=why):
            files.read(ws, path)
    assert files.read(ws, str(root / "src" / "a.py")) == "1\tprint('hi')"
    assert files.read(ws, "./src//a.py") == "1\tprint('hi')"


def test_spec_WS1_b_no_link_is_followed_on_the_way_or_at_the_end(tree: tuple[Path, Path]) -> None:
    """[WS1-b] A link as a directory on the way or as the file itself is refused, for reads and writes."""
    root, outside = tree
    ws = Workspace.at(root)
    with pytest.raises(WorkspaceError, match="up: is a symbolic link"):
        files.read(ws, "up/secret.txt")
    with pytest.raises(WorkspaceError, match="up2: is a symbolic link"):
        files.read(ws, "src/up2/secret.txt")
    with pytest.raises(WorkspaceError, match="is a symbolic link"):
        files.read(ws, "secret_link.txt")
    with pytest.raises(WorkspaceError, match="up: is a symbolic link"):
        files.write(ws, "up/new.txt", "x")
    with pytest.raises(WorkspaceError, match="is a symbolic link"):
        files.write(ws, "secret_link.txt", "overwritten")
    with pytest.raises(WorkspaceError, match="is a symbolic link"):
        files.edit(ws, "secret_link.txt", "SECRET", "gone")
    assert (outside / "secret.txt").read_text() == "SECRET\n"
    assert not (outside / "new.txt").exists()
    assert os.path.islink(root / "secret_link.txt")  # the link itself is left alone too


def test_spec_WS1_c_fifo_socket_and_device_are_refused_before_open(tree: tuple[Path, Path]) -> None:
    """[WS1-c] A FIFO (an open would block), a socket and a /dev/null link are refused; nothing hangs."""
    import socket

    root, _ = tree
    os.mkfifo(root / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock"))
    ws = Workspace.at(root)
    try:
        with pytest.raises(WorkspaceError, match="pipe: is a FIFO"):
            files.read(ws, "pipe")
        with pytest.raises(WorkspaceError, match="pipe: is a FIFO"):
            files.write(ws, "pipe", "x")
        with pytest.raises(WorkspaceError, match="sock: is a socket"):
            files.read(ws, "sock")
        with pytest.raises(WorkspaceError, match="null: is a symbolic link"):
            files.read(ws, "null")
        with pytest.raises(WorkspaceError, match="src: is a directory"):
            files.read(ws, "src")
        # the search tools skip them rather than opening them
        assert search.grep(ws, search.GrepQuery("x")) == "No files found"
    finally:
        sock.close()


def test_spec_WS1_d_a_hard_linked_file_is_not_written(tree: tuple[Path, Path]) -> None:
    """[WS1-d] A regular file with another hard link (here to a file outside) is refused by Write and Edit."""
    root, outside = tree
    os.link(outside / "secret.txt", root / "hard.txt")
    ws = Workspace.at(root)
    with pytest.raises(WorkspaceError, match="has 2 hard links"):
        files.write(ws, "hard.txt", "changed")
    with pytest.raises(WorkspaceError, match="has 2 hard links"):
        files.edit(ws, "hard.txt", "SECRET", "changed")
    assert (outside / "secret.txt").read_text() == "SECRET\n"
    assert files.read(ws, "hard.txt") == "1\tSECRET"  # reading it changes nothing outside


def test_spec_WS1_d_a_write_replaces_the_file_whole(tmp_path: Path) -> None:
    """[WS1-d] A write goes to a temporary file renamed over the name: no temporary is left, the mode is kept."""
    target = tmp_path / "run.sh"
    target.write_text("old\n")
    target.chmod(0o755)
    ws = Workspace.at(tmp_path)
    assert files.write(ws, "run.sh", "new\n") == f"The file {target} has been updated successfully."
    assert target.read_text() == "new\n"
    assert target.stat().st_mode & 0o777 == 0o755
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.sh"]


_NAMES = st.sampled_from(["..", ".", "", "up", "src", "up2", "secret.txt", "a.py", "null", "x" * 256, "a\x00b"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_NAMES | st.text(min_size=1, max_size=8), max_size=8), absolute=st.booleans())
def test_spec_WS1_a_no_path_string_reaches_outside(tree: tuple[Path, Path], parts: list[str], absolute: bool) -> None:
    """[WS1-a] [WS1-b] Whatever path the model writes, a read never returns the secret and a write lands inside."""
    root, outside = tree
    path = "/".join(parts)
    if absolute:
        path = str(root) + "/" + path
    ws = Workspace.at(root)
    with contextlib.suppress(WorkspaceError):
        assert "SECRET" not in files.read(ws, path)
    try:
        shown = files.write(ws, path + "/w.txt" if path else "w.txt", "W")
    except WorkspaceError:
        pass
    else:
        written = Path(shown.split(": ", 1)[-1].removeprefix("The file ").split(" has been")[0])
        assert os.path.realpath(written).startswith(str(root.resolve()) + "/")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "SECRET\n"


def test_spec_WS1_c_a_device_node_in_the_tree_is_never_opened(tmp_path: Path) -> None:
    """[WS1-c] A character device made in the workspace (as root can) is refused by its stat, before any open."""
    import stat

    try:
        os.mknod(tmp_path / "zero", stat.S_IFCHR | 0o600, os.makedev(1, 5))
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD")
    ws = Workspace.at(tmp_path)
    with pytest.raises(WorkspaceError, match="zero: is a device"):
        files.read(ws, "zero")
    with pytest.raises(WorkspaceError, match="zero: is a device"):
        files.write(ws, "zero", "x")
    assert search.glob(ws, "*") == "No files found"


def test_spec_WS2_a_a_huge_file_is_paged_by_offset_in_bounded_memory(tmp_path: Path) -> None:
    """[WS2-a] A file over 10 MB is read line by line: an offset past the first 10 MB reads its lines too."""
    line = "x" * 99 + "\n"
    (tmp_path / "big.log").write_text(line * 110_000 + "the end\n")  # 11 MB
    ws = Workspace.at(tmp_path)
    assert files.read(ws, "big.log", offset=110_000, limit=5).splitlines() == [
        "110000\t" + "x" * 99,
        "110001\tthe end",
    ]
    assert files.read(ws, "big.log", offset=5, limit=1).splitlines() == [
        "5\t" + "x" * 99,
        "[agent-ref: lines 5-5 of 110001; pass offset=6 for more]",
    ]
