"""Envelope streams to AG-UI events and back (spec/interop.md §4).

``EnvelopeToAgui``: envelope lines in (one at a time, ``[DONE]`` included), AG-UI
events out, as dicts ready for ``json`` encoding. ``AguiToEnvelope``: AG-UI events in
(dicts, or their JSON text), envelope lines out. Both are sans-I/O; ``close()`` ends
what is open. Every decision (which event carries which block, what travels in
``metadata.envelope`` or a ``CUSTOM`` event, what cannot cross) is in spec/interop.md.

Example::

    conv = EnvelopeToAgui()
    events = [e for line in lines for e in conv.feed(line)] + conv.close()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from .._blocks import _parse
from .._encoder import ImageRef
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
    made_meta_init,
    need,
    optional,
    parse_object,
    split_data_uri,
    write_awaiting,
    write_piece,
    write_result,
)
from ._requests import ServerRequest, request_from_run_input

if TYPE_CHECKING:
    from collections.abc import Mapping

    from .._errors import Position

__all__ = ["CUSTOM_PREFIX", "AguiToEnvelope", "EnvelopeToAgui", "ServerRequest", "request_from_run_input"]

#: ``CUSTOM`` events named ``envelope.<type>`` carry what AG-UI has no event for.
CUSTOM_PREFIX: Final = "envelope."


class EnvelopeToAgui(EnvelopeReader):
    """Envelope lines to AG-UI events (spec/interop.md §4).

    The first agent of each response is the run's agent; every other agent is a
    subagent (``SUBAGENT_STARTED``, its events attributed by ``subagentRunId`` = its
    agent id, parent links from its ``meta_init``).
    """

    def __init__(
        self,
        *,
        thread_id: str = "thread",
        run_id: str | None = None,
        max_block_bytes: int = DEFAULT_MAX_BLOCK_BYTES,
        message_prefix: str = "",
    ) -> None:
        """Create a converter.

        Args:
            thread_id: the AG-UI ``threadId`` of every run.
            message_prefix: put before every ``messageId`` made (``<agent>.<kind><n>``);
                a server that converts each response of a thread with a new converter
                gives each its own, since a client's reducer merges messages by id.
            run_id: the ``runId``; by default the first ``meta_init``'s ``run_id`` when the
                response opens with a one-line ``meta_init`` carrying one, else ``run-<n>``
                for the n-th response.
            max_block_bytes: a block held whole (a result, a control payload) larger than
                this many characters is an error (I208).
        """
        super().__init__(max_block_bytes=max_block_bytes)
        self.thread_id = thread_id
        self.run_id = run_id
        self._runs = 0
        self._current_run = ""
        self._sub_active: set[str] = set()
        self._sub_done: set[str] = set()
        self._pending: list[str] = []  # awaiting_frontend_tools ids of the run's agent
        self._suspended: set[str] = set()
        self._last_msg: dict[str, str] = {}
        self._steps: dict[str, list[str]] = {}  # per agent: its AG-UI steps still open (I4-g)
        self.message_prefix = message_prefix

    def _ref(self, agent: str, kind: str) -> str:
        return self.message_prefix + super()._ref(agent, kind)

    def _attr(self, agent: str, event: dict[str, Any]) -> dict[str, Any]:
        if agent != self.main:
            event["subagentRunId"] = agent
        return event

    def _on_run_start(self, main: str | None) -> list[Any]:
        self._runs += 1
        self._current_run = self.run_id or f"run-{self._runs}"
        event: dict[str, Any] = {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self._current_run}
        event["metadata"] = {"envelope": {"agent": main} if main is not None else {}}
        self._pending = []
        self._sub_active = set()
        self._sub_done = set()
        self._suspended = set()
        self._steps = {}
        return [event]

    def _on_run_end(self) -> list[Any]:
        out: list[Any] = [e for agent in sorted(self._sub_active) for e in self._sub_finish(agent)]
        out += self._close_steps(self.main) if self.main is not None else []
        self._sub_active.clear()
        event: dict[str, Any] = {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self._current_run}
        if self._pending:
            event["outcome"] = {"type": "success", "pendingToolCallIds": list(self._pending)}
        return [*out, event]

    def _sub_finish(self, agent: str) -> list[dict[str, Any]]:
        self._sub_done.add(agent)
        event: dict[str, Any] = {"type": "SUBAGENT_FINISHED", "subagentRunId": agent}
        if agent in self._suspended:
            event["outcome"] = {"type": "suspended"}
        return [*self._close_steps(agent), event]

    def _close_steps(self, agent: str) -> list[dict[str, Any]]:
        """``STEP_FINISHED`` for the agent's steps still open: AG-UI's verifier ends nothing with one open (I4-g)."""
        names = self._steps.pop(agent, [])
        return [self._attr(agent, {"type": "STEP_FINISHED", "stepName": name}) for name in names]

    def _native_step(self, agent: str, data: object) -> list[dict[str, Any]]:
        """AG-UI's own step events beside a ``step_start``/``step_finish`` status (spec/interop.md I4-g)."""
        if not isinstance(data, dict) or type(data.get("step")) is not int:
            return []
        kind, name = data.get("kind"), f"step {data['step']}"
        open_steps = self._steps.setdefault(agent, [])
        if kind == "step_start" and name not in open_steps:
            open_steps.append(name)
            return [self._attr(agent, {"type": "STEP_STARTED", "stepName": name})]
        if kind == "step_finish" and name in open_steps:
            open_steps.remove(name)
            return [self._attr(agent, {"type": "STEP_FINISHED", "stepName": name})]
        return []

    def _on_agent(self, agent: str) -> list[Any]:
        if agent == self.main or agent in self._sub_done:
            return []
        event: dict[str, Any] = {"type": "SUBAGENT_STARTED", "subagentRunId": agent, "name": agent}
        meta = self.meta.get(agent)
        if isinstance(meta, dict):
            parent, call = meta.get("parent_agent"), meta.get("parent_tool_use_id")
            if isinstance(parent, str) and parent in self._sub_active:
                event["parentSubagentRunId"] = parent
            if isinstance(call, str) and isinstance(parent, str):
                event["parentToolCallId"] = call
        self._sub_active.add(agent)
        return [event]

    def _on_open(self, block: OpenBlock, delta: str) -> list[Any]:
        agent, ref = block.agent, block.ref
        out: list[dict[str, Any]]
        if block.type == "text":
            out = [{"type": "TEXT_MESSAGE_START", "messageId": ref, "role": "assistant"}]
            self._last_msg[agent] = ref
        elif block.type == "thinking":
            out = [
                {"type": "REASONING_START", "messageId": ref + ".span"},
                {"type": "REASONING_MESSAGE_START", "messageId": ref, "role": "reasoning"},
            ]
        else:
            start: dict[str, Any] = {"type": "TOOL_CALL_START", "toolCallId": block.id, "toolCallName": block.name}
            parent = self._last_msg.get(agent)
            if parent is not None:
                start["parentMessageId"] = parent
            if block.type == "server_tool_call":
                start["metadata"] = {"envelope": {"type": "server_tool_call"}}
            if block.edit:
                # the input that ran goes whole on TOOL_CALL_END: no TOOL_CALL_ARGS, which the
                # reducer would append to the model's input (spec/interop.md I4-e)
                start["metadata"] = {"envelope": {"edit": True}}
                block.parts = []
            out = [start]
        for event in out:
            self._attr(agent, event)
        return out + (self._on_delta(block, delta) if delta else [])

    def _on_delta(self, block: OpenBlock, delta: str) -> list[Any]:
        event: dict[str, Any]
        if block.type == "text":
            event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": block.ref, "delta": delta}
        elif block.type == "thinking":
            event = {"type": "REASONING_MESSAGE_CONTENT", "messageId": block.ref, "delta": delta}
        elif block.edit:
            block.parts.append(delta)
            block.size += len(delta)
            if block.size > self.max_block_bytes:
                raise InteropError("I208", f"edited tool_call over {self.max_block_bytes} characters")
            return []
        else:
            event = {"type": "TOOL_CALL_ARGS", "toolCallId": block.id, "delta": delta}
        return [self._attr(block.agent, event)]

    def _on_close(self, block: OpenBlock) -> list[Any]:
        events: list[dict[str, Any]]
        if block.type == "text":
            events = [{"type": "TEXT_MESSAGE_END", "messageId": block.ref}]
        elif block.type == "thinking":
            events = [
                {"type": "REASONING_MESSAGE_END", "messageId": block.ref},
                {"type": "REASONING_END", "messageId": block.ref + ".span"},
            ]
        else:
            events = [{"type": "TOOL_CALL_END", "toolCallId": block.id}]
            if block.edit:
                events[0]["metadata"] = {"envelope": {"edit": True, "input": "".join(block.parts)}}
        return [self._attr(block.agent, e) for e in events]

    def _on_whole(self, block: OpenBlock, text: str) -> list[Any]:
        agent = block.agent
        if block.type in ("tool_result", "server_tool_result"):
            content: Any = text
            if block.images:
                content = [{"type": "text", "text": text}]
                for image in block.images:
                    body = split_data_uri(image.src, image.media_type)
                    source = (
                        {"type": "data", "value": body, "mimeType": image.media_type}
                        if body is not None
                        else {"type": "url", "value": image.src, "mimeType": image.media_type}
                    )
                    content.append({"type": "image", "source": source})
            event = {
                "type": "TOOL_CALL_RESULT",
                "messageId": block.ref,
                "toolCallId": block.id,
                "content": content,
                "role": "tool",
                "metadata": {"envelope": {"type": block.type, "name": block.name}},
            }
            return [self._attr(agent, event)]
        value: dict[str, Any] = {"text": text}
        data = _parse(text)
        if data is not text:
            value["data"] = data
        out = [self._attr(agent, {"type": "CUSTOM", "name": CUSTOM_PREFIX + block.type, "value": value})]
        if block.type == "awaiting_frontend_tools":
            if agent == self.main and isinstance(data, list):
                ids = [c.get("tool_use_id") for c in data if isinstance(c, dict)]
                self._pending += [i for i in ids if isinstance(i, str)]
            self._suspended.add(agent)
        if block.type == "meta_status":
            out += self._native_step(agent, data)
        if block.type == "meta_final" and agent in self._sub_active:
            self._sub_active.discard(agent)
            out += self._sub_finish(agent)
        return out

    def _on_piece(self, block: OpenBlock, text: str, images: list[ImageRef], final: bool) -> list[Any]:
        value: dict[str, Any] = {"type": block.type, "text": text, "final": final}
        if block.id is not None:
            value["id"] = block.id
            value["name"] = block.name
        if images:
            value["images"] = [{"src": i.src, "media_type": i.media_type} for i in images]
        return [self._attr(block.agent, {"type": "CUSTOM", "name": CUSTOM_PREFIX + "piece", "value": value})]

    def _on_citation(self, agent: str, text_ref: str, citation: dict[str, Any], final: bool) -> list[Any]:
        value = {"messageId": text_ref, **citation, "final": final}
        return [self._attr(agent, {"type": "CUSTOM", "name": CUSTOM_PREFIX + "citation", "value": value})]


