"""Anthropic Messages API stream events to envelope lines: the seed's formatter layer.

Owns: ``AnthropicTranslator``, which turns one API call's stream events (the SDK's
typed events, raw or beta, or the same events as plain dicts from a recording) into
envelope lines, and accumulates the assistant message so the caller can append it
to its history without a second pass (``finalize()``). The decisions it applies are
written, with reasons, in ``spec/anthropic-adapter.md``; the ids ``[A…]`` cited
below refer to that file.

Does not own: any I/O or the SDK itself. Nothing here imports ``anthropic``,
``httpx``/``httpx2`` or ``asyncio``; SDK objects are read by duck typing
(attribute access, never ``model_dump`` per delta), and one conversion to plain
data (``to_dict``) happens at most once per *block* (server tool results, unknown
blocks) or per citation. Serving recordings to the real SDK client lives in
``agent_ref.models.replay``. Chunking and the byte layout of lines are the ``Emitter``'s.

The machine is three tables at the end of the module, drawn there: stream event
type -> handler (``_EVENTS``), delta type -> handler (``_DELTAS``), and envelope type
-> what a block's stop sends (``_STOPS``), each entry beside the spec rule it applies.

The per-block state is small: for each content block index, its API type, the
envelope type it maps to, and a list of string parts. Tool input JSON is gathered
as a list of strings and joined and parsed exactly once, at ``content_block_stop``
([A4.1-a]); text and thinking are forwarded as they arrive ([A3.1-a]).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

from ._decoder import CITATION_FIELDS
from ._depth import too_deep
from ._encoder import CitationData, Emitter, OversizeLine, Profile
from ._errors import DecodeError, EncodeError, OversizeError, SequenceError
from ._limits import DEFAULT_MAX_BYTES, MAX_NESTING_DEPTH
from ._partial_json import complete_prefix
from ._types import BlockKey

if TYPE_CHECKING:
    from ._types import BufferedType, StreamedType

__all__ = ["AnthropicTranslator", "error_payload"]

_json_decode = msgspec.json.decode
_json_encode = msgspec.json.encode

#: Events ``messages.stream()`` derives from a raw event it has already yielded; the
#: raw event carries the same data, so these are dropped to avoid doubling [A2.2-a].
DERIVED_EVENTS: Final = frozenset({"text", "thinking", "citation", "input_json", "signature", "compaction"})
#: Raw events with nothing to emit or accumulate.
_SILENT_EVENTS: Final = frozenset({"ping"})
#: Client tool blocks: the caller runs the tool, so the envelope is ``tool_call`` [A4.1-b].
_CLIENT_CALLS: Final = frozenset({"tool_use"})
#: Tool calls the API runs itself: ``server_tool_call`` [A4.2-a].
_SERVER_CALLS: Final = frozenset({"server_tool_use", "mcp_tool_use"})
#: Known block types with no envelope: kept for ``finalize()`` only, without a warning [A5.1-a].
_SILENT_BLOCKS: Final = frozenset(
    {"redacted_thinking", "container_upload", "mcp_tool_listing", "fallback", "compaction"}
)
#: Citation extras the envelope carries (spec §4.5), besides ``cited_text`` and ``type``.
_CITATION_EXTRAS: Final = tuple(name for name in CITATION_FIELDS if name != "citation_type")
#: Usage counters reported by ``usage`` (ints only; nested objects are left out).
_USAGE_KEYS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
#: SDK-only fields that never appear on the wire and must not go back to the API.
_SDK_ONLY_FIELDS: Final = frozenset({"parsed_output"})


def _get(obj: Any, name: str) -> Any:
    """Field ``name`` of an SDK object or a dict, ``None`` when absent (duck typing)."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _plain(obj: Any, depth: int = 0) -> Any:
    """JSON-able plain data for ``obj``: dicts, lists, str, int, float, bool, None.

    SDK models go through their own ``to_dict(mode="json")`` (wire names, only the
    fields the API set), pydantic models without it through ``model_dump``. Used once
    per block or citation, never per delta.

    Raises:
        EncodeError: data nested deeper than ``MAX_NESTING_DEPTH`` (or a cycle) [A5.3-a],
            or an object that is not JSON data [A4.3-b].
    """
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if depth >= MAX_NESTING_DEPTH:
        # [A5.3-a]: refused before the interpreter's recursion limit (a cycle ends here too).
        raise EncodeError(f"block data nests deeper than {MAX_NESTING_DEPTH} levels", section="A5.3-a")
    if isinstance(obj, Mapping):
        return {str(k): _plain(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v, depth + 1) for v in obj]
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return _plain(to_dict(mode="json"), depth)
    model_dump = getattr(obj, "model_dump", None)
    if callable(model_dump):
        return _plain(model_dump(mode="json", by_alias=True, exclude_unset=True), depth)
    # Never a repr() (the peer implementation's mistake): refuse instead.
    raise EncodeError(f"cannot convert a {type(obj).__name__} to JSON data", section="A4.3-b")


