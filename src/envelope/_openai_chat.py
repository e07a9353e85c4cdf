"""OpenAI Chat Completions stream chunks to envelope lines.

Owns: ``ChatTranslator``, which turns one streamed Chat Completions call
(``chat.completion.chunk`` objects of the SDK, the ``chunk`` events of
``chat.completions.stream()``, or the same chunks as plain dicts from a capture) into
envelope lines, and gives the assistant message back for the next request
(``finalize()``). The decisions it applies are in ``spec/openai-adapter.md``; the ids
``[O…]`` cited below refer to that file.

Does not own: I/O or the SDK (nothing here imports ``openai`` or an HTTP client), the
streamed-block and ending logic shared with the Responses translator
(``_openai_common``), or chunking (the ``Emitter``'s).

The per-call state: the one streamed block open (content or refusal, both ``text``
[O3-c]), and per tool call index its id, name and argument fragments, joined and parsed
once when the choice's ``finish_reason`` arrives [O4-b].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ._anthropic_adapter import _get, _plain, _show
from ._limits import DEFAULT_MAX_BYTES
from ._openai_common import _Base, _Streamed, int_or_none, str_or
from ._types import BlockKey

if TYPE_CHECKING:
    from ._encoder import Profile

__all__ = ["CHAT_DERIVED_EVENTS", "ChatTranslator"]

#: Events ``chat.completions.stream()`` derives from a ``chunk`` event it yields too:
#: the chunk carries the same data, so these give nothing [O2-b].
CHAT_DERIVED_EVENTS: Final = frozenset(
    {
        "content.delta",
        "content.done",
        "refusal.delta",
        "refusal.done",
        "tool_calls.function.arguments.delta",
        "tool_calls.function.arguments.done",
        "logprobs.content.delta",
        "logprobs.content.done",
        "logprobs.refusal.delta",
        "logprobs.refusal.done",
    }
)


class _Call:
    """One tool call being received by index; private and mutable."""

    __slots__ = ("id", "index", "name", "parts")

    def __init__(self, index: int) -> None:
        self.index = index
        self.id = ""
        self.name = ""
        self.parts: list[str] = []


class ChatTranslator(_Base):
    """Translate one streamed Chat Completions call into envelope lines, sans I/O.

    Feed every chunk in order (the SDK's ``ChatCompletionChunk``, a ``chunk`` event of
    ``chat.completions.stream()``, whose derived events are passed over, or a dict of
    the wire JSON); send the returned lines. At the end call ``finish()`` (or
    ``abort(exc)`` when iterating raised, as the SDK does on an error chunk).

    Example::

        t = ChatTranslator(agent_id, meta=True, user_query=question)
        try:
            async for chunk in await client.chat.completions.create(..., stream=True):
                for line in t.feed(chunk):
                    await send(frame(line))
            closing = t.finish()
        except Exception as exc:
            closing = t.abort(exc)
        for line in closing:
            await send(frame(line))
        messages.append(t.finalize())

    Attributes:
        agent: the agent id of every envelope.
        choice: the choice index followed; chunks of other choices are passed over [O5-a].
        other_choices: the other choice indexes seen (each warned about once).
        finish_reason: the followed choice's ``finish_reason``, ``None`` until it comes.
        stop_reason: the same (``"error"`` after ``abort()``): ``meta_final``'s [O2-a].
        model, response_id, system_fingerprint: from the chunks.
        usage: the usage chunk's counters (``stream_options.include_usage``), as the API sent them.
        warnings: one message per input passed over [O9-a].
    """

    SOURCE = "openai-chat"

    def __init__(
        self,
        agent: str,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        strict: bool = False,
        profile: Profile = "default",
        meta: bool = False,
        user_query: str = "",
        choice: int = 0,
    ) -> None:
        """Create a translator for one Chat Completions call.

        Args:
            agent: the agent id of every envelope.
            max_bytes: the bound on each line (spec §6.1).
            strict: raise ``OversizeError`` where a line cannot fit (spec §6.5).
            profile: the emitter profile (spec §10).
            meta: also send the run's ``meta_init`` (before the first line) and
                ``meta_final`` (last), making the output a whole stream [O2-a].
            user_query: ``meta_init``'s ``user_query`` when ``meta`` is set.
            choice: the choice index to follow (``n`` > 1 streams: one translator per choice) [O5-a].

        Raises:
            EncodeError: as ``Emitter``: a bad ``max_bytes``, ``agent`` or ``profile``.
        """
        super().__init__(agent, max_bytes, strict=strict, profile=profile, meta=meta, user_query=user_query)
        self.choice: Final = choice
        self.other_choices: set[int] = set()
        self.finish_reason: str | None = None
        self.system_fingerprint: str | None = None
        self._open: _Streamed | None = None
        self._open_is_refusal = False
        self._content: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, _Call] = {}
        self._sent_calls: list[_Call] = []

    # ------------------------------------------------------------------ feeding

    def feed(self, chunk: object) -> list[bytes]:
        """Translate one chunk into envelope lines (unframed JSON).

        Args:
            chunk: a ``ChatCompletionChunk``, a ``ChunkEvent`` (its derived siblings give
                nothing), an error chunk ``{"error": {...}}``, or the same as dicts.

        Returns:
            Zero or more envelope lines.

        Raises:
            SequenceError: ``feed()`` after the stream ended [O1-b].
            DecodeError: a tool call's arguments are no prefix of JSON, or nest too deep [O4-a].
            EncodeError: a lone surrogate (spec §6.4).
            OversizeError: strict mode only (spec §6.5).
        """
        self._check_open()
        kind = _get(chunk, "type")
        if kind == "chunk":
            chunk = _get(chunk, "chunk")
        elif isinstance(kind, str) and kind in CHAT_DERIVED_EVENTS:
            return []  # [O2-b]
        error = _get(chunk, "error")
        if error is not None and _get(chunk, "choices") is None:
            return self.abort(error)  # [O7-b]: the API's mid-stream error chunk
        obj = _get(chunk, "object")
        if obj != "chat.completion.chunk":
            self._warn(f"input whose object is {_show(obj)}, not 'chat.completion.chunk', passed over")  # [O9-a]
            return []
        self._ids(chunk)
        lines: list[bytes] = []
        choices = _get(chunk, "choices")
        for choice in choices if isinstance(choices, list | tuple) else ():
            lines.extend(self._choice(choice))
        usage = _get(chunk, "usage")
        if usage is not None:
            plain = _plain(usage)
            if isinstance(plain, Mapping):
                # [O2-c]: the usage chunk, as the API sent it (nulls dropped).
                self.usage = {k: v for k, v in plain.items() if v is not None}
        return self._lead(lines)

    def _ids(self, chunk: Any) -> None:
        if self.response_id is None:
            self.response_id = str_or(_get(chunk, "id")) or None
        if self.model is None:
            self.model = str_or(_get(chunk, "model")) or None
        fingerprint = _get(chunk, "system_fingerprint")
        if isinstance(fingerprint, str):
            self.system_fingerprint = fingerprint

    def _choice(self, choice: Any) -> list[bytes]:
        index = int_or_none(_get(choice, "index"))
        if index != self.choice:
            if index is not None and index not in self.other_choices:
                self.other_choices.add(index)
                self._warn(f"choice {index} passed over: this translator follows choice {self.choice} [O5-a]")
            elif index is None:
                self._warn("choice without an int index passed over")
            return []
        if self.finish_reason is not None:
            self._warn(f"chunk for choice {index} after its finish_reason passed over")
            return []
        lines: list[bytes] = []
        delta = _get(choice, "delta")
        if delta is not None:
            content = _get(delta, "content")
            if isinstance(content, str) and content:
                lines.extend(self._text(content, refusal=False))
            refusal = _get(delta, "refusal")
            if isinstance(refusal, str) and refusal:
                lines.extend(self._text(refusal, refusal=True))
            calls = _get(delta, "tool_calls")
            for call in calls if isinstance(calls, list | tuple) else ():
                self._fragment(call)
            if _get(delta, "function_call") is not None:
                self._warn("legacy function_call delta passed over: use tools (tool_calls) [O9-a]")
        reason = _get(choice, "finish_reason")
        if isinstance(reason, str):
            lines.extend(self._finished(reason))
        return lines

    def _text(self, text: str, *, refusal: bool) -> list[bytes]:
        """Content and refusal both stream as ``text``; a switch between them starts a new block [O3-c]."""
        lines: list[bytes] = []
        if self._open is not None and self._open_is_refusal != refusal:
            lines.extend(self._end(self._open))
            self._open = None
        if self._open is None:
            self._open = _Streamed("text")
            self._open_is_refusal = refusal
        before = len(self._open.parts)
        lines.extend(self._stream(self._open, text))
        (self._refusal if refusal else self._content).extend(self._open.parts[before:])
        return lines

    def _fragment(self, call: Any) -> None:
        """One tool call fragment: id and name from the first that has them, arguments appended [O4-b]."""
        index = int_or_none(_get(call, "index"))
        if index is None:
            self._warn("tool call fragment without an int index passed over")
            return
        state = self._calls.get(index)
        if state is None:
            state = self._calls[index] = _Call(index)
        call_id = _get(call, "id")
        if isinstance(call_id, str) and call_id:
            if not state.id:
                state.id = call_id
            elif call_id != state.id:
                self._warn(f"tool call {index}: a second id {_show(call_id)} ignored, keeping {state.id!r}")
        function = _get(call, "function")
        name = _get(function, "name")
        if isinstance(name, str) and name:
            if not state.name:
                state.name = name
            elif name != state.name:
                self._warn(f"tool call {index}: a second name {_show(name)} ignored, keeping {state.name!r}")
        arguments = _get(function, "arguments")
        if isinstance(arguments, str) and arguments:
            state.parts.append(arguments)

    def _finished(self, reason: str) -> list[bytes]:
        """The choice ended: close the open block, then every tool call in index order [O4-b]."""
        self.finish_reason = self.stop_reason = reason
        lines: list[bytes] = []
        if self._open is not None:
            lines.extend(self._end(self._open))
            self._open = None
        for index in sorted(self._calls):
            call = self._calls.pop(index)
            if not call.id:
                call.id = f"call_{index}"
                self._warn(f"tool call {index} had no id; sent as {call.id!r} [O4-c]")
            text = "".join(call.parts)
            call.parts = [self._arguments(text, "tool_call", f"arguments of tool call {index}")]
            lines.extend(self._emitter.buffered("tool_call", call.parts[0], id=call.id, name=call.name))
            self._sent_calls.append(call)
        return lines

    # ------------------------------------------------------------------ ending

    def _take_open(self) -> list[_Streamed]:
        block, self._open = self._open, None
        return [block] if block is not None else []

    def _cut_pending(self) -> list[BlockKey]:
        keys = [BlockKey(self.agent, "tool_call") for _ in self._calls]
        self._calls = {}
        return keys

    def _complete(self) -> bool:
        return self.finish_reason is not None

    def finalize(self) -> dict[str, Any]:
        """The assistant message as the API takes it back in ``messages`` [O6-b].

        Returns:
            ``{"role": "assistant", "content": str | None}``, with ``refusal`` when the
            model refused and ``tool_calls`` (complete ones only) when it called tools.
        """
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content) or None}
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        if self._sent_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.parts[0]}}
                for c in self._sent_calls
            ]
        return message
