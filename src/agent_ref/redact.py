"""Scrubbing text before it can reach the stream: no secret, no traceback (spec §6.3).

Owns: ``public_message``, the single filter every error text passes through on its
way into an envelope (tool errors, API errors).
Does not own: logging (full details go to the ``agent_ref`` logger, on stderr).
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["public_message"]

#: Longest public message; longer text is cut (a message is a hint, not a dump).
MAX_PUBLIC_CHARS: Final = 500

_SECRETS: Final = re.compile(
    r"(sk-ant-[A-Za-z0-9_\-]+"  # Anthropic keys
    r"|sk-[A-Za-z0-9]{16,}"  # other sk- style keys
    r"|(?i:bearer)\s+[A-Za-z0-9._\-~+/]+=*"  # bearer tokens
    r"|(?i:x-api-key|api[_-]?key|authorization|password|secret|token)\s*[=:]\s*\S+)"
)


def public_message(text: str) -> str:
    """``text`` with secrets replaced by ``[redacted]``, without traceback lines, at most 500 characters.

    Args:
        text: a message that may have come from an exception.

    Returns:
        A one-paragraph message safe to put into the stream.
    """
    kept = [line for line in text.splitlines() if not _is_traceback_line(line)]
    clean = _SECRETS.sub("[redacted]", " ".join(" ".join(kept).split()))
    if len(clean) > MAX_PUBLIC_CHARS:
        clean = clean[: MAX_PUBLIC_CHARS - 1] + "…"
    return clean


def _is_traceback_line(line: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(("Traceback (most recent call last)", 'File "')) or stripped.startswith("^")
