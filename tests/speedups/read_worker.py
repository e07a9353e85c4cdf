"""Reads cases from stdin, one JSON object a line, and prints what the read path made of each.

``test_read_differential.py`` runs one worker per build (``ENVELOPE_PURE=1`` and not) and
sends both the same cases; each answers one JSON line a case. A case is SSE bytes, the
offsets they are cut at, ``max_block_bytes``, and for each piece how its lines are fed:

* ``"many"``: ``feed_many`` on the batch ``StreamReader.feed_batch`` returned;
* ``"list"``: ``feed_many`` on the batch as a list of ``RawLine``;
* ``"each"``: ``feed`` on each line;
* ``"half"``: ``feed`` on the first half of the lines, ``feed_many`` on the rest;
* ``"snap"``: as ``"many"``, then ``transcript()`` (which flushes the blocks' buffers).

The outcome: each snapshot's transcript, the last transcript, the open blocks, ``done``, and
the error (type, message, line, offset, envelope index, field, section, key) if one was raised, after which the
case stops.
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

from envelope import EnvelopeError, Reconstructor, StreamReader


def _feed(rec: Reconstructor, batch: Any, mode: str) -> None:
    if mode in ("many", "snap"):
        rec.feed_many(batch)
    elif mode == "list":
        rec.feed_many(list(batch))
    elif mode == "each":
        for raw in batch:
            rec.feed(raw)
    else:
        half = len(batch) // 2
        for raw in batch[:half]:
            rec.feed(raw)
        rec.feed_many(batch[half:])


def outcome(case: dict[str, Any]) -> dict[str, Any]:
    """What reading ``case`` gives (see the module's docstring)."""
    data = bytes.fromhex(case["sse"])
    cuts = [0, *case["cuts"], len(data)]
    rec = Reconstructor(max_block_bytes=case["max_block"])
    reader = StreamReader("sse")
    snaps: list[Any] = []
    error = None
    try:
        for k, (start, stop) in enumerate(itertools.pairwise(cuts)):
            mode = case["modes"][k % len(case["modes"])]
            _feed(rec, reader.feed_batch(data[start:stop]), mode)
            if mode == "snap":
                snaps.append(rec.transcript().to_dict())
        reader.close()
    except EnvelopeError as exc:
        at = exc.position
        error = [type(exc).__name__, str(exc), at.line, at.offset, at.index, exc.field, exc.section, exc.key]
    return {
        "snaps": snaps,
        "transcript": rec.transcript().to_dict(),
        "open": [list(key) for key in rec.open_blocks()],
        "done": rec.done,
        "error": error,
    }


def main() -> int:
    """Answer each case line of stdin with its outcome line."""
    for line in sys.stdin:
        print(json.dumps(outcome(json.loads(line)), sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