def _show(value: Any) -> str:
    """A caller's value in a warning: a short repr of a str, int or None, else its type [A5.3-a].

    Never the repr of a container: a list nested a thousand deep would raise
    ``RecursionError`` from inside a warning.
    """
    if value is None or isinstance(value, str | int | float):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"<{type(value).__name__}>"


def _dumps(data: Any, *, sort: bool = True) -> str:
    """Compact JSON text of plain data, keys sorted [A4.3-b]; a lone surrogate is spec §6.4's error."""
    try:
        return _json_encode(data, order="sorted" if sort else None).decode()
    except UnicodeEncodeError as exc:
        bad = exc.object[exc.start] if isinstance(exc.object, str) else "?"
        raise EncodeError(
            f"lone surrogate U+{ord(bad):04X} in block data cannot be encoded as UTF-8", section="6.4"
        ) from None


def _api_block(obj: Any) -> dict[str, Any]:
    """A content block as the API would return it: plain, no top-level nulls, no SDK-only fields [A6.1-b]."""
    data = _plain(obj)
    if not isinstance(data, dict):
        return {"type": str(data)}
    return {k: v for k, v in data.items() if v is not None and k not in _SDK_ONLY_FIELDS}


def error_payload(error: object) -> dict[str, Any]:
    """The JSON payload of an ``error`` envelope for an API error event or exception [A7.1-a].

    Args:
        error: a stream ``error`` event (dict or object with an ``error`` member), the
            inner error object itself (``{"type": ..., "message": ...}``), or an
            exception. An SDK ``APIStatusError`` carries the API's error body in
            ``.body``; it is used when it has the API's shape.

    Returns:
        ``{"type": <error type>, "message": <text>}`` plus any other fields the API sent.
    """
    if isinstance(error, BaseException):
        body = getattr(error, "body", None)
        inner = _get(body, "error") if isinstance(body, Mapping) else None
        if isinstance(inner, Mapping) and isinstance(inner.get("type"), str):
            return dict(_plain(inner))
        kind = getattr(error, "type", None)
        if not isinstance(kind, str):
            kind = type(error).__name__
        message = getattr(error, "message", None)
        return {"type": kind, "message": message if isinstance(message, str) else str(error)}
    inner = _get(error, "error")
    if inner is not None and _get(error, "type") == "error":
        error = inner
    data = _plain(error)
    if isinstance(data, dict) and isinstance(data.get("type"), str):
        return data
    return {"type": "api_error", "message": str(data)}


class _Block:
    """One content block being received; private and mutable."""

    __slots__ = (
        "api_type",
        "citations",
        "cut",
        "done",
        "final",
        "held",
        "index",
        "input",
        "key",
        "parts",
        "sent",
        "signature",
        "start",
        "updates",
    )

    def __init__(self, index: int, api_type: str, key: BlockKey | None, start: Any) -> None:
        self.index = index
        self.api_type = api_type
        #: The envelope block this one writes to, ``None`` for blocks with no envelope.
        self.key = key
        #: The ``content_block`` of ``content_block_start`` (SDK object or dict), as given.
        self.start = start
        #: Text, thinking or partial JSON strings in arrival order; joined once at stop.
        self.parts: list[str] = []
        self.citations: list[Any] = []
        self.signature: str | None = None
        #: The tool input, parsed once at ``content_block_stop`` (tool blocks only).
        self.input: Any = None
        #: No more events are taken for it: stopped, or cut (below).
        self.done = False
        #: Ended by the stream's end, an error or a new message, not by its stop [A8.2-a].
        self.cut = False
        #: A streamed block that has sent a line, so is open on the wire.
        self.sent = False
        #: A high surrogate that ended the last text delta, waiting for its low half [A3.1-c].
        self.held = ""
        #: Fields a delta replaced in a block with no envelope (``compaction_delta``) [A5.4-a].
        self.updates: dict[str, Any] = {}
        #: The block as ``finalize()`` gives it, built once at its stop.
        self.final: dict[str, Any] | None = None


