"""Benchmark: ``envelope.client``'s read throughput against ``envelope reconstruct`` on the same bytes.

Owns: one body made once per protocol and read two ways, rounds alternated in one run:

- ``envelope``: an SSE envelope stream of four interleaved agents (``inputs.stream_lines``:
  small deltas, citations, tool results up to 256 KiB) with the ids a server sends
  (``run:0:n``). The client reads it whole (``connect`` on an in-memory transport, in
  64 KiB pieces: no socket, so what is timed is the client, not the loopback) and builds
  its transcript; ``envelope reconstruct``'s own loop (``StreamReader.feed_batch`` and
  ``Reconstructor.feed_many`` on 64 KiB pieces, the JSON it writes left out) reads the
  same bytes.
- ``agui``: the same lines converted to AG-UI events (``EnvelopeToAgui``), read by the
  client (``protocol`` told by the first event) and by ``AguiToEnvelope`` and a
  ``Reconstructor`` alone: what ``envelope convert --from agui`` then ``reconstruct`` does.

``ratios()`` gives client time / reader time for each, best of the alternated rounds.
Not a test: no assertion on time; the smoke test checks that both reads give one transcript.

Run: ``python -m benchmarks.bench_client`` (needs the ``check`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

from envelope import Reconstructor, StreamReader
from envelope.interop.agui import AguiToEnvelope, EnvelopeToAgui

from .inputs import stream_lines

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

    from envelope import Transcript

RUN = "bench-run"
PIECE = 64 * 1024


def envelope_body(size_mb: float) -> bytes:
    """An SSE envelope stream of about ``size_mb`` MB, each event with a server's id, ``[DONE]`` last."""
    lines = [*stream_lines(int(size_mb * 1_000_000)), b"[DONE]"]
    return b"".join(b"id: %s:0:%d\ndata: %s\n\n" % (RUN.encode(), n, line) for n, line in enumerate(lines))


def agui_body(size_mb: float) -> bytes:
    """The same lines as AG-UI events (``EnvelopeToAgui``), as an AG-UI server sends them."""
    converter = EnvelopeToAgui()
    lines = [*stream_lines(int(size_mb * 1_000_000)), b"[DONE]"]
    events = [e for line in lines for e in converter.feed(line)] + converter.close()
    return b"".join(b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n" for e in events)


def _pieces(body: bytes) -> list[bytes]:
    return [body[i : i + PIECE] for i in range(0, len(body), PIECE)]


def client_read(body: bytes) -> Transcript:
    """The client reads ``body`` whole from an in-memory transport; its transcript."""
    import httpx2

    from envelope.client import connect

    pieces = _pieces(body)

    class Body(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for piece in pieces:
                yield piece

    def handle(_request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, stream=Body(), headers={"content-type": "text/event-stream", "x-run-id": RUN})

    async def go() -> Transcript:
        async with connect("http://bench.invalid/agent/run", body={}, transport=httpx2.MockTransport(handle)) as run:
            async for _ in run:
                pass
            return run.transcript

    return asyncio.run(go())


def reconstruct_read(body: bytes) -> Transcript:
    """``envelope reconstruct``'s loop on ``body``: the SSE reader's batches into ``feed_many``."""
    rebuilder = Reconstructor()
    reader = StreamReader("sse")
    for piece in _pieces(body):
        rebuilder.feed_many(reader.feed_batch(piece))
    rebuilder.feed_many(reader.close())
    rebuilder.close()
    return rebuilder.transcript()


def convert_read(body: bytes) -> Transcript:
    """``envelope convert --from agui`` then ``reconstruct``: each event through ``AguiToEnvelope``."""
    from envelope import SSEReader

    converter = AguiToEnvelope()
    rebuilder = Reconstructor()
    reader = SSEReader()
    for piece in _pieces(body):
        for event in reader.feed(piece):
            rebuilder.feed_many(converter.feed(event.data))
    for event in reader.close():
        rebuilder.feed_many(converter.feed(event.data))
    rebuilder.feed_many(converter.close())
    return rebuilder.transcript()


def alternated(first: Callable[[bytes], Any], second: Callable[[bytes], Any], body: bytes, rounds: int) -> float:
    """``first``'s time / ``second``'s on ``body``, best of ``rounds`` each, the two alternated round by round."""
    best = [float("inf"), float("inf")]
    for n in range(rounds):
        order = (0, 1) if n % 2 == 0 else (1, 0)  # neither always runs on a warmer machine
        for who in order:
            fn = (first, second)[who]
            start = time.perf_counter()
            fn(body)
            best[who] = min(best[who], time.perf_counter() - start)
    return best[0] / best[1]


def ratios(size_mb: float = 8.0, rounds: int = 5) -> dict[str, float]:
    """Client time / the reader's on the same bytes, for ``envelope`` and ``agui`` bodies, one run."""
    return {
        "envelope": alternated(client_read, reconstruct_read, envelope_body(size_mb), rounds),
        "agui": alternated(client_read, convert_read, agui_body(size_mb), rounds),
    }


def main(argv: list[str] | None = None) -> int:
    """Print the client's read time as a ratio to ``envelope reconstruct``'s (and convert's) on the same bytes."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_client",
        description="envelope.client's read time as a ratio to envelope reconstruct's loop on the same SSE bytes "
        "(and, for an AG-UI body, to AguiToEnvelope with a Reconstructor), best of ROUNDS alternated, in one run.",
    )
    parser.add_argument("--size-mb", type=float, default=8.0, help="megabytes of envelope stream made (default 8)")
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds of each; the best is kept (default 5)")
    args = parser.parse_args(argv)
    for protocol, ratio in ratios(args.size_mb, args.rounds).items():
        reader = "envelope reconstruct" if protocol == "envelope" else "AguiToEnvelope + Reconstructor"
        print(f"{protocol}: client / {reader} = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
