"""The sandbox a ``Bash`` command runs in: bubblewrap's argv, the probe, the limits (spec agent-ref §SB).

Owns: ``SandboxLimits`` (memory, processes), ``sandbox_problem`` (is a working ``bwrap`` on
``PATH``? probed once per binary and cached), ``bwrap_argv`` (the workspace read-write,
``/usr`` and a few ``/etc`` files read-only, nothing else of the host; every namespace
unshared, network included; a fresh ``/tmp``, a minimal ``/proc`` and ``/dev``),
``clean_env`` (the scrubbed environment) and ``Confinement``: the per-command limits put on
the child before it runs bubblewrap (``RLIMIT_AS``, ``RLIMIT_NPROC``, ``RLIMIT_CORE`` by
``resource.setrlimit``, and a ``pids`` cgroup where one is writable), and the kill of
everything the command started.
Does not own: running the command or reading its output (``sandbox/shell.py``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import itertools
import logging
import os
import resource
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = [
    "INSTALL_HINT",
    "Confinement",
    "SandboxLimits",
    "bwrap_argv",
    "clean_env",
    "sandbox_problem",
    "sandbox_status",
]

log = logging.getLogger("agent_ref")

#: How to get bubblewrap, said whenever ``Bash`` is refused for the lack of it (spec [SB1-b]).
INSTALL_HINT: Final = (
    "install bubblewrap (`apt-get install bubblewrap`), or opt in to running commands without a sandbox "
    "(`--unsandboxed-bash`, `bash_tools(root, unsandboxed=True)`)"
)
#: Host directories bound read-only when they are directories (symlinks, as on merged-/usr
#: systems, are recreated as the same symlinks).
_SYSTEM_DIRS: Final = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: The few ``/etc`` files a shell and its tools need (names, libraries, time, locale).
_ETC_FILES: Final = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/alternatives",
    "/etc/bash.bashrc",
    "/etc/profile",
    "/etc/inputrc",
)
#: The PATH a command sees.
SANDBOX_PATH: Final = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

_probed: dict[str, str | None] = {}


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one command (and everything it starts) may use (spec [SB2-c]).

    Attributes:
        memory_bytes: each process's address space (``RLIMIT_AS``).
        max_processes: processes and threads at once: ``RLIMIT_NPROC`` (counted in the
            sandbox's own user namespace) and, where a ``pids`` cgroup is writable, its
            ``pids.max`` (which also binds root, whom ``RLIMIT_NPROC`` does not).
    """

    memory_bytes: int = 2 * 1024**3
    max_processes: int = 256

    def __post_init__(self) -> None:
        if self.memory_bytes < 64 * 1024**2:
            raise ValueError(f"SandboxLimits.memory_bytes must be at least 64 MiB, got {self.memory_bytes}")
        if self.max_processes < 8:
            raise ValueError(f"SandboxLimits.max_processes must be at least 8, got {self.max_processes}")


def _probe_argv(bwrap: str) -> list[str]:
    return [bwrap, "--unshare-all", "--die-with-parent", *_system_binds(), "--proc", "/proc", "--", "true"]