#: AG-UI events that carry structure only, nothing an envelope holds (spec/interop.md §4.3).
_STRUCTURE: Final = frozenset(
    {"STEP_STARTED", "STEP_FINISHED", "REASONING_START", "REASONING_END", "SUBAGENT_FINISHED"}
)


#: The events of a run's and a subagent's life (``AguiToEnvelope._lifecycle``).
_LIFECYCLE: Final = frozenset({"RUN_STARTED", "RUN_FINISHED", "RUN_ERROR", "SUBAGENT_STARTED", "SUBAGENT_ERROR"})
#: The events of a text or reasoning message (``AguiToEnvelope._message``).
_MESSAGE_EVENTS: Final = frozenset(
    {
        "TEXT_MESSAGE_START",
        "REASONING_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "REASONING_MESSAGE_END",
    }
)
#: The events of a tool call's block (``AguiToEnvelope._tool_call``).
_CALL_EVENTS: Final = frozenset({"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"})


class AguiToEnvelope(Inputs):
    """AG-UI events to envelope lines (spec/interop.md §4).

    Events of the run's agent (no ``subagentRunId``) go to agent ``agent`` (or the one our
    ``RUN_STARTED`` names); a subagent's to its ``subagentRunId``. A stream not made by
    ``EnvelopeToAgui`` gets a ``meta_init`` per agent (``migrated_from: "agui"``).
    """

    def __init__(self, *, agent: str = "agent", max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        """Create a converter.

        Args:
            agent: the envelope agent of the run's own events when ``RUN_STARTED`` does
                not name one.
            max_bytes: the bound on each envelope line written (spec §6.1).
        """
        super().__init__()
        self.default_agent = agent
        self._writer = EnvelopeWriter(max_bytes)
        self._main = agent
        self._ours = False
        self._in_run = False
        self._messages = OpenParts(self._writer, "message")  # by messageId
        self._calls: dict[str, tuple[str, str, str]] = {}  # toolCallId -> (agent, type, name)
        self._started: set[str] = set()  # agents with a meta_init in this response
        self._parents: dict[str, tuple[str | None, str | None]] = {}
        self._args: dict[str, str] = {}  # a stream not ours: each call's arguments, for a pending call
        self._edits: set[str] = set()  # open edited calls (TOOL_CALL_START with metadata.envelope.edit)

    def feed(self, raw: bytes | str | Mapping[str, Any]) -> list[bytes]:
        """Convert one AG-UI event (a dict or its JSON text); returns envelope lines.

        Raises:
            InteropError: I201-I205 with the event's position (its 1-based number).
        """
        where = self._next_input()
        event = parse_object(raw, where)
        kind = need(event, "type", str, where)
        if kind != "RUN_STARTED" and not self._in_run:
            raise InteropError("I204", f"{kind} outside a run (the first event must be RUN_STARTED)", position=where)
        sub = optional(event, "subagentRunId", str, where)
        agent: str = sub if sub is not None else self._main
        if kind in _LIFECYCLE:
            return self._lifecycle(kind, event, agent, where)
        if kind in _STRUCTURE:
            return []
        if kind in _MESSAGE_EVENTS:
            return self._message(kind, event, agent, where)
        if kind in _CALL_EVENTS:
            return self._tool_call(kind, event, agent, where)
        if kind == "TOOL_CALL_RESULT":
            return self._result(event, agent, where)
        if kind == "CUSTOM":
            name = need(event, "name", str, where)
            if name.startswith(CUSTOM_PREFIX):
                return self._custom(name[len(CUSTOM_PREFIX) :], event.get("value"), agent, where)
        raise InteropError("I203", f"{kind} has no envelope counterpart (spec/interop.md §4.3)", position=where)

    def _lifecycle(self, kind: str, event: dict[str, Any], agent: str, where: Position) -> list[bytes]:
        """A run or a subagent starts, finishes or fails (spec/interop.md §4.1)."""
        w = self._writer
        if kind == "RUN_STARTED":
            if self._in_run:
                raise InteropError("I204", "RUN_STARTED inside a run", position=where)
            need(event, "threadId", str, where)
            need(event, "runId", str, where)
            ours = envelope_meta(event)
            self._ours = "agent" in ours or event.get("metadata") == {"envelope": {}}
            named = ours.get("agent")
            self._main = named if isinstance(named, str) else self.default_agent
            self._in_run = True
            self._started = set()
            return []
        if kind in ("RUN_FINISHED", "RUN_ERROR"):
            if kind == "RUN_FINISHED":
                need(event, "threadId", str, where)
                need(event, "runId", str, where)
            out: list[bytes] = []
            if kind == "RUN_FINISHED" and not self._ours:
                out += self._pending_calls(event, where)
            if kind == "RUN_ERROR":
                message = need(event, "message", str, where)
                payload = {"type": optional(event, "code", str, where) or "run_error", "message": message}
                out += self._meta(agent, where) + w.whole(agent, "error", dumps(payload), where)
            self._in_run = False
            return out + w.done(where)
        if kind == "SUBAGENT_STARTED":
            name = need(event, "subagentRunId", str, where)
            self._parents[name] = (
                optional(event, "parentSubagentRunId", str, where),
                optional(event, "parentToolCallId", str, where),
            )
            need(event, "name", str, where)
            return []
        # SUBAGENT_ERROR
        message = need(event, "message", str, where)
        payload = {"type": optional(event, "code", str, where) or "subagent_error", "message": message}
        return self._meta(agent, where) + w.whole(agent, "error", dumps(payload), where)

    def _message(self, kind: str, event: dict[str, Any], agent: str, where: Position) -> list[bytes]:
        """A text or reasoning message starts, grows or ends: a text or thinking block."""
        if kind in ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START"):
            mid = need(event, "messageId", str, where)
            role = optional(event, "role", str, where)
            if kind == "TEXT_MESSAGE_START" and role not in (None, "assistant"):
                raise InteropError("I203", f"a {role} text message has no envelope counterpart", position=where)
            btype = "text" if kind == "TEXT_MESSAGE_START" else "thinking"
            out = self._meta(agent, where)
            self._messages.begin(mid, agent, btype, where)
            return out
        # TEXT_MESSAGE_CONTENT, REASONING_MESSAGE_CONTENT, TEXT_MESSAGE_END, REASONING_MESSAGE_END
        return self._messages.step(event, "messageId", kind, where, end=kind.endswith("_END"))

    def _tool_call(self, kind: str, event: dict[str, Any], agent: str, where: Position) -> list[bytes]:
        """A tool call starts, gets its arguments, or ends: a tool_call or server_tool_call block."""
        w = self._writer
        if kind == "TOOL_CALL_START":
            tid = need(event, "toolCallId", str, where)
            name = need(event, "toolCallName", str, where)
            ours = envelope_meta(event)
            btype = "server_tool_call" if ours.get("type") == "server_tool_call" else "tool_call"
            if ours.get("edit") is True:
                self._edits.add(tid)  # its input comes whole on TOOL_CALL_END (spec/interop.md I4-e)
            self._calls[tid] = (agent, btype, name)
            out = self._meta(agent, where)
            w.begin(agent, btype, where, id=tid, name=name)
            return out
        # TOOL_CALL_ARGS, TOOL_CALL_END
        tid = need(event, "toolCallId", str, where)
        call = self._calls.get(tid)
        if call is None or not w.is_open(call[0], call[1]):
            raise InteropError("I204", f"{kind} for tool call {tid!r} that is not open", position=where)
        if kind == "TOOL_CALL_END":
            if tid in self._edits:
                self._edits.discard(tid)
                ran = envelope_meta(event).get("input")
                if not isinstance(ran, str):
                    raise InteropError(
                        "I202",
                        f"TOOL_CALL_END of edited call {tid!r} needs metadata.envelope.input, a string",
                        position=where,
                        field="$.metadata.envelope.input",
                    )
                return w.add(call[0], call[1], ran, where) + w.end(call[0], call[1], where)
            # a call of a stream not ours that sent no arguments: an empty JSON object (spec/interop.md §4.2)
            empty = [] if self._ours or tid in self._args else w.add(call[0], call[1], "{}", where)
            return empty + w.end(call[0], call[1], where)
        if tid in self._edits:
            raise InteropError(
                "I204", f"TOOL_CALL_ARGS for edited call {tid!r}: its input comes on TOOL_CALL_END", position=where
            )
        delta = need(event, "delta", str, where)
        if not self._ours:
            self._args[tid] = self._args.get(tid, "") + delta
        return w.add(call[0], call[1], delta, where)

    def _pending_calls(self, event: dict[str, Any], where: Position) -> list[bytes]:
        """A run not ours that finished with client tools to run: ``awaiting_frontend_tools`` (spec/interop.md §4.1)."""
        outcome = event.get("outcome")
        if not isinstance(outcome, dict) or outcome.get("type") != "success":
            return []
        ids = optional(outcome, "pendingToolCallIds", list, where) or []
        pending: list[dict[str, Any]] = []
        for tid in ids:
            call = self._calls.get(tid) if isinstance(tid, str) else None
            if call is None:
                raise InteropError("I204", f"pending tool call {tid!r} was never started", position=where)
            args = _parse(self._args.get(tid, ""))
            pending.append({"tool_use_id": tid, "name": call[2], "input": args if isinstance(args, dict) else {}})
        return write_awaiting(self._writer, self._meta, self._main, pending, where)

    def _meta(self, agent: str, where: Position) -> list[bytes]:
        """A stream not ours: each agent's first block is preceded by a made ``meta_init``."""
        if self._ours or agent in self._started:
            return []
        self._started.add(agent)
        payload = made_meta_init(agent, "agui")
        parent, call = self._parents.get(agent, (None, None))
        if agent != self._main and call is not None:
            payload["parent_agent"] = parent if parent is not None else self._main
            payload["parent_tool_use_id"] = call
        return self._writer.whole(agent, "meta_init", dumps(payload), where)

    def _result(self, event: dict[str, Any], agent: str, where: Position) -> list[bytes]:
        tid = need(event, "toolCallId", str, where)
        need(event, "messageId", str, where)
        ours = envelope_meta(event)
        call = self._calls.get(tid)
        name = ours.get("name")
        if not isinstance(name, str):
            if call is None:
                raise InteropError("I202", f"result of tool call {tid!r}: no tool name known", position=where)
            name = call[2]
        btype = "server_tool_result" if ours.get("type") == "server_tool_result" else "tool_result"
        content = event.get("content")
        images: list[ImageRef] = []
        if isinstance(content, str):
            text = content
        elif isinstance(content, list):
            texts: list[str] = []
            for part in content:
                text_part, image = _content_part(part, where)
                if image is not None:
                    images.append(image)
                else:
                    texts.append(text_part)
            text = "".join(texts)
        else:
            raise InteropError("I202", "TOOL_CALL_RESULT needs content: a string or parts", position=where)
        out = self._meta(agent, where)
        return out + write_result(
            self._writer, agent, tid, name, text, images, where, server=btype == "server_tool_result"
        )

    def _custom(self, what: str, value: Any, agent: str, where: Position) -> list[bytes]:
        if not isinstance(value, dict):
            raise InteropError("I202", f"CUSTOM envelope.{what} needs an object value", position=where, field="$.value")
        w = self._writer
        if what == "citation":
            citation = {k: v for k, v in value.items() if k not in ("messageId", "final")}
            final = value.get("final", True)
            if not isinstance(final, bool):
                raise InteropError("I202", "citation final must be a boolean", position=where, field="$.value.final")
            return self._meta(agent, where) + w.citation(agent, citation, final, where)
        if what == "piece":
            return self._meta(agent, where) + write_piece(w, agent, value, where)
        if what in CONTROL_TYPES:
            text = need(value, "text", str, where)
            if what == "meta_init":
                self._started.add(agent)
            return self._meta(agent, where) + w.whole(agent, what, text, where)
        raise InteropError("I203", f"CUSTOM envelope.{what} is no envelope type", position=where)

    def close(self) -> list[bytes]:
        """End of input: a run without ``RUN_FINISHED`` was cut; its open blocks stay open."""
        self._end_of_input()
        return self._writer.cut() if self._in_run else []


def _content_part(part: Any, where: Position) -> tuple[str, ImageRef | None]:
    """A result content part: its text, or an image (``data`` sources become data URIs)."""
    if not isinstance(part, dict):
        raise InteropError("I202", "a content part must be an object", position=where)
    kind = part.get("type")
    if kind == "text":
        return need(part, "text", str, where), None
    if kind == "image":
        source = need(part, "source", dict, where)
        value = need(source, "value", str, where)
        mime = optional(source, "mimeType", str, where)
        if source.get("type") == "data" and mime is not None:
            return "", ImageRef(src=f"data:{mime};base64,{value}", media_type=mime)
        if source.get("type") == "url" and mime is not None:
            return "", ImageRef(src=value, media_type=mime)
        raise InteropError("I203", "an image part needs a data or url source with a mimeType", position=where)
    raise InteropError("I203", f"a {kind!r} content part has no envelope counterpart", position=where)
