"""The errors of the delivery layer: a journal that fails, and a ``Last-Event-ID`` that cannot be resumed from."""

from __future__ import annotations

__all__ = [
    "JournalError",
    "JournalGapError",
    "JournalTakenOverError",
    "JournalUnavailableError",
    "ResumeDenied",
    "ResumeError",
]


class JournalError(Exception):
    """A journal's backend failed (its database refused, its files could not be written).

    ``str(error)`` says where and why, for the server's log (it may name a database's
    host, port and name, and quote its driver); ``public`` says what failed in words a
    remote client may read: no location, no driver text (spec delivery §5.1-a).

    Attributes:
        public: the message a server may send to its clients.
    """

    def __init__(self, message: str, *, public: str = "the server's database failed") -> None:
        """Create the error; ``message`` is the detailed one."""
        super().__init__(message)
        self.public = public


class JournalUnavailableError(JournalError):
    """The journal's backend cannot be reached now (down, restarting): try again later.

    Attributes:
        retry_after: seconds after which trying again makes sense (at least 1).
    """

    def __init__(
        self, message: str, *, retry_after: int = 1, public: str = "the server's database is unavailable"
    ) -> None:
        """Create the error; ``message`` is the detailed one."""
        super().__init__(message, public=public)
        self.retry_after = max(1, retry_after)


class JournalGapError(JournalError):
    """A follower found a line missing or repeated in a journaled response (never expected; a bug)."""


class JournalTakenOverError(JournalError):
    """A response this process was writing was closed by another process while its connection was lost."""


class ResumeError(ValueError):
    """A ``Last-Event-ID`` that cannot be resumed from (HTTP 400, spec delivery §2.3-b); the text says why."""


class ResumeDenied(Exception):  # a refusal the caller chose, not an error of the server
    """Raised by an ``authorize`` hook to refuse a resume (spec delivery [D6.2-a]).

    ``404`` (the default) is answered exactly as an unknown run is, whatever ``kind`` and
    ``message`` say, so a refusal never tells a run exists; ``401`` and ``403`` send
    ``kind`` and ``message`` (public words: no secret, no detail of a signature).

    Args:
        status: 401, 403 or 404.
        kind: the error's ``type`` in the answer (``token_expired``, ``forbidden``, ...).
        message: the error's ``message`` in the answer.
        headers: extra headers of the answer (``WWW-Authenticate``, ...).
    """

    def __init__(
        self,
        status: int = 404,
        kind: str = "unknown_run",
        message: str = "no such run",
        *,
        headers: dict[str, str] | None = None,
    ) -> None:
        """See the class docstring."""
        if status not in (401, 403, 404):
            raise ValueError(f"a refused resume is 401, 403 or 404, not {status}")
        super().__init__(f"{status} {kind}: {message}")
        self.status = status
        self.kind = kind
        self.message = message
        self.headers = dict(headers or {})
