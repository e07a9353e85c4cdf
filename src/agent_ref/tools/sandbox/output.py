"""A command's output, bounded: its head and tail kept, the middle counted and cut (spec agent-ref [SB4-a]).

Owns: ``BoundedOutput``, which takes a command's bytes as they come, keeps at most
``head_bytes`` from the start and ``tail_bytes`` from the end (so its memory is bounded
whatever the command writes), counts the bytes and lines between, and renders the text the
model reads: non-UTF-8 bytes replaced by U+FFFD (visibly), the cut marked by a note saying
how many bytes and lines were left out. Also ``last_line``, the line a progress report shows.
Pure: no I/O.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CUT_NOTE", "DEFAULT_MAX_OUTPUT_BYTES", "BoundedOutput"]

#: Bytes of output a result keeps by default (head and tail together), as the SDK's Bash keeps 30,000 characters.
DEFAULT_MAX_OUTPUT_BYTES: Final = 30_000
#: The note where the middle was cut (spec [SB4-a]).
CUT_NOTE: Final = "\n[agent-ref: output cut: {bytes:,} bytes ({lines:,} lines) omitted of {total:,} bytes]\n"
#: Share of the kept bytes taken from the head.
_HEAD_SHARE: Final = 0.4


class BoundedOutput:
    """Output kept within ``max_bytes``: the first bytes and the last, with the count of those between."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> None:
        if max_bytes < 256:
            raise ValueError(f"max_bytes must be at least 256, got {max_bytes}")
        self.head_bytes = int(max_bytes * _HEAD_SHARE)
        self.tail_bytes = max_bytes - self.head_bytes
        self._head = bytearray()
        self._tail = bytearray()
        self.total_bytes = 0
        self.total_lines = 0
        self._last = b""

    def feed(self, data: bytes) -> None:
        """Take the next bytes of output."""
        if not data:
            return
        self.total_bytes += len(data)
        self.total_lines += data.count(b"\n")
        self._last = (self._last + data)[-4096:]
        room = self.head_bytes - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self.tail_bytes:  # trimmed in batches: amortised O(1) a byte
                del self._tail[: len(self._tail) - self.tail_bytes]

    def last_line(self) -> str:
        """The last non-empty line written so far (at most its last 4 KiB), for a progress report."""
        lines = [line for line in self._last.replace(b"\r", b"\n").split(b"\n") if line.strip()]
        return lines[-1].decode("utf-8", "replace") if lines else ""

    @property
    def cut(self) -> bool:
        """Some output was left out."""
        return self.total_bytes > self.head_bytes + self.tail_bytes

    def text(self) -> str:
        """The output as the model reads it: head, the cut note, tail; undecodable bytes as U+FFFD."""
        if not self.cut:
            return bytes(self._head + self._tail).decode("utf-8", "replace")
        tail = bytes(self._tail[-self.tail_bytes :])
        start = 0
        while start < min(3, len(tail)) and tail[start] & 0xC0 == 0x80:  # begin on a code point
            start += 1
        tail = tail[start:]
        head = bytes(self._head)
        head = head[: _whole_end(head)]
        omitted = self.total_bytes - len(head) - len(tail)
        lines = self.total_lines - head.count(b"\n") - tail.count(b"\n")
        note = CUT_NOTE.format(bytes=omitted, lines=lines, total=self.total_bytes)
        return head.decode("utf-8", "replace") + note + tail.decode("utf-8", "replace")


def _whole_end(head: bytes) -> int:
    """Where ``head`` ends without a code point cut in two (a cut sequence at its end is left out)."""
    for back in range(1, min(4, len(head)) + 1):
        byte = head[-back]
        if byte & 0xC0 != 0x80:  # ASCII or a lead byte: the last sequence starts here
            need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
            return len(head) - back if need > back else len(head)
    return len(head)
