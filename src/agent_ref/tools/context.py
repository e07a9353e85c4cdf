"""What a tool may ask for by annotation: ``ToolContext``, and how its progress reaches the stream.

Owns: ``ToolContext`` (the agent and run ids, the tool use id, the store, a
``progress(message, fraction=None)`` callback; spec ``spec/agent-ref.md`` §2.6),
``ToolContextBase`` (what the caller of ``run_tools`` knows of the run), the progress
payload and ``ProgressStream``, which sends progress as ``meta_status`` envelopes of kind
``tool_progress`` (§2.6-b) without breaking a call's contiguous result group (§2.3-a),
and ``status_lines``, the one way the agent sends a status signal (envelope-v1 §4.16).
Does not own: running the tools (``tools/core.py``) or the wire form (``envelope.Emitter``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..policy import scrub

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    from envelope import Emitter

__all__ = ["STATUS_TYPE", "ToolContext", "ToolContextBase", "ToolProgress", "ToolStore", "status_lines"]

log = logging.getLogger("agent_ref")

#: The envelope type of the agent's routine status signals (envelope-v1 §4.16).
STATUS_TYPE: Final = "meta_status"
#: The ``kind`` of the ``meta_status`` payload that carries tool progress (spec §2.6-b).
PROGRESS_TYPE: Final = "tool_progress"
#: Longest progress message sent; longer ones are cut (spec §2.6-b: one line, and a line, not a log).
MAX_PROGRESS_CHARS: Final = 300


def status_lines(emitter: Emitter, payload: Mapping[str, Any]) -> list[bytes]:
    """The ``meta_status`` lines of ``payload`` (a ``kind`` and its keys), or none under the seed profile.

    envelope-v1 §4.16: a routine signal is a status, never an ``error``; §10.2-e: a
    ``seed``-profile stream carries none, since its clients know only the seed's types.
    """
    if emitter.profile == "seed":
        return []
    return emitter.buffered(STATUS_TYPE, json.dumps(payload, ensure_ascii=False))


class ToolStore(Protocol):
    """The agent's store as a tool sees it: its reads of a run's lines (STYLE §17: tools sit below the store).

    A Protocol of the tools wing, which names no store type. Every ``Store`` (``MemoryStore``,
    ``SQLiteStore``, ``PostgresStore``) is one, and ``ToolContext.store`` is that same object,
    so a tool that needs more narrows it: ``isinstance(ctx.store, SnapshotStore)`` for
    snapshots, ``cast(Store, ctx.store)`` for ``load``, ``runs`` and the rest.
    """

    async def run_log(self, run_id: str) -> list[bytes]:
        """Every line sent for the run, in order, across its responses."""
        ...

    async def run_responses(self, run_id: str) -> list[list[bytes]]:
        """The run's lines grouped by response, in order: each a complete stream ending with ``[DONE]``."""
        ...


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """One progress report of a running call (spec §2.6-b).

    Attributes:
        tool_use_id: the call.
        name: the tool.
        message: what the tool says it is doing (at most ``MAX_PROGRESS_CHARS``).
        fraction: how far it is, from 0 to 1, when it knows.
    """

    tool_use_id: str
    name: str
    message: str
    fraction: float | None = None

    def payload(self) -> dict[str, Any]:
        """The ``meta_status`` payload: ``kind``, ``message``, ``tool_use_id``, ``name``, ``fraction``?."""
        out: dict[str, Any] = {
            "kind": PROGRESS_TYPE,
            "message": self.message,
            "tool_use_id": self.tool_use_id,
            "name": self.name,
        }
        if self.fraction is not None:
            out["fraction"] = self.fraction
        return out


@dataclass(frozen=True, slots=True)
class ToolContextBase:
    """What the caller of ``run_tools`` knows of the run; each call's ``ToolContext`` adds its own part.

    Attributes:
        agent_uuid: the agent running the tools.
        run_id: the run.
        store: the agent's store (``None`` when the caller has none to give).
        stream_progress: send progress into the stream (spec §2.6-b); otherwise only
            ``on_progress`` and the log hear of it.
        progress_interval: seconds between two progress lines of one call; reports in
            between are coalesced, the latest kept (a tool reporting in a tight loop
            must not flood the stream).
        on_progress: told of every report as it is made (for a log, a hook, a test).
        step: the run's step the calls belong to (0: unknown); snapshots key on it (spec RU1-b).
    """

    agent_uuid: str = ""
    run_id: str = ""
    store: ToolStore | None = None
    stream_progress: bool = True
    progress_interval: float = 0.25
    on_progress: Callable[[ToolProgress], None] | None = None
    step: int = 0


def progress_note(payload: Mapping[str, Any]) -> str:
    """A progress payload as a one-line note for people: ``name: message (50%)`` (spec §2.6-b)."""
    note = f"{payload.get('name', 'tool')}: {payload.get('message', '')}"
    fraction = payload.get("fraction")
    if isinstance(fraction, int | float) and not isinstance(fraction, bool):
        note += f" ({round(fraction * 100)}%)"
    return note


