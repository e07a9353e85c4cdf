"""The agent server's stream bookkeeping: what ``envelope.delivery`` does not know about agents.

Owns: ``LiveStream`` with the agent that runs it (``X-Agent-Uuid``); the rest (event
ids, journals, followers, closing lines) is ``envelope.delivery`` (``spec/delivery.md``),
re-exported here under the names the server and its tests have always used.
Does not own: HTTP (``server/app.py``), the agent loop and its store (``agent.py``,
``store/core.py``), the encoding of envelopes (``envelope``).

Framing happens once, in ``envelope.delivery.LiveStream.append``: each line becomes
``id: <run>:<response>:<seq>`` + ``envelope.frame(line)``; the server hands those bytes
to the response unchanged.
"""

from __future__ import annotations

from envelope import delivery
from envelope.delivery import (
    DONE_LINE,
    JOURNAL_LOST,
    RUN_ID_PATTERN,
    EventId,
    FileJournal,
    Journal,
    JournalFailedError,
    MemoryJournal,
    closing_lines,
    event_id,
    frame_event,
    parse_event_id,
    stream_agent,
)

__all__ = [
    "DONE_LINE",
    "JOURNAL_LOST",
    "RUN_ID_PATTERN",
    "EventId",
    "FileJournal",
    "Journal",
    "JournalFailedError",
    "LiveStream",
    "MemoryJournal",
    "closing_lines",
    "event_id",
    "frame_event",
    "parse_event_id",
    "stream_agent",
]


class LiveStream(delivery.LiveStream):
    """``envelope.delivery.LiveStream`` of a run of an agent: it knows the agent, for the response headers.

    Attributes:
        agent_uuid: the agent that runs it.
    """

    def __init__(self, run_id: str, response: int, agent_uuid: str, journal: Journal, *, max_bytes: int = 2048) -> None:
        """See ``envelope.delivery.LiveStream``."""
        super().__init__(run_id, response, journal, max_bytes=max_bytes)
        self.agent_uuid = agent_uuid
