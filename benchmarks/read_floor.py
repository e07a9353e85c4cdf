"""Where read + reconstruct spends its time, against bare msgspec decoding, in one process.

Run: ``python -m benchmarks.read_floor [--size-mb N]`` (the build installed). Times,
alternated round by round on the ``read`` stage's stream (4 interleaved agents, 64 KiB
reads), CPU time:

* ``bare msgspec`` and ``ours``: the read stage's reference and candidate;
* ``bare split only``: the reference's SSE split without the decoding;
* ``ours split only``: ``StreamReader.feed_batch`` alone (SSE parsing with its checks:
  line bounds, UTF-8, the WHATWG line rules);
* ``reconstruct only``: ``Reconstructor.feed_many`` + ``transcript()`` on the batches
  ``feed_batch`` returned, split beforehand (decoding, routing, the transcript);
* ``reconstruct, collector off``: the same with ``gc`` disabled while it runs.

Each prints the median and quartiles of its per-round ratio to bare msgspec. This is how
``docs/benchmarks.md`` quotes what bounds the read targets (issue 31).
Does not own: the stages or inputs (``benchmarks.engine``, ``benchmarks.inputs``).
"""

from __future__ import annotations

import argparse
import gc
from typing import TYPE_CHECKING, Any

from envelope import Reconstructor, StreamReader
from envelope._speedups import loaded

from .engine import MB, _pieces, _split_events, read_msgspec, read_ours
from .inputs import iter_sse
from .steps import alternate, print_ratios

if TYPE_CHECKING:
    from collections.abc import Callable


def main(argv: list[str] | None = None) -> int:
    """Parse the options, time the steps, print the ratios."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.read_floor", description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=20.0, help="stream size in MiB (default: 20)")
    parser.add_argument("--rounds", type=int, default=7, help="alternated rounds (default: 7)")
    args = parser.parse_args(argv)
    data = b"".join(iter_sse(int(args.size_mb * MB)))
    reader = StreamReader("sse")
    # The batches as the read stage hands them to feed_many (each 64 KiB read's lines).
    batches = [reader.feed_batch(piece) for piece in _pieces(data)]
    reader.close()

    def split_only() -> int:
        split = StreamReader("sse")
        count = sum(len(split.feed_batch(piece)) for piece in _pieces(data))
        split.close()
        return count

    def bare_split() -> int:
        return sum(len(datas) for datas in _split_events(_pieces(data)))

    def rebuild() -> None:
        rec = Reconstructor()
        for batch in batches:
            rec.feed_many(batch)
        rec.transcript()

    def rebuild_no_gc() -> None:
        gc.disable()
        try:
            rebuild()
        finally:
            gc.enable()

    candidates: dict[str, Callable[[], Any]] = {
        "bare msgspec": lambda: read_msgspec(_pieces(data)),
        "ours": lambda: read_ours(_pieces(data)),
        "bare split only": bare_split,
        "ours split only": split_only,
        "reconstruct only": rebuild,
        "reconstruct, collector off": rebuild_no_gc,
    }
    print_ratios(
        f"build: {loaded()}; {sum(map(len, batches))} lines, {len(data)} bytes of SSE; CPU time / bare msgspec",
        alternate(candidates, args.rounds),
        "bare msgspec",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
