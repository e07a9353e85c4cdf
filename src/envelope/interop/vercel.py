"""Envelope streams to the AI SDK's UI message stream and back (spec/interop.md §5).

The UI message stream is what ``useChat`` reads (AI SDK 5 and later; response header
``x-vercel-ai-ui-message-stream: v1``): SSE whose events are JSON *chunks*
(``text-delta``, ``tool-input-start``, ``data-*``...) and a final ``[DONE]``.

``EnvelopeToVercel``: envelope lines in, chunks out (dicts, and the string ``"[DONE]"``).
``VercelToEnvelope``: chunks in (dicts, their JSON text, or ``"[DONE]"``), envelope lines
out. Both are sans-I/O; ``close()`` ends what is open. Every decision is in
spec/interop.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._blocks import _parse
from .._limits import DEFAULT_MAX_BLOCK_BYTES, DEFAULT_MAX_BYTES
from ._common import (
    CONTROL_TYPES,
    EnvelopeReader,
    EnvelopeWriter,
    Inputs,
    InteropError,
    OpenBlock,
    OpenParts,
    dumps,
    envelope_meta,
    image_refs,
    made_meta_init,
    need,
    optional,
    parse_object,
    write_awaiting,
    write_piece,
    write_result,
)
from ._requests import ServerRequest, request_from_chat

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._encoder import ImageRef
    from .._errors import Position

__all__ = [
    "DONE",
    "HEADERS",
    "EnvelopeToVercel",
    "ServerRequest",
    "VercelToEnvelope",
    "data_type",
    "request_from_chat",
]

#: The terminator, sent as ``data: [DONE]``.
DONE: Final = "[DONE]"
#: The response headers a UI message stream is served with.
HEADERS: Final = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
}


def data_type(envelope_type: str) -> str:
    """The ``data-*`` chunk type of a control envelope type: ``meta_init`` -> ``data-meta-init``."""
    return "data-" + envelope_type.replace("_", "-")


_CONTROL_BY_DATA: Final = {data_type(t): t for t in CONTROL_TYPES}
_RUN: Final = "data-envelope-run"
_PIECE: Final = "data-envelope-piece"
_SUBAGENT: Final = "data-subagent"


class EnvelopeToVercel(EnvelopeReader):
    """Envelope lines to UI message stream chunks (spec/interop.md §5).

    Each response becomes one assistant message: ``start`` ... ``finish``, ``[DONE]``.
    Parts of agents other than the response's first carry
    ``providerMetadata.envelope.agent``; a ``data-subagent`` part announces each.
    """

    def __init__(self, *, max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES) -> None:
        """Create a converter; a block held whole over ``max_block_bytes`` characters is I208."""
        super().__init__(max_block_bytes=max_block_bytes)
        self._calls: dict[str, str] = {}  # tool call id -> agent, this response
        self._answered: set[str] = set()  # tool call ids with an output, this response
        self._paused = False
        self._step_answered = False  # a result of the run's agent was sent since the step began
        #: tool call id -> its input as sent in this response, until answered: an edit keeps it
        #: as ``original`` (spec/interop.md I5-e)
        self._inputs: dict[str, Any] = {}
        #: call parts whose input streams (``tool-input-start`` sent, not yet available): the
        #: SDK finds a tool part only within the current step, so a step waits for them
        self._streaming: set[str] = set()
        self._step_due = False

    def _meta(self, agent: str, **extra: Any) -> dict[str, Any]:
        ours: dict[str, Any] = {} if agent == self.main else {"agent": agent}
        ours.update(extra)
        return {"envelope": ours}

    def _on_run_start(self, main: str | None) -> list[Any]:
        self._calls = {}
        self._answered = set()
        self._paused = False
        self._step_answered = False
        self._inputs = {}
        self._streaming = set()
        self._step_due = False
        run: dict[str, Any] = {"agent": main} if main is not None else {}
        return [{"type": "start"}, {"type": _RUN, "data": run, "transient": True}, {"type": "start-step"}]

    def _on_run_end(self) -> list[Any]:
        return [{"type": "finish", "finishReason": "tool-calls" if self._paused else "stop"}, DONE]

    def _on_agent(self, agent: str) -> list[Any]:
        if agent == self.main:
            return []
        data: dict[str, Any] = {"agent": agent}
        meta = self.meta.get(agent)
        if isinstance(meta, dict):
            for key in ("parent_agent", "parent_tool_use_id"):
                if isinstance(meta.get(key), str):
                    data[key] = meta[key]
        return [{"type": _SUBAGENT, "data": data}]

    def _on_open(self, block: OpenBlock, delta: str) -> list[Any]:
        step: list[Any] = []
        if block.agent == self.main and self._step_answered and not block.edit:
            # the run's agent speaks again after results: a new model step (spec/interop.md §5.1),
            # once no call's input is streaming (I5-f)
            self._step_answered = False
            if self._streaming:
                self._step_due = True
            else:
                step = [{"type": "start-step"}]
        if block.type in ("text", "thinking"):
            kind = "text" if block.type == "text" else "reasoning"
            start: dict[str, Any] = {"type": f"{kind}-start", "id": block.ref}
            if block.agent != self.main:
                start["providerMetadata"] = self._meta(block.agent)
        else:
            assert block.id is not None
            self._calls[block.id] = block.agent
            self._streaming.add(block.id)
            block.parts = []  # the input as it streams: tool-input-available carries it whole
            start = {"type": "tool-input-start", "toolCallId": block.id, "toolName": block.name, "dynamic": True}
            if block.type == "server_tool_call":
                start["providerExecuted"] = True
            if block.agent != self.main or block.edit:
                start["providerMetadata"] = self._call_meta(block)
        return [*step, start, *(self._on_delta(block, delta) if delta else [])]

    def _call_meta(self, block: OpenBlock) -> dict[str, Any]:
        """A call part's ``providerMetadata``: its agent, and for an edit the input it replaces."""
        if not block.edit:
            return self._meta(block.agent)
        assert block.id is not None
        extra: dict[str, Any] = {"edit": True}
        if block.id in self._inputs:
            extra["original"] = self._inputs[block.id]
        return self._meta(block.agent, **extra)

    def _on_delta(self, block: OpenBlock, delta: str) -> list[Any]:
        if block.type == "text":
            return [{"type": "text-delta", "id": block.ref, "delta": delta}]
        if block.type == "thinking":
            return [{"type": "reasoning-delta", "id": block.ref, "delta": delta}]
        block.parts.append(delta)
        block.size += len(delta)
        if block.size > self.max_block_bytes:
            raise InteropError("I208", f"{block.type} block over {self.max_block_bytes} characters")
        return [{"type": "tool-input-delta", "toolCallId": block.id, "inputTextDelta": delta}]

    def _on_close(self, block: OpenBlock) -> list[Any]:
        if block.type == "text":
            return [{"type": "text-end", "id": block.ref}]
        if block.type == "thinking":
            return [{"type": "reasoning-end", "id": block.ref}]
        assert block.id is not None
        out = [self._call_available(block, "".join(block.parts))]
        self._streaming.discard(block.id)
        if self._step_due and not self._streaming:
            self._step_due = False
            out.append({"type": "start-step"})
        return out

    def _call_available(self, block: OpenBlock, text: str) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "type": "tool-input-available",
            "toolCallId": block.id,
            "toolName": block.name,
            "input": _parse(text),
            "dynamic": True,
        }
        if block.type == "server_tool_call":
            chunk["providerExecuted"] = True
        if block.agent != self.main or block.edit:
            chunk["providerMetadata"] = self._call_meta(block)
        if block.id is not None and not block.edit:
            self._inputs[block.id] = chunk["input"]
        return chunk

    def _on_whole(self, block: OpenBlock, text: str) -> list[Any]:
        agent = block.agent
        if block.type in ("tool_result", "server_tool_result"):
            assert block.id is not None
            self._step_answered |= agent == self.main
            self._inputs.pop(block.id, None)
            if self._calls.get(block.id) != agent or block.id in self._answered:
                # no call in this response to attach to (a resumed response's answers), or
                # a call already answered: the AI SDK refuses an output without its call
                # and would overwrite an earlier output, so it goes as a data part
                return self._on_piece(block, text, block.images, True)
            self._answered.add(block.id)
            extra: dict[str, Any] = {"name": block.name}
            if block.images:
                extra["images"] = [{"src": i.src, "media_type": i.media_type} for i in block.images]
            chunk: dict[str, Any] = {
                "type": "tool-output-available",
                "toolCallId": block.id,
                "output": text,
                "dynamic": True,
                "providerMetadata": self._meta(agent, **extra),
            }
            if block.type == "server_tool_result":
                chunk["providerExecuted"] = True
            files = [
                {
                    "type": "file",
                    "url": i.src,
                    "mediaType": i.media_type,
                    "providerMetadata": self._meta(agent, toolCallId=block.id),
                }
                for i in block.images
            ]
            return [chunk, *files]
        data: dict[str, Any] = {"agent": agent, "text": text}
        parsed = _parse(text)
        if parsed is not text:
            data["data"] = parsed
        if block.type == "awaiting_frontend_tools":
            self._paused = True
        return [{"type": data_type(block.type), "data": data}]

    def _on_piece(self, block: OpenBlock, text: str, images: list[ImageRef], final: bool) -> list[Any]:
        if block.type in ("tool_result", "server_tool_result"):
            self._step_answered |= block.agent == self.main
        data: dict[str, Any] = {"agent": block.agent, "type": block.type, "text": text, "final": final}
        if block.id is not None:
            data["id"] = block.id
            data["name"] = block.name
        if images:
            data["images"] = [{"src": i.src, "media_type": i.media_type} for i in images]
        return [{"type": _PIECE, "data": data}]

    def _on_citation(self, agent: str, text_ref: str, citation: dict[str, Any], final: bool) -> list[Any]:
        self._count += 1
        meta = {"envelope": {"agent": agent, "textId": text_ref, "citation": citation, "final": final}}
        source: dict[str, Any]
        if isinstance(citation.get("url"), str):
            source = {"type": "source-url", "sourceId": f"{text_ref}.c{self._count}", "url": citation["url"]}
            if isinstance(citation.get("title"), str):
                source["title"] = citation["title"]
        else:
            title = citation.get("document_title")
            source = {
                "type": "source-document",
                "sourceId": f"{text_ref}.c{self._count}",
                "mediaType": "text/plain",
                "title": title if isinstance(title, str) else "",
            }
        source["providerMetadata"] = meta
        return [source]