class AnthropicTranslator:
    """Translate one Messages API stream into envelope lines, sans I/O.

    Feed every event of one API call in order, as the SDK yields them (raw, beta or
    ``messages.stream()`` events, derived ones included) or as plain dicts; send the
    returned lines (``frame()`` them for SSE). At the end call ``finish()`` (or
    ``abort(exc)`` when iterating raised) for the lines that end the stream validly,
    and ``finalize()`` for the assistant turn.

    Example::

        t = AnthropicTranslator(agent_id)
        try:
            async for event in stream:
                for line in t.feed(event):
                    await send(frame(line))
            closing = t.finish()  # empty unless the stream was cut
        except Exception as exc:
            closing = t.abort(exc)  # close what is open, then an error envelope
        for line in closing:
            await send(frame(line))
        messages.append({"role": "assistant", "content": t.finalize()})

    Attributes:
        agent: the agent id written into every envelope.
        stop_reason: ``stop_reason`` of the last ``message_delta``, else ``None``.
        stop_sequence: ``stop_sequence`` of the last ``message_delta``, else ``None``.
        message_id: ``id`` of the message from ``message_start``.
        model: ``model`` from ``message_start``.
        usage: token counters (``input_tokens``, ``output_tokens`` and the cache
            counters when the API sent them); ``message_delta`` values are running
            totals and replace earlier ones, as in the SDK's own accumulation.
        warnings: one message per event or block that was passed over [A5.2-a].
    """

    __slots__ = (
        "_blocks",
        "_closed",
        "_emitter",
        "_ended",
        "_lost",
        "_started",
        "_stopped",
        "agent",
        "message_id",
        "model",
        "stop_reason",
        "stop_sequence",
        "usage",
        "warnings",
    )

    def __init__(
        self, agent: str, max_bytes: int = DEFAULT_MAX_BYTES, *, strict: bool = False, profile: Profile = "default"
    ) -> None:
        """Create a translator for one agent's API call.

        Args:
            agent: the agent id of every envelope.
            max_bytes: the bound on each line (spec §6.1).
            strict: raise ``OversizeError`` where a line cannot fit (spec §6.5)
                instead of reporting it in ``oversize``.
            profile: the emitter profile (spec §10.2): in ``"seed"`` an ``error``
                envelope is one line whatever its length [A1-c].

        Raises:
            EncodeError: ``max_bytes`` is not a positive int, ``agent`` is not a str,
                or ``profile`` is unknown.
        """
        self._emitter = Emitter(agent, max_bytes, strict=strict, profile=profile)
        self.agent: Final = agent
        self._blocks: dict[int, _Block] = {}
        self._lost: list[BlockKey] = []
        self._started = False
        self._stopped = False
        self._closed = False
        self._ended = False
        self.message_id: str | None = None
        self.model: str | None = None
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.usage: dict[str, int] = {}
        self.warnings: list[str] = []

    @property
    def oversize(self) -> list[OversizeLine]:
        """Lines that had to exceed ``max_bytes`` (spec §6.5), oldest first."""
        return self._emitter.oversize

    # ------------------------------------------------------------------ feeding

    def feed(self, event: object) -> list[bytes]:
        """Translate one stream event into envelope lines (unframed JSON).

        Args:
            event: an SDK stream event object (``RawMessageStreamEvent``, its beta twin,
                or any ``MessageStreamEvent`` of ``messages.stream()``) or the same as a dict.

        Returns:
            Zero or more envelope lines.

        Raises:
            SequenceError: ``feed()`` after the stream was ended [A2.1-b].
            DecodeError: a tool block's accumulated input is no prefix of JSON [A4.1-c],
                or nests deeper than ``MAX_NESTING_DEPTH`` [A4.1-d].
            EncodeError: a lone surrogate in text or tool input (spec §6.4), or a block
                holding something that is not JSON data (an object with neither
                ``to_dict`` nor ``model_dump``).
            OversizeError: strict mode only (spec §6.5).
        """
        if self._closed or self._ended:
            raise SequenceError("feed() after the stream ended (close, finish, abort, error event)", section="A2.1-b")
        kind = _get(event, "type")
        if not isinstance(kind, str):
            # [A5.3-a]: not an event the API sends; passed over like an unknown type.
            self._warn(f"event whose type is a {type(kind).__name__}, not a string, passed over")
            return []
        handler = _EVENTS.get(kind)
        if handler is None:
            self._warn(f"unknown stream event type {_show(kind)} passed over")  # [A5.2-a]
            return []
        return handler(self, event)

    def error(self, error: object) -> list[bytes]:
        """Lines of one ``error`` envelope for an API error event or an SDK exception.

        The SDK raises on a mid-stream ``error`` event instead of yielding it; pass the
        exception here to send the same envelope a recorded ``error`` event gives.

        Args:
            error: see ``error_payload``.

        Returns:
            The lines of one buffered ``error`` envelope (spec §4.13).
        """
        payload = _dumps(error_payload(error), sort=False)  # the API's own key order
        return self._emitter.buffered("error", payload)

    def _message_start(self, event: Any) -> list[bytes]:
        lines: list[bytes] = []
        if self._started:
            # [A2.1-c]: a new message starts a new turn; earlier blocks left open are lost,
            # and closed on the wire so that the new message's blocks do not join them.
            self._warn("second message_start: one translator serves one API call; the earlier message is dropped")
            lines = self._cut_open_blocks()
            self._blocks = {}
            self.stop_reason = None
            self.stop_sequence = None
            self.usage = {}
            self._stopped = False
        self._started = True
        message = _get(event, "message")
        mid = _get(message, "id")
        model = _get(message, "model")
        self.message_id = mid if isinstance(mid, str) else None
        self.model = model if isinstance(model, str) else None
        self._usage(_get(message, "usage"))
        return lines

    def _message_delta(self, event: Any) -> list[bytes]:
        delta = _get(event, "delta")
        reason = _get(delta, "stop_reason")
        if reason is not None:
            self.stop_reason = str(reason)
        sequence = _get(delta, "stop_sequence")
        if sequence is not None:
            self.stop_sequence = str(sequence)
        self._usage(_get(event, "usage"))
        return []

    def _message_stop(self, event: Any) -> list[bytes]:  # noqa: ARG002  # one signature for the table
        self._stopped = True
        return []

    def _nothing(self, event: Any) -> list[bytes]:  # noqa: ARG002  # one signature for the table
        return []

    def _usage(self, usage: Any) -> None:
        if usage is None:
            return
        for name in _USAGE_KEYS:
            value = _get(usage, name)
            # Running totals: a later value replaces the earlier one; an absent one keeps it.
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[name] = value

    def _start(self, event: Any) -> list[bytes]:
        index = _get(event, "index")
        block = _get(event, "content_block")
        api_type = _get(block, "type")
        if not isinstance(index, int) or not isinstance(api_type, str):
            self._warn(f"content_block_start without an int index and a block type (index {_show(index)}) passed over")
            return []
        old = self._blocks.get(index)
        lines: list[bytes] = []
        if old is not None and not old.done and old.key is not None:
            self._warn(f"content_block_start for index {index} while that block is open; the open one is lost")
            lines = self._cut(old)
        key = self._key_for(api_type)
        if key is None and api_type not in _SILENT_BLOCKS:
            self._warn(f"unknown content block type {_show(api_type)} at index {index}: kept for finalize(), not sent")
        state = _Block(index, api_type, key, block)
        self._blocks[index] = state
        if api_type == "fallback":
            # [A5.4-a]: the model that serves the rest of the response, as the SDK records it.
            model = _get(_get(block, "to"), "model")
            self.model = model if isinstance(model, str) else self.model
        streamed: StreamedType
        if api_type == "text":
            streamed = "text"
        elif api_type == "thinking":
            streamed = "thinking"
            signature = _get(block, "signature")
            state.signature = signature if isinstance(signature, str) else None
        else:
            return lines
        # The API starts these empty; text given at start is content all the same.
        initial = _get(block, api_type)
        if isinstance(initial, str) and initial:
            lines.extend(self._stream(state, streamed, initial))
        return lines

    def _stream(self, block: _Block, kind: StreamedType, text: str) -> list[bytes]:
        """Lines for one text or thinking delta (spec §5.1), chunked when oversized [A3.1-b].

        [A3.1-c] A UTF-16 surrogate pair may arrive split across two deltas (the API's
        JSON escapes ``\\ud83d`` and ``\\ude00`` in two events): a high surrogate that
        ends a delta is held back and joined to the next delta's low one. Joining costs
        nothing on the usual path: pairs are looked for only when encoding failed.
        """
        held = block.held
        if held:
            text = held + text
        if "\ud800" <= text[-1] <= "\udbff":
            held, text = text[-1], text[:-1]
            if not text:
                block.held = held
                return []
        else:
            held = ""
        try:
            lines = self._emitter.streamed(kind, text)
        except EncodeError:
            joined = _join_pairs(text)
            if joined == text:
                raise  # a lone surrogate: spec §6.4
            text = joined
            lines = self._emitter.streamed(kind, text)
        block.held = held
        block.parts.append(text)
        block.sent = True
        return lines

    def _key_for(self, api_type: str) -> BlockKey | None:
        """The envelope block of an API block type, ``None`` when it has none."""
        if api_type in ("text", "thinking"):
            return BlockKey(self.agent, api_type)
        if api_type in _CLIENT_CALLS:
            return BlockKey(self.agent, "tool_call")
        if api_type in _SERVER_CALLS:
            return BlockKey(self.agent, "server_tool_call")
        if api_type.endswith("_tool_result"):  # [A4.3-a]: every *_tool_result block
            return BlockKey(self.agent, "server_tool_result")
        return None

    def _live(self, event: Any, what: str) -> _Block | None:
        index = _get(event, "index")
        block = self._blocks.get(index) if isinstance(index, int) else None
        if block is None or block.done:
            state = "closed" if block is not None else "never started"
            self._warn(f"{what} for block index {_show(index)}, which is {state}, passed over")
            return None
        return block

    def _delta(self, event: Any) -> list[bytes]:
        block = self._live(event, "content_block_delta")
        if block is None:
            return []
        delta = _get(event, "delta")
        kind = _get(delta, "type")
        entry = _DELTAS.get(kind) if isinstance(kind, str) else None
        if entry is None or block.api_type not in entry[0]:
            self._warn(f"{_show(kind)} delta for a {block.api_type!r} block at index {block.index} passed over")
            return []  # [A5.2-a]
        return entry[1](self, block, delta)

    def _text_delta(self, block: _Block, delta: Any) -> list[bytes]:
        text = _get(delta, "text")
        return self._stream(block, "text", text) if isinstance(text, str) and text else []

    def _thinking_delta(self, block: _Block, delta: Any) -> list[bytes]:
        text = _get(delta, "thinking")
        return self._stream(block, "thinking", text) if isinstance(text, str) and text else []

    def _input_json_delta(self, block: _Block, delta: Any) -> list[bytes]:
        partial = _get(delta, "partial_json")
        if isinstance(partial, str) and partial:
            block.parts.append(partial)  # [A4.1-a]: never parsed here
        return []

    def _citations_delta(self, block: _Block, delta: Any) -> list[bytes]:
        block.citations.append(_get(delta, "citation"))  # [A3.3-a]: emitted after the final marker
        return []

    def _signature_delta(self, block: _Block, delta: Any) -> list[bytes]:
        signature = _get(delta, "signature")
        block.signature = signature if isinstance(signature, str) else block.signature  # [A3.2-a]
        return []

    def _compaction_delta(self, block: _Block, delta: Any) -> list[bytes]:
        # [A5.4-a]: no envelope; each delta replaces both fields, as the SDK's accumulation does.
        block.updates = {name: _get(delta, name) for name in ("content", "encrypted_content")}
        return []

    def _stop(self, event: Any) -> list[bytes]:
        block = self._live(event, "content_block_stop")
        if block is None:
            return []
        lines = self._stop_lines(block)
        # The history form is built here, once, so that data no API block holds (nested
        # too deep, not JSON) fails at this stop and never later in finalize() [A5.3-a].
        block.final = self._final_block(block)
        # Only now: a block whose stop raised stays open, so abort() closes it and
        # finalize() leaves it out (never a tool_use with ``input: null``).
        block.done = True
        return lines

    def _stop_lines(self, block: _Block) -> list[bytes]:
        key = block.key
        if key is None:
            return []
        kind = key.type
        if block.held:
            # [A3.1-c]: the block ended on a high surrogate with no low one after it.
            raise EncodeError(
                f"lone surrogate U+{ord(block.held):04X} ends the {kind} block at index {block.index}",
                key=key,
                field="$.delta",
                section="6.4",
            )
        return _STOPS[kind](self, block)

    def _stop_text(self, block: _Block) -> list[bytes]:
        lines = [self._emitter.end("text")]  # spec §5.1
        if block.citations:
            # spec §5.4 / [A3.3-a]: right after the text block's final marker.
            lines.extend(self._emitter.citations([_citation_data(c) for c in block.citations]))
        return lines

    def _stop_thinking(self, block: _Block) -> list[bytes]:  # noqa: ARG002  # one signature for the table
        return [self._emitter.end("thinking")]  # spec §5.1

    def _stop_result(self, block: _Block) -> list[bytes]:
        # [A4.3-b]: the block's content as real JSON; the id is the call's id.
        # Keys sorted, so SDK objects and recorded dicts give the same bytes.
        content = _dumps(_plain(_get(block.start, "content")))
        tool_use_id = _get(block.start, "tool_use_id")
        return self._emitter.buffered(
            "server_tool_result",
            content,
            id=tool_use_id if isinstance(tool_use_id, str) else "",
            name=block.api_type,
        )

    def _stop_call(self, block: _Block) -> list[bytes]:
        payload = self._tool_input_text(block)  # [A4.1-a] .. [A4.1-d]
        call_type: BufferedType = "tool_call" if block.api_type in _CLIENT_CALLS else "server_tool_call"
        block_id = _get(block.start, "id")
        name = _get(block.start, "name")
        return self._emitter.buffered(
            call_type,
            payload,
            id=block_id if isinstance(block_id, str) else "",
            name=name if isinstance(name, str) else "",
        )

    def _tool_input_text(self, block: _Block) -> str:
        """Join the partial JSON once and parse it once [A4.1-a]; a cut input as the SDK reads it [A4.1-c]."""
        if not block.parts:
            # No deltas: the input given at start is the input (usually ``{}``).
            block.input = _plain(_get(block.start, "input") or {})
            return _dumps(block.input)
        text = "".join(block.parts)
        block.parts = [text]
        where = f"tool input of block {block.index} ({block.api_type})"
        deep = too_deep(text, MAX_NESTING_DEPTH)
        if deep is not None:
            # [A4.1-d]: refused before any parser recurses (the SDK's own parser refuses at ~200).
            raise DecodeError(
                f"{where} nests deeper than {MAX_NESTING_DEPTH} levels at character {deep}",
                key=block.key,
                field="$.delta",
                section="A4.1-d",
            )
        try:
            block.input = _json_decode(text)
        except msgspec.DecodeError as exc:
            completed = complete_prefix(text)
            if completed is None:
                raise DecodeError(f"{where} is not JSON: {exc}", key=block.key, section="A4.1-c") from None
            try:
                block.input = _json_decode(completed)
            except msgspec.DecodeError:
                raise DecodeError(f"{where} is not JSON: {exc}", key=block.key, section="A4.1-c") from None
            # [A4.1-c]: cut by max_tokens; the SDK's final message holds this value too.
            self._warn(f"{where} was cut after {len(text)} characters; sent as the SDK reads it")
            return completed
        except UnicodeEncodeError as exc:
            joined = _join_pairs(text)
            if joined != text:
                # A pair split across two deltas, joined by "".join as two code points.
                block.parts = [joined]
                return self._tool_input_text(block)
            raise EncodeError(
                f"{where}: lone surrogate U+{ord(text[exc.start]):04X} at index {exc.start} cannot be encoded as UTF-8",
                key=block.key,
                field="$.delta",
                section="6.4",
            ) from None
        return text

    def _warn(self, message: str) -> None:
        self.warnings.append(message)

    # ------------------------------------------------------------------ ending

    def close(self) -> list[BlockKey]:
        """Stop taking events and report the envelope blocks the stream cut. Emits nothing [A8.1-a].

        A streamed block (text, thinking) cut mid-block has sent ``final: false`` lines
        and never its final marker; a tool call or server tool result cut before its
        ``content_block_stop`` has sent nothing. Both are reported, and so are blocks
        ``abort()``/``finish()`` or a second ``message_start`` already closed on the wire.
        ``close()`` closes nothing itself; ``finish()`` is the call that also ends the
        stream validly. Calling it again returns the same keys.

        Returns:
            The ``(agent, type)`` keys, in the order they were cut; empty for a complete stream.
        """
        if self._closed:
            return list(self._lost)
        self._closed = True
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if not block.done:
                if block.key is None:
                    self._warn(f"{block.api_type!r} block at index {index} left open at end of stream")
                else:
                    self._lost.append(block.key)
        if self._started and not self._stopped:
            self._warn("stream ended before message_stop")
        return list(self._lost)

    def abort(self, reason: object) -> list[bytes]:
        """End the stream after a failure: close what is open on the wire, then one ``error`` [A8.2-a].

        Call it when iterating the API stream raised (the SDK's ``APIStatusError`` for a
        mid-stream ``error`` event, a network error, an ``EnvelopeError`` from ``feed()``).
        A stream ``error`` event fed as a dict does the same by itself. Each streamed
        block that has sent lines gets its final marker, so no block stays open (the
        validator's E120); the ``error`` envelope after them says the output was cut.
        Calls and results cut before their stop sent nothing and send nothing. Cut
        blocks are left out of ``finalize()`` and reported by ``close()``.

        Args:
            reason: what ended the stream, as ``error_payload`` takes it (an exception,
                an API error event or its ``error`` object).

        Returns:
            The closing lines: final markers, then the lines of one ``error`` envelope.
            Empty when the stream was already ended (by ``abort()``, ``finish()`` or an
            ``error`` event): its error is out already.

        Raises:
            OversizeError: strict mode only, when a final marker cannot fit (spec §6.5).
                Nothing else: a reason that cannot be encoded gives an
                ``unsendable_error`` envelope instead [A5.3-a].
        """
        if self._ended:
            return []
        self._ended = True
        lines = self._cut_open_blocks()
        try:
            lines.extend(self.error(reason))
        except EncodeError as exc:
            # The reason itself cannot be sent (a lone surrogate, data nested too deep):
            # the stream still ends with an error that says so [A8.2-a].
            if isinstance(exc, OversizeError):
                raise
            fallback = {"type": "unsendable_error", "message": f"the error could not be encoded: {exc}"}
            lines.extend(self.error(fallback))
        return lines

    def finish(self) -> list[bytes]:
        """End the stream when the API's events ran out: nothing if it was complete [A8.2-a].

        Complete means a ``message_start``, a ``message_stop`` and no block left open.
        Otherwise the stream was cut (a dropped connection, a proxy that stops early):
        the lines are those of ``abort()`` with the error
        ``{"type": "incomplete_stream", "message": ...}``. Either way the translator is
        closed afterwards, as by ``close()``.

        Returns:
            The closing lines; empty for a complete stream or one already ended.
        """
        lines: list[bytes] = []
        if not self._ended:
            open_keys = [b.key.type for i in sorted(self._blocks) if (b := self._blocks[i]).key and not b.done]
            cut = [key.type for key in self._lost] + open_keys
            if not (self._started and self._stopped) or cut:
                what = "before message_stop" if not self._stopped else "with blocks left open"
                detail = f"; cut: {', '.join(cut)}" if cut else ""
                message = f"the API stream ended {what}{detail}"
                lines = self.abort({"type": "incomplete_stream", "message": message})
            self._ended = True
        self.close()
        return lines

    def _cut_open_blocks(self) -> list[bytes]:
        """Cut every open block, in index order; the final markers of those open on the wire."""
        lines: list[bytes] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if not block.done:
                lines.extend(self._cut(block))
        return lines

    def _cut(self, block: _Block) -> list[bytes]:
        """Mark one open block cut [A8.2-a]; its final marker when it is streamed and open on the wire."""
        block.done = True
        block.cut = True
        if block.key is None:
            self._warn(f"{block.api_type!r} block at index {block.index} left open at end of stream")
            return []
        self._lost.append(block.key)
        if block.sent and block.key.type in ("text", "thinking"):
            return [self._emitter.end(block.api_type)]  # type: ignore[arg-type]  # text or thinking, checked
        return []

    def finalize(self) -> list[dict[str, Any]]:
        """The assistant content received so far, as the API returns it [A6.1-a].

        Blocks in index order, each a fresh JSON-able dict (its nested values are
        shared between calls), ready to send back as the
        ``content`` of the assistant turn. Only completed blocks are included: a block
        the stream cut is not a block the API would accept back.

        Returns:
            A list of content block dicts.
        """
        out: list[dict[str, Any]] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.final is not None and not block.cut:
                out.append(dict(block.final))  # a fresh dict: a caller may set `input` on it
        return out

    def _final_block(self, block: _Block) -> dict[str, Any]:
        api_type = block.api_type
        if api_type == "text":
            data: dict[str, Any] = {"type": "text", "text": "".join(block.parts)}
            if block.citations:
                # As received (nulls kept): citations go back to the API unchanged.
                data["citations"] = [_plain(c) for c in block.citations]
            return data
        if api_type == "thinking":
            return {"type": "thinking", "thinking": "".join(block.parts), "signature": block.signature or ""}
        data = _api_block(block.start)
        for name, value in block.updates.items():
            if value is None:
                data.pop(name, None)  # [A6.1-b]: no top-level nulls
            else:
                data[name] = _plain(value)
        if block.key is not None and block.key.type in ("tool_call", "server_tool_call"):
            data["input"] = block.input
        return data