def sandbox_problem() -> str | None:
    """Why no sandbox can be made here, or ``None`` when ``bwrap`` works (spec [SB1-b]).

    ``bwrap`` is looked up on ``PATH``; a binary found is run once, with every namespace
    unshared, and what it answered is cached for that path (a container may forbid user
    namespaces: bwrap exists but cannot sandbox).
    """
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return f"bubblewrap (bwrap) is not on PATH; {INSTALL_HINT}"
    if bwrap not in _probed:
        try:
            done = subprocess.run(_probe_argv(bwrap), capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            _probed[bwrap] = f"{bwrap} could not be run ({exc})"
        else:
            said = done.stderr.decode("utf-8", "replace").strip()[:300]
            _probed[bwrap] = None if done.returncode == 0 else f"{bwrap} cannot make a sandbox here: {said}"
    problem = _probed[bwrap]
    return None if problem is None else f"{problem}; {INSTALL_HINT}"


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        args += ["--ro-bind-try", path, path]
    return args


def bwrap_argv(bwrap: str, root: Path) -> list[str]:
    """bubblewrap's argv up to the command: what the sandbox holds (spec [SB2-a], [SB2-b]).

    ``root`` (the workspace, resolved) is bound read-write at its own path, so paths in a
    command's output are the paths the other workspace tools take.
    """
    return [
        bwrap,
        "--unshare-all",  # user, ipc, pid, net, uts, cgroup: no network, no host processes
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
        *_system_binds(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--bind",
        str(root),
        str(root),
        "--remount-ro",
        "/",  # the sandbox's own root (where /etc, /home ... would be made) is read-only too
        "--chdir",
        str(root),
        "--clearenv",
        *itertools.chain.from_iterable(("--setenv", k, v) for k, v in clean_env(root).items()),
        "--",
    ]


def clean_env(root: Path) -> dict[str, str]:
    """The whole environment a command sees (spec [SB2-d]): nothing of the parent's.

    ``PYTHONDONTWRITEBYTECODE=1``: Python run by a command writes no ``__pycache__`` into
    the workspace, where it would show in the step's changes and its undo (spec [MA1-a]).
    """
    return {
        "PATH": SANDBOX_PATH,
        "HOME": str(root),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


_serial = itertools.count(1)


class Confinement:
    """The limits of one command's process tree, and its kill (spec [SB2-c], [SB3-a]).

    Built before the command starts; ``preexec`` runs in the child between fork and exec;
    ``kill`` ends every process the command started; ``close`` removes the cgroup.
    """

    def __init__(self, limits: SandboxLimits) -> None:
        self.limits = limits
        self.cgroup = _new_pids_cgroup(limits.max_processes)

    def preexec(self) -> None:
        """In the child: join the cgroup, then set the rlimits (they hold for bwrap and all below it)."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError), open(self.cgroup / "cgroup.procs", "w", encoding="ascii") as procs:
                procs.write(str(os.getpid()))
        resource.setrlimit(resource.RLIMIT_AS, (self.limits.memory_bytes, self.limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_NPROC, (self.limits.max_processes, self.limits.max_processes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def kill(self, pid: int) -> None:
        """SIGKILL the command's process group and every process left in its cgroup."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        if self.cgroup is None:
            return
        for _ in range(100):  # a fork racing the kill adds a process; each pass kills what is there
            pids = _cgroup_pids(self.cgroup)
            if not pids:
                return
            for other in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(other, signal.SIGKILL)

    def close(self) -> None:
        """Remove the cgroup (it is empty once its processes are reaped) (spec [SB3-c])."""
        if self.cgroup is not None:
            _remove(self.cgroup)
            self.cgroup = None

    @property
    def enforced(self) -> str:
        """How the process bound is enforced: ``cgroup pids.max`` or ``RLIMIT_NPROC``."""
        return "cgroup pids.max" if self.cgroup is not None else "RLIMIT_NPROC"


def _cgroup_pids(cgroup: Path) -> list[int]:
    try:
        return [int(x) for x in (cgroup / "cgroup.procs").read_text(encoding="ascii").split()]
    except OSError:
        return []


def _own_pids_cgroup() -> Path | None:
    """The ``pids`` cgroup directory this process is in (v1 ``pids`` or v2 unified), if there is one."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            return Path("/sys/fs/cgroup/pids") / path.lstrip("/")
    for line in lines:
        if line.startswith("0::"):
            unified = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            if (unified / "cgroup.controllers").is_file() and "pids" in (unified / "cgroup.subtree_control").read_text(
                encoding="ascii"
            ):
                return unified
    return None


#: The prefix of the cgroups a command runs in: ``agent-ref-bash-PID-N`` (PID: the agent's process).
CGROUP_PREFIX: Final = "agent-ref-bash-"
#: The cgroups this process made and has not removed yet; ``_remove_live`` empties them at exit.
_live: set[Path] = set()


def _remove(cgroup: Path) -> None:
    """Kill what is left in ``cgroup``, wait for it to exit, then remove the cgroup; failures are logged."""
    _live.discard(cgroup)
    for _ in range(50):  # a fork racing the kill adds a process; each pass kills and waits for what is there
        pids = _cgroup_pids(cgroup)
        if not pids:
            break
        for other in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(other, signal.SIGKILL)
        _wait_exits(pids, timeout_ms=200)
    for attempt in range(_RMDIR_TRIES):
        try:
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            # busy: a killed process that has exited is still counted until its parent reaps it
            if exc.errno != errno.EBUSY or attempt == _RMDIR_TRIES - 1:
                log.warning("sandbox: cannot remove cgroup %s: %s", cgroup, exc)
                return
            time.sleep(0.01)


#: Tries of ``rmdir`` on a busy cgroup, 10 ms apart (its last processes being reaped).
_RMDIR_TRIES: Final = 200


def _wait_exits(pids: list[int], *, timeout_ms: int) -> None:
    """Wait until every process of ``pids`` has exited (its pidfd turns readable), at most ``timeout_ms`` each."""
    for pid in pids:
        try:
            fd = os.pidfd_open(pid)
        except OSError:  # gone already
            continue
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            poller.poll(timeout_ms)
        finally:
            os.close(fd)


@atexit.register
def _remove_live() -> None:
    """At the interpreter's exit: the cgroups of commands still running (background ones) go (spec [SB3-c])."""
    for cgroup in list(_live):
        _remove(cgroup)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep(parent: Path) -> None:
    """Remove the empty cgroups left by agent processes that are gone (killed before ``atexit`` ran)."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        owner = entry.name.removeprefix(CGROUP_PREFIX).split("-", 1)[0]
        if entry.name.startswith(CGROUP_PREFIX) and owner.isdigit() and not _alive(int(owner)):
            with contextlib.suppress(OSError):  # a cgroup with processes in it is busy: left alone
                os.rmdir(entry.path)


def _new_pids_cgroup(max_processes: int) -> Path | None:
    """A fresh ``pids`` cgroup bounded to ``max_processes``, or ``None`` where none can be made."""
    parent = _own_pids_cgroup()
    if parent is None or not (parent / "cgroup.procs").is_file():
        return None
    _sweep(parent)
    made = parent / f"{CGROUP_PREFIX}{os.getpid()}-{next(_serial)}"
    try:
        made.mkdir()
    except OSError:
        return None
    try:
        (made / "pids.max").write_text(str(max_processes), encoding="ascii")
    except OSError:
        with contextlib.suppress(OSError):
            made.rmdir()
        return None
    _live.add(made)
    return made


async def sandbox_status(*, unsandboxed: bool) -> dict[str, str] | None:
    """The ``meta_status`` payload a response with a workspace opens with, if any (spec [WS5-b]).

    ``mode: "unsandboxed"`` when ``Bash`` runs on the host by choice; ``mode: "unavailable"``
    when it should be sandboxed and no working ``bwrap`` is here (every call will be
    refused, and the message says how to install it); ``None`` when the sandbox works.
    The probe runs in a thread: its first run starts a process.
    """
    if unsandboxed:
        message = "Bash runs UNSANDBOXED (--unsandboxed-bash): the host's filesystem and network are reachable"
        return {"kind": "sandbox", "mode": "unsandboxed", "message": message}
    problem = await asyncio.to_thread(sandbox_problem)
    if problem is None:
        return None
    return {"kind": "sandbox", "mode": "unavailable", "message": f"Bash calls will be refused: {problem}"}