#: The chunks of a text or reasoning part (``_part``).
_PART_CHUNKS: Final = frozenset(
    {"text-start", "reasoning-start", "text-delta", "reasoning-delta", "text-end", "reasoning-end"}
)


class VercelToEnvelope(Inputs):
    """UI message stream chunks to envelope lines (spec/interop.md §5).

    The message's parts go to agent ``agent`` (or the one our ``data-envelope-run`` names),
    a part marked ``providerMetadata.envelope.agent`` to that agent. A stream not made by
    ``EnvelopeToVercel`` gets a ``meta_init`` per agent (``migrated_from: "vercel"``).
    """

    def __init__(self, *, agent: str = "agent", max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """Create a converter.

        Args:
            agent: the envelope agent of unmarked parts when the stream names none.
            max_bytes: the bound on each envelope line written (spec §6.1).
        """
        super().__init__()
        self.default_agent = agent
        self._writer = EnvelopeWriter(max_bytes)
        self._main = agent
        self._ours = False
        self._in_message = False
        self._parts = OpenParts(self._writer, "part")  # text/reasoning by id
        self._calls: dict[str, list[Any]] = {}  # toolCallId -> [agent, type, name, got_delta]
        self._started: set[str] = set()
        self._answered: set[str] = set()  # tool calls with an output in this message
        #: a stream not ours: the last source of a run of sources, held so the citation
        #: block ends with it (one block per text, as spec §5.4 sends them)
        self._held_cite: tuple[str, dict[str, Any]] | None = None

    def feed(self, raw: bytes | str | Mapping[str, Any]) -> list[bytes]:
        """Convert one chunk (a dict, its JSON text, or ``[DONE]``); returns envelope lines.

        Raises:
            InteropError: I201-I206 with the chunk's position (its 1-based number).
        """
        where = self._next_input()
        if isinstance(raw, bytes | str) and raw.strip() in (DONE, DONE.encode()):
            if self._in_message:
                self._in_message = False
                return self._release_citation(where) + self._writer.done(where)
            return []
        chunk = parse_object(raw, where)
        kind = need(chunk, "type", str, where)
        if kind == "start":
            if self._in_message:
                raise InteropError("I204", "start inside a message", position=where)
            if chunk.get("messageMetadata") is not None:
                raise InteropError("I203", "message metadata has no envelope counterpart", position=where)
            self._in_message = True
            self._ours = False
            self._main = self.default_agent
            self._started = set()
            self._calls = {}
            self._answered = set()
            return []
        if not self._in_message:
            raise InteropError("I204", f"{kind} outside a message (the first chunk must be start)", position=where)
        released = self._release_citation(where) if kind not in ("source-url", "source-document") else []
        return released + self._chunk(chunk, kind, where)

    def _release_citation(self, where: Position) -> list[bytes]:
        """The held last citation of a run of sources not ours, closing its block (``final: true``)."""
        if self._held_cite is None:
            return []
        agent, citation = self._held_cite
        self._held_cite = None
        return self._writer.citation(agent, citation, True, where)

    def _chunk(self, chunk: dict[str, Any], kind: str, where: Position) -> list[bytes]:
        """One parsed chunk of an open message, after any held citation was written."""
        ours = envelope_meta(chunk, "providerMetadata")
        named = ours.get("agent")
        agent: str = named if isinstance(named, str) else self._main
        w = self._writer
        if kind == "finish":
            if chunk.get("messageMetadata") is not None:
                raise InteropError("I203", "message metadata has no envelope counterpart", position=where)
            self._in_message = False
            out = [] if self._ours else self._pending_calls(where)
            return out + w.done(where)
        if kind == "abort":
            self._in_message = False
            return w.cut()
        if kind in ("start-step", "finish-step"):
            return []
        if kind == "error":
            payload = {"type": "error", "message": need(chunk, "errorText", str, where)}
            return self._meta(agent, where) + w.whole(agent, "error", dumps(payload), where)
        if kind in _PART_CHUNKS:
            return self._part(chunk, kind, agent, where)
        if kind == "tool-input-start":
            tid = need(chunk, "toolCallId", str, where)
            name = need(chunk, "toolName", str, where)
            btype = "server_tool_call" if chunk.get("providerExecuted") is True else "tool_call"
            self._calls[tid] = [agent, btype, name, False, None]
            out = self._meta(agent, where)
            w.begin(agent, btype, where, id=tid, name=name)
            return out
        if kind == "tool-input-delta":
            tid = need(chunk, "toolCallId", str, where)
            call = self._calls.get(tid)
            if call is None or not w.is_open(call[0], call[1]):
                raise InteropError("I204", f"tool-input-delta for call {tid!r} that is not open", position=where)
            call[3] = True
            return w.add(call[0], call[1], need(chunk, "inputTextDelta", str, where), where)
        if kind == "tool-input-available":
            return self._available(chunk, agent, where)
        if kind in ("tool-output-available", "tool-output-error"):
            return self._output(chunk, kind, ours, where)
        if kind in ("source-url", "source-document"):
            return self._source(chunk, kind, ours, agent, where)
        if kind == "file" and isinstance(ours.get("toolCallId"), str):
            return []  # an image shown beside its tool output, which carries it
        if kind.startswith("data-"):
            return self._data(chunk, kind, where)
        raise InteropError("I203", f"{kind} has no envelope counterpart (spec/interop.md §5.3)", position=where)

    def _part(self, chunk: dict[str, Any], kind: str, agent: str, where: Position) -> list[bytes]:
        """A text or reasoning part starts, grows or ends: a text or thinking block."""
        if kind in ("text-start", "reasoning-start"):
            pid = need(chunk, "id", str, where)
            btype = "text" if kind == "text-start" else "thinking"
            out = self._meta(agent, where)
            self._parts.begin(pid, agent, btype, where)
            return out
        # text-delta, reasoning-delta, text-end, reasoning-end
        return self._parts.step(chunk, "id", kind, where, end=kind.endswith("-end"))

    def _pending_calls(self, where: Position) -> list[bytes]:
        """A message not ours that ends with client tool calls unanswered: ``awaiting_frontend_tools``.

        The AI SDK leaves a call the server did not run for the browser (``onToolCall``,
        ``addToolResult``); the envelope protocol says so with ``awaiting_frontend_tools``
        (spec/interop.md §5.1).
        """
        pending = [
            {"tool_use_id": tid, "name": call[2], "input": call[4] if isinstance(call[4], dict) else {}}
            for tid, call in self._calls.items()
            if call[1] == "tool_call" and call[0] == self._main and tid not in self._answered
        ]
        return write_awaiting(self._writer, self._meta, self._main, pending, where)

    def _meta(self, agent: str, where: Position) -> list[bytes]:
        """A stream not ours: each agent's first block is preceded by a made ``meta_init``."""
        if self._ours or agent in self._started:
            return []
        self._started.add(agent)
        payload = made_meta_init(agent, "vercel")
        return self._writer.whole(agent, "meta_init", dumps(payload), where)

    def _available(self, chunk: dict[str, Any], agent: str, where: Position) -> list[bytes]:
        tid = need(chunk, "toolCallId", str, where)
        name = need(chunk, "toolName", str, where)
        if "input" not in chunk:
            raise InteropError("I202", "tool-input-available needs input", position=where, field="$.input")
        w = self._writer
        call = self._calls.get(tid)
        if call is None or not w.is_open(call[0], call[1]):
            btype = "server_tool_call" if chunk.get("providerExecuted") is True else "tool_call"
            self._calls[tid] = [agent, btype, name, True, chunk["input"]]
            return self._meta(agent, where) + w.whole(
                agent, btype, _input_text(chunk["input"]), where, id=tid, name=name
            )
        call[4] = chunk["input"]
        out = [] if call[3] else w.add(call[0], call[1], _input_text(chunk["input"]), where)
        return out + w.end(call[0], call[1], where)

    def _output(self, chunk: dict[str, Any], kind: str, ours: dict[str, Any], where: Position) -> list[bytes]:
        tid = need(chunk, "toolCallId", str, where)
        call = self._calls.get(tid)
        name = ours.get("name")
        if call is None:
            raise InteropError("I204", f"{kind} for tool call {tid!r} never started", position=where)
        self._answered.add(tid)
        agent = call[0]
        if not isinstance(name, str):
            name = call[2]
        if kind == "tool-output-error":
            text = need(chunk, "errorText", str, where)
        else:
            if "output" not in chunk:
                raise InteropError("I202", "tool-output-available needs output", position=where, field="$.output")
            output = chunk["output"]
            text = output if isinstance(output, str) else dumps(output)
        images = image_refs(ours.get("images"), where)
        server = chunk.get("providerExecuted") is True
        out = self._meta(agent, where)
        return out + write_result(self._writer, agent, tid, name, text, images, where, server=server)

    def _source(
        self, chunk: dict[str, Any], kind: str, ours: dict[str, Any], agent: str, where: Position
    ) -> list[bytes]:
        need(chunk, "sourceId", str, where)
        citation = ours.get("citation")
        final = ours.get("final", True)
        if not isinstance(citation, dict):
            if kind == "source-url":
                citation = {"cited_text": "", "citation_type": "web_search_result_location"}
                citation["url"] = need(chunk, "url", str, where)
                title = optional(chunk, "title", str, where)
                if title is not None:
                    citation["title"] = title
            else:
                citation = {
                    "cited_text": "",
                    "citation_type": "char_location",
                    "document_title": need(chunk, "title", str, where),
                }
            out = [] if self._held_cite is None else self._writer.citation(*self._held_cite, False, where)
            self._held_cite = (agent, citation)
            return self._meta(agent, where) + out
        if not isinstance(final, bool):
            raise InteropError("I202", "citation final must be a boolean", position=where)
        return self._meta(agent, where) + self._writer.citation(agent, citation, final, where)

    def _data(self, chunk: dict[str, Any], kind: str, where: Position) -> list[bytes]:
        data = chunk.get("data")
        if not isinstance(data, dict):
            raise InteropError(
                "I203", f"{kind}: a data part that is not ours has no envelope counterpart", position=where
            )
        if kind == _RUN:
            named = data.get("agent")
            self._ours = True
            if isinstance(named, str):
                self._main = named
            return []
        if kind == _SUBAGENT:
            need(data, "agent", str, where)
            return []
        agent = need(data, "agent", str, where)
        w = self._writer
        if kind == _PIECE:
            return self._meta(agent, where) + write_piece(w, agent, data, where)
        btype = _CONTROL_BY_DATA.get(kind)
        if btype is None:
            raise InteropError("I203", f"{kind} has no envelope counterpart (spec/interop.md §5.3)", position=where)
        if btype == "meta_init":
            self._started.add(agent)
        return self._meta(agent, where) + w.whole(agent, btype, need(data, "text", str, where), where)

    def close(self) -> list[bytes]:
        """End of input: a message without ``finish`` was cut; its open blocks stay open."""
        where = self._end_of_input()
        if not self._in_message:
            return []
        return self._release_citation(where) + self._writer.cut()


def _input_text(value: Any) -> str:
    """A tool input as the JSON text an envelope carries (a string stays the raw text we sent)."""
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()
