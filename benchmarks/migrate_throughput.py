"""Throughput and peak memory of the legacy XML migrator on the real capture, repeated.

Run: ``PYTHONPATH=src python benchmarks/migrate_throughput.py --mb 100 [--rss]``.

The input is ``fixtures/corpus/legacy_xml_sse_capture.txt``: its ``meta_init``
record once, the records after it repeated to about ``--mb`` megabytes, then ``[DONE]``.
It is fed in 64 KiB pieces. The baseline is an incremental UTF-8 decode of the same
pieces, so the ratio says what migrating costs over touching the input at all; the two
are alternated and the best of ``--rounds`` is kept. Times are CPU time of this process
(``time.process_time``): on a machine shared with other jobs, wall time mostly measures
the neighbours; absolute numbers still drift, the ratio less so. ``--rss`` migrates the
same stream generated on the fly in a fresh subprocess (never held whole) and prints its
peak RSS (``VmHWM``).
"""

from __future__ import annotations

import argparse
import codecs
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from envelope import XmlMigrator

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

CAPTURE = Path(__file__).resolve().parents[1] / "fixtures" / "corpus" / "legacy_xml_sse_capture.txt"
PIECE = 64 * 1024


def parts() -> tuple[bytes, bytes, bytes]:
    """The capture as (meta_init record, the records to repeat, the [DONE] record)."""
    raw = CAPTURE.read_bytes()
    cut = raw.rindex(b"data: [DONE]")
    head, rest = raw[:cut].split(b"\n\n", 1)
    return head + b"\n\n", rest, raw[cut:]


def pieces(megabytes: float) -> Iterator[bytes]:
    """The repeated capture, about ``megabytes`` MB, in 64 KiB pieces, never held whole."""
    head, rest, done = parts()
    times = max(1, int(megabytes * 1e6) // len(rest))
    pending = head
    for _ in range(times):
        pending += rest
        while len(pending) >= PIECE:
            yield pending[:PIECE]
            pending = pending[PIECE:]
    pending += done
    for at in range(0, len(pending), PIECE):
        yield pending[at : at + PIECE]


def migrate(chunks: list[bytes]) -> int:
    """Migrate the pieces; return the number of output bytes."""
    m = XmlMigrator()
    n = 0
    for chunk in chunks:
        n += sum(map(len, m.feed(chunk)))
    return n + sum(map(len, m.close()))


def plain(chunks: list[bytes]) -> int:
    """Decode the pieces as UTF-8, incrementally; return the number of characters."""
    dec = codecs.getincrementaldecoder("utf-8")("strict")
    n = 0
    for chunk in chunks:
        n += len(dec.decode(chunk))
    return n + len(dec.decode(b"", final=True))


def _best(fns: list[Callable[[list[bytes]], int]], chunks: list[bytes], rounds: int) -> list[float]:
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            start = time.process_time()
            fn(chunks)
            best[k] = min(best[k], time.process_time() - start)
    return best


def _rss_child(megabytes: float) -> None:
    m = XmlMigrator()
    size = out = 0
    for chunk in pieces(megabytes):
        size += len(chunk)
        out += sum(map(len, m.feed(chunk)))
    out += sum(map(len, m.close()))
    print(f"migrated {size / 1e6:.1f} MB (on the fly) to {out / 1e6:.1f} MB of lines: ", end="")
    print(f"peak RSS {_peak_rss_kib() / 1024:.1f} MiB")


def _peak_rss_kib() -> int:
    """Peak RSS of this process: VmHWM, which exec resets; ``ru_maxrss`` keeps the parent's peak."""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:  # not Linux
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # pragma: no cover - VmHWM is always there


def main() -> None:
    """Parse the options and print MB/s, the ratio to plain decoding and (with --rss) peak RSS."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.migrate_throughput", description=__doc__.splitlines()[0] if __doc__ else None
    )
    ap.add_argument("--mb", type=float, default=8.0, help="input size in MB (default 8)")
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds, the best kept (default 3)")
    ap.add_argument("--rss", action="store_true", help="also measure peak RSS in a subprocess")
    ap.add_argument("--rss-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rss_child:
        _rss_child(args.mb)
        return
    chunks = list(pieces(args.mb))
    mb = sum(map(len, chunks)) / 1e6
    t_mig, t_plain = _best([migrate, plain], chunks, args.rounds)
    print(
        f"input {mb:.1f} MB in {len(chunks)} pieces: migrate {mb / t_mig:.1f} MB/s, "
        f"plain decode {mb / t_plain:.0f} MB/s, migrate/plain time ratio {t_mig / t_plain:.1f}x"
    )
    if args.rss:
        del chunks
        cmd = [sys.executable, __file__, "--rss-child", "--mb", str(args.mb)]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
