"""The client's reading of AG-UI and Vercel UI message streams: which protocol, and each event as envelope lines.

Owns (spec/client.md ``[CL4…]``): the protocol of a response (the caller's, else its
headers, else its first event), and ``ForeignStream``, which feeds each SSE event of an
AG-UI or UI message stream to the converter of ``envelope.interop`` and tells whether
the stream reached its terminator (``RUN_FINISHED``/``RUN_ERROR``, ``[DONE]``).
Does not own: the mapping itself (``envelope.interop.agui``/``vercel``, spec/interop.md),
the HTTP side or the transcript (``envelope.client``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

import msgspec

from .interop import DONE_LINE

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .interop.agui import AguiToEnvelope
    from .interop.vercel import VercelToEnvelope

__all__ = ["PROTOCOLS", "ForeignStream", "Protocol", "protocol_of_event", "protocol_of_headers"]

Protocol = Literal["envelope", "agui", "vercel"]
#: The protocols ``connect(protocol=...)`` reads.
PROTOCOLS: Final = ("envelope", "agui", "vercel")

#: The AI SDK's header of a UI message stream, and the one version of it read [CL4-a].
VERCEL_HEADER: Final = "x-vercel-ai-ui-message-stream"
VERCEL_VERSION: Final = "v1"
#: AG-UI's binary (protobuf) encoding, which this client does not read [CL4-a].
AGUI_PROTO: Final = "application/vnd.ag-ui.event+proto"


class _Typed(msgspec.Struct):
    """Only the ``type`` of an event (the rest is skipped unread)."""

    type: str = ""


_typed = msgspec.json.Decoder(_Typed)


def protocol_of_headers(headers: Mapping[str, str]) -> Protocol | str | None:
    """The protocol the response's headers name [CL4-a]: ``vercel``, or ``None`` when they name none.

    Returns the text of a refusal (a ``str`` that is not a protocol) for a response this
    client cannot read: a UI message stream of another version, AG-UI's protobuf.
    """
    version = headers.get(VERCEL_HEADER)
    if version is not None:
        if version.strip() != VERCEL_VERSION:
            return f"{VERCEL_HEADER}: {version!r} is not a version this client reads ({VERCEL_VERSION})"
        return "vercel"
    if headers.get("content-type", "").split(";")[0].strip().lower() == AGUI_PROTO:
        return f"content-type {AGUI_PROTO} (AG-UI's protobuf encoding) is not read: ask for text/event-stream"
    return None


def protocol_of_event(data: str) -> Protocol:
    """The protocol of a response whose headers named none, from its first event [CL4-a].

    An AG-UI stream's first event is ``RUN_STARTED``, which no envelope line is (envelope
    types are lower case); everything else is read as an envelope stream.
    """
    if data.lstrip().startswith("{"):
        try:
            if _typed.decode(data).type == "RUN_STARTED":
                return "agui"
        except msgspec.DecodeError:
            pass
    return "envelope"


class ForeignStream:
    """One AG-UI or UI message stream response, event by event, as envelope lines [CL4-b]."""

    def __init__(self, protocol: Protocol) -> None:
        """Create the reader of ``protocol`` (``agui`` or ``vercel``)."""
        from .interop.agui import AguiToEnvelope
        from .interop.vercel import VercelToEnvelope

        self.protocol = protocol
        self.converter: AguiToEnvelope | VercelToEnvelope = (
            AguiToEnvelope() if protocol == "agui" else VercelToEnvelope()
        )
        #: The stream reached its terminator (and nothing began after it).
        self.finished = False
        #: Events fed so far.
        self.events = 0

    def feed(self, data: str) -> list[bytes]:
        """One event's data: the envelope lines it makes (``[DONE]`` ends a response).

        Raises:
            InteropError: the converter's (a code ``I2xx`` and the event's number).
        """
        self.events += 1
        if self.protocol == "vercel" and data.strip() == "[DONE]":
            lines = self.converter.feed(data)
            self.finished = True
            return lines
        lines = self.converter.feed(data)
        if self.protocol == "agui":
            if lines:
                self.finished = lines[-1] == DONE_LINE
            elif self.finished and _typed.decode(data).type == "RUN_STARTED":
                self.finished = False  # another run began on the same body
        elif self.finished:
            self.finished = False  # a chunk after the stream's [DONE]
        return lines

    def close(self) -> list[bytes]:
        """The body ended: what the converter held of the blocks left open (no final)."""
        return self.converter.close()

    def unfinished(self) -> str:
        """What is missing, said for an error [CL4-c]."""
        if self.protocol == "agui":
            return f"the AG-UI stream ended after {self.events} events without RUN_FINISHED or RUN_ERROR"
        return f"the UI message stream ended after {self.events} events without [DONE]"
