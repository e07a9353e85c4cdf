"""Resumable delivery of envelope streams over SSE: event ids, journals, live followers, replay.

A server that streams envelope lines to browsers makes every response resumable with
this package (``spec/delivery.md``):

- every event carries ``id: <run>:<response>:<seq>`` (``event_id``, ``frame_event``);
- every line is written to a ``Journal`` *before* it is sent (``MemoryJournal``,
  bounded; ``FileJournal``, append-only files; ``envelope.delivery.postgres`` for
  several processes on one PostgreSQL database);
- a ``LiveStream`` hands each line, framed, to any number of followers, each of which
  sees every line once and in order from wherever it joined;
- a client that reconnects with ``Last-Event-ID`` gets the rest (``resume_point``,
  ``replay_events``, ``caught_up``: pure functions over the journal's lines);
- a response whose writer failed or died is ended validly by ``closing_lines``;
- ``with_keepalives`` adds a ``: keep-alive`` comment after each silence, none while lines flow;
- ``mint`` and ``verify`` make and check a resume link's token, signed for one run's
  stream and short-lived, and ``query_token(keys)`` is the ``authorize`` hook of
  ``Delivery`` that accepts it from ``?token=`` (a browser's ``EventSource`` cannot send
  an ``Authorization`` header).

The pure parts do no I/O; only ``FileJournal`` touches files, and ``off_loop(journal)``
runs a journal's calls in a thread of its own, each bounded in time, so an event loop
never waits on storage. Only msgspec and the
standard library are used here; ``import envelope`` does not import this package.
"""

from __future__ import annotations

from ._errors import (
    JournalError,
    JournalGapError,
    JournalTakenOverError,
    JournalUnavailableError,
    ResumeDenied,
    ResumeError,
)
from ._ids import (
    DONE_LINE,
    RUN_ID_PATTERN,
    EventId,
    caught_up,
    event_id,
    frame_event,
    parse_event_id,
    replay_events,
    resume_point,
    stream_agent,
)
from ._journal import FileJournal, Journal, MemoryJournal
from ._keepalive import KEEPALIVE, NO_PING, with_keepalives
from ._live import JOURNAL_LOST, SERVER_AGENT, JournalFailedError, LiveStream, closing_lines
from ._offloop import DEFAULT_CALL_TIMEOUT, OffLoopJournal, off_loop
from ._tokens import (
    LEEWAY_SECONDS,
    MAX_TOKEN_CHARS,
    MAX_TTL_SECONDS,
    MIN_KEY_BYTES,
    STREAM_SCOPE,
    TOKEN_PARAM,
    TokenError,
    TokenExpiredError,
    TokenMalformedError,
    TokenScopeError,
    TokenSignatureError,
    TokenWrongRunError,
    mint,
    query_token,
    verify,
)

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DONE_LINE",
    "JOURNAL_LOST",
    "KEEPALIVE",
    "LEEWAY_SECONDS",
    "MAX_TOKEN_CHARS",
    "MAX_TTL_SECONDS",
    "MIN_KEY_BYTES",
    "NO_PING",
    "RUN_ID_PATTERN",
    "SERVER_AGENT",
    "STREAM_SCOPE",
    "TOKEN_PARAM",
    "EventId",
    "FileJournal",
    "Journal",
    "JournalError",
    "JournalFailedError",
    "JournalGapError",
    "JournalTakenOverError",
    "JournalUnavailableError",
    "LiveStream",
    "MemoryJournal",
    "OffLoopJournal",
    "ResumeDenied",
    "ResumeError",
    "TokenError",
    "TokenExpiredError",
    "TokenMalformedError",
    "TokenScopeError",
    "TokenSignatureError",
    "TokenWrongRunError",
    "caught_up",
    "closing_lines",
    "event_id",
    "frame_event",
    "mint",
    "off_loop",
    "parse_event_id",
    "query_token",
    "replay_events",
    "resume_point",
    "stream_agent",
    "verify",
    "with_keepalives",
]
