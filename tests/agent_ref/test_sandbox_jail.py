"""The Bash sandbox holds: no write outside the workspace, no network, a fresh /tmp, a clean environment, limits (spec §SB2, §SB3)."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import uuid
from pathlib import Path

import pytest

from agent_ref.tools.sandbox import SandboxLimits, Shell
from sandbox_support import need_bwrap, processes_with, run


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    need_bwrap()
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_sb2_a_nothing_outside_the_workspace_can_be_written(workspace: Path, tmp_path: Path) -> None:
    """/etc, the workspace's parent, / and a host directory beside it are read-only or absent [SB2-a]."""
    beside = tmp_path / "beside"
    beside.mkdir()
    marker = uuid.uuid4().hex
    done = run(
        Shell(workspace),
        f"touch /etc/{marker}; echo x > ~/../{marker}; echo x > /{marker}; echo x > {beside}/{marker}; "
        f"mkdir -p /usr/{marker}; echo inside > mine.txt; cat mine.txt",
    )
    assert f"touch: cannot touch '/etc/{marker}': Read-only file system" in done.output
    assert f"/{marker}: Read-only file system" in done.output
    assert done.output.rstrip().endswith("inside")
    for path in (Path("/etc") / marker, tmp_path / marker, Path("/") / marker, beside / marker, Path("/usr") / marker):
        assert not path.exists(), path
    assert (workspace / "mine.txt").read_text() == "inside\n"


def test_sb2_b_a_loopback_server_of_the_host_cannot_be_reached(workspace: Path) -> None:
    """The sandbox has its own network namespace: a server the test listens on is refused [SB2-b]."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        script = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('CONNECTED')"
        done = run(Shell(workspace), f'python3 -c "{script}"; exec 3<>/dev/tcp/127.0.0.1/{port} && echo TCP-OPEN')
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody came
    finally:
        server.close()
    assert "CONNECTED" not in done.output
    assert "TCP-OPEN" not in done.output
    assert "Connection refused" in done.output or "Network is unreachable" in done.output
    # the control: the same server is reachable from the host
    with socket.socket() as probe, socket.socket() as again:
        again.bind(("127.0.0.1", 0))
        again.listen(1)
        probe.connect(again.getsockname())


def test_sb2_b_tmp_is_fresh_and_proc_shows_only_the_sandbox(workspace: Path) -> None:
    """A file planted in the host's /tmp is not visible; /proc holds only the sandbox's processes [SB2-b]."""
    fd, planted = tempfile.mkstemp(prefix="agent-ref-planted-", dir="/tmp")
    os.close(fd)
    try:
        name = Path(planted).name
        done = run(Shell(workspace), f"ls /tmp/{name} 2>&1; ls /proc | grep -c '^[0-9]'; ls -A /tmp")
    finally:
        os.unlink(planted)
    lines = done.output.splitlines()
    assert "No such file or directory" in lines[0]
    assert int(lines[1]) < 10  # the host has many more processes
    assert len(processes_with("")) > int(lines[1])
    # nothing of the host's /tmp but the way down to the workspace, when it is below /tmp
    host_tmp = Path(os.path.realpath("/tmp"))
    way = (
        {workspace.resolve().relative_to(host_tmp).parts[0]} if workspace.resolve().is_relative_to(host_tmp) else set()
    )
    assert set(lines[2:-1]) <= way
    assert len(os.listdir("/tmp")) > len(way)  # the host's /tmp did have more (the planted file at least)


def test_sb2_d_the_environment_is_scrubbed(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A secret in the parent's environment is not seen; HOME is the workspace [SB2-d]."""
    secret = "sk-test-" + uuid.uuid4().hex
    monkeypatch.setenv("AGENT_REF_SANDBOX_SECRET", secret)
    for shell in (Shell(workspace), Shell(workspace, unsandboxed=True)):
        done = run(shell, "env; echo HOME=$HOME")
        assert secret not in done.output
        assert "AGENT_REF_SANDBOX_SECRET" not in done.output
        assert f"HOME={workspace.resolve()}" in done.output
        assert "LANG=C.UTF-8" in done.output


@pytest.mark.parametrize("unsandboxed", [False, True], ids=["sandboxed", "unsandboxed"])
def test_sb3_a_a_timeout_kills_the_command_and_its_children(workspace: Path, unsandboxed: bool) -> None:
    """At the timeout the whole tree is killed: no `sleep` of it is left in /proc [SB3-a]."""
    marker = f"{uuid.uuid4().int % 1000}.{uuid.uuid4().int % 100000}"
    done = run(
        Shell(workspace, unsandboxed=unsandboxed),
        f"echo begun; (sleep 300{marker} &); sleep 301{marker}; echo never",
        timeout_ms=3000,
    )
    assert done.timed_out_ms == 3000
    assert "begun" in done.output
    assert "never" not in done.output
    assert "[timed out after 3000 ms" in done.text()
    assert processes_with(f"sleep 300{marker}") == []
    assert processes_with(f"sleep 301{marker}") == []


