"""The secrets this process holds, and scrubbing every error text with them (spec ``spec/agent-ref.md`` §6.3-b).

Owns: the process-wide set of held secret values (each agent adds its client's API key
and auth token and the ``secrets=`` it was given: a server's bearer token, say), the
public form of an error text (``public``: for a stream or a store), the redacted form of
a whole text (``redact_text``: for a log, tracebacks kept), and the filter that applies
it to every record of the ``agent_ref`` logger.
Does not own: the redaction rules themselves (``redact.py``: ``Redactor`` and its table
of common credential forms, ``public_message``). This module only feeds them the values
the process holds, and works with both the plain ``public_message(text)`` and the
``Redactor`` API (``public_message(text, redactor)``).

Held secrets are process-wide on purpose: a secret one agent holds is a secret of the
process, and a log record does not say which agent it came from.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Final

from . import redact

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["MARK", "held", "hold", "install_log_filter", "public", "redact_text"]

#: What a held secret becomes.
MARK: Final = "[redacted]"
#: Shorter values are not held: they would blank ordinary words (and are no real credential).
MIN_HELD_CHARS: Final = 6
#: Variables whose values are secrets of the process whenever they are set.
SECRET_ENV_VARS: Final = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "AGENT_REF_TOKEN")

_HELD: set[str] = set()
_LOCK = threading.Lock()


def hold(secrets: Iterable[str | None]) -> None:
    """Hold these values: from now on every text this module scrubs has them replaced.

    Args:
        secrets: values (``None`` and values under ``MIN_HELD_CHARS`` are skipped).
    """
    with _LOCK:
        _HELD.update(s for s in secrets if isinstance(s, str) and len(s.strip()) >= MIN_HELD_CHARS)


def held() -> list[str]:
    """The held values and the secret environment variables' values, longest first."""
    env = (os.environ.get(name, "").strip() for name in SECRET_ENV_VARS)
    with _LOCK:
        values = _HELD | {v for v in env if len(v) >= MIN_HELD_CHARS}
    return sorted(values, key=len, reverse=True)


def _redactor(secrets: list[str]) -> Callable[[str], str] | None:
    """``redact.Redactor(secrets=...)`` when the redaction module has it."""
    factory: Any = getattr(redact, "Redactor", None)
    if factory is None:
        return None
    made: Callable[[str], str] = factory(secrets=secrets)
    return made


def _replace_held(text: str, secrets: list[str]) -> str:
    for _ in range(4):  # a replacement can complete a secret with the text beside it
        if not any(s in text for s in secrets):
            break
        for secret in secrets:
            text = text.replace(secret, MARK)
    return text


def public(text: str) -> str:
    """``text`` as it may go into a stream or a store: ``public_message`` plus the held secrets.

    Args:
        text: an error text (an exception's message, an API error message).

    Returns:
        One short paragraph without traceback lines, common credential forms or held secrets.
    """
    secrets = held()
    redactor = _redactor(secrets)
    message: Callable[..., str] = redact.public_message
    if redactor is not None:
        return message(text, redactor)
    # Before ``redact.Redactor`` existed: held secrets out first (so truncation cannot cut
    # one in half and leak its prefix), then the common forms, then once more.
    return _replace_held(message(_replace_held(text, secrets)), secrets)


def redact_text(text: str) -> str:
    """``text`` whole (tracebacks kept), with common credential forms and held secrets replaced."""
    secrets = held()
    redactor = _redactor(secrets)
    if redactor is not None:
        return redactor(text)
    return _replace_held(text, secrets)


class _LogScrubber(logging.Filter):
    """Rewrites each record's message and traceback through ``redact_text`` (spec §6.3-b)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        if record.exc_info:
            text = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact_text(text)
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True


_FILTER: Final = _LogScrubber()


def install_log_filter() -> None:
    """Scrub every record of the ``agent_ref`` logger (idempotent)."""
    logger = logging.getLogger("agent_ref")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
