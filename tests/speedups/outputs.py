"""Everything the hot modules produce from every input we have, as one digest per case.

``python tests/speedups/outputs.py`` prints ``{case: sha256}`` as JSON for the ``envelope``
it imports: run it on the compiled build, with ``ENVELOPE_PURE=1``, or on another
checkout (``PYTHONPATH=<other>/src``) to compare builds or versions byte for byte. Uses
only the public API, so that an older checkout runs it too.

Cases: each stream under ``fixtures/`` and ``spec/conformance/`` (golden inputs and
envelopes, conformance files, the corpus, the seed's examples) read whole, in 7-byte and
in 64 KiB pieces, through ``SSEReader`` (events), ``StreamReader`` (lines), and the
``Reconstructor`` fed per line and per batch (transcript, or error with position); the
legacy capture, cut in the same ways and repeated, through ``XmlMigrator`` (lines,
warnings, error); and generated streams (the benchmark's read stream, 2 MiB, and the
legacy capture repeated to 1 MiB).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import envelope

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT = Path(__file__).resolve().parent.parent.parent
LEGACY = ROOT / "fixtures" / "corpus" / "legacy_xml_sse_capture.txt"


def _error(exc: BaseException) -> list[str]:
    return ["error", type(exc).__name__, str(exc)]


def _pieces(data: bytes, size: int) -> Iterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


def _sse(data: bytes, size: int) -> list[Any]:
    reader = envelope.SSEReader()
    out: list[Any] = []
    try:
        for piece in _pieces(data, size):
            out += [[e.data, e.event, e.id, e.line, e.offset] for e in reader.feed(piece)]
        reader.close()
    except envelope.EnvelopeError as exc:
        out.append(_error(exc))
    return out


def _read(data: bytes, size: int, batch: bool) -> list[Any]:
    reader, rebuilt = envelope.StreamReader(), envelope.Reconstructor()
    out: list[Any] = []
    try:
        for piece in _pieces(data, size):
            if batch:
                rebuilt.feed_many(reader.feed_batch(piece))
            else:
                for line in reader.feed(piece):
                    out.append([line.data, line.line, line.offset])
                    rebuilt.feed(line)
        rebuilt.feed_many(reader.close())
        out.append([list(k) for k in rebuilt.close()])
    except envelope.EnvelopeError as exc:
        out.append(_error(exc))
    out.append(rebuilt.transcript().to_dict())
    return out


def _migrate(data: bytes, size: int, **options: Any) -> list[Any]:
    warnings: list[envelope.MigrationWarning] = []
    migrator = envelope.XmlMigrator(on_warning=warnings.append, **options)
    out: list[Any] = []
    try:
        for piece in _pieces(data, size):
            out += migrator.feed(piece)
        out += migrator.close()
    except envelope.EnvelopeError as exc:
        out.append(_error(exc))
    return [[x.decode() if isinstance(x, bytes) else x for x in out], [str(w) for w in warnings]]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=repr).encode()).hexdigest()


def streams() -> Iterator[tuple[str, bytes]]:
    """Each stream file in the repository, by its path."""
    for folder in (ROOT / "fixtures", ROOT / "spec" / "conformance"):
        for path in sorted(folder.rglob("*")):
            if path.suffix in {".sse", ".jsonl"}:
                yield str(path.relative_to(ROOT)), path.read_bytes()


def digests() -> dict[str, str]:
    """``{case: sha256 of the outputs}`` for every case (see the module's docstring)."""
    out: dict[str, str] = {}
    for name, data in streams():
        for size in (7, 65536, len(data) or 1):
            out[f"{name} sse {size}"] = _digest(_sse(data, size))
            out[f"{name} read {size}"] = _digest(_read(data, size, batch=False))
            out[f"{name} read-batch {size}"] = _digest(_read(data, size, batch=True))
    capture = LEGACY.read_bytes()
    for size in (7, 4096, 65536):
        out[f"legacy {size}"] = _digest(_migrate(capture, size, agent="a"))
        out[f"legacy lenient {size}"] = _digest(_migrate(capture, size, agent="a", lenient=True))
        out[f"legacy keep-labels {size}"] = _digest(_migrate(capture, size, agent="a", keep_labels=True))
    for cut in range(0, len(capture), max(1, len(capture) // 40)):
        out[f"legacy cut at {cut}"] = _digest(_migrate(capture[:cut], 4096, agent="a"))
    repeated = (capture * (2**20 // len(capture) + 1))[: 2**20]
    out["legacy repeated 1 MiB"] = _digest(_migrate(repeated, 65536, agent="a"))
    sys.path.insert(0, str(ROOT))
    from benchmarks.inputs import iter_sse

    generated = b"".join(iter_sse(2 * 2**20))
    out["generated read 2 MiB"] = _digest(_read(generated, 65536, batch=True))
    out["generated read 2 MiB per line"] = _digest(_read(generated, 65536, batch=False))
    out["generated sse 2 MiB"] = _digest(_sse(generated, 65536))
    return out


if __name__ == "__main__":
    print(json.dumps(digests(), indent=0, sort_keys=True))
