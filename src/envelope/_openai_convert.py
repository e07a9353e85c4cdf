"""Recorded OpenAI captures to a whole envelope stream: the part of ``envelope convert`` with no I/O.

Owns: ``convert_records``, which takes a capture's records (the ``data`` of each SSE
event, or each JSON line, with its line number) of a Chat Completions or Responses
stream, and yields envelope lines with the line they came from, ending with the lines
``finish()`` gives [O10-a]. Errors are ``EnvelopeError``\\ s positioned at the record.
Does not own: reading the file, framing the output or printing (``envelope.cli``, the
edge, with the readers ``envelope convert`` uses for its other sources).
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from ._errors import DecodeError, EnvelopeError, Position, ValidationError
from ._openai_chat import ChatTranslator
from ._openai_responses import ResponsesTranslator

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["OPENAI_SOURCES", "agent_for", "convert_records"]

#: The ``--from`` names of the two captures.
OPENAI_SOURCES: Final = ("openai-chat", "openai-responses")
Source = Literal["openai-chat", "openai-responses"]


def agent_for(source: str) -> str:
    """The agent id of a converted capture: fixed per source, so a conversion is repeatable [O10-a]."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"envelope-convert:{source}"))


def _decode(data: str) -> object:
    """One record's JSON. A UTF-16 pair split across two deltas escapes one half per record
    (``"\\ud83d"``), which msgspec refuses and the SDK's ``json`` reads; the translator joins
    the halves [O3-b]. So ``json`` reads the records msgspec refuses for that reason alone."""
    try:
        return msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        if "surrogate" not in str(exc):
            raise ValueError(str(exc)) from None
        import json

        return json.loads(data)


def convert_records(records: Iterable[tuple[str, int]], source: Source) -> Iterator[tuple[bytes, int]]:
    """Envelope lines of a capture, each with the 1-based line of the record it came from.

    Args:
        records: ``(data, line)`` for each SSE event's data or JSON line, in order.
        source: ``"openai-chat"`` or ``"openai-responses"``.

    Raises:
        DecodeError: a record that is not JSON, or what the translator raises, at its line.
        ValidationError: a Chat capture with several choices [O5-a].
    """
    translator: ChatTranslator | ResponsesTranslator
    if source == "openai-chat":
        translator = ChatTranslator(agent_for(source), meta=True)
    else:
        translator = ResponsesTranslator(agent_for(source), meta=True)
    last = 0
    for data, line in records:
        last = line
        if data.strip() == "[DONE]":
            continue
        try:
            event = _decode(data)
        except ValueError as exc:
            raise DecodeError(f"not JSON: {exc}", position=Position(line=line)) from None
        if not isinstance(event, dict):
            raise DecodeError(f"a JSON {type(event).__name__}, not an object", position=Position(line=line))
        try:
            out = translator.feed(event)
        except EnvelopeError as exc:
            raise exc.at(Position(line=line)) from None
        if isinstance(translator, ChatTranslator) and translator.other_choices:
            index = min(translator.other_choices)
            raise ValidationError(
                f"choice {index}: a capture of n > 1 choices is not converted; "
                "translate each choice with ChatTranslator(choice=...) instead",
                position=Position(line=line),
                section="O5-a",
            )
        for env in out:
            yield env, line
    for env in translator.finish():
        yield env, last + 1
