"""OpenAI Responses API stream events to envelope lines.

Owns: ``ResponsesTranslator``, which turns one streamed Responses call (the SDK's typed
``response.*`` events, raw or from ``responses.stream()``, or the same as plain dicts
from a capture) into envelope lines, and gives the output items back for the next
request (``finalize()``). The decisions it applies are in ``spec/openai-adapter.md``;
the ids ``[O…]`` cited below refer to that file.

Does not own: I/O or the SDK (nothing here imports ``openai`` or an HTTP client), the
streamed-block and ending logic shared with the Chat translator (``_openai_common``),
or chunking (the ``Emitter``'s).

The machine is two tables at the end of the module: event type -> handler (``_EVENTS``)
and output item type -> what its ``response.output_item.done`` sends (``_ITEMS``). Text
and reasoning stream as they arrive, one block per content part or summary part
[O3-a]; every tool item is sent whole when its ``output_item.done`` arrives, from the
item the API completed [O4-d] [O6-a].
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ._anthropic_adapter import _get, _plain, _show
from ._encoder import CitationData, Profile
from ._limits import DEFAULT_MAX_BYTES
from ._openai_common import _Base, _Streamed, int_or_none, str_or
from ._types import BlockKey

__all__ = ["ResponsesTranslator"]

#: Progress events with nothing to send: what they announce comes whole in the item [O9-b].
_SILENT_PREFIXES: Final = (
    "response.web_search_call.",
    "response.file_search_call.",
    "response.code_interpreter_call",
    "response.image_generation_call.",
    "response.mcp_call.",
    "response.mcp_list_tools.",
)
#: Item types the caller runs: ``tool_call`` with the item's ``call_id`` as the id [O4-d].
_CLIENT_ITEMS: Final = frozenset(
    {"function_call", "custom_tool_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call"}
)
#: Item types the API runs itself: ``server_tool_call`` then ``server_tool_result`` [O6-a].
_SERVER_ITEMS: Final = frozenset(
    {"web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call", "mcp_call"}
)
#: Item types with no envelope, passed over without a warning [O9-b].
_SILENT_ITEMS: Final = frozenset({"mcp_list_tools", "compaction"})
#: Fields of a server item that say what was asked (its call); the rest of the item is its result [O6-a].
_CALL_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "web_search_call": ("action",),
    "file_search_call": ("queries",),
    "code_interpreter_call": ("code", "container_id"),
    "image_generation_call": (),
    "mcp_call": ("server_label", "name", "arguments"),
}
#: Annotation types that are citations -> the envelope's citation type [O3-d]; others (``file_path``) are none.
_CITATIONS: Final = {
    "url_citation": "web_search_result_location",
    "file_citation": "char_location",
    "container_file_citation": "char_location",
}


class _Item:
    """One output item being received; private and mutable."""

    __slots__ = ("done", "index", "item", "kind", "parts")

    def __init__(self, index: int, kind: str, item: Any) -> None:
        self.index = index
        self.kind = kind
        self.item = item
        #: Argument (or custom tool input) fragments, in arrival order.
        self.parts: list[str] = []
        self.done = False


class _Part(_Streamed):
    """A streamed block of one content or summary part, with the annotations of a text part."""

    __slots__ = ("annotations", "refusal")

    def __init__(self, kind: Any, refusal: bool = False) -> None:
        super().__init__(kind)
        self.annotations: list[Any] = []
        self.refusal = refusal


class ResponsesTranslator(_Base):
    """Translate one streamed Responses API call into envelope lines, sans I/O.

    Feed every event in order (the SDK's events from ``responses.create(stream=True)``
    or ``responses.stream()``, or dicts of the wire JSON); send the returned lines; end
    with ``finish()`` (or ``abort(exc)`` when iterating raised).

    Example::

        t = ResponsesTranslator(agent_id, meta=True, user_query=question)
        try:
            async for event in await client.responses.create(..., stream=True):
                for line in t.feed(event):
                    await send(frame(line))
            closing = t.finish()
        except Exception as exc:
            closing = t.abort(exc)
        for line in closing:
            await send(frame(line))
        history.extend(t.finalize())

    Attributes:
        agent: the agent id of every envelope.
        status: the response's last status (``completed``, ``incomplete``, ``failed`` …).
        stop_reason: ``meta_final``'s: ``tool_calls``, ``completed``, the reason of an
            ``incomplete`` response, or ``error`` [O2-d].
        model, response_id: from the response.
        usage: the completed response's usage, as the API sent it.
        warnings: one message per input passed over [O9-a].
    """

    SOURCE = "openai-responses"

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
        """Create a translator for one Responses API call.

        Args:
            agent: the agent id of every envelope.
            max_bytes: the bound on each line (spec §6.1).
            strict: raise ``OversizeError`` where a line cannot fit (spec §6.5).
            profile: the emitter profile (spec §10).
            meta: also send ``meta_init`` (before the first line) and ``meta_final`` (last) [O2-a].
            user_query: ``meta_init``'s ``user_query`` when ``meta`` is set.

        Raises:
            EncodeError: as ``Emitter``: a bad ``max_bytes``, ``agent`` or ``profile``.
        """
        super().__init__(agent, max_bytes, strict=strict, profile=profile, meta=meta, user_query=user_query)
        self.status: str | None = None
        self._items: dict[int, _Item] = {}
        #: Open streamed blocks by (output index, part kind, part index), in opening order.
        self._parts: dict[tuple[int, str, int], _Part] = {}
        self._final_items: dict[int, Any] = {}
        self._called = False
        self._complete_seen = False

    # ------------------------------------------------------------------ feeding

    def feed(self, event: object) -> list[bytes]:
        """Translate one stream event into envelope lines (unframed JSON).

        Args:
            event: a Responses stream event (SDK object or dict).

        Returns:
            Zero or more envelope lines.

        Raises:
            SequenceError: ``feed()`` after the stream ended [O1-b].
            DecodeError: a function call's arguments are no prefix of JSON, or nest too deep [O4-a].
            EncodeError: a lone surrogate (spec §6.4), or item data that is not JSON.
            OversizeError: strict mode only (spec §6.5).
        """
        self._check_open()
        kind = _get(event, "type")
        if not isinstance(kind, str):
            self._warn(f"event whose type is a {type(kind).__name__}, not a string, passed over")
            return []
        handler = _EVENTS.get(kind)
        if handler is None:
            if not kind.startswith(_SILENT_PREFIXES):
                self._warn(f"unknown stream event type {_show(kind)} passed over")  # [O9-a]
            return []
        return self._lead(handler(self, event))

    def _response(self, event: Any) -> list[bytes]:
        response = _get(event, "response")
        if self.response_id is None:
            self.response_id = str_or(_get(response, "id")) or None
        model = _get(response, "model")
        if isinstance(model, str) and model:
            self.model = model
        status = _get(response, "status")
        if isinstance(status, str):
            self.status = status
        return []

    def _completed(self, event: Any) -> list[bytes]:
        self._response(event)
        response = _get(event, "response")
        usage = _plain(_get(response, "usage"))
        if isinstance(usage, Mapping):
            self.usage = {k: v for k, v in usage.items() if v is not None}
        self._complete_seen = True
        if _get(event, "type") == "response.incomplete":
            # [O2-d]: why the response stopped, as the API says it; the text so far is kept.
            reason = _get(_get(response, "incomplete_details"), "reason")
            self.stop_reason = str_or(reason, "incomplete")
        else:
            self.stop_reason = "tool_calls" if self._called else "completed"
        return self._close_open(cut=False)

    def _failed(self, event: Any) -> list[bytes]:
        self._response(event)
        error = _get(_get(event, "response"), "error")
        return self.abort(error if error is not None else {"type": "response_failed", "message": "response failed"})

    def _added(self, event: Any) -> list[bytes]:
        index = int_or_none(_get(event, "output_index"))
        item = _get(event, "item")
        kind = _get(item, "type")
        if index is None or not isinstance(kind, str):
            self._warn("response.output_item.added without an int output_index and an item type passed over")
            return []
        if kind not in _ITEMS and kind not in _SILENT_ITEMS:
            self._warn(f"unknown output item type {_show(kind)} at output {index}: not sent [O9-a]")
        self._items[index] = _Item(index, kind, item)
        return []

    def _item(self, event: Any, what: str) -> _Item | None:
        index = int_or_none(_get(event, "output_index"))
        item = self._items.get(index) if index is not None else None
        if item is None or item.done:
            state = "done" if item is not None else "never added"
            self._warn(f"{what} for output {_show(index)}, which is {state}, passed over")
            return None
        return item

    def _part(self, event: Any, kind: Any, part: str, index_field: str, refusal: bool = False) -> _Part | None:
        """The open block of an event's part, opened at its first delta [O3-a]."""
        item = self._item(event, str(_get(event, "type")))
        index = int_or_none(_get(event, index_field))
        if item is None or index is None:
            return None
        key = (item.index, part, index)
        block = self._parts.get(key)
        if block is None:
            block = self._parts[key] = _Part(kind, refusal)
        return block

    def _switch(self, key: tuple[int, str, int], kind: str) -> list[bytes]:
        """[O3-e]: one block per envelope type is open at a time: another open one of ``kind`` is closed."""
        lines: list[bytes] = []
        for other in [k for k, b in self._parts.items() if k != key and b.kind == kind and b.sent]:
            self._warn(f"a {kind} part opened while another was open; the open one was closed first")
            lines.extend(self._close_part(other))
        return lines

    def _text_delta(self, event: Any) -> list[bytes]:
        return self._delta(
            event, "text", "content", "content_index", refusal=_get(event, "type") == "response.refusal.delta"
        )

    def _summary_delta(self, event: Any) -> list[bytes]:
        return self._delta(event, "thinking", "summary", "summary_index")

    def _reasoning_delta(self, event: Any) -> list[bytes]:
        return self._delta(event, "thinking", "reasoning", "content_index")

    def _delta(self, event: Any, kind: str, part: str, index_field: str, refusal: bool = False) -> list[bytes]:
        block = self._part(event, kind, part, index_field, refusal)
        delta = _get(event, "delta")
        if block is None or not isinstance(delta, str) or not delta:
            return []
        key = (int(_get(event, "output_index")), part, int(_get(event, index_field)))
        lines = self._switch(key, kind) if not block.sent else []
        return lines + self._stream(block, delta)

    def _annotation(self, event: Any) -> list[bytes]:
        block = self._part(event, "text", "content", "content_index")
        if block is not None:
            block.annotations.append(_get(event, "annotation"))  # [O3-d]: sent after the final marker
        return []

    def _part_done(self, event: Any) -> list[bytes]:
        """A content part ends: its block's final marker, then its citations [O3-d]."""
        output = int_or_none(_get(event, "output_index"))
        index = int_or_none(_get(event, "content_index"))
        key = (output if output is not None else -1, "content", index if index is not None else -1)
        block = self._parts.get(key)
        if block is not None:
            annotations = _get(_get(event, "part"), "annotations")
            if isinstance(annotations, list | tuple) and annotations:
                block.annotations = list(annotations)  # the part as completed is the authority
        return self._close_part(key)

    def _summary_done(self, event: Any) -> list[bytes]:
        output = int_or_none(_get(event, "output_index"))
        index = int_or_none(_get(event, "summary_index"))
        return self._close_part((output if output is not None else -1, "summary", index if index is not None else -1))

    def _reasoning_done(self, event: Any) -> list[bytes]:
        output = int_or_none(_get(event, "output_index"))
        index = int_or_none(_get(event, "content_index"))
        return self._close_part((output if output is not None else -1, "reasoning", index if index is not None else -1))

    def _close_part(self, key: tuple[int, str, int]) -> list[bytes]:
        block = self._parts.pop(key, None)
        if block is None:
            return []
        lines = self._end(block)
        if block.sent and block.annotations:
            text = block.text
            lines.extend(self._citations([c for a in block.annotations if (c := self._cite(a, text)) is not None]))
        return lines

    def _cite(self, annotation: Any, text: str) -> CitationData | None:
        """The envelope citation of one annotation [O3-d]; ``None`` for a kind that is no citation.

        ``url_citation`` -> ``web_search_result_location`` (url, title); ``file_citation``
        and ``container_file_citation`` -> ``char_location`` (the filename as
        ``document_title``). The character range travels as ``start_char_index``/
        ``end_char_index`` and the cited text is that slice of the part's text.
        """
        kind = _get(annotation, "type")
        citation_type = _CITATIONS.get(kind) if isinstance(kind, str) else None
        if citation_type is None:
            return None
        start = int_or_none(_get(annotation, "start_index"))
        end = int_or_none(_get(annotation, "end_index"))
        if start is None and end is None:
            start = end = int_or_none(_get(annotation, "index"))  # a file_citation marks one position
        fields: dict[str, Any] = {}
        if start is not None and end is not None:
            fields["start_char_index"] = start
            fields["end_char_index"] = end
        for name, value in (("url", _get(annotation, "url")), ("title", _get(annotation, "title"))):
            if isinstance(value, str):
                fields[name] = value
        filename = _get(annotation, "filename")
        if isinstance(filename, str):
            fields["document_title"] = filename
        fits = start is not None and end is not None and 0 <= start <= end <= len(text)
        cited = text[start:end] if fits else ""
        return CitationData(cited_text=cited, citation_type=citation_type, **fields)

    def _arguments_delta(self, event: Any) -> list[bytes]:
        item = self._item(event, str(_get(event, "type")))
        delta = _get(event, "delta")
        if item is not None and isinstance(delta, str) and delta:
            item.parts.append(delta)  # [O4-d]: the completed item's arguments win at output_item.done
        return []

    def _done(self, event: Any) -> list[bytes]:
        item = self._item(event, "response.output_item.done")
        if item is None:
            return []
        done = _get(event, "item")
        if done is not None:
            item.item = done
        lines: list[bytes] = []
        for key in [k for k in self._parts if k[0] == item.index]:
            lines.extend(self._close_part(key))
        send = _ITEMS.get(item.kind)
        if send is not None:
            lines.extend(send(self, item))
        item.done = True
        self._final_items[item.index] = item.item
        return lines

    def _client_call(self, item: _Item) -> list[bytes]:
        """[O4-d]: the caller's tool: ``tool_call``, id ``call_id``, the arguments as JSON text."""
        data = item.item
        call_id = str_or(_get(data, "call_id")) or str_or(_get(data, "id"))
        where = f"arguments of {item.kind} at output {item.index}"
        self._called = True
        if item.kind == "function_call":
            arguments = _get(data, "arguments")
            text = arguments if isinstance(arguments, str) else "".join(item.parts)
            return self._call("tool_call", text, call_id, str_or(_get(data, "name")), where)
        if item.kind == "custom_tool_call":
            value = _get(data, "input")
            text = value if isinstance(value, str) else "".join(item.parts)
            return self._buffered("tool_call", {"input": text}, call_id, str_or(_get(data, "name")))  # [O4-e]
        rest = _plain(data)
        args = (
            {k: v for k, v in rest.items() if k not in ("id", "type", "status", "call_id")}
            if isinstance(rest, dict)
            else {}
        )
        return self._buffered("tool_call", args, call_id, item.kind)  # [O4-e]

    def _server_call(self, item: _Item) -> list[bytes]:
        """[O6-a]: the API's own tool: ``server_tool_call`` (what was asked), ``server_tool_result`` (the rest)."""
        data = _plain(item.item)
        if not isinstance(data, dict):
            data = {}
        call_id = str_or(data.get("id"))
        asked = {k: data[k] for k in _CALL_FIELDS[item.kind] if data.get(k) is not None}
        name = item.kind.removesuffix("_call")
        if item.kind == "mcp_call":
            arguments = asked.pop("arguments", None)
            asked["arguments"] = self._parsed(arguments, f"arguments of mcp_call at output {item.index}")
        lines = self._buffered("server_tool_call", asked, call_id, name)
        result = {k: v for k, v in data.items() if k not in ("id", "type") and k not in _CALL_FIELDS[item.kind]}
        result_name = item.kind.removesuffix("_call") + "_tool_result"  # spec §4.10: a result block type
        return lines + self._buffered("server_tool_result", result, call_id, result_name)

    def _parsed(self, text: Any, where: str) -> Any:
        if not isinstance(text, str):
            return text
        import msgspec

        return msgspec.json.decode(self._arguments(text, "server_tool_call", where))

    def _error(self, event: Any) -> list[bytes]:
        return self.abort(event)  # [O7-b]

    def _nothing(self, event: Any) -> list[bytes]:  # noqa: ARG002  # one signature for the table
        return []

    def _no_lines(self, item: _Item) -> list[bytes]:  # noqa: ARG002  # one signature for the table
        return []

    # ------------------------------------------------------------------ ending

    def _take_open(self) -> list[_Streamed]:
        blocks: list[_Streamed] = list(self._parts.values())
        self._parts = {}
        return blocks

    def _cut_pending(self) -> list[BlockKey]:
        keys: list[BlockKey] = []
        for item in self._items.values():
            if not item.done and item.kind in _CLIENT_ITEMS:
                keys.append(BlockKey(self.agent, "tool_call"))
            elif not item.done and item.kind in _SERVER_ITEMS:
                keys.append(BlockKey(self.agent, "server_tool_call"))
            item.done = True
        return keys

    def _complete(self) -> bool:
        return self._complete_seen

    def finish(self) -> list[bytes]:  # the docstring: _Base.finish
        if self._complete_seen and not self._ended:
            for item in self._items.values():
                if not item.done and item.kind in _CLIENT_ITEMS | _SERVER_ITEMS:
                    self._warn(f"{item.kind} at output {item.index} never completed: not sent [O2-d]")
        return super().finish()

    def finalize(self) -> list[Any]:
        """The completed output items, in output order, as plain data for the next request's input [O6-b]."""
        return [_plain(self._final_items[i]) for i in sorted(self._final_items)]


