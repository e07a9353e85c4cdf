"""Which API failures are transient, and how long to wait before the next attempt.

Owns: the classification of an exception raised while streaming from the API into
``transient`` or not, the public (stream-safe) description of it, and the backoff
schedule: exponential with full jitter, bounded (spec ``spec/agent-ref.md`` §6).
Does not own: what the stream shows when a partly streamed attempt is discarded
(``agent.py``), or sleeping itself (the policy's ``sleep`` is injectable so tests
stay fast).
"""

from __future__ import annotations

import asyncio
import email.utils
import math
import random
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from envelope._extras import import_failed

try:
    import anthropic
    import httpx2
except ModuleNotFoundError as exc:  # spec cli [C10-c]: one line naming the extra, not the module
    raise import_failed(exc, __name__, "agent") from None  # pragma: no cover  # in a subprocess (tests/install)

from ..policy import scrub

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

__all__ = ["ApiFailure", "RetryPolicy", "classify", "retry_after"]

#: HTTP statuses worth another attempt: timeout, conflict (lock), rate limit, server errors, overloaded.
RETRYABLE_STATUS: Final = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
#: ``error.type`` values of the API (also sent inside a 200 stream as an ``error`` event) that are transient.
RETRYABLE_TYPES: Final = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error"})


@dataclass(frozen=True, slots=True)
class ApiFailure:
    """A classified failure.

    Attributes:
        type: the API's error type (``overloaded_error``...) or ours (``connection_error``,
            ``timeout_error``, ``incomplete_stream``, ``internal_error``).
        message: a public message: no traceback, no secret.
        transient: worth retrying.
        status: the HTTP status, when there was one.
        retry_after: seconds the API asked to wait (``retry-after-ms`` or ``retry-after``
            header), when it did.
    """

    type: str
    message: str
    transient: bool
    status: int | None = None
    retry_after: float | None = None


class IncompleteStreamError(Exception):
    """The API stream ended without ``message_stop`` (a cut connection that closed cleanly)."""


def classify(exc: BaseException) -> ApiFailure:
    """Classify an exception raised by the model call (spec §6.1).

    Transient: rate limit, overloaded, 5xx, 408/409, connection and timeout errors,
    a stream cut mid-way (transport error or an incomplete stream), and an ``error``
    event of a transient type inside the stream. Anything else (4xx such as a bad
    request or a bad key, and programming errors) is not retried.

    Args:
        exc: the exception.

    Returns:
        The classification; ``message`` is safe to stream.
    """
    if isinstance(exc, anthropic.APITimeoutError):
        return ApiFailure("timeout_error", "the API request timed out", True)
    if isinstance(exc, anthropic.APIConnectionError):
        return ApiFailure("connection_error", "could not connect to the API", True)
    if isinstance(exc, anthropic.APIStatusError):
        kind = exc.type or f"http_{exc.status_code}"
        text = scrub.public(exc.api_message or f"HTTP {exc.status_code}")
        transient = exc.status_code in RETRYABLE_STATUS or (exc.status_code == 200 and kind in RETRYABLE_TYPES)
        if exc.status_code == 200 and exc.type is None:
            transient = True  # an unparseable error event mid-stream: the stream broke
        return ApiFailure(str(kind), text, transient, exc.status_code, retry_after(exc.response.headers))
    if isinstance(exc, httpx2.TimeoutException):
        return ApiFailure("timeout_error", "the API stream timed out", True)
    if isinstance(exc, httpx2.TransportError):
        return ApiFailure("connection_error", "the API connection was interrupted", True)
    if isinstance(exc, IncompleteStreamError):
        return ApiFailure("incomplete_stream", "the API stream ended before message_stop", True)
    return ApiFailure("internal_error", "internal error in the agent (details are in the server log)", False)


def retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a response asks the client to wait, or ``None`` (spec §6.2-b).

    ``retry-after-ms`` (milliseconds, as the API sends) wins over ``retry-after``
    (seconds, or an HTTP date as RFC 9110 §10.2.3 allows). Negative, non-finite or
    unreadable values count as absent.
    """
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) * scale
        except ValueError:
            if scale != 1.0:
                continue
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                continue
            if when.tzinfo is None:
                continue
            seconds = when.timestamp() - time.time()
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    return None


@dataclass(slots=True)
class RetryPolicy:
    """Bounded exponential backoff with full jitter (spec §6.2).

    Attempt *n* (1-based) failed transiently: wait a uniform random time in
    ``[0, min(max_delay, base_delay * 2 ** (n - 1))]``, then try again, up to
    ``max_attempts`` attempts in all.

    Attributes:
        max_attempts: attempts per API call, the first included (1 = no retry).
        base_delay: seconds; the cap of the first wait.
        max_delay: seconds; the cap of any backoff wait.
        max_retry_after: seconds; the cap on a wait the API asks for with ``retry-after``.
        rng: the jitter source (seed it for reproducible waits).
        sleep: the sleeping function (tests pass a fake).
    """

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    rng: random.Random = field(default_factory=random.Random)
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def delay(self, attempt: int) -> float:
        """The wait after failed attempt ``attempt`` (1-based)."""
        cap = min(self.max_delay, self.base_delay * (2 ** max(0, attempt - 1)))
        return self.rng.uniform(0.0, cap)

    def wait(self, attempt: int, failure: ApiFailure) -> tuple[float, str]:
        """The wait after failed attempt ``attempt`` and where it comes from (spec §6.2-b).

        Returns:
            ``(seconds, "retry-after")`` when the API asked for a wait (capped at
            ``max_retry_after``), else ``(delay(attempt), "backoff")``.
        """
        if failure.retry_after is not None:
            return min(failure.retry_after, self.max_retry_after), "retry-after"
        return self.delay(attempt), "backoff"