@pytest.mark.parametrize("unsandboxed", [False, True], ids=["sandboxed", "unsandboxed"])
def test_sb3_b_what_a_command_leaves_running_ends_with_it(workspace: Path, unsandboxed: bool) -> None:
    """A `sleep &` left behind does not hold the call up, nor outlive it [SB3-b]."""
    marker = f"{uuid.uuid4().int % 100000}"
    done = run(Shell(workspace, unsandboxed=unsandboxed), f"sleep 310.{marker} & echo started", timeout_ms=60_000)
    assert done.timed_out_ms is None
    assert done.exit_code == 0
    assert processes_with(f"sleep 310.{marker}") == []


def test_sb2_c_forks_and_memory_are_bounded(workspace: Path) -> None:
    """A process may not take more than its memory; forks stop at the process bound; a fork bomb ends [SB2-c]."""
    shell = Shell(workspace, limits=SandboxLimits(memory_bytes=256 * 1024**2, max_processes=48))
    hog = run(shell, "python3 -c 'x = bytearray(512 * 1024**2); print(\"ALLOCATED\")'")
    assert "MemoryError" in hog.output
    assert "ALLOCATED" not in hog.output
    small = run(shell, "python3 -c 'x = bytearray(64 * 1024**2); print(\"ALLOCATED\")'")
    assert "ALLOCATED" in small.output
    forks = (
        "import os, time\nn = 0\nwhile n < 1000:\n    try:\n        pid = os.fork()\n    except OSError as exc:\n"
        "        print('BOUNDED', n, exc.errno); break\n    if pid == 0:\n        time.sleep(60); os._exit(0)\n"
        "    n += 1\nelse:\n    print('UNBOUNDED')\n"
    )
    (workspace / "forks.py").write_text(forks)
    counted = run(shell, "python3 forks.py")
    assert "UNBOUNDED" not in counted.output
    word, count, errno = counted.output.split()[:3]
    assert word == "BOUNDED"
    assert int(count) < 48
    assert errno == "11"  # EAGAIN
    name = f"bomb{uuid.uuid4().hex[:8]}"
    bomb = run(shell, f"{name}() {{ {name} | {name} & }}; {name}; echo lit", timeout_ms=3000)
    assert bomb.exit_code is not None or bomb.signal is not None
    assert processes_with(name) == []


def test_sb1_d_the_cwd_persists_and_never_leaves_the_workspace(workspace: Path) -> None:
    """`cd` carries over to the next call; a cwd outside the workspace is not kept, and a note says so [SB1-d]."""
    shell = Shell(workspace)
    assert run(shell, "mkdir -p a/b && cd a/b").exit_code == 0
    assert run(shell, "pwd").output.strip() == str(workspace.resolve() / "a" / "b")
    out = run(shell, "cd /usr/bin")
    assert f"cwd /usr/bin is outside the workspace; the shell is back at {workspace.resolve()}" in out.text()
    assert run(shell, "pwd").output.strip() == str(workspace.resolve())
    (workspace / "real").mkdir()
    (workspace / "link").symlink_to(workspace.parent)
    out = run(shell, "cd link")
    assert "outside the workspace" in out.text()
    assert run(shell, "cd real; exit 4").exit_code == 4  # kept whatever way it exits
    assert run(shell, "pwd").output.strip() == str(workspace.resolve() / "real")


def test_sb4_c_exit_codes_and_signals_are_in_the_result(workspace: Path) -> None:
    """`[exit code N]`; a shell killed by a signal says which [SB4-c]."""
    shell = Shell(workspace)
    assert run(shell, "exit 3").text() == "[exit code 3]"
    killed = run(shell, "kill -9 $$")
    assert killed.exit_code == 137
    assert "killed by SIGKILL" in killed.text()
    bare = run(Shell(workspace, unsandboxed=True), "kill -TERM $$")
    assert bare.signal == "SIGTERM"
    assert "[killed by SIGTERM]" in bare.text()


def test_sb3_a_a_cancelled_call_kills_its_command_first(workspace: Path) -> None:
    """An abort (the call's task cancelled) kills the command's tree before the cancellation ends the call [SB3-a]."""
    marker = f"{uuid.uuid4().int % 100000}"
    shell = Shell(workspace)

    async def go() -> None:
        task = asyncio.ensure_future(shell.run(f"touch up; sleep 330.{marker}", 60_000, lambda _: None))
        while not (workspace / "up").exists():
            await asyncio.sleep(0.02)  # waits for the command to be running
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    async def at_once() -> None:  # cancelled while the sandbox is still being started
        for _ in range(5):
            task = asyncio.ensure_future(shell.run(f"sleep 331.{marker}", 60_000, lambda _: None))
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(go())
    asyncio.run(at_once())
    assert processes_with(f"sleep 330.{marker}") == []
    assert processes_with(f"sleep 331.{marker}") == []
