"""Memory across runs (seed 000): retrieved before a run into the system context, updated after it (spec §21).

Owns: the ``LongTermMemory`` protocol (``retrieve(agent_id, prompt)`` before a run,
``update(agent_id, transcript)`` after it, each sync or async), what the agent does with
it — ``recall`` (the retrieved notes as one bounded block for the system prompt,
``memory_block``, ``with_memory``) and ``remember`` — and how their failures are reported
(``MemoryFailure``: logged and given to the caller, never raised; spec §21.3-a); and
``FileMemory``, a bounded store of notes in one JSON file per agent whose update is a
pluggable function (``remembered_facts`` by default).
Does not own: when the agent calls ``recall`` and ``remember`` (the run's stages), the
memory *tool* the model edits (``tools/memory.py``), or the conversation history (memory goes
into the system prompt only, never into ``messages``).

Named ``LongTermMemory``, not ``MemoryStore``: ``agent_ref.MemoryStore`` is the in-memory
state store (``store/core.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import inspect
import logging
import os
import re
import stat
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Protocol, runtime_checkable

import msgspec

from ..errors import AgentRefError, ConfigError
from ..policy import scrub

__all__ = [
    "DEFAULT_TIMEOUT",
    "Extract",
    "FileMemory",
    "LongTermMemory",
    "MemoryFailure",
    "MemoryStoreError",
    "memory_block",
    "recall",
    "remember",
    "remembered_facts",
    "with_memory",
]

log = logging.getLogger("agent_ref")

#: Seconds ``recall`` and ``remember`` wait for the store (spec §21.3-a).
DEFAULT_TIMEOUT: Final = 10.0
#: Bounds of the block put into the system prompt (spec §21.2-a).
BLOCK_MAX_ENTRIES: Final = 50
BLOCK_MAX_ENTRY_CHARS: Final = 2_000
BLOCK_MAX_CHARS: Final = 8_000
#: The block's opening lines.
BLOCK_HEADER: Final = (
    "<memory>\nNotes kept from earlier runs of this agent, most relevant first; they may be out of date."
)
BLOCK_FOOTER: Final = "</memory>"
#: Longest failure message (characters).
MAX_FAILURE_CHARS: Final = 500

#: What ``FileMemory`` calls to turn a run's transcript into notes to keep (sync or async).
Extract = Callable[[Sequence[Mapping[str, Any]]], Iterable[str] | Awaitable[Iterable[str]]]


class MemoryStoreError(AgentRefError):
    """A memory store cannot do what was asked (a bad agent id, a file that is not a memory file...)."""


@runtime_checkable
class LongTermMemory(Protocol):
    """A memory store: what an agent is told before a run, and what it keeps after (spec §21.1-a).

    Either method may be a coroutine function; ``recall`` and ``remember`` await it then,
    and run a plain one in a worker thread.
    """

    def retrieve(self, agent_id: str, prompt: str) -> Sequence[str] | Awaitable[Sequence[str]]:
        """The notes for a run of ``agent_id`` about to answer ``prompt``, most relevant first."""
        ...

    def update(self, agent_id: str, transcript: Sequence[Mapping[str, Any]]) -> Awaitable[None] | None:
        """Keep what matters of a finished run: ``transcript`` is its messages (API form)."""
        ...


@dataclass(frozen=True, slots=True)
class MemoryFailure:
    """A retrieve or update that failed or timed out: reported, never raised (spec §21.3-a).

    Attributes:
        operation: ``retrieve`` or ``update``.
        message: ``ExceptionType: text`` (or ``timed out after N s``), scrubbed of held
            secrets, at most ``MAX_FAILURE_CHARS`` characters.
    """

    operation: Literal["retrieve", "update"]
    message: str

    def payload(self) -> dict[str, str]:
        """The payload of the ``error`` envelope the run sends: ``{"type": "memory_error", "operation", "message"}``."""
        return {
            "type": "memory_error",
            "operation": self.operation,
            "message": f"the memory store's {self.operation} failed: {self.message}",
        }


def _failure(
    operation: Literal["retrieve", "update"], agent_id: str, exc: BaseException | None, timeout: float
) -> MemoryFailure:
    text = f"timed out after {timeout:g} s" if exc is None else f"{type(exc).__name__}: {exc}"
    message = scrub.public(text)[:MAX_FAILURE_CHARS]
    scrub.install_log_filter()  # the traceback logged below is scrubbed too (spec §6.3-b)
    if exc is None:
        log.warning("memory store %s for agent %s %s", operation, agent_id, message)
    else:
        log.warning("memory store %s for agent %s failed: %s", operation, agent_id, message, exc_info=exc)
    return MemoryFailure(operation=operation, message=message)


async def _call(function: Callable[..., Any], *args: Any) -> Any:
    """Await a coroutine function; run a plain one in a worker thread (file or network I/O must not block the loop)."""
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    result = await asyncio.to_thread(function, *args)
    if inspect.isawaitable(result):
        return await result
    return result


def _one_line(text: str) -> str:
    return " ".join(text.split())


def memory_block(entries: Iterable[str]) -> str | None:
    """The system-prompt block of ``entries`` (spec §21.2-a), or ``None`` when none is left.

    Each entry becomes one line ``- TEXT`` (whitespace runs collapsed, cut at
    ``BLOCK_MAX_ENTRY_CHARS``, ``</memory`` written ``<\\/memory`` so no entry closes the
    block); empty entries are dropped; at most ``BLOCK_MAX_ENTRIES`` entries and
    ``BLOCK_MAX_CHARS`` characters of them, the first ones kept.
    """
    lines: list[str] = []
    size = 0
    for entry in entries:
        text = _one_line(entry)
        if not text:
            continue
        if len(text) > BLOCK_MAX_ENTRY_CHARS:
            text = text[: BLOCK_MAX_ENTRY_CHARS - 1] + "…"
        text = re.sub(r"</(memory)", r"<\\/\1", text, flags=re.IGNORECASE)
        line = f"- {text}"
        if len(lines) >= BLOCK_MAX_ENTRIES or size + len(line) + 1 > BLOCK_MAX_CHARS:
            break
        lines.append(line)
        size += len(line) + 1
    if not lines:
        return None
    return "\n".join([BLOCK_HEADER, *lines, BLOCK_FOOTER])


def with_memory(system: str | None, block: str | None) -> str | None:
    """The system prompt with the memory block after it, a blank line between (spec §21.2-a)."""
    if not block:
        return system
    return f"{system}\n\n{block}" if system else block


async def recall(
    memory: LongTermMemory, agent_id: str, prompt: str, *, timeout: float = DEFAULT_TIMEOUT
) -> tuple[str | None, MemoryFailure | None]:
    """Retrieve before a run: the block for the system prompt (``None``: nothing) and a failure, if any.

    A retrieve that raises, times out or returns anything but a list of strings gives no
    block and a ``MemoryFailure`` (logged); the run goes on without memory (spec §21.3-a).
    """
    try:
        entries = await asyncio.wait_for(_call(memory.retrieve, agent_id, prompt), timeout)
    except TimeoutError:
        return None, _failure("retrieve", agent_id, None, timeout)
    except Exception as exc:
        return None, _failure("retrieve", agent_id, exc, timeout)
    if isinstance(entries, str | bytes) or not isinstance(entries, Sequence):
        problem = MemoryStoreError(f"retrieve returned {type(entries).__name__}, not a list of strings")
        return None, _failure("retrieve", agent_id, problem, timeout)
    bad = next((i for i, e in enumerate(entries) if not isinstance(e, str)), None)
    if bad is not None:
        problem = MemoryStoreError(f"retrieve returned a {type(entries[bad]).__name__} at index {bad}, not a string")
        return None, _failure("retrieve", agent_id, problem, timeout)
    return memory_block(entries), None


async def remember(
    memory: LongTermMemory,
    agent_id: str,
    transcript: Sequence[Mapping[str, Any]],
    *,
    timeout: float = DEFAULT_TIMEOUT,
) -> MemoryFailure | None:
    """Update after a run; a failure or a timeout is logged and returned, never raised (spec §21.3-a)."""
    try:
        await asyncio.wait_for(_call(memory.update, agent_id, transcript), timeout)
    except TimeoutError:
        return _failure("update", agent_id, None, timeout)
    except Exception as exc:
        return _failure("update", agent_id, exc, timeout)
    return None


# ----------------------------------------------------------------- the default extract

_REMEMBER = re.compile(r"\bremember\s+(?:that\s+)?([^\n.!?]+)", re.IGNORECASE)


def _user_texts(transcript: Sequence[Mapping[str, Any]]) -> Iterable[str]:
    for message in transcript:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str):
                    yield block["text"]


def remembered_facts(transcript: Sequence[Mapping[str, Any]]) -> list[str]:
    """The default ``Extract``: what the user asked to be remembered ("remember (that) X" in a user turn gives X).

    Only the user's own text counts (not tool results, not the model's words). A real
    deployment plugs in its own function (a summarizing model call, say) (spec §21.4-c).
    """
    facts = []
    for text in _user_texts(transcript):
        for match in _REMEMBER.finditer(text):
            fact = _one_line(match.group(1))
            if fact:
                facts.append(fact)
    return facts


# ----------------------------------------------------------------- FileMemory

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
#: Longest encoded agent id (bytes): a file name stays under the common 255-byte limit with its suffix.
MAX_ENCODED_ID: Final = 200
FORMAT: Final = "agent-ref-memory"


class _Entry(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    at: float


class _File(msgspec.Struct, forbid_unknown_fields=True):
    format: Literal["agent-ref-memory"]
    version: Literal[1]
    entries: list[_Entry]


def encode_agent_id(agent_id: str) -> str:
    """The file name stem of an agent id: ``[A-Za-z0-9_-]`` kept, every other UTF-8 byte ``%XX`` (spec §21.4-b).

    The encoding is injective and its output has no ``/``, no ``.`` and no NUL, so no id
    names a path outside the root or another agent's file.

    Raises:
        MemoryStoreError: an empty id, or one longer than ``MAX_ENCODED_ID`` once encoded.
    """
    if not isinstance(agent_id, str) or not agent_id:
        raise MemoryStoreError("agent id must be a non-empty string")
    out = []
    for char in agent_id:
        if char in _SAFE:
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    stem = "".join(out)
    if len(stem) > MAX_ENCODED_ID:
        shown = agent_id[:40].encode("unicode_escape").decode("ascii")
        raise MemoryStoreError(
            f"agent id {shown!r}... is too long for a file name: {len(stem)} bytes encoded, at most {MAX_ENCODED_ID}"
        )
    return stem


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w{3,}", text.lower()))


class FileMemory:
    """Notes per agent in a directory, one JSON file each, bounded, written atomically (spec §21.4).

    ``retrieve`` returns the agent's notes sharing the most words (of 3+ letters) with the
    prompt first, newest first among equals, at most ``max_results``. ``update`` calls
    ``extract`` on the run's transcript and adds what it returns (``add``).

    Args:
        root: the directory (made, mode 0700, when missing).
        extract: turns a transcript into notes (sync or async); ``remembered_facts`` by default.
        max_entries: notes kept per agent (the oldest dropped beyond).
        max_entry_chars: a longer note is cut (ending ``…``).
        max_bytes: the most one agent's file may hold (the oldest notes dropped beyond).
        max_results: notes one ``retrieve`` returns.

    Raises:
        ConfigError: ``root`` exists and is not a directory, or a bound is not positive.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        extract: Extract = remembered_facts,
        max_entries: int = 200,
        max_entry_chars: int = 2_000,
        max_bytes: int = 256_000,
        max_results: int = 20,
    ) -> None:
        """See the class docstring."""
        for name, value in (
            ("max_entries", max_entries),
            ("max_entry_chars", max_entry_chars),
            ("max_bytes", max_bytes),
            ("max_results", max_results),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"FileMemory: {name} must be a positive integer, got {value!r}")
        if max_bytes < 4 * max_entry_chars + 200:
            raise ConfigError(
                f"FileMemory: max_bytes ({max_bytes}) must hold at least one note of max_entry_chars "
                f"({max_entry_chars}) characters: at least {4 * max_entry_chars + 200}"
            )
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"FileMemory: {self.root} is not a directory")
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.extract = extract
        self.max_entries = max_entries
        self.max_entry_chars = max_entry_chars
        self.max_bytes = max_bytes
        self.max_results = max_results

    def path(self, agent_id: str) -> Path:
        """The agent's file (it may not exist yet)."""
        return self.root / f"{encode_agent_id(agent_id)}.json"

    def entries(self, agent_id: str) -> list[str]:
        """The agent's notes, oldest first (``[]`` when it has none).

        Raises:
            MemoryStoreError: the file is not a memory file (its name and what is wrong).
        """
        return [e.text for e in self._read(self.path(agent_id))]

    def retrieve(self, agent_id: str, prompt: str) -> list[str]:
        """The notes for a run answering ``prompt``: most shared words first, then newest (spec §21.4-a)."""
        stored = self.entries(agent_id)
        wanted = _words(prompt)
        ranked = sorted(range(len(stored)), key=lambda i: (-len(_words(stored[i]) & wanted), -i))
        return [stored[i] for i in ranked[: self.max_results]]

    async def update(self, agent_id: str, transcript: Sequence[Mapping[str, Any]]) -> None:
        """Add what ``extract`` finds in the transcript (spec §21.4-c)."""
        found = self.extract(transcript)
        if inspect.isawaitable(found):
            found = await found
        notes = list(found)
        if notes:
            await asyncio.to_thread(self.add, agent_id, notes)

    def add(self, agent_id: str, notes: Iterable[str]) -> None:
        """Add notes, as the newest, within the bounds (spec §21.4-a).

        Each note is put on one line (whitespace runs collapsed) and cut at
        ``max_entry_chars``; empty ones are dropped; a note equal to a kept one moves that
        one to the newest place instead of being kept twice. Then the oldest are dropped
        until at most ``max_entries`` remain and the file is at most ``max_bytes``. The file
        is replaced atomically under an exclusive lock, so concurrent adds of several
        processes each land.

        Raises:
            MemoryStoreError: a bad agent id, or the existing file is not a memory file
                (it is left as it is).
        """
        path = self.path(agent_id)
        cleaned = []
        for note in notes:
            if not isinstance(note, str):
                raise MemoryStoreError(f"a note must be a string, not {type(note).__name__}")
            text = _one_line(note)
            if len(text) > self.max_entry_chars:
                text = text[: self.max_entry_chars - 1] + "…"
            if text:
                cleaned.append(text)
        if not cleaned:
            return
        with self._locked(path):
            kept = self._read(path)
            now = time.time()
            for text in cleaned:
                kept = [e for e in kept if e.text != text]
                kept.append(_Entry(text=text, at=now))
            kept = kept[-self.max_entries :]
            data = msgspec.json.encode(_File(format=FORMAT, version=1, entries=kept))
            while len(data) > self.max_bytes and len(kept) > 1:
                kept = kept[1:]
                data = msgspec.json.encode(_File(format=FORMAT, version=1, entries=kept))
            self._write(path, data)

    # ----------------------------------------------------------------- files

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Any:
        fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _read(self, path: Path) -> list[_Entry]:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise MemoryStoreError(
                f"{path.name}: cannot be read ({exc.strerror or exc}; a link is not followed)"
            ) from exc
        with os.fdopen(fd, "rb") as file:
            info = os.fstat(file.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise MemoryStoreError(f"{path.name}: not a regular file")
            if info.st_size > 2 * self.max_bytes:
                raise MemoryStoreError(f"{path.name}: {info.st_size} bytes, more than a memory file holds; not read")
            data = file.read()
        try:
            return msgspec.json.decode(data, type=_File).entries
        except msgspec.DecodeError as exc:
            raise MemoryStoreError(f"{path.name}: not a memory file ({exc}); left as it is") from exc

    def _write(self, path: Path, data: bytes) -> None:
        temp = path.with_name(f".{path.stem}.{uuid.uuid4().hex}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        directory = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
