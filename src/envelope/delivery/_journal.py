"""Journals: where every line of every response is written before it is sent (spec delivery §3).

``Journal`` is the protocol; ``MemoryJournal`` (bounded, in a dict) and ``FileJournal``
(append-only files) implement it here, ``envelope.delivery.postgres.PostgresJournal``
on PostgreSQL. Lines are envelope lines without their SSE framing; ``[DONE]`` ends a
response.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ._ids import DONE_LINE, RUN_ID_PATTERN

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["FileJournal", "Journal", "MemoryJournal"]


class Journal(Protocol):
    """Where every line of every response is written before it is sent (spec delivery §3.1-a)."""

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """Add ``line`` at the end of response ``response`` of ``run_id``."""
        ...

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """The lines of that response so far, or ``None`` if it was never written."""
        ...

    def responses(self, run_id: str) -> int:
        """How many responses of the run the journal holds (0 for an unknown run)."""
        ...

    def unfinished(self) -> list[tuple[str, int]]:
        """``(run_id, response)`` of every response whose last line is not ``[DONE]``."""
        ...


class MemoryJournal:
    """A ``Journal`` in a dict: for tests and for a server whose streams need not survive a restart.

    Bounded (spec delivery §3.2-a): a finished response (its ``[DONE]`` appended) is kept
    for ``keep_seconds`` and among the newest ``keep_finished``, then dropped (a server
    that must replay older responses keeps them elsewhere, as the reference agent's store
    does). Responses still being written are always kept (there are as many as running runs).

    Args:
        keep_finished: the most finished responses kept.
        keep_seconds: how long a finished response is kept at most.
        clock: the time source (``time.monotonic``; tests pass their own).
    """

    def __init__(
        self,
        *,
        keep_finished: int = 256,
        keep_seconds: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create an empty journal."""
        if keep_finished < 0 or keep_seconds < 0:
            raise ValueError("keep_finished and keep_seconds must not be negative")
        self.keep_finished = keep_finished
        self.keep_seconds = keep_seconds
        self._clock = clock
        self._lines: dict[tuple[str, int], list[bytes]] = {}
        self._runs: dict[str, set[int]] = {}
        self._finished: OrderedDict[tuple[str, int], float] = OrderedDict()  # oldest first

    def __len__(self) -> int:
        """How many responses the journal holds now (finished or not)."""
        return len(self._lines)

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """See ``Journal.append``."""
        key = (run_id, response)
        lines = self._lines.get(key)
        if lines is None:  # the response's first line
            self._lines[key] = lines = []
            self._runs.setdefault(run_id, set()).add(response)
        lines.append(line)
        if line == DONE_LINE:
            self._finished[key] = self._clock()
        if self._finished:
            self._prune()

    def _prune(self) -> None:
        """Drop the finished responses past the count or the age bound."""
        finished = self._finished
        if not finished:
            return
        oldest_kept = self._clock() - self.keep_seconds
        while finished:
            key, finished_at = next(iter(finished.items()))
            if len(finished) <= self.keep_finished and finished_at > oldest_kept:
                return
            del finished[key]
            del self._lines[key]
            held = self._runs[key[0]]
            held.discard(key[1])
            if not held:
                del self._runs[key[0]]

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """See ``Journal.read`` (``None`` for a response dropped already)."""
        self._prune()
        lines = self._lines.get((run_id, response))
        return list(lines) if lines is not None else None

    def responses(self, run_id: str) -> int:
        """See ``Journal.responses``: one more than the newest response held (0 if none is)."""
        self._prune()
        held = self._runs.get(run_id)
        return max(held) + 1 if held else 0

    def unfinished(self) -> list[tuple[str, int]]:
        """See ``Journal.unfinished``."""
        return [key for key, lines in self._lines.items() if not lines or lines[-1] != DONE_LINE]


class FileJournal:
    """A ``Journal`` in a directory: one append-only file per response, one line per envelope.

    Each ``append`` is one unbuffered ``os.write`` of ``line + b"\\n"`` (envelope lines
    hold no LF, spec §2.1-b), so what was written survives the *process* being killed
    (the kernel has it); it does not ``fsync``, so it does not survive the machine
    losing power (spec delivery §3.3-a says so). File names are ``<run>.<response>.log``;
    run ids are checked against ``RUN_ID_PATTERN`` first.

    Args:
        directory: created if missing.
    """

    def __init__(self, directory: str | Path) -> None:
        """See the class docstring."""
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fds: dict[tuple[str, int], int] = {}

    def _path(self, run_id: str, response: int) -> Path:
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        return self.directory / f"{run_id}.{response}.log"

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """See ``Journal.append``; the file is closed after ``[DONE]``."""
        key = (run_id, response)
        fd = self._fds.get(key)
        if fd is None:
            path = self._path(run_id, response)
            self._drop_cut_tail(path)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._fds[key] = fd
        os.write(fd, line + b"\n")
        if line == DONE_LINE:
            os.close(self._fds.pop(key))

    @staticmethod
    def _drop_cut_tail(path: Path) -> None:
        """Before appending to a file a killed process wrote: cut a last line it left without its LF."""
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        if data and not data.endswith(b"\n"):
            with path.open("r+b") as f:
                f.truncate(data.rfind(b"\n") + 1)

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """See ``Journal.read``. A last line cut by a crash (no LF) is left out."""
        try:
            data = self._path(run_id, response).read_bytes()
        except FileNotFoundError:
            return None
        lines = data.split(b"\n")
        return lines[:-1]  # the part after the last LF is empty, or a line cut mid-write

    def responses(self, run_id: str) -> int:
        """See ``Journal.responses``."""
        count = 0
        while self._path(run_id, count).exists():
            count += 1
        return count

    def unfinished(self) -> list[tuple[str, int]]:
        """See ``Journal.unfinished``."""
        out: list[tuple[str, int]] = []
        for path in sorted(self.directory.glob("*.log")):
            run_id, _, response = path.name[: -len(".log")].rpartition(".")
            if not RUN_ID_PATTERN.fullmatch(run_id) or not response.isdigit():
                continue
            lines = self.read(run_id, int(response)) or []
            if not lines or lines[-1] != DONE_LINE:
                out.append((run_id, int(response)))
        return out

    def close(self) -> None:
        """Close the files of responses still being written (a later journal on the directory closes them)."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
