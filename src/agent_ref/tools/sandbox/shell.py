"""One workspace's shell: commands run in the sandbox, the cwd kept between them, background runs (spec agent-ref §SB).

Owns: ``Shell`` (a workspace root, the current directory, the sandbox or the named
unsandboxed mode, the limits), ``Shell.run`` (one command to its end or its timeout, its
output bounded and reported as it comes), background runs (``start``, ``read``, ``kill``)
and ``RunResult``, the result text the model reads (output, exit code or signal, notes).
Each command is a fresh ``bash -c`` whose last directory is read back through a pipe (an
``EXIT`` trap), so ``cd`` persists without a long-lived shell to corrupt.
Does not own: the sandbox's argv or limits (``sandbox/jail.py``), the tools' schemas
(``sandbox/tools.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .jail import Confinement, SandboxLimits, bwrap_argv, clean_env, sandbox_problem
from .output import DEFAULT_MAX_OUTPUT_BYTES, BoundedOutput

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from typing import Any

__all__ = ["MAX_BACKGROUND", "RunResult", "SandboxUnavailable", "Shell"]

#: Background runs one shell keeps at once (each holds a bounded buffer).
MAX_BACKGROUND: Final = 8
#: The wrapper: the cwd at exit goes to fd ``{fd}`` (whatever way the command exits), then the command runs.
_SCRIPT: Final = (
    "trap 'pwd -P >&{fd} 2>/dev/null' EXIT; __agent_ref_cmd=$2; cd -- \"$1\" || exit 126; shift 2; "
    'eval "$__agent_ref_cmd"'
)
_READ: Final = 64 * 1024


class SandboxUnavailable(RuntimeError):
    """``Bash`` was refused: no working bubblewrap, and the unsandboxed mode was not chosen (spec [SB1-b])."""


@dataclass(slots=True)
class RunResult:
    """A finished (or stopped) command.

    Attributes:
        output: the bounded output text (stdout and stderr, interleaved as written).
        exit_code: the shell's exit status, or ``None`` when a signal ended it.
        signal: the signal's name (``SIGKILL``) when one ended it.
        timed_out_ms: the timeout that killed it, or ``None``.
        notes: lines said after the output (the cwd reset, the unsandboxed mode).
    """

    output: str
    exit_code: int | None
    signal: str | None = None
    timed_out_ms: int | None = None
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        """What the model reads: the output, then ``[exit code N]`` or ``[killed by SIGNAME]``, then notes."""
        parts = [self.output.rstrip("\n")] if self.output else []
        if self.timed_out_ms is not None:
            parts.append(
                f"[timed out after {self.timed_out_ms} ms: the command and every process it started were killed]"
            )
        if self.signal is not None:
            parts.append(f"[killed by {self.signal}]")
        else:
            parts.append(f"[exit code {self.exit_code}]")
        parts += [f"[{note}]" for note in self.notes]
        return "\n".join(parts)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass(slots=True)
class _Job:
    """A background run: its process, the output not yet read, and how it ended."""

    process: asyncio.subprocess.Process
    confinement: Confinement
    command: str
    unread: BoundedOutput
    reader: asyncio.Task[None] | None = None
    killed: bool = False


class Shell:
    """A workspace's shell (spec §SB): commands in the sandbox, the cwd kept, background runs.

    Args:
        root: the workspace; commands may write only below it.
        unsandboxed: run commands without bubblewrap (spec [SB1-c]); only the time,
            memory and process limits and the scrubbed environment remain.
        limits: memory and process bounds per command.
        max_output_bytes: the bound on a result's output (head and tail kept).
    """

    def __init__(
        self,
        root: Path,
        *,
        unsandboxed: bool = False,
        limits: SandboxLimits | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> None:
        resolved = Path(os.path.realpath(root))
        if not resolved.is_dir():
            raise ValueError(f"the Bash workspace {str(root)!r} is not a directory")
        self.root = resolved
        self.cwd = resolved
        self.unsandboxed = unsandboxed
        self.limits = limits or SandboxLimits()
        self.max_output_bytes = max_output_bytes
        self._jobs: dict[str, _Job] = {}
        self._serial = 0

    def _argv(self, command: str, cwd: Path, cwd_fd: int | None) -> list[str]:
        script = _SCRIPT.format(fd=cwd_fd) if cwd_fd is not None else _SCRIPT.split("; ", 1)[1]
        shell = ["/bin/bash", "-c", script, "bash", str(cwd), command]
        if self.unsandboxed:
            return shell
        problem = sandbox_problem()
        if problem is not None:
            raise SandboxUnavailable(f"Bash is refused: {problem}")
        bwrap = shutil.which("bwrap")
        assert bwrap is not None  # sandbox_problem found it
        return [*bwrap_argv(bwrap, self.root), *shell]

    async def _spawn(self, command: str, cwd_pipe: int | None) -> tuple[asyncio.subprocess.Process, Confinement]:
        argv = self._argv(command, self.cwd, cwd_pipe)
        confinement = Confinement(self.limits)
        fds: tuple[int, ...] = () if cwd_pipe is None else (cwd_pipe,)
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                cwd=self.root,
                env=clean_env(self.root),
                start_new_session=True,
                pass_fds=fds,
                preexec_fn=confinement.preexec,
            )
        except BaseException:
            confinement.close()
            raise
        return process, confinement

    async def run(self, command: str, timeout_ms: int, report: Callable[[str], None]) -> RunResult:
        """Run ``command`` to its end or ``timeout_ms``; ``report`` hears its last line as output comes.

        Cancelled (an abort, the agent's own timeout), the command's processes are killed first.
        """
        read_end, write_end = os.pipe()
        try:
            process, confinement = await _uncancelled_spawn(self._spawn(command, write_end))
        except BaseException:
            os.close(read_end)
            os.close(write_end)
            raise
        os.close(write_end)
        output = BoundedOutput(self.max_output_bytes)
        timed_out = False
        try:
            try:
                await asyncio.wait_for(_to_end(process, confinement, _feeder(output, report)), timeout_ms / 1000)
            except TimeoutError:
                timed_out = True
            confinement.kill(process.pid)  # spec [SB3-b]: nothing it started outlives it
            code = await process.wait()
        except BaseException:
            confinement.kill(process.pid)
            with contextlib.suppress(ProcessLookupError):
                await asyncio.shield(process.wait())
            raise
        finally:
            confinement.close()
            last_dir = _read_all(read_end)
        result = _result(output, code, timed_out_ms=timeout_ms if timed_out else None)
        self._follow(last_dir, result)
        if self.unsandboxed:
            result.notes.append("ran UNSANDBOXED: no bubblewrap, the host's filesystem and network were reachable")
        return result

    def _follow(self, last_dir: str, result: RunResult) -> None:
        """Keep the directory the command ended in, when it is in the workspace (spec [SB1-d])."""
        where = last_dir.strip().splitlines()[-1] if last_dir.strip() else ""
        if not where:
            return
        path = Path(where)
        if path == self.root or self.root in path.parents:
            if path.is_dir():
                self.cwd = path
            return
        self.cwd = self.root
        result.notes.append(f"cwd {where} is outside the workspace; the shell is back at {self.root}")

    async def start(self, command: str) -> str:
        """Start ``command`` in the background; its id (``bash_1`` ...) (spec [SB5-a])."""
        running = [key for key, job in self._jobs.items() if job.process.returncode is None]
        if len(running) >= MAX_BACKGROUND:
            raise RuntimeError(
                f"{len(running)} background commands run already (at most {MAX_BACKGROUND}); kill one first"
            )
        process, confinement = await self._spawn(command, None)
        self._serial += 1
        key = f"bash_{self._serial}"
        job = _Job(process, confinement, command, BoundedOutput(self.max_output_bytes))
        job.reader = asyncio.ensure_future(_drain_job(job))
        self._jobs[key] = job
        return key

    def _job(self, key: str) -> _Job:
        job = self._jobs.get(key)
        if job is None:
            known = ", ".join(self._jobs) or "none"
            raise KeyError(f"no background command {key!r} (known: {known})")
        return job

    def read(self, key: str, pattern: str | None = None) -> str:
        """The output ``key`` wrote since the last read (lines matching ``pattern`` only), and its status."""
        job = self._job(key)
        regex = None
        if pattern:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"filter {pattern!r} is not a regular expression: {exc}") from None
        taken, job.unread = job.unread, BoundedOutput(self.max_output_bytes)
        text = taken.text()
        if regex is not None:
            text = "\n".join(line for line in text.splitlines() if regex.search(line))
        return f"{text.rstrip(chr(10))}\n[{_status(job)}]" if text else f"[{_status(job)}]"

    async def kill(self, key: str) -> str:
        """Kill background command ``key`` and everything it started (spec [SB5-b])."""
        job = self._job(key)
        if job.process.returncode is not None:
            return f"{key} had already ended: {_status(job)}"
        job.killed = True
        job.confinement.kill(job.process.pid)
        await job.process.wait()
        if job.reader is not None:
            await job.reader
        return f"{key} killed: {_status(job)}"

    async def close(self) -> None:
        """Kill every background command (the owner of the tools is done with them)."""
        for key in list(self._jobs):
            await self.kill(key)


async def _uncancelled_spawn(
    spawning: Coroutine[Any, Any, tuple[asyncio.subprocess.Process, Confinement]],
) -> tuple[asyncio.subprocess.Process, Confinement]:
    """The spawn run to its end even when the call is cancelled meanwhile; then it is killed (spec [SB3-a])."""
    task = asyncio.ensure_future(spawning)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            process, confinement = await task
            confinement.kill(process.pid)
            with contextlib.suppress(ProcessLookupError):
                await process.wait()
            confinement.close()
        raise


async def _to_end(process: asyncio.subprocess.Process, confinement: Confinement, feed: Callable[[bytes], None]) -> None:
    """Read the output until the shell ends; then kill what it left (holding the pipe open) and read the rest."""
    pump = asyncio.ensure_future(_pump(process, feed))
    try:
        await _exited(process.pid)  # not process.wait(): that also waits for the pipes a leftover holds
        confinement.kill(process.pid)  # spec [SB3-b]
        await pump
    finally:
        pump.cancel()


async def _exited(pid: int) -> None:
    """Wait until process ``pid`` has exited (its pidfd turns readable); at once if it is gone already."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(fd, ready)
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def _pump(process: asyncio.subprocess.Process, feed: Callable[[bytes], None]) -> None:
    assert process.stdout is not None
    while chunk := await process.stdout.read(_READ):
        feed(chunk)


async def _drain_job(job: _Job) -> None:
    try:
        await _to_end(job.process, job.confinement, lambda chunk: job.unread.feed(chunk))
    finally:
        job.confinement.kill(job.process.pid)  # spec [SB3-b]: its leftovers end with it
        await job.process.wait()
        job.confinement.close()


def _feeder(output: BoundedOutput, report: Callable[[str], None]) -> Callable[[bytes], None]:
    def feed(chunk: bytes) -> None:
        output.feed(chunk)
        report(output.last_line())

    return feed


def _status(job: _Job) -> str:
    code = job.process.returncode
    if code is None:
        return "running"
    if job.killed:
        return "killed"
    return f"exited: killed by {_signal_name(-code)}" if code < 0 else f"exited: exit code {code}"


def _result(output: BoundedOutput, code: int, *, timed_out_ms: int | None) -> RunResult:
    if code < 0:
        return RunResult(output.text(), None, signal=_signal_name(-code), timed_out_ms=timed_out_ms)
    if code > 128 and code - 128 in signal.valid_signals():  # bash reports a child killed by a signal as 128+N
        return RunResult(
            output.text(),
            code,
            timed_out_ms=timed_out_ms,
            notes=[f"{code} = 128+{code - 128}: killed by {_signal_name(code - 128)}"],
        )
    return RunResult(output.text(), code, timed_out_ms=timed_out_ms)


def _read_all(fd: int) -> str:
    """What is in the pipe now (the writer is gone or killed), without waiting for more."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                break
            if not chunk or sum(map(len, chunks)) > 65536:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace")