# ---------------------------------------------------------------------- the machine
#
#   response.created ─> output_item.added(i) ─> {text, refusal, summary, reasoning} deltas (stream)
#                        │                       arguments deltas (gather)  annotations (gather)
#                        │                       content_part.done / *_text.done: final marker (+ citations)
#                        └─> output_item.done(i): close its parts; tool items sent whole by _ITEMS
#   response.completed | response.incomplete: complete [O2-d]; response.failed | error: abort [O7-b]

_Handler = Callable[[ResponsesTranslator, Any], list[bytes]]

_EVENTS: Final[dict[str, _Handler]] = {
    "response.created": ResponsesTranslator._response,
    "response.queued": ResponsesTranslator._response,
    "response.in_progress": ResponsesTranslator._response,
    "response.completed": ResponsesTranslator._completed,
    "response.incomplete": ResponsesTranslator._completed,  # [O2-d]
    "response.failed": ResponsesTranslator._failed,  # [O7-b]
    "error": ResponsesTranslator._error,  # [O7-b]
    "response.output_item.added": ResponsesTranslator._added,
    "response.output_item.done": ResponsesTranslator._done,
    "response.content_part.added": ResponsesTranslator._nothing,  # opened at its first delta [O3-a]
    "response.content_part.done": ResponsesTranslator._part_done,
    "response.output_text.delta": ResponsesTranslator._text_delta,  # [O3-a]
    "response.output_text.done": ResponsesTranslator._nothing,  # closed by content_part.done (citations) [O3-d]
    "response.output_text.annotation.added": ResponsesTranslator._annotation,  # [O3-d]
    "response.refusal.delta": ResponsesTranslator._text_delta,  # [O3-c]
    "response.refusal.done": ResponsesTranslator._nothing,
    "response.reasoning_summary_part.added": ResponsesTranslator._nothing,
    "response.reasoning_summary_part.done": ResponsesTranslator._summary_done,
    "response.reasoning_summary_text.delta": ResponsesTranslator._summary_delta,  # [O3-f]
    "response.reasoning_summary_text.done": ResponsesTranslator._summary_done,
    "response.reasoning_text.delta": ResponsesTranslator._reasoning_delta,  # [O3-f]
    "response.reasoning_text.done": ResponsesTranslator._reasoning_done,
    "response.function_call_arguments.delta": ResponsesTranslator._arguments_delta,  # [O4-d]
    "response.function_call_arguments.done": ResponsesTranslator._nothing,
    "response.custom_tool_call_input.delta": ResponsesTranslator._arguments_delta,
    "response.custom_tool_call_input.done": ResponsesTranslator._nothing,
    "response.mcp_call_arguments.delta": ResponsesTranslator._nothing,  # the item holds them [O6-a]
    "response.mcp_call_arguments.done": ResponsesTranslator._nothing,
}
_ITEMS: Final[dict[str, Callable[[ResponsesTranslator, _Item], list[bytes]]]] = {
    "message": ResponsesTranslator._no_lines,  # its parts streamed [O3-a]
    "reasoning": ResponsesTranslator._no_lines,  # its summary parts streamed [O3-f]
    **dict.fromkeys(sorted(_CLIENT_ITEMS), ResponsesTranslator._client_call),  # [O4-d] [O4-e]
    **dict.fromkeys(sorted(_SERVER_ITEMS), ResponsesTranslator._server_call),  # [O6-a]
}