def _ignore(message: str, fraction: float | None = None) -> None:
    """A progress callback that goes nowhere (no context was given to ``run_tools``)."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Given to a tool whose parameter is annotated ``ToolContext``; the model never sees it (spec §2.6-a).

    Attributes:
        agent_uuid: the agent running the tool (``""`` when the caller gave no context).
        run_id: the run (``""`` likewise).
        tool_use_id: the call being answered.
        tool_name: the tool's name.
        store: the agent's store, or ``None``.
        step: the run's step (0: unknown; spec RU1-b).
    """

    agent_uuid: str
    run_id: str
    tool_use_id: str
    tool_name: str
    store: ToolStore | None = None
    _report: Callable[[str, float | None], None] = field(default=_ignore, repr=False)
    step: int = 0

    def progress(self, message: str, fraction: float | None = None) -> None:
        """Report progress: what the tool is doing, and how far (0 to 1) when it knows (spec §2.6-b).

        Safe from any thread (a blocking tool runs in one of its own) and never blocks; a
        report after the call has ended is dropped.

        Raises:
            ValueError: ``message`` is not a string, or ``fraction`` is not a number from 0 to 1.
        """
        if not isinstance(message, str):
            raise ValueError(f"progress message must be a string, not {type(message).__name__}")
        if fraction is not None:
            if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not math.isfinite(fraction):
                raise ValueError(f"progress fraction must be a number from 0 to 1, not {fraction!r}")
            if not 0 <= fraction <= 1:
                raise ValueError(f"progress fraction must be from 0 to 1, not {fraction!r}")
            fraction = float(fraction)
        self._report(scrub.held_text(message)[:MAX_PROGRESS_CHARS], fraction)  # [SC1-a]: before the cut


class ProgressStream:
    """Sends the progress of one step's calls, between the calls' result groups (spec §2.6-b, §2.3-a).

    Every send of ``run_tools`` goes through ``send`` here, under one lock, so a progress
    line never falls inside a call's result group. Reports are coalesced per call (the
    latest wins) and sent at most once per ``progress_interval`` per call; a call's
    pending report is dropped when its result is ready, and every report after ``close``.
    """

    def __init__(
        self,
        base: ToolContextBase | None,
        emitter: Emitter,
        send: Callable[[list[bytes]], Awaitable[None]],
    ) -> None:
        self._base = base
        self._emitter = emitter
        self._send = send
        self._lock = asyncio.Lock()
        self._pending: dict[str, ToolProgress] = {}
        self._last: dict[str, float] = {}
        self._ended: set[str] = set()
        self._closed = False
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None
        self._failed: Exception | None = None
        if base is not None and base.stream_progress:
            self._task = asyncio.ensure_future(self._drain())

    def context(self, tool_use_id: str, tool_name: str) -> ToolContext:
        """The ``ToolContext`` of one call."""
        base = self._base
        if base is None:
            return ToolContext(agent_uuid="", run_id="", tool_use_id=tool_use_id, tool_name=tool_name)

        def report(message: str, fraction: float | None) -> None:
            item = ToolProgress(tool_use_id=tool_use_id, name=tool_name, message=message, fraction=fraction)
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody listens any more
                self._loop.call_soon_threadsafe(self._take, item)

        return ToolContext(base.agent_uuid, base.run_id, tool_use_id, tool_name, base.store, report, base.step)

    def _take(self, item: ToolProgress) -> None:
        if self._closed or item.tool_use_id in self._ended:
            return
        base = self._base
        log.debug("tool progress %s %s: %s (%s)", item.name, item.tool_use_id, item.message, item.fraction)
        if base is not None and base.on_progress is not None:
            try:
                base.on_progress(item)
            except Exception as exc:  # an observer's bug is not the tool's failure
                log.warning("on_progress raised %s: %s", type(exc).__name__, exc)
        if self._task is not None:
            self._pending[item.tool_use_id] = item
            self._wake.set()

    async def _drain(self) -> None:
        interval = self._base.progress_interval if self._base is not None else 0.0
        while not self._closed:
            await self._wake.wait()
            self._wake.clear()
            now = time.monotonic()
            due = [k for k in self._pending if now - self._last.get(k, -math.inf) >= interval]
            for key in due:
                item = self._pending.pop(key, None)
                if item is None or self._closed:
                    continue
                self._last[key] = time.monotonic()
                lines = status_lines(self._emitter, item.payload())
                try:
                    if lines:
                        await self.send(lines)
                except Exception as exc:  # the sink failed (the client is gone): the next result send says so
                    self._failed = exc
                    self._closed = True
                    return
            if self._pending:  # some wait for their interval: look again when the first is due
                wait = min(interval - (time.monotonic() - self._last.get(k, 0.0)) for k in self._pending)
                self._loop.call_later(max(0.0, wait), self._wake.set)

    async def send(self, lines: Sequence[bytes]) -> None:
        """Send one group of lines, never interleaved with another group of this step.

        Raises:
            Exception: what the sink raised, also when it raised while sending a progress
                line (the caller learns of a gone client from the next result, spec §5.5-c).
        """
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed
        async with self._lock:
            await self._send(list(lines))

    def ended(self, tool_use_id: str) -> None:
        """The call's result is ready: its pending report is dropped, later ones too."""
        self._ended.add(tool_use_id)
        self._pending.pop(tool_use_id, None)

    async def close(self) -> None:
        """No more progress: pending reports are dropped; waits for a line being sent to be sent."""
        self._closed = True
        self._pending.clear()
        task, self._task = self._task, None
        if task is None:
            return
        self._wake.set()
        async with self._lock:  # a line in flight finishes first (one group is never cut)
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
