"""No cgroup left behind: a Bash command's cgroup goes however the command ends (spec agent-ref [SB3-c])."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from typing import TYPE_CHECKING

import pytest

from agent_ref.tools.sandbox import SandboxLimits, Shell
from agent_ref.tools.sandbox import jail as jail_module
from sandbox_support import need_bwrap, processes_with, run

if TYPE_CHECKING:
    from pathlib import Path


def _parent() -> Path:
    """The pids cgroup commands' cgroups are made in; skip, saying why, where none can be made."""
    made = jail_module.Confinement(SandboxLimits())
    cgroup = made.cgroup
    made.close()
    if cgroup is None:
        pytest.skip(
            "CGROUP TESTS DID NOT RUN: no writable pids cgroup here (cgroup v1 pids or a v2 tree delegating pids)"
        )
    return cgroup.parent


def _ours(parent: Path, pid: int) -> list[str]:
    return sorted(p.name for p in parent.glob(f"{jail_module.CGROUP_PREFIX}{pid}-*"))


@pytest.fixture(params=["sandboxed", "unsandboxed"])
def shell(request: pytest.FixtureRequest, tmp_path: Path) -> Shell:
    if request.param == "sandboxed":
        need_bwrap()
    root = tmp_path / "ws"
    root.mkdir()
    return Shell(root, unsandboxed=request.param == "unsandboxed")


def test_sb3_c_the_cgroup_goes_when_the_command_ends_times_out_or_is_killed(shell: Shell) -> None:
    """[SB3-c] Counted before and after: an ended command, a timed-out one, a killed background one."""
    parent = _parent()
    before = _ours(parent, os.getpid())
    assert run(shell, "true").exit_code == 0
    assert _ours(parent, os.getpid()) == before
    timed_out = run(shell, "sleep 30 & sleep 30", timeout_ms=300)
    assert timed_out.timed_out_ms == 300
    assert _ours(parent, os.getpid()) == before

    async def killed() -> str:
        key = await shell.start("sleep 30")
        assert len(_ours(parent, os.getpid())) == len(before) + 1  # it is there while the command runs
        return await shell.kill(key)

    assert "killed" in asyncio.run(killed())
    assert _ours(parent, os.getpid()) == before


def test_sb3_c_the_cgroup_goes_when_the_call_is_cancelled(shell: Shell) -> None:
    """[SB3-c] A call cancelled mid-command (an abort) removes its cgroup once it has killed the command."""
    parent = _parent()
    before = _ours(parent, os.getpid())

    async def cancelled() -> None:
        started = asyncio.Event()
        task = asyncio.ensure_future(shell.run("echo started; sleep 30", 60_000, lambda _line: started.set()))
        await started.wait()
        assert len(_ours(parent, os.getpid())) == len(before) + 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled())
    assert _ours(parent, os.getpid()) == before


CHILD = textwrap.dedent(
    """
    import asyncio, pathlib, sys
    from agent_ref.tools.sandbox import Shell

    async def main():
        shell = Shell(pathlib.Path(sys.argv[1]), unsandboxed=sys.argv[2] == "unsandboxed")
        await shell.start("sleep 61.25")
        print("started", flush=True)

    if sys.argv[3] == "asyncio.run":
        asyncio.run(main())  # its end cancels the reader task, which kills and closes
    else:
        asyncio.new_event_loop().run_until_complete(main())  # no loop close: only atexit is left
    """
)


@pytest.mark.parametrize("ending", ["asyncio.run", "loop left open"])
def test_sb3_c_the_cgroups_go_when_the_process_exits(shell: Shell, ending: str) -> None:
    """[SB3-c] A process that exits with a background command running leaves no cgroup (and no sleep)."""
    parent = _parent()
    mode = "unsandboxed" if shell.unsandboxed else "sandboxed"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(shell.root), mode, ending],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out == "started\n"
    assert "cannot remove cgroup" not in err
    assert _ours(parent, child.pid) == []  # its pid is reaped: nothing else makes cgroups under it meanwhile
    assert processes_with("sleep 61.25") == []  # killed before its cgroup could go


def test_sb3_c_a_killed_agents_empty_cgroups_are_swept_by_the_next_command() -> None:
    """[SB3-c] An empty `agent-ref-bash-PID-N` whose PID is dead is removed when a new command makes its cgroup."""
    parent = _parent()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not jail_module._alive(gone.pid)
    left = parent / f"{jail_module.CGROUP_PREFIX}{gone.pid}-1"
    left.mkdir()
    try:
        mine = parent / f"{jail_module.CGROUP_PREFIX}{os.getpid()}-swept-not"
        mine.mkdir()  # a live owner's (ours): never swept
        try:
            made = jail_module.Confinement(SandboxLimits())
            made.close()
            assert not left.exists()
            assert mine.exists()
        finally:
            mine.rmdir()
    finally:
        if left.exists():
            left.rmdir()
