"""Benchmark inputs: fixed-seed, corpus-shaped text, deltas, payloads and SSE streams.

Owns: every input the benchmarks and ``envelope bench`` measure, built from fixed seeds
so two runs (and two machines) measure the same bytes. ``benchmarks/data.py`` re-exports
this module. It lives in ``benchmarks/``, outside the ``envelope`` package: the library
servers import holds the codec and nothing else (issue 17 §1).
Does not own: timing or peers (``benchmarks.engine``), or any file I/O beyond ``write_sse`` (which
takes an open binary file from the caller).

The shapes follow the recorded corpus (``fixtures/corpus``): Anthropic text and
thinking deltas are a few words (a median near 20 bytes, some near 200), tool inputs and
results are JSON or file text from a few hundred bytes to hundreds of kilobytes, and
every envelope carries a 36-character UUID agent. The text is not copied from the
corpus: it is drawn from a small vocabulary, so the benchmarks need no input file.

The 100 MB read stream is never held in memory: ``iter_sse`` yields it piece by piece
and ``write_sse`` writes it to a file, so a benchmark can read it back in 64 KiB reads.
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Final

from envelope import DONE, CitationData, Emitter, frame

if TYPE_CHECKING:
    from envelope import StreamedType

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import BinaryIO

__all__ = [
    "AGENTS",
    "ascii_payload",
    "deltas",
    "escape_payload",
    "iter_sse",
    "stream_lines",
    "write_sse",
]

SEED: Final = 20_240_611

#: Four agent ids, as the reference agent writes them (UUID4 text).
AGENTS: Final = (
    "6f1c2a8e-3b4d-4e5f-8a9b-0c1d2e3f4a5b",
    "a7b8c9d0-e1f2-4a3b-9c4d-5e6f7a8b9c0d",
    "1e2d3c4b-5a69-4788-96a5-b4c3d2e1f0a9",
    "c0ffee00-1234-4abc-8def-0123456789ab",
)

_PROSE: Final = (
    "the of and to a in is that for it as with was on be by this are or from at an not "
    "which but have has can will if more when all there their one so what about would "
    "function value return error file line data result request response stream agent "
    "tool call input output model token message block chunk delta buffer parse encode "
    "decode server client browser event JSON SSE UTF-8 byte string object array number "
    "Let me check the configuration first. Based on the document, here is a summary: "
    "I'll search for that. The test passes now; next, the edge cases."
)
_WORDS: Final = tuple(_PROSE.split())

#: Characters that cost more than one byte once JSON-escaped or UTF-8-encoded: quotes,
#: backslashes, newlines, tabs, other control characters, CJK (3 bytes), emoji (4).
_HEAVY: Final = (
    '"',
    "\\",
    "\n",
    "\t",
    "\r",
    "\x00",
    "\x01",
    "\x1b",
    "\x1f",
    "\x7f",
    "漢",
    "字",
    "データ",
    "流",
    "é",
    "ß",
    "😀",
    "🚀",
    "👍🏽",
    "∑",
)


def _words(rng: random.Random, n_bytes: int) -> str:
    """Plain ASCII prose of about ``n_bytes`` bytes (at least one word)."""
    out: list[str] = []
    size = 0
    while size < n_bytes:
        word = rng.choice(_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def ascii_payload(n_bytes: int, *, seed: int = SEED) -> str:
    """Plain ASCII prose of exactly ``n_bytes`` bytes, with no character JSON escapes.

    Args:
        n_bytes: the size in UTF-8 bytes.
        seed: the random seed.

    Returns:
        The text.
    """
    rng = random.Random(seed)
    block = _words(rng, min(n_bytes, 64 * 1024) + 64)
    reps = n_bytes // len(block) + 1
    return (block * reps)[:n_bytes]


def escape_payload(n_bytes: int, *, seed: int = SEED) -> str:
    """Escape-heavy text of about ``n_bytes`` UTF-8 bytes (never more).

    About half of the characters need a JSON escape (quotes, backslashes, newlines,
    control characters) or are multi-byte (CJK, emoji), mixed into ASCII words: the
    worst realistic case for a chunker that measures before escaping.

    Args:
        n_bytes: the size in UTF-8 bytes (the result may be up to 3 bytes short, so that
            no character is cut).
        seed: the random seed.

    Returns:
        The text.
    """
    rng = random.Random(seed + 1)
    parts: list[str] = []
    size = 0
    target = min(n_bytes, 64 * 1024) + 64
    while size < target:
        piece = rng.choice(_HEAVY) if rng.random() < 0.5 else rng.choice(_WORDS)
        parts.append(piece)
        size += len(piece.encode("utf-8"))
    block = "".join(parts)
    block_bytes = len(block.encode("utf-8"))
    text = block * (n_bytes // block_bytes + 1)
    raw = text.encode("utf-8")[:n_bytes]
    return raw.decode("utf-8", errors="ignore")


def deltas(count: int, size: int, *, heavy: float = 0.05, seed: int = SEED) -> list[str]:
    """Streamed deltas as the Anthropic API sends them: a few words each.

    Args:
        count: how many deltas.
        size: their mean size in bytes (20 for token-sized, 200 for typical sentences).
        heavy: the share of deltas that also hold a quote, newline, CJK or emoji.
        seed: the random seed.

    Returns:
        The deltas, none empty.
    """
    rng = random.Random(seed + size)
    out: list[str] = []
    for _ in range(count):
        n = max(1, int(rng.uniform(0.5, 1.5) * size))
        text = _words(rng, n)[:n]
        if rng.random() < heavy:
            text = text[: n // 2] + rng.choice(_HEAVY) + text[n // 2 :]
        out.append(" " + text.strip() if text.strip() else "x")
    return out


class _Agent:
    """One agent's lifecycle (spec §8.1), as an endless source of lines."""

    def __init__(self, agent: str, rng: random.Random, text: str, heavy: str) -> None:
        self.em = Emitter(agent)
        self.rng = rng
        self.text = text
        self.heavy = heavy
        self.turn = 0

    def _slice(self, size: int) -> str:
        pool = self.heavy if self.rng.random() < 0.1 else self.text
        size = min(size, len(pool) - 1)
        at = self.rng.randrange(0, len(pool) - size)
        return pool[at : at + size]

    def _streamed(self, kind: StreamedType, n: int) -> Iterator[bytes]:
        for _ in range(n):
            size = int(self.rng.lognormvariate(3.0, 0.8))  # median 20 bytes, some near 200
            yield from self.em.streamed(kind, self._slice(max(1, size)))
        yield self.em.end(kind)

    def lines(self) -> Iterator[bytes]:
        rng = self.rng
        meta = {"format": "json", "user_query": self._slice(300), "agent_uuid": self.em.agent, "model": "claude"}
        yield from self.em.buffered("meta_init", json.dumps(meta))
        while True:
            self.turn += 1
            yield from self._streamed("thinking", rng.randint(10, 80))
            yield from self._streamed("text", rng.randint(20, 150))
            if rng.random() < 0.2:
                cites = [
                    CitationData(cited_text=self._slice(120), citation_type="char_location", start_char_index=0)
                    for _ in range(rng.randint(1, 3))
                ]
                yield from self.em.citations(cites)
            tool_id = f"toolu_{self.turn:06d}"
            args = {"path": f"src/{self.turn}.py", "pattern": self._slice(60)}
            yield from self.em.buffered("tool_call", json.dumps(args), id=tool_id, name="read_file")
            # Mostly small results; now and then a large file or search dump (up to 256 KiB).
            size = rng.choice((200, 800, 3_000, 12_000)) if rng.random() < 0.85 else rng.randint(32_000, 262_144)
            yield from self.em.tool_result(tool_id, "read_file", self._slice(size))

    def finish(self) -> Iterator[bytes]:
        yield from self.em.buffered("meta_final", '{"stop_reason": "end_turn", "total_steps": ' + str(self.turn) + "}")


