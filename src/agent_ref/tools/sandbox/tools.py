"""The ``Bash``, ``BashOutput`` and ``KillShell`` tools, with the Claude Agent SDK's inputs (spec agent-ref §SB).

Owns: ``bash_tools``, which makes the three tools over one ``Shell`` (one workspace, one
cwd, one set of background runs), and the tools' limits on input (``MAX_TIMEOUT_MS``).
Does not own: the shell or the sandbox (``sandbox/shell.py``, ``sandbox/jail.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..core import Tool, ToolContext, tool
from .shell import Shell

if TYPE_CHECKING:
    from pathlib import Path

    from .jail import SandboxLimits

__all__ = ["DEFAULT_TIMEOUT_MS", "MAX_TIMEOUT_MS", "bash_tools"]

#: A command's time when the call names none (the SDK's two minutes).
DEFAULT_TIMEOUT_MS: Final = 120_000
#: The longest ``timeout`` a call may ask for (the SDK's ten minutes) (spec [SB1-a]).
MAX_TIMEOUT_MS: Final = 600_000


def _timeout_ms(timeout: int | None) -> int:
    if timeout is None:
        return DEFAULT_TIMEOUT_MS
    if not 1 <= timeout <= MAX_TIMEOUT_MS:
        raise ValueError(f"timeout must be from 1 to {MAX_TIMEOUT_MS} ms, got {timeout}")
    return timeout


def bash_tools(
    root: Path,
    *,
    unsandboxed: bool = False,
    limits: SandboxLimits | None = None,
    max_output_bytes: int | None = None,
) -> list[Tool]:
    """``Bash``, ``BashOutput`` and ``KillShell`` over one shell in ``root`` (spec §SB).

    Commands run in bubblewrap (the workspace writable, the rest read-only, no network, a
    fresh ``/tmp``, a scrubbed environment, limits on time, memory and processes). Without
    a working ``bwrap`` every ``Bash`` call is refused with how to install it, unless
    ``unsandboxed`` is set: then commands run on the host, named so in every result.

    Args:
        root: the workspace directory (the shell starts there and may not leave it).
        unsandboxed: run without bubblewrap (the CLI's ``--unsandboxed-bash``), spec [SB1-c].
        limits: the memory and process bounds per command; ``SandboxLimits()`` by default.
        max_output_bytes: the bound on one result's output; ``DEFAULT_MAX_OUTPUT_BYTES`` by default.

    Returns:
        The three tools, sharing the shell.

    Raises:
        ValueError: ``root`` is not a directory.
    """
    extra = {} if max_output_bytes is None else {"max_output_bytes": max_output_bytes}
    shell = Shell(root, unsandboxed=unsandboxed, limits=limits, **extra)
    return [_bash(shell), *_background(shell)]


def _bash(shell: Shell) -> Tool:
    """The ``Bash`` tool over ``shell``."""
    where = "on the host, UNSANDBOXED" if shell.unsandboxed else "in a bubblewrap sandbox with no network"

    # the tool's own bound is past the longest command's, so the command's timeout acts first
    @tool(name="Bash", timeout=MAX_TIMEOUT_MS / 1000 + 30, description=_BASH_DOC.format(where=where, root=shell.root))
    async def bash(
        command: str,
        ctx: ToolContext,
        timeout: int | None = None,
        description: str | None = None,
        run_in_background: bool = False,
    ) -> str:
        """Run a shell command.

        Args:
            command: The command to execute.
            ctx: The call's context (progress).
            timeout: Optional timeout in milliseconds (max 600000); 120000 when omitted.
            description: A short description of what the command does, in 5-10 words.
            run_in_background: Run it in the background; read its output with BashOutput.
        """
        limit = _timeout_ms(timeout)
        if run_in_background:
            key = await shell.start(command)
            return f"started in the background as {key}; read its output with BashOutput, stop it with KillShell"
        ctx.progress(description or command[:200])
        done = await shell.run(command, limit, ctx.progress)
        return done.text()

    return bash


def _background(shell: Shell) -> list[Tool]:
    """``BashOutput`` and ``KillShell`` over ``shell``'s background runs."""

    @tool(name="BashOutput")
    async def bash_output(bash_id: str, filter: str | None = None) -> str:
        """Read the output a background command wrote since the last read, and whether it still runs.

        Args:
            bash_id: The id of the background command (from Bash).
            filter: Optional regular expression; only output lines that match it are shown.
        """
        return shell.read(bash_id, filter)

    @tool(name="KillShell")
    async def kill_shell(shell_id: str) -> str:
        """Kill a background command and every process it started.

        Args:
            shell_id: The id of the background command to kill.
        """
        return await shell.kill(shell_id)

    return [bash_output, kill_shell]


_BASH_DOC: Final = (
    "Run a bash command {where}. The workspace {root} is the only writable place (and /tmp, fresh for each "
    "command); the working directory persists between calls and stays inside the workspace. Output "
    "(stdout and stderr) is bounded: its head and tail are kept. Each command and everything it starts "
    "is killed at its timeout or when it exits; use run_in_background for long-running commands."
)
