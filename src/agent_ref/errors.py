"""The agent's exception hierarchy: one base, ``AgentRefError``, and a class per kind of misuse.

Owns: the errors the reference agent raises to its *caller* (Python code, the CLI).
Does not own: what goes into the stream when a run fails; that is an ``error`` envelope
built by ``agent.py`` from a short public message, never from a traceback (spec
``spec/agent-ref.md`` §6). Codec errors stay ``envelope.EnvelopeError``.
"""

from __future__ import annotations

from envelope.delivery import JournalError, JournalUnavailableError

__all__ = [
    "AgentRefError",
    "ConfigError",
    "ConflictError",
    "StateError",
    "StoreError",
    "ToolDefinitionError",
    "ToolResultsError",
    "UnavailableError",
]


class AgentRefError(Exception):
    """Base of every error the reference agent raises on purpose."""


class ConfigError(AgentRefError):
    """The agent or a model was configured in a way that cannot work (for example a missing key)."""


class ToolDefinitionError(AgentRefError):
    """A function cannot be turned into a tool (unsupported type hint, duplicate name)."""


class StateError(AgentRefError):
    """The stored agent is not in a state that allows the call (for example resuming a finished run)."""


class ConflictError(StateError):
    """Another process changed the stored agent first (optimistic concurrency, spec §4.3).

    Nothing was applied: the caller may reload the agent and look at its new state.
    """


class StoreError(StateError, JournalError):
    """The store's database failed.

    A ``JournalError`` too (``envelope.delivery``): the server answers a failing store and
    a failing journal alike, catching ``JournalError`` for both.

    ``str(error)`` says where and why, for the log and the command line (it may name the
    database's host, port and name, and quote the driver); ``public`` says what failed in
    words a remote client may read: no location, no driver text (spec server §3.4-a).

    Attributes:
        public: the message a server may send to its clients.
    """

    def __init__(self, message: str, *, public: str = "the server's database failed") -> None:
        """Create the error; ``message`` is the detailed one."""
        super().__init__(message)
        self.public = public


class UnavailableError(StoreError, JournalUnavailableError):
    """The database cannot be reached now (down, restarting, unreachable): try again later.

    A ``JournalUnavailableError`` too, for the same reason as ``StoreError``.

    Attributes:
        retry_after: seconds after which trying again makes sense (at least 1).
    """

    def __init__(
        self, message: str, *, retry_after: int = 1, public: str = "the server's database is unavailable"
    ) -> None:
        """Create the error; ``message`` is the detailed one."""
        super().__init__(message, public=public)
        self.retry_after = max(1, retry_after)


class ToolResultsError(StateError):
    """The frontend tool results do not match the pending calls exactly (spec §3.3).

    Attributes:
        missing: pending ids with no result.
        unexpected: result ids that are not pending.
        duplicated: ids given more than once.
    """

    def __init__(self, message: str, *, missing: list[str], unexpected: list[str], duplicated: list[str]) -> None:
        """Create the error; ``message`` already names the ids."""
        super().__init__(message)
        self.missing = missing
        self.unexpected = unexpected
        self.duplicated = duplicated