def stream_lines(total_bytes: int, *, seed: int = SEED, agent_ids: Sequence[str] = AGENTS) -> Iterator[bytes]:
    """Envelope lines of interleaved agents (four by default), until about ``total_bytes`` of SSE.

    Each agent runs meta_init, then turns of thinking, text (sometimes citations), a
    tool call and its result, then meta_final; the agents' lines are interleaved at
    random (each keeps its own order, spec §8.3). Small deltas dominate the count and
    large tool results (up to 256 KiB, chunked to 2048-byte lines) a good share of the
    bytes. A block in progress when the budget is reached is finished first.

    Args:
        total_bytes: the SSE size to stop at (the framed bytes, ``[DONE]`` excluded).
        seed: the random seed.
        agent_ids: the agents' ids (the scaling sweep passes 1 to 1,000 of them).

    Yields:
        Unframed envelope lines (pass each to ``frame``).
    """
    rng = random.Random(seed)
    text = ascii_payload(512 * 1024, seed=seed)
    heavy = escape_payload(64 * 1024, seed=seed)
    agents = [_Agent(a, random.Random(seed + i), text, heavy) for i, a in enumerate(agent_ids)]
    sources = [a.lines() for a in agents]
    size = 0
    while size < total_bytes:
        source = sources[rng.randrange(len(sources))]
        # A run of one agent's lines, as a real server flushes them between awaits.
        for _ in range(rng.randint(1, 8)):
            line = next(source)
            size += len(line) + 8
            yield line
    # Finish each agent's open block and close its run: every block ends complete.
    for agent, source in zip(agents, sources, strict=True):
        for line in source:
            yield line
            if line.startswith((b'{"type":"tool_result","agent"', b'{"type":"text"')) and b'"final":true' in line:
                break
        yield from agent.finish()


def iter_sse(total_bytes: int, *, seed: int = SEED) -> Iterator[bytes]:
    """The stream of ``stream_lines`` as SSE bytes, ``[DONE]`` last, in pieces of about 64 KiB.

    Args:
        total_bytes: see ``stream_lines``.
        seed: the random seed.

    Yields:
        SSE bytes; joined, a whole ``text/event-stream`` body.
    """
    buf: list[bytes] = []
    size = 0
    for line in stream_lines(total_bytes, seed=seed):
        framed = frame(line)
        buf.append(framed)
        size += len(framed)
        if size >= 64 * 1024:
            yield b"".join(buf)
            buf = []
            size = 0
    buf.append(DONE)
    yield b"".join(buf)


def write_sse(out: BinaryIO, total_bytes: int, *, seed: int = SEED) -> int:
    """Write the SSE stream of ``iter_sse`` to ``out`` without holding it in memory.

    Args:
        out: a binary file open for writing.
        total_bytes: see ``stream_lines``.
        seed: the random seed.

    Returns:
        The number of bytes written.
    """
    written = 0
    for piece in iter_sse(total_bytes, seed=seed):
        out.write(piece)
        written += len(piece)
    return written
