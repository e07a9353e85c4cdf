"""The ``Bash`` tool in a bubblewrap sandbox, with its background runs (spec ``spec/agent-ref.md`` §SB).

``bash_tools(root)`` gives ``Bash``, ``BashOutput`` and ``KillShell`` over one shell in the
workspace ``root``; see ``sandbox/tools.py``.
"""

from __future__ import annotations

from .jail import INSTALL_HINT, SandboxLimits, sandbox_problem, sandbox_status
from .output import DEFAULT_MAX_OUTPUT_BYTES, BoundedOutput
from .shell import RunResult, SandboxUnavailable, Shell
from .tools import DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, bash_tools

__all__ = [
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_TIMEOUT_MS",
    "INSTALL_HINT",
    "MAX_TIMEOUT_MS",
    "BoundedOutput",
    "RunResult",
    "SandboxLimits",
    "SandboxUnavailable",
    "Shell",
    "bash_tools",
    "sandbox_problem",
    "sandbox_status",
]
