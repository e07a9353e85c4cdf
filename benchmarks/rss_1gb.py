"""Peak memory of reading, validating and migrating a large input, streamed, never held.

Run: ``PYTHONPATH=src python -m benchmarks.rss_1gb [MB]`` (default 1024).

Each mode runs in its own child process and reports its peak RSS (``VmHWM`` from
``/proc/self/status``; ``ru_maxrss`` would keep the forking parent's peak across exec):

* ``baseline``: imports and builds the input generators, reads nothing;
* ``read``: SSE bytes of a generated 4-agent stream in 64 KiB pieces through
  ``StreamReader``, each envelope line decoded (the reconstructor is left out on
  purpose: it keeps every block it rebuilds, so its memory grows with the transcript by
  design);
* ``validate``: the same bytes through ``StreamValidator``;
* ``migrate``: the real legacy capture (``fixtures/corpus/legacy_xml_sse_capture.txt``)
  repeated to the size, through ``XmlMigrator``, its output discarded.

Nothing is written to disk. The issue 7 target is a peak under 100 MB for 1 GB of input.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

CAPTURE = Path(__file__).resolve().parent.parent / "fixtures" / "corpus" / "legacy_xml_sse_capture.txt"
MODES = ("baseline", "read", "validate", "migrate")
CHUNK = 64 * 1024


def _peak_mb() -> float:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1]) / 1024
    return float("nan")


def _capture_chunks(total: int) -> Iterator[bytes]:
    data = CAPTURE.read_bytes()
    # The capture's own [DONE] record ends it; drop it so the repeats form one stream.
    body = data[: data.rindex(b"data: [DONE]")]
    sent = 0
    buf = b""
    while sent < total:
        buf += body
        while len(buf) >= CHUNK:
            yield buf[:CHUNK]
            buf = buf[CHUNK:]
            sent += CHUNK
    yield buf + b"data: [DONE]\n\n"


def _child(mode: str, mb: int) -> None:
    from benchmarks.inputs import iter_sse
    from envelope import StreamReader, StreamValidator, XmlMigrator
    from envelope._decoder import decode_lenient

    total = mb * 1024 * 1024
    fed = 0
    start = time.perf_counter()
    if mode == "read":
        reader = StreamReader("sse")
        for chunk in iter_sse(total):
            fed += len(chunk)
            for raw in reader.feed(chunk):
                if raw.data != "[DONE]":
                    decode_lenient(raw.data)
        reader.close()
    elif mode == "validate":
        checker = StreamValidator("sse")
        for chunk in iter_sse(total):
            fed += len(chunk)
            checker.feed(chunk)
        checker.close()
    elif mode == "migrate":
        warnings = 0

        def count(_: object) -> None:
            nonlocal warnings
            warnings += 1

        # as the CLI does: warnings go to a callback, so none is kept (spec M6.2)
        migrator = XmlMigrator(on_warning=count)
        for chunk in _capture_chunks(total):
            fed += len(chunk)
            migrator.feed(chunk)
        migrator.close()
    seconds = time.perf_counter() - start
    print(f"{mode}\t{fed / 1e6:.0f}\t{seconds:.1f}\t{_peak_mb():.1f}")


def main(argv: list[str] | None = None) -> None:
    """Run each mode in its own child and print its peak RSS (or, as a child, run one mode)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.rss_1gb",
        description="Peak RSS of reading, validating and migrating a large generated input, streamed; "
        "each mode in its own child process.",
    )
    parser.add_argument("mb", nargs="?", type=int, default=1024, help="input size in MiB (default 1024)")
    parser.add_argument("child", nargs="?", choices=MODES, help=argparse.SUPPRESS)  # one mode, in a child
    args = parser.parse_args(argv)
    mb = args.mb
    if args.child:
        _child(args.child, mb)
        return
    print(f"{'mode':<9} {'MB in':>7} {'seconds':>8} {'MB/s':>7} {'peak RSS MB':>12}")
    for mode in MODES:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.rss_1gb", str(mb), mode], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            print(f"{mode:<9} failed: {proc.stderr.strip()[-300:]}")
            continue
        _, fed, seconds, peak = proc.stdout.split("\t")
        rate = float(fed) / float(seconds) if float(seconds) else float("inf")
        print(f"{mode:<9} {fed:>7} {seconds:>8} {rate:>7.1f} {float(peak):>12.1f}")


if __name__ == "__main__":
    main()
