"""What the two OpenAI translators share: streamed blocks, the run's meta lines, and ending.

Owns: ``_Base``, the part of ``ChatTranslator`` and ``ResponsesTranslator`` that does
not depend on the API: forwarding text and thinking deltas (with a UTF-16 pair split
across deltas held and joined, [O3-b]), the buffered tool call lines with their input
parsed once ([O4-a]), the ``error`` envelope of an API error ([O7-a]), the ``meta_init``
and ``meta_final`` lines of ``meta=True`` ([O2-a]), and ``finish()``/``abort()``/
``close()``, which end every stream validly ([O8-a]). The ids ``[O…]`` refer to
``spec/openai-adapter.md``.

Does not own: the event tables of each API (``_openai_chat``, ``_openai_responses``),
any I/O, or the SDK. Nothing here imports ``openai``, ``httpx``/``httpx2`` or
``asyncio``; SDK objects are read by duck typing, as the Anthropic adapter reads its own
(and with its helpers).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ._anthropic_adapter import _dumps, _get, _join_pairs, _plain
from ._depth import too_deep
from ._encoder import Emitter, OversizeLine, Profile
from ._errors import DecodeError, EncodeError, OversizeError, SequenceError
from ._limits import DEFAULT_MAX_BYTES, MAX_NESTING_DEPTH
from ._partial_json import complete_prefix
from ._types import BlockKey

if TYPE_CHECKING:
    from ._encoder import CitationData
    from ._types import BufferedType, StreamedType

__all__ = ["error_payload", "int_or_none", "str_or"]

_json_decode = msgspec.json.decode

#: Keys of an OpenAI error object carried into the ``error`` envelope, besides ``type``/``message``.
_ERROR_EXTRAS: Final = ("code", "param")


def error_payload(error: object) -> dict[str, Any]:
    """The JSON payload of an ``error`` envelope for an OpenAI error [O7-a].

    Args:
        error: an SDK exception (``APIError`` and its subclasses carry the API's error
            object in ``.body``), a Responses ``error`` event, a Chat Completions error
            chunk (``{"error": {...}}``), the error object itself, or any other exception.

    Returns:
        ``{"type": ..., "message": ...}`` plus ``code`` and ``param`` when the API set them.
        ``type`` is the API's ``type``, else its ``code``, else ``"api_error"``.
    """
    if isinstance(error, BaseException):
        body = getattr(error, "body", None)
        if isinstance(body, Mapping):
            inner = body.get("error")
            return _shape(inner if isinstance(inner, Mapping) else body, str(getattr(error, "message", error)))
        message = getattr(error, "message", None)
        return {"type": type(error).__name__, "message": message if isinstance(message, str) else str(error)}
    inner = _get(error, "error")
    if inner is not None and _get(error, "type") in (None, "error"):
        error = inner
    data = _plain(error)
    if isinstance(data, Mapping):
        return _shape(data, "")
    return {"type": "api_error", "message": str(data)}


def _shape(data: Mapping[str, Any], fallback: str) -> dict[str, Any]:
    """``type``/``message`` first (the seed's error shape), then the API's ``code`` and ``param``."""
    kind = data.get("type")
    if not isinstance(kind, str) or kind == "error":
        code = data.get("code")
        kind = code if isinstance(code, str) else "api_error"
    message = data.get("message")
    out: dict[str, Any] = {"type": kind, "message": message if isinstance(message, str) else fallback}
    for name in _ERROR_EXTRAS:
        value = _plain(data.get(name))
        if value is not None:
            out[name] = value
    return out


class _Streamed:
    """One text or thinking block being streamed; private and mutable."""

    __slots__ = ("held", "kind", "parts", "sent")

    def __init__(self, kind: StreamedType) -> None:
        self.kind: StreamedType = kind
        self.parts: list[str] = []
        #: A high surrogate that ended the last delta, waiting for its low half [O3-b].
        self.held = ""
        #: Lines were sent, so the block is open on the wire.
        self.sent = False

    @property
    def text(self) -> str:
        return "".join(self.parts)


class _Base:
    """The API-independent half of a translator (see the module docstring)."""

    #: The name of the source in the ``meta_init`` of ``meta=True`` (``migrated_from``) [O2-a].
    SOURCE: str = "openai"

    def __init__(
        self,
        agent: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        strict: bool = False,
        profile: Profile = "default",
        meta: bool = False,
        user_query: str = "",
    ) -> None:
        self._emitter = Emitter(agent, max_bytes, strict=strict, profile=profile)
        self.agent: Final = agent
        self._meta = meta
        self._user_query = user_query
        self._meta_sent = False
        self._ended = False
        self._closed = False
        self._lost: list[BlockKey] = []
        self.model: str | None = None
        self.response_id: str | None = None
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.warnings: list[str] = []

    @property
    def oversize(self) -> list[OversizeLine]:
        """Lines that had to exceed ``max_bytes`` (spec §6.5), oldest first."""
        return self._emitter.oversize

    # ------------------------------------------------------------------ lines

    def _lead(self, lines: list[bytes]) -> list[bytes]:
        """``lines``, after the run's ``meta_init`` when ``meta=True`` and it is not out yet [O2-a]."""
        if not self._meta or self._meta_sent or not lines:
            return lines
        return self._meta_init() + lines

    def _meta_init(self) -> list[bytes]:
        self._meta_sent = True
        payload = {
            "format": "json",
            "user_query": self._user_query,
            "agent_uuid": self.agent,
            "model": self.model or "",
            "migrated_from": self.SOURCE,
        }
        return self._emitter.buffered("meta_init", _dumps(payload, sort=False))

    def _meta_final(self) -> list[bytes]:
        if not self._meta:
            return []
        lead = [] if self._meta_sent else self._meta_init()
        payload: dict[str, Any] = {
            "stop_reason": self.stop_reason or "error",
            "total_steps": 1,
            "cumulative_usage": self.usage,
            "model": self.model or "",
        }
        if self.response_id is not None:
            payload["response_id"] = self.response_id
        # Keys sorted: SDK objects and a capture's dicts list the usage counters in other orders.
        return lead + self._emitter.buffered("meta_final", _dumps(payload))

    def _check_open(self) -> None:
        if self._closed or self._ended:
            raise SequenceError("feed() after the stream ended (close, finish, abort, error)", section="O1-b")

    def _warn(self, message: str) -> None:
        self.warnings.append(message)

    def _stream(self, block: _Streamed, text: str) -> list[bytes]:
        """Lines for one text or thinking delta (spec §5.1) [O3-a], a split UTF-16 pair joined [O3-b]."""
        if not text:
            return []
        if block.held:
            text = block.held + text
            block.held = ""
        if "\ud800" <= text[-1] <= "\udbff":
            block.held, text = text[-1], text[:-1]
            if not text:
                return []
        try:
            lines = self._emitter.streamed(block.kind, text)
        except EncodeError:
            joined = _join_pairs(text)
            if joined == text:
                raise  # a lone surrogate: spec §6.4
            text = joined
            lines = self._emitter.streamed(block.kind, text)
        block.parts.append(text)
        block.sent = True
        return lines

    def _end(self, block: _Streamed) -> list[bytes]:
        """The final marker of a streamed block, when it is open on the wire (spec §5.1)."""
        if block.held:
            raise EncodeError(
                f"lone surrogate U+{ord(block.held):04X} ends a {block.kind} block",
                key=BlockKey(self.agent, block.kind),
                field="$.delta",
                section="6.4",
            )
        return [self._emitter.end(block.kind)] if block.sent else []

    def _citations(self, citations: list[CitationData]) -> list[bytes]:
        return self._emitter.citations(citations) if citations else []

    def _call(self, kind: BufferedType, text: str, call_id: str, name: str, where: str) -> list[bytes]:
        """The lines of one tool call whose arguments are ``text``, parsed once [O4-a]."""
        return self._emitter.buffered(kind, self._arguments(text, kind, where), id=call_id, name=name)

    def _arguments(self, text: str, kind: BufferedType, where: str) -> str:
        """Arguments as sent: the API's text when it is JSON, ``{}`` when empty, a cut one completed [O4-a]."""
        key = BlockKey(self.agent, kind)
        if not text.strip():
            return "{}"  # [O4-a]: a call with no arguments (the API sends "")
        deep = too_deep(text, MAX_NESTING_DEPTH)
        if deep is not None:
            raise DecodeError(
                f"{where} nests deeper than {MAX_NESTING_DEPTH} levels at character {deep}",
                key=key,
                field="$.delta",
                section="O4-a",
            )
        try:
            _json_decode(text)
        except msgspec.DecodeError as exc:
            completed = complete_prefix(text)
            if completed is None:
                raise DecodeError(f"{where}: arguments are not JSON: {exc}", key=key, section="O4-a") from None
            self._warn(f"{where}: arguments were cut after {len(text)} characters; sent completed")
            return completed
        except UnicodeEncodeError:
            return _join_pairs(text)
        return text

    def _buffered(self, kind: BufferedType, data: Any, call_id: str, name: str) -> list[bytes]:
        """A server tool call or result: plain JSON of ``data``, keys sorted [O6-a]."""
        return self._emitter.buffered(kind, _dumps(_plain(data)), id=call_id, name=name)

    # ------------------------------------------------------------------ ending

    def error(self, error: object) -> list[bytes]:
        """Lines of one ``error`` envelope for an API error or an exception [O7-a]; nothing else ends.

        Args:
            error: see ``error_payload``.
        """
        return self._emitter.buffered("error", _dumps(error_payload(error), sort=False))

    def _take_open(self) -> list[_Streamed]:
        """The streamed blocks still open, in the order they opened, now forgotten (subclasses)."""
        raise NotImplementedError

    def _cut_pending(self) -> list[BlockKey]:
        """Forget buffered items (tool calls) still pending; their keys (subclasses)."""
        raise NotImplementedError

    def _complete(self) -> bool:
        """Whether the API said the response ended (subclasses)."""
        raise NotImplementedError

    def _close_open(self, cut: bool) -> list[bytes]:
        """Final markers of every open streamed block; ``cut`` records them as lost."""
        lines: list[bytes] = []
        for block in self._take_open():
            if cut:
                self._lost.append(BlockKey(self.agent, block.kind))
            if cut:
                block.held = ""  # a cut block may end on half a pair: the cut is reported instead
            lines.extend(self._end(block))
        return lines

    def abort(self, reason: object) -> list[bytes]:
        """End the stream after a failure: close what is open, one ``error``, then ``meta_final`` [O8-a].

        Call it when iterating the SDK's stream raised (``APIError`` for a mid-stream
        error, a network error, an ``EnvelopeError`` from ``feed()``). An error fed as an
        event (a Responses ``error`` or ``response.failed``, a Chat error chunk) does the
        same by itself.

        Args:
            reason: see ``error_payload``.

        Returns:
            The closing lines; empty when the stream was already ended.

        Raises:
            OversizeError: strict mode only, when a line cannot fit (spec §6.5).
        """
        if self._ended:
            return []
        self._ended = True
        lines = self._close_open(cut=True)
        self._lost.extend(self._cut_pending())
        self.stop_reason = "error"
        try:
            lines.extend(self.error(reason))
        except EncodeError as exc:
            if isinstance(exc, OversizeError):
                raise
            lines.extend(self.error({"type": "unsendable_error", "message": f"the error could not be encoded: {exc}"}))
        return self._lead(lines) + self._meta_final()

    def finish(self) -> list[bytes]:
        """End the stream when the events ran out [O8-a].

        A complete response (Chat: a ``finish_reason``; Responses: ``response.completed``
        or ``response.incomplete``) gives only ``meta_final`` (``meta=True``), else nothing.
        A cut one gives ``abort()``'s lines with an ``incomplete_stream`` error.

        Returns:
            The closing lines.
        """
        if self._ended:
            self.close()
            return []
        if not self._complete():
            lines = self.abort(
                {"type": "incomplete_stream", "message": "the API stream ended before the response was complete"}
            )
        else:
            self._ended = True
            lines = self._lead(self._close_open(cut=False)) + self._meta_final()
        self.close()
        return lines

    def close(self) -> list[BlockKey]:
        """Stop taking events; the ``(agent, type)`` keys of the blocks the stream cut [O8-a].

        Emits nothing: ``finish()`` is the call that also ends the stream validly.
        """
        if not self._closed:
            self._closed = True
            for block in self._take_open():
                self._lost.append(BlockKey(self.agent, block.kind))
            self._lost.extend(self._cut_pending())
        return list(self._lost)


def str_or(value: object, default: str = "") -> str:
    """``value`` when it is a str, else ``default``."""
    return value if isinstance(value, str) else default


def int_or_none(value: object) -> int | None:
    """``value`` when it is an int (not a bool), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