# ---------------------------------------------------------------------- the machine
#
# One API call is one small machine per content block index, driven by the events in
# the order the API sends them:
#
#     message_start ─┬─> content_block_start(i) ─> content_block_delta(i)* ─> content_block_stop(i) ─┐
#                    │        (a block: OPEN)            (accumulate / stream)       (DONE: emit)       │
#                    └──────────────────────────── message_delta ─> message_stop <─────────────────────┘
#
# An ``error`` event, ``abort()`` or ``finish()`` on a cut stream moves every OPEN block
# to CUT (final markers for those open on the wire, then one ``error``) [A8.2-a]. Any
# event or delta not in these tables, or a delta for a block of the wrong type, is
# passed over with one warning [A5.2-a]. The spec rule beside each entry is the one
# its handler applies (spec/anthropic-adapter.md).

_Handler = Callable[[AnthropicTranslator, Any], list[bytes]]
_BlockHandler = Callable[[AnthropicTranslator, _Block, Any], list[bytes]]

#: Stream event type -> handler.
_EVENTS: Final[dict[str, _Handler]] = {
    "message_start": AnthropicTranslator._message_start,  # [A2.1-c]: a second one starts over
    "content_block_start": AnthropicTranslator._start,  # [A3.1-a] [A5.1-a] [A5.4-a]: open block i
    "content_block_delta": AnthropicTranslator._delta,  # by the _DELTAS table below
    "content_block_stop": AnthropicTranslator._stop,  # by the _STOPS table below
    "message_delta": AnthropicTranslator._message_delta,  # stop reason, running usage
    "message_stop": AnthropicTranslator._message_stop,  # the stream is complete [A8.2-a]
    "error": AnthropicTranslator.abort,  # [A7.1-a]: the API ends the stream with it
    **dict.fromkeys(sorted(_SILENT_EVENTS), AnthropicTranslator._nothing),  # ping
    **dict.fromkeys(sorted(DERIVED_EVENTS), AnthropicTranslator._nothing),  # [A2.2-a]
}
#: Delta type -> (the API block types it belongs to, handler).
_DELTAS: Final[dict[str, tuple[frozenset[str], _BlockHandler]]] = {
    "text_delta": (frozenset({"text"}), AnthropicTranslator._text_delta),  # spec §5.1 [A3.1-a..c]
    "thinking_delta": (frozenset({"thinking"}), AnthropicTranslator._thinking_delta),  # spec §5.1
    "input_json_delta": (_CLIENT_CALLS | _SERVER_CALLS, AnthropicTranslator._input_json_delta),  # [A4.1-a]
    "citations_delta": (frozenset({"text"}), AnthropicTranslator._citations_delta),  # [A3.3-a]
    "signature_delta": (frozenset({"thinking"}), AnthropicTranslator._signature_delta),  # [A3.2-a]
    "compaction_delta": (frozenset({"compaction"}), AnthropicTranslator._compaction_delta),  # [A5.4-a]
}
#: Envelope type of a block -> what its ``content_block_stop`` sends.
_STOPS: Final[dict[str, Callable[[AnthropicTranslator, _Block], list[bytes]]]] = {
    "text": AnthropicTranslator._stop_text,  # final marker, then citations [A3.3-a]
    "thinking": AnthropicTranslator._stop_thinking,  # final marker
    "tool_call": AnthropicTranslator._stop_call,  # the joined input, parsed once [A4.1-a]
    "server_tool_call": AnthropicTranslator._stop_call,  # [A4.2-a]
    "server_tool_result": AnthropicTranslator._stop_result,  # content as JSON [A4.3-a] [A4.3-b]
}


def _join_pairs(text: str) -> str:
    """``text`` with each UTF-16 surrogate pair (two code points) made one code point.

    Lone surrogates stay as they are. Used only after encoding failed, so the round
    trip through UTF-16 costs nothing on the usual path.
    """
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _citation_data(citation: Any) -> CitationData:
    """The envelope citation (spec §4.5) of one API citation [A3.3-b]."""
    fields: dict[str, Any] = {}
    for name in _CITATION_EXTRAS:
        value = _get(citation, name)
        # spec §3.3: absent, never null; a wrong JSON type is left out rather than sent.
        if value is None:
            continue
        if name.endswith(("_index", "_number")):
            if isinstance(value, int) and not isinstance(value, bool):
                fields[name] = value
        elif isinstance(value, str):
            fields[name] = value
    cited = _get(citation, "cited_text")
    kind = _get(citation, "type")
    if kind == "search_result_location" and "url" not in fields:
        # [A3.3-c]: a search result's `source` is its URL (or the caller's identifier).
        source = _get(citation, "source")
        if isinstance(source, str):
            fields["url"] = source
    return CitationData(
        cited_text=cited if isinstance(cited, str) else "",
        citation_type=kind if isinstance(kind, str) else "unknown",
        **fields,
    )
