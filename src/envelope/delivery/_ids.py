"""Event ids, framing with ids, and replay from a ``Last-Event-ID``: pure functions over lines and bytes.

Every event of a response carries ``id: <run>:<response>:<seq>`` (spec delivery §1.1):
``run`` names the stream's producer run, ``response`` the response's index in that run
(0, then 1 after a first resume...), ``seq`` the line's index in the response. Nothing
here does I/O: a server reads lines from its journal and hands them in.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Final

from envelope import DONE, EnvelopeError, decode, frame

from ._errors import ResumeError

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "DONE_LINE",
    "RUN_ID_PATTERN",
    "EventFramer",
    "EventId",
    "caught_up",
    "event_id",
    "frame_event",
    "parse_event_id",
    "replay_events",
    "resume_point",
    "stream_agent",
]

#: The terminator as a journal holds it (framed, it is ``envelope.DONE``).
DONE_LINE: Final = b"[DONE]"

#: What a run id may look like in a URL, an event id or a file name (spec delivery §1.1-b).
RUN_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9_-]{1,128}")

#: ``(run_id, response, seq)``.
EventId = tuple[str, int, int]


def event_id(run_id: str, response: int, seq: int) -> str:
    """The SSE ``id:`` of line ``seq`` of response ``response`` of run ``run_id`` (spec delivery §1.1-a)."""
    return f"{run_id}:{response}:{seq}"


def parse_event_id(text: str) -> EventId | None:
    """``(run_id, response, seq)`` from an ``id:`` value, or ``None`` when it is not one (spec delivery §1.1-b).

    Never guesses: three ``:``-separated parts, a run id matching ``RUN_ID_PATTERN``, and
    two ASCII decimal numbers of at most 9 and 12 digits.
    """
    parts = text.strip().split(":")
    if len(parts) != 3 or not RUN_ID_PATTERN.fullmatch(parts[0]):
        return None
    run_id, response, seq = parts
    if not (response.isascii() and response.isdigit() and seq.isascii() and seq.isdigit()):
        return None
    if len(response) > 9 or len(seq) > 12:
        return None
    return run_id, int(response), int(seq)


def frame_event(run_id: str, response: int, seq: int, line: bytes) -> bytes:
    """One SSE event: the ``id:`` line, then ``envelope.frame(line)`` (or ``envelope.DONE``)."""
    head = f"id: {event_id(run_id, response, seq)}\n".encode()
    return head + (DONE if line == DONE_LINE else frame(line))


class EventFramer:
    """``frame_event`` for the lines of one response, with its ``id:`` prefix built once.

    ``framer(seq, line) == frame_event(run_id, response, seq, line)`` for every line (the
    same bytes, and the same ``EncodeError`` for a line holding CR or LF); a live stream
    frames each of its lines with it (issue 26 §5: the id was formatted anew per line).
    """

    __slots__ = ("_head",)

    def __init__(self, run_id: str, response: int) -> None:
        """The framer of response ``response`` of run ``run_id``."""
        self._head = f"id: {run_id}:{response}:".encode()

    def __call__(self, seq: int, line: bytes) -> bytes:
        """The event of line ``seq``: ``id:`` line, then the data (or ``[DONE]``) and the blank line."""
        if line == DONE_LINE:
            return b"%b%d\n%b" % (self._head, seq, DONE)
        if 10 in line or 13 in line:  # LF or CR (an int test is a memchr, several times faster than b"\n" in)
            frame(line)  # raises EncodeError, saying where
        return b"%b%d\ndata: %b\n\n" % (self._head, seq, line)


def resume_point(last_event_id: str, run_id: str) -> tuple[int, int]:
    """``(response, after)`` to resume run ``run_id`` from a client's ``Last-Event-ID``.

    Raises:
        ResumeError: the id is not an event id, or is one of another run (spec delivery §2.3-b).
    """
    parsed = parse_event_id(last_event_id)
    if parsed is None or parsed[0] != run_id:
        raise ResumeError(f"Last-Event-ID {last_event_id[:80]!r} is not an id of run {run_id}")
    return parsed[1], parsed[2]


def caught_up(lines: Sequence[bytes], after: int) -> bool:
    """Whether a client that has every line up to ``after`` has the whole ended response (HTTP 204)."""
    return bool(lines) and lines[-1] == DONE_LINE and after == len(lines) - 1


def replay_events(run_id: str, response: int, lines: Sequence[bytes], after: int = -1) -> list[bytes]:
    """The framed events of ``lines`` with ``seq > after``, in order (spec delivery §2.3-a).

    Args:
        run_id: the run, for the ids.
        response: the response's index, for the ids.
        lines: the response's lines so far (from a journal).
        after: the ``seq`` the client has last (-1: none).

    Raises:
        ResumeError: ``after`` is past what ``lines`` hold, or below -1 (spec delivery §2.3-b).
    """
    if after < -1 or after >= len(lines):
        raise ResumeError(f"line {after} of response {run_id}:{response} is past the {len(lines)} it holds")
    return [frame_event(run_id, response, seq, lines[seq]) for seq in range(after + 1, len(lines))]


def stream_agent(lines: Sequence[bytes]) -> str | None:
    """The agent of a response: the ``agent`` of its first envelope line (``None``: no line, or not one)."""
    for line in lines:
        if line != DONE_LINE:
            try:
                return decode(line).agent
            except EnvelopeError:
                return None
    return None
