"""Journals: where every line of every response is written before it is sent (spec delivery §3).

``Journal`` is the protocol; ``MemoryJournal`` (bounded, in a dict) and ``FileJournal``
(append-only files) implement it here, ``envelope.delivery.postgres.PostgresJournal``
on PostgreSQL. Lines are envelope lines without their SSE framing; ``[DONE]`` ends a
response.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from ._errors import JournalUnavailableError
from ._ids import DONE_LINE, RUN_ID_PATTERN

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["FileJournal", "Journal", "MemoryJournal"]

log = logging.getLogger("envelope.delivery")


class Journal(Protocol):
    """Where every line of every response is written before it is sent (spec delivery §3.1-a).

    The operations are synchronous; an event loop calls them through ``off_loop(journal)``
    (spec delivery §3.6-a), in a thread of their own, unless the journal's class sets
    ``blocks_on_io = False`` (it does no I/O, as ``MemoryJournal``). A journal may set
    ``call_timeout`` (seconds) to bound its calls there, and may have
    ``append_upto(run_id, response, lines) -> (written, error)``, several lines of one
    response at once, which the adapter then calls for a batch (``FileJournal``'s is one
    write; spec delivery [D3.6-d]).
    """

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

    #: No I/O: called on the event loop directly (spec delivery §3.6-a).
    blocks_on_io: ClassVar[bool] = False

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

    Each ``append`` is unbuffered ``os.write`` calls of ``line + b"\\n"`` (envelope lines
    hold no LF, spec §2.1-b), so what was written survives the *process* being killed
    (the kernel has it); it does not ``fsync``, so it does not survive the machine
    losing power (spec delivery §3.3-a says so). File names are ``<run>.<response>.log``;
    run ids are checked against ``RUN_ID_PATTERN`` first.

    A write that fails (a full or read-only file system) closes the response's file
    before it raises, so no descriptor outlives its failure, and the next ``append``
    opens it again, cutting off a line the failed write left half written (spec delivery
    §3.3-b). A file whose first line never arrived holds no response: it is removed, and
    one found later reads as ``None``.

    Finished responses (their ``[DONE]`` written) are pruned (spec delivery §3.3-c): a
    file is removed once it is ``keep_seconds`` old (by its modification time, so across
    restarts) or more than ``keep_finished`` newer finished ones are kept.

    Args:
        directory: created if missing.
        keep_finished: the most finished responses kept (``None``: no count bound).
        keep_seconds: how long a finished response is kept at most (``None``: no age bound).
        clock: the wall clock (``time.time``, the clock of file times; tests pass their own).

    Raises:
        JournalUnavailableError: the directory cannot be made or listed.
        ValueError: a negative bound.
    """

    def __init__(
        self,
        directory: str | Path,
        *,
        keep_finished: int | None = 1024,
        keep_seconds: float | None = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """See the class docstring."""
        if (keep_finished is not None and keep_finished < 0) or (keep_seconds is not None and keep_seconds < 0):
            raise ValueError("keep_finished and keep_seconds must not be negative")
        self.directory = Path(directory)
        self.keep_finished = keep_finished
        self.keep_seconds = keep_seconds
        self._clock = clock
        self._fds: dict[tuple[str, int], int] = {}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._finished = self._scan_finished()
        except OSError as exc:
            raise _storage_error(f"cannot open the journal directory {self.directory}", exc) from None
        self._prune()

    def _path(self, run_id: str, response: int) -> Path:
        if not RUN_ID_PATTERN.fullmatch(run_id):
            raise ValueError(f"not a run id: {run_id!r}")
        return self.directory / f"{run_id}.{response}.log"

    def _files(self) -> list[tuple[str, int, Path]]:
        """``(run_id, response, path)`` of every response file in the directory, by name."""
        out: list[tuple[str, int, Path]] = []
        for path in sorted(self.directory.glob("*.log")):
            run_id, _, response = path.name[: -len(".log")].rpartition(".")
            if RUN_ID_PATTERN.fullmatch(run_id) and response.isascii() and response.isdigit():
                out.append((run_id, int(response), path))
        return out

    def _scan_finished(self) -> OrderedDict[tuple[str, int], float]:
        """The finished responses already in the directory, oldest first (their file's time)."""
        found: list[tuple[float, tuple[str, int]]] = []
        tail = DONE_LINE + b"\n"
        for run_id, response, path in self._files():
            try:
                with path.open("rb") as f:
                    size = f.seek(0, os.SEEK_END)
                    if size < len(tail):
                        continue
                    f.seek(size - len(tail))
                    if f.read() != tail:
                        continue
                    found.append((os.fstat(f.fileno()).st_mtime, (run_id, response)))
            except OSError:
                continue  # unreadable now: not pruned, read() reports it
        found.sort()
        return OrderedDict((key, when) for when, key in found)

    def append(self, run_id: str, response: int, line: bytes) -> None:
        """See ``Journal.append``; the file is closed after ``[DONE]``, and after a failed write.

        Raises:
            JournalUnavailableError: the line could not be written (the file system is
                full, read-only, or gone); it may be half written, and is cut off by the
                next ``append`` or ignored by ``read``.
        """
        _, error = self.append_upto(run_id, response, (line,))
        if error is not None:
            raise error

    def append_upto(self, run_id: str, response: int, lines: Sequence[bytes]) -> tuple[int, Exception | None]:
        """``append`` of each line, in order, in one write (spec delivery [D3.6-d]).

        Returns:
            How many of ``lines`` were written whole, and the ``JournalUnavailableError``
            of the write that stopped short (``None`` when all were). A line cut in the
            middle is cut off by the next ``append`` or ignored by ``read``, as ``append``'s.

        Raises:
            ValueError: ``run_id`` is not a run id.
        """
        if not lines:
            return 0, None
        key = (run_id, response)
        fd = self._fds.get(key)
        path = None  # built only to open the file, or to name it in an error (it was two thirds of an append)
        empty = False
        data = b"\n".join(lines) + b"\n"
        written = 0
        try:
            if fd is None:
                path = self._path(run_id, response)
                empty = self._drop_cut_tail(path)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
                self._fds[key] = fd
            view = memoryview(data)
            while written < len(data):  # a short write (a disk filling up) goes on with the rest, or fails below
                written += os.write(fd, view[written:])
        except OSError as exc:
            self._close(key)
            path = path or self._path(run_id, response)
            if empty:
                with contextlib.suppress(OSError):
                    if path.stat().st_size == 0:  # the response's first line never arrived: no response
                        path.unlink()
            error = _storage_error(f"cannot write a line of run {run_id} to {path}", exc)
            return data.count(b"\n", 0, written), error
        if lines[-1] == DONE_LINE:
            self._close(key)
            self._finished[key] = self._clock()
            self._finished.move_to_end(key)
            self._prune()
        return len(lines), None

    def _close(self, key: tuple[str, int]) -> None:
        fd = self._fds.pop(key, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _prune(self) -> None:
        """Remove the finished responses past the count or the age bound (spec delivery §3.3-c)."""
        finished = self._finished
        oldest_kept = None if self.keep_seconds is None else self._clock() - self.keep_seconds
        while finished:
            key, finished_at = next(iter(finished.items()))
            over = self.keep_finished is not None and len(finished) > self.keep_finished
            if not over and (oldest_kept is None or finished_at > oldest_kept):
                return
            del finished[key]
            with contextlib.suppress(FileNotFoundError):
                try:
                    self._path(*key).unlink()
                except OSError:
                    log.warning("journal: cannot remove the finished response %s:%d", *key, exc_info=True)

    @staticmethod
    def _drop_cut_tail(path: Path) -> bool:
        """Before appending to a file a killed process wrote: cut a last line it left without its LF.

        Returns:
            Whether the file holds no line yet (missing, or empty after a failed first write).
        """
        try:
            with path.open("r+b") as f:
                size = f.seek(0, os.SEEK_END)
                if size == 0:
                    return True
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    f.seek(0)
                    f.truncate(f.read().rfind(b"\n") + 1)  # -1 + 1: no whole line, nothing kept
                return False
        except FileNotFoundError:
            return True

    def read(self, run_id: str, response: int) -> list[bytes] | None:
        """See ``Journal.read``. A last line cut by a crash (no LF) is left out; a file with no line is ``None``.

        Raises:
            JournalUnavailableError: the file exists but cannot be read.
        """
        path = self._path(run_id, response)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _storage_error(f"cannot read the journal of run {run_id} in {path}", exc) from None
        lines = data.split(b"\n")[:-1]  # the part after the last LF is empty, or a line cut mid-write
        return lines or None

    def responses(self, run_id: str) -> int:
        """See ``Journal.responses``."""
        count = 0
        while self._path(run_id, count).exists():
            count += 1
        return count

    def unfinished(self) -> list[tuple[str, int]]:
        """See ``Journal.unfinished`` (a file with no whole line holds no response and is not listed).

        Raises:
            JournalUnavailableError: the directory cannot be listed.
        """
        out: list[tuple[str, int]] = []
        try:
            files = self._files()
        except OSError as exc:
            raise _storage_error(f"cannot list the journal directory {self.directory}", exc) from None
        for run_id, response, _ in files:
            try:
                lines = self.read(run_id, response)
            except JournalUnavailableError:
                log.warning("journal: cannot read response %s:%d; not listed", run_id, response, exc_info=True)
                continue
            if lines and lines[-1] != DONE_LINE:
                out.append((run_id, response))
        return out

    def close(self) -> None:
        """Close the files of responses still being written (a later journal on the directory closes them)."""
        for key in list(self._fds):
            self._close(key)


def _storage_error(doing: str, exc: OSError) -> JournalUnavailableError:
    """A file system failure as the journal's error: the path and the reason for the log, neither for a client."""
    return JournalUnavailableError(
        f"{doing}: {exc.strerror or exc}", retry_after=2, public="the server's storage is unavailable"
    )
