"""The comparison engine behind ``envelope bench`` and ``benchmarks/compare.py``.

Owns: the candidates (ours, the seed-literal stdlib baseline, the peers, the practical
limits), the stages they run on, the timing protocol, the targets, and the Markdown
and PNG reports. Does not own: the inputs (``benchmarks.inputs``), printing, files or
processes (``benchmarks.command`` does those), or the pytest-benchmark suites.

This is tooling, not part of the codec: it lives outside the ``envelope`` package, and
nothing in the codec imports it (``envelope bench`` loads it lazily from the checkout).
It does no I/O of its own: ``benchmarks.command`` reads ``/proc/cpuinfo`` and starts
the child processes (one per stage, and the read stage's RSS check, which runs
``run_reader`` and reports its own peak RSS), and passes their results in. Peers are imported lazily,
inside the candidate that needs them; a missing one is a row marked "not installed",
never an error.

Timing protocol (what makes a ratio trustworthy on a shared machine, issue 31 §2):

* each stage runs in a fresh process (``envelope bench``'s default; ``run(runner=...)``):
  in one process the ratios depended on the stages before (heap, allocator and
  collector state carry over; ``benchmarks.command`` has the figures);
* every candidate of a stage runs in that one process, on the same input object;
* a round runs every candidate once, in an order rotated by the round (A B C, B C A,
  ...), each pass after a ``gc.collect()``, timed in wall time (``perf_counter``) and
  in this process's CPU time (``process_time``);
* a candidate's ratio to ours is the median of the per-round ratios (the two passes of
  a round ran under the same load), in wall and in CPU time; the spread is the
  quartiles of the per-round CPU ratios (``spread``);
* a target compares ours with a reference of the same stage, on CPU time: met when the
  whole spread meets the goal, missed when none of it does, *too noisy* when the goal
  lies inside it (``TargetResult.noisy``). No target is an absolute figure of time;
  MB/s and milliseconds are printed as indications.

Peak memory, two honest methods, each named in the report:

* emit and migrate stages: ``tracemalloc`` peak of one extra, untimed pass (Python
  allocations made by the candidate, its output included; the input existed before and
  is not counted);
* read and validate stages: the peak RSS (``VmHWM`` of ``/proc/self/status``) of a child process
  that runs only that candidate over the stream generated on the fly (so the input is
  never in memory whole); the interpreter and its imports are included. Not
  ``ru_maxrss``: Linux carries the parent's peak into a child across ``exec``.

Stages are built by the factories in ``STAGES``. The validate (issue 4) and migrate
(issue 5) stages plug in there: write a factory returning a ``Stage`` and append it;
``TARGETS`` takes their targets the same way.

* validate: the read stage's stream, 64 KiB reads -> ``StreamValidator``, alternated with
  the read stage's ours (``read_ours``: ``StreamReader.feed_batch`` ->
  ``Reconstructor.feed_many``, under the same name) as the target's in-stage reference;
  peak RSS from a child process like the read stage (key ``validate``).
* migrate: the real legacy capture (``fixtures/corpus/legacy_xml_sse_capture.txt``)
  repeated to the read size, 64 KiB reads -> ``XmlMigrator``. ``benchmarks.command`` reads the file
  and passes its bytes in (``run(legacy_capture=...)``, kept in ``Sizes``); without them
  the stage's rows say the capture was not found. Memory: tracemalloc, as the emit stages.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from envelope import _speedups
from envelope._decoder import StreamReader, decode_lenient
from envelope._encoder import Emitter
from envelope._limits import DEFAULT_MAX_BYTES
from envelope._reconstruct import Reconstructor
from envelope._sse import SSEReader
from envelope._types import Envelope, Text, ToolResult
from envelope._validator import StreamValidator
from envelope._xml_migrate import MigrationWarning, XmlMigrator

from .inputs import AGENTS, ascii_payload, deltas, escape_payload, iter_sse

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

__all__ = [
    "STAGES",
    "TARGETS",
    "Candidate",
    "Report",
    "Row",
    "Sizes",
    "Stage",
    "StageInfo",
    "TargetResult",
    "build_stage",
    "legacy_input",
    "machine",
    "render_markdown",
    "render_png",
    "render_table",
    "run",
    "run_one",
    "run_reader",
    "seed_chunk_and_emit",
    "validate_ours",
]

MB: Final = 1024 * 1024
READ_SIZE: Final = 64 * 1024
TOOL_ID: Final = "toolu_01A2B3C4D5E6F7G8H9J0K1L2"
TOOL_NAME: Final = "read_file"
MESSAGE_ID: Final = "msg_01A2B3C4D5E6F7G8H9J0K1L2"

# --------------------------------------------------------------------------- sizes


@dataclass(frozen=True)
class Sizes:
    """How big each stage's input is, derived from one ``--size-mb``.

    Attributes:
        read_bytes: the read stream (the issue's 100 MB at the default).
        big_bytes: the large buffered payload (10 MB, or less for a tiny run).
        mid_bytes: the medium buffered payload (100 KB, or less).
        small_count: how many 20-byte deltas one pass emits.
        typical_count: how many 200-byte deltas one pass emits.
        legacy_capture: the bytes of the real legacy XML capture, read by the caller
            (``benchmarks.command``); the migrate stage repeats it to ``read_bytes``. ``None``: not
            found, and the migrate stage says so.
    """

    read_bytes: int
    big_bytes: int
    mid_bytes: int
    small_count: int
    typical_count: int
    legacy_capture: bytes | None = None

    @classmethod
    def from_mb(cls, size_mb: float, legacy_capture: bytes | None = None) -> Sizes:
        """Sizes for a read stream of ``size_mb`` MiB; the rest scale down for tiny runs."""
        read = max(1024, int(size_mb * MB))
        scale = min(1.0, size_mb / 10)
        return cls(
            read_bytes=read,
            big_bytes=min(10 * MB, read),
            mid_bytes=min(100 * 1024, read),
            small_count=max(10, int(20_000 * scale)),
            typical_count=max(10, int(5_000 * scale)),
            legacy_capture=legacy_capture,
        )


# --------------------------------------------------------------------------- candidates


@dataclass
class Candidate:
    """One implementation in a stage.

    Attributes:
        name: the row label.
        role: ``ours``, ``baseline``, ``peer`` or ``limit``.
        run: one full pass over the stage input; returns what ``Stage.measure`` reads.
            ``None`` when the candidate is unavailable.
        missing: why it is unavailable (``"not installed"``).
        note: one line for the report (what exactly the candidate does).
        rss_key: the name ``run_reader`` knows it by (read stage only).
    """

    name: str
    role: str
    run: Callable[[], Any] | None
    missing: str = ""
    note: str = ""
    rss_key: str = ""


@dataclass(frozen=True)
class Measured:
    """What one candidate's output holds: events, bytes, and lines over the bound."""

    events: int
    nbytes: int
    violations: int | None


@dataclass
class Stage:
    """A benchmark stage: an input, its candidates, and how to read their output.

    Attributes:
        key: a short id used by targets (``emit_small``).
        title: the heading in the report.
        input_bytes: the UTF-8 bytes of input one pass handles (MB/s is computed on it).
        candidates: ours first, then the others.
        measure: turns a candidate's output into ``Measured`` (untimed).
        memory: ``"tracemalloc"`` or ``"rss"`` (see the module docstring).
        rss_size: for ``"rss"``: the stream size the child processes generate.
    """

    key: str
    title: str
    input_bytes: int
    candidates: list[Candidate]
    measure: Callable[[Any], Measured]
    memory: str = "tracemalloc"
    rss_size: int = 0


@dataclass(frozen=True)
class StageInfo:
    """What the report keeps of a stage once it has run (never its input).

    Attributes:
        key: the stage key (``emit_small``).
        title: the heading, with the sizes this run used.
        memory: how its peak memory was measured (``"tracemalloc"`` or ``"rss"``).
    """

    key: str
    title: str
    memory: str


@dataclass
class Row:
    """One line of the table.

    Attributes:
        stage: the stage key.
        candidate: the candidate name.
        role: see ``Candidate``.
        seconds: median time of one pass (``None`` when unavailable).
        events: events produced (emit) or consumed (read) by one pass.
        events_per_s: ``events / seconds``.
        mb_per_s: input megabytes (10^6 bytes) per second.
        peak_bytes: peak memory (method: the stage's ``memory``).
        ratio: the median, over the rounds, of this round's wall time over ours in the
            same round: above 1 the candidate is slower than ours.
        cpu_seconds: median CPU time (``time.process_time``) of one pass.
        cpu_ratios: the per-round CPU time ratios to ours, in round order.
        ratio_cpu: as ``ratio``, on CPU time (what the targets judge: other jobs on the
            machine stretch wall time, much less this process's CPU time).
        spread_cpu: the quartiles ``(q1, q3)`` of the per-round CPU ratios (the min and
            max below 4 rounds): how far one round's ratio strayed from another's.
        violations: lines over the bound (``None`` where the candidate has no bound).
        missing: why the row is empty.
        note: what the candidate does.
    """

    stage: str
    candidate: str
    role: str
    seconds: float | None = None
    events: int = 0
    events_per_s: float = 0.0
    mb_per_s: float = 0.0
    peak_bytes: int | None = None
    ratio: float | None = None
    violations: int | None = None
    missing: str = ""
    note: str = ""
    cpu_seconds: float | None = None
    ratio_cpu: float | None = None
    spread_cpu: tuple[float, float] | None = None
    cpu_ratios: list[float] = field(default_factory=list)


def _lines_measure(max_bytes: int) -> Callable[[Any], Measured]:
    def measure(out: Any) -> Measured:
        lines: list[bytes] = out
        return Measured(len(lines), sum(map(len, lines)), sum(1 for x in lines if len(x) > max_bytes))

    return measure


def _unbounded_measure(out: Any) -> Measured:
    lines: list[bytes] = out
    return Measured(len(lines), sum(map(len, lines)), None)


def seed_chunk_and_emit(
    type: str,
    agent: str,
    payload: str,
    *,
    extras: dict[str, str] | None = None,
    final_on_last: bool = True,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> list[bytes]:
    """The seed's chunking algorithm, followed literally with the standard library.

    This is the stdlib baseline: what a typical server does today. Per the seed's
    "Proactive Chunking" section: build the envelope with ``delta=""`` and measure it
    (the overhead), take ``max_bytes - overhead`` as the delta budget, encode the
    payload as UTF-8, cut it into pieces of at most that many bytes stepping back off
    continuation bytes, and ``json.dumps`` one envelope per piece.

    It is given every benefit of the doubt: compact separators and ``ensure_ascii=False``
    (so CJK and emoji stay 3 and 4 bytes, not a 6- or 12-byte escape). Its flaw is the
    seed's: the budget is measured before escaping, so a quote, backslash or newline in
    the payload (2 bytes escaped) or a control character (6) pushes a line over the
    bound. The comparison counts those lines.

    Args:
        type: the envelope type.
        agent: the agent id.
        payload: the whole payload (buffered) or one delta (streamed).
        extras: fields between ``final`` and ``delta`` (``id``, ``name``).
        final_on_last: ``True`` for a buffered block, ``False`` for a streamed delta.
        max_bytes: the bound the seed calls ``MAX_SSE_CHUNK_BYTES``.

    Returns:
        The lines, as UTF-8 bytes.
    """
    dumps = json.dumps
    base: dict[str, Any] = {"type": type, "agent": agent, "final": False}
    if extras:
        base.update(extras)
    base["delta"] = ""
    overhead = len(dumps(base, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    pieces = _seed_pieces(payload.encode("utf-8"), max(1, max_bytes - overhead))
    last = len(pieces) - 1
    lines: list[bytes] = []
    for i, piece in enumerate(pieces):
        message = dict(base)
        message["final"] = final_on_last and i == last
        message["delta"] = piece.decode("utf-8")
        lines.append(dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return lines


def _seed_pieces(raw: bytes, budget: int) -> list[bytes]:
    """The seed's cut of the raw UTF-8 payload: ``budget`` bytes, stepped back off continuation bytes."""
    n = len(raw)
    pieces: list[bytes] = []
    start = 0
    while True:
        end = start + budget
        if end >= n:
            pieces.append(raw[start:])
            return pieces
        while end > start + 1 and raw[end] & 0xC0 == 0x80:
            end -= 1
        pieces.append(raw[start:end])
        start = end


def _agui_encoder() -> tuple[Callable[[str], bytes] | None, str]:
    """AG-UI's encoder for one text-content event, or ``None`` and why not."""
    try:
        from ag_ui.core import TextMessageContentEvent  # a peer: imported only when benchmarked
        from ag_ui.encoder import EventEncoder
    except ImportError:
        return None, "not installed (pip install 'envelope-stream[bench]')"
    encoder = EventEncoder()

    def encode(delta: str) -> bytes:
        # The server must send bytes: AG-UI returns framed str, so encoding is part of the work.
        return encoder.encode(TextMessageContentEvent(message_id=MESSAGE_ID, delta=delta)).encode("utf-8")

    return encode, ""


def _copy_spans(sizes: Sequence[int]) -> Callable[[], list[bytes]]:
    """The floor: one bytes copy per output line, of the sizes ours produced."""
    # One byte longer than the longest line, so that every slice is a real copy
    # (CPython returns the object itself for a slice of its whole length).
    source = bytes(max(sizes, default=0) + 1)
    spans = list(sizes)

    def copy() -> list[bytes]:
        return [source[:n] for n in spans]

    return copy


def _emit_stream_stage(key: str, title: str, items: list[str]) -> Stage:
    agent = AGENTS[0]
    emitter = Emitter(agent)
    enc = msgspec.json.Encoder().encode

    def ours() -> list[bytes]:
        out: list[bytes] = []
        extend = out.extend
        streamed = emitter.streamed
        for delta in items:
            extend(streamed("text", delta))
        return out

    def baseline() -> list[bytes]:
        out: list[bytes] = []
        for delta in items:
            out.extend(seed_chunk_and_emit("text", agent, delta, final_on_last=False))
        return out

    def bare() -> list[bytes]:
        return [enc(Text(agent=agent, final=False, delta=delta)) for delta in items]

    agui, why = _agui_encoder()

    def peer() -> list[bytes]:
        assert agui is not None
        return [agui(delta) for delta in items]

    sizes = [len(x) for x in ours()]
    nbytes = sum(len(x.encode("utf-8")) for x in items)
    return Stage(
        key=key,
        title=title,
        input_bytes=nbytes,
        measure=_lines_measure(DEFAULT_MAX_BYTES),
        candidates=[
            Candidate("ours: Emitter.streamed", "ours", ours, note="one text delta to one line"),
            Candidate(
                "stdlib seed-literal",
                "baseline",
                baseline,
                note="json.dumps per envelope, overhead from an empty delta, raw UTF-8 cut",
            ),
            Candidate(
                "AG-UI EventEncoder",
                "peer",
                peer if agui else None,
                missing=why,
                note="TextMessageContentEvent, framed str encoded to bytes",
            ),
            Candidate("msgspec bare Struct", "limit", bare, note="Text(...) built and encoded; no bound"),
            Candidate("bytes copy", "limit", _copy_spans(sizes), note="one copy per line of ours' sizes"),
        ],
    )


def _emit_buffered_stage(key: str, title: str, payload: str) -> Stage:
    agent = AGENTS[0]
    emitter = Emitter(agent)
    enc = msgspec.json.Encoder().encode
    extras = {"id": TOOL_ID, "name": TOOL_NAME}

    def ours() -> list[bytes]:
        return emitter.buffered("tool_result", payload, id=TOOL_ID, name=TOOL_NAME)

    def baseline() -> list[bytes]:
        return seed_chunk_and_emit("tool_result", agent, payload, extras=extras)

    def bare() -> list[bytes]:
        return [enc(ToolResult(agent=agent, final=True, id=TOOL_ID, name=TOOL_NAME, delta=payload))]

    agui, why = _agui_encoder()

    def peer() -> list[bytes]:
        assert agui is not None
        return [agui(payload)]

    sizes = [len(x) for x in ours()]
    return Stage(
        key=key,
        title=title,
        input_bytes=len(payload.encode("utf-8")),
        measure=_lines_measure(DEFAULT_MAX_BYTES),
        candidates=[
            Candidate("ours: Emitter.buffered", "ours", ours, note="tool_result, escaped once, cut after escaping"),
            Candidate(
                "stdlib seed-literal",
                "baseline",
                baseline,
                note="the seed's algorithm: measure, cut raw UTF-8, json.dumps each piece",
            ),
            Candidate(
                "AG-UI EventEncoder",
                "peer",
                peer if agui else None,
                missing=why,
                note="one TextMessageContentEvent, unchunked (AG-UI has no bound)",
            ),
            Candidate("msgspec bare Struct", "limit", bare, note="one ToolResult line, no chunking"),
            Candidate("bytes copy", "limit", _copy_spans(sizes), note="one copy per line of ours' sizes"),
        ],
    )


# --------------------------------------------------------------------------- read candidates


def _pieces(data: bytes) -> Iterator[bytes]:
    for at in range(0, len(data), READ_SIZE):
        yield data[at : at + READ_SIZE]


def read_ours(pieces: Iterable[bytes]) -> int:
    """Ours: SSE bytes -> ``StreamReader.feed_batch`` -> ``Reconstructor.feed_many`` -> transcript.

    Returns the events read. Every event's data is decoded and routed to its block, as
    with ``feed`` per line (``feed_many`` is that, in one loop per chunk).
    """
    reader = StreamReader("sse")
    rebuilder = Reconstructor()
    feed_many = rebuilder.feed_many
    count = 0
    for piece in pieces:
        lines = reader.feed_batch(piece)
        count += len(lines)
        feed_many(lines)
    reader.close()
    rebuilder.transcript()
    return count


def read_ours_stream(pieces: Iterable[bytes]) -> int:
    """Ours without the transcript: SSE bytes -> ``SSEReader`` -> ``decode_lenient`` per event."""
    reader = SSEReader()
    count = 0
    for piece in pieces:
        for event in reader.feed(piece):
            if event.data != "[DONE]":
                decode_lenient(event.data)
            count += 1
    reader.close()
    return count


def _split_events(pieces: Iterable[bytes]) -> Iterator[list[bytes]]:
    """The simplest SSE split: events end at a blank line; keep the ``data: `` payload."""
    rest = b""
    for piece in pieces:
        chunks = (rest + piece).split(b"\n\n")
        rest = chunks.pop()
        yield [c[6:] for c in chunks if c.startswith(b"data: ")]


def read_json_loads(pieces: Iterable[bytes]) -> int:
    """The decoding baseline: split on blank lines, ``json.loads``, dicts keyed by (agent, type)."""
    loads = json.loads
    open_blocks: dict[tuple[str, str], dict[str, Any]] = {}
    blocks: dict[str, list[dict[str, Any]]] = {}
    last_text: dict[str, dict[str, Any]] = {}
    count = 0
    for datas in _split_events(pieces):
        for data in datas:
            count += 1
            if data == b"[DONE]":
                continue
            msg = loads(data)
            agent = msg["agent"]
            kind = msg["type"]
            if kind == "citation":
                last_text[agent].setdefault("citations", []).append(msg)
                continue
            if kind == "tool_result_image":
                open_blocks[(agent, "tool_result")].setdefault("images", []).append(msg)
                continue
            key = (agent, kind)
            block = open_blocks.get(key)
            if block is None:
                block = {"type": kind, "parts": [], "id": msg.get("id"), "name": msg.get("name")}
                blocks.setdefault(agent, []).append(block)
                open_blocks[key] = block
            block["parts"].append(msg["delta"])
            if msg["final"]:
                block["content"] = "".join(block.pop("parts"))
                del open_blocks[key]
                if kind == "text":
                    last_text[agent] = block
    return count


def read_msgspec(pieces: Iterable[bytes]) -> int:
    """The practical limit: the same split, then ``msgspec`` decoding into the typed union."""
    decode = msgspec.json.Decoder(Envelope).decode
    count = 0
    for datas in _split_events(pieces):
        for data in datas:
            count += 1
            if data != b"[DONE]":
                decode(data)
    return count


def read_copy(pieces: Iterable[bytes]) -> int:
    """The floor: copy each 64 KiB read once."""
    count = 0
    for piece in pieces:
        bytearray(piece)
        count += 1
    return count


_READERS: Final[dict[str, Callable[[Iterable[bytes]], int]]] = {
    "ours": read_ours,
    "ours-stream": read_ours_stream,
    "json": read_json_loads,
    "msgspec": read_msgspec,
    "copy": read_copy,
}


def _sse_input(
    sizes: Sizes,
) -> tuple[bytes, Callable[[Callable[[Iterable[bytes]], int]], Callable[[], int]], Callable[[Any], Measured]]:
    """The read stream of the read and validate stages, a candidate maker and the measure.

    ``make(reader)`` runs ``reader`` over the stream in 64 KiB pieces; every candidate
    consumes the same events, so the measure counts the input's, not the candidate's.
    """
    data = b"".join(iter_sse(sizes.read_bytes))
    events = data.count(b"\n\n")

    def make(reader: Callable[[Iterable[bytes]], int]) -> Callable[[], int]:
        return lambda: reader(_pieces(data))

    def measure(out: Any) -> Measured:
        del out
        return Measured(events, len(data), None)

    return data, make, measure


def _read_stage(sizes: Sizes) -> Stage:
    data, make, measure = _sse_input(sizes)
    return Stage(
        key="read",
        title=f"read + reconstruct: {_amount(len(data))} SSE, 4 interleaved agents, 64 KiB reads",
        input_bytes=len(data),
        measure=measure,
        memory="rss",
        rss_size=sizes.read_bytes,
        candidates=[
            Candidate(
                "ours: StreamReader + Reconstructor",
                "ours",
                make(read_ours),
                note="transcript kept (memory grows with content)",
                rss_key="ours",
            ),
            Candidate(
                "ours: SSEReader + decode, streaming",
                "ours",
                make(read_ours_stream),
                note="no transcript: the streaming memory target",
                rss_key="ours-stream",
            ),
            Candidate(
                "json.loads + dicts",
                "baseline",
                make(read_json_loads),
                note="split on blank lines, json.loads, (agent, type) dicts",
                rss_key="json",
            ),
            Candidate(
                "msgspec bare decode",
                "limit",
                make(read_msgspec),
                note="same split, Decoder(Envelope), no routing",
                rss_key="msgspec",
            ),
            Candidate("bytes copy", "limit", make(read_copy), note="one copy of each 64 KiB read", rss_key="copy"),
        ],
    )


def run_reader(key: str, size: int) -> int:
    """Run the read candidate ``key`` over a stream of ``size`` bytes generated on the fly.

    The child process of the RSS check (``envelope bench --rss-child KEY:SIZE``) calls
    this and then reports its own peak RSS: the input is never in memory whole, so the
    peak is the candidate's (plus the interpreter's).

    Returns:
        The events the candidate consumed.

    Raises:
        KeyError: no read candidate ``key``.
    """
    return _READERS[key](iter_sse(size))


# --------------------------------------------------------------------------- validate


def validate_ours(pieces: Iterable[bytes]) -> int:
    """Ours: SSE bytes -> ``StreamValidator`` (every check). Returns the violations found."""
    checker = StreamValidator()
    feed = checker.feed
    count = 0
    for piece in pieces:
        count += len(feed(piece))
    return count + len(checker.close())


# The RSS child of the validate stage runs it like a read candidate.
_READERS["validate"] = validate_ours


def _validate_stage(sizes: Sizes) -> Stage:
    data, make, measure = _sse_input(sizes)
    return Stage(
        key="validate",
        title=f"validate: {_amount(len(data))} SSE (the read stream), 64 KiB reads",
        input_bytes=len(data),
        measure=measure,
        memory="rss",
        rss_size=sizes.read_bytes,
        candidates=[
            Candidate(
                "ours: StreamValidator",
                "ours",
                make(validate_ours),
                note="every check of spec/validation.md, violations collected",
                rss_key="validate",
            ),
            Candidate(
                "ours: StreamReader + Reconstructor",
                "ours",
                make(read_ours),
                note="the read stage's ours (feed_batch + feed_many), alternated here: the target's reference "
                "(RSS: see read)",
            ),
        ],
    )


# --------------------------------------------------------------------------- migrate

LEGACY_CAPTURE: Final = "fixtures/corpus/legacy_xml_sse_capture.txt"  #: the default input, in the checkout


def legacy_input(capture: bytes, size: int) -> bytes:
    """The legacy capture repeated to about ``size`` bytes, still one valid capture.

    Its first record (the ``meta_init``) comes once, the records after it up to the
    ``[DONE]`` record are repeated until ``size`` is reached (at least once), then
    ``[DONE]``: the migrator sees one long turn, as in a real log.

    Args:
        capture: the raw SSE capture of the old server (``data: `` records).
        size: the size to reach.

    Returns:
        The input bytes.
    """
    done = capture.rfind(b"data: [DONE]")
    body = capture if done < 0 else capture[:done]
    head, sep, rest = body.partition(b"\n\n")
    if not rest:  # one record only: repeat it whole
        head, sep, rest = b"", b"", body
    times = max(1, (size - len(head) - len(sep)) // len(rest)) if rest else 1
    return head + sep + rest * times + b"data: [DONE]\n\n"


def _drop_warning(_warning: MigrationWarning) -> None:
    """The migrate stage's warning callback: the figures are the same with or without them."""


def migrate_ours(pieces: Iterable[bytes]) -> int:
    """Ours: legacy capture bytes -> ``XmlMigrator`` -> envelope lines. Returns the lines.

    Warnings go to a callback, as a streaming caller (``envelope migrate``) takes them,
    rather than piling up in ``warnings`` (the repeated capture gives about a thousand
    per MB); this one drops them.
    """
    migrator = XmlMigrator(on_warning=_drop_warning)
    feed = migrator.feed
    count = 0
    for piece in pieces:
        count += len(feed(piece))
    return count + len(migrator.close())


def migrate_stdlib_tokenizer(pieces: Iterable[bytes]) -> int:
    """The migrate stage's reference: the same bytes through the standard library's tokenizer.

    What a server without this codec would start from: split the SSE records at blank
    lines, decode each ``data:`` payload, and feed it to ``html.parser.HTMLParser``, which
    tokenizes the legacy tags (their attributes unescaped) and the text between them,
    holding a tag cut across records until it is complete. It only counts the tokens: no
    envelope is built, no bound kept. Returns the tokens.
    """
    from html.parser import HTMLParser  # stdlib, imported where it is measured

    class Tokens(HTMLParser):
        count = 0

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:  # noqa: ARG002
            self.count += 1

        def handle_endtag(self, tag: str) -> None:  # noqa: ARG002
            self.count += 1

        def handle_data(self, data: str) -> None:  # noqa: ARG002
            self.count += 1

    parser = Tokens(convert_charrefs=False)
    for datas in _split_events(pieces):
        for data in datas:
            parser.feed(data.decode("utf-8"))
    parser.close()
    return parser.count


def _decode_reads(pieces: Iterable[bytes]) -> int:
    """The floor: decode each 64 KiB read as UTF-8 (a read may end inside a character)."""
    count = 0
    for piece in pieces:
        piece.decode("utf-8", "ignore")
        count += 1
    return count


def _migrate_stage(sizes: Sizes) -> Stage:
    capture = sizes.legacy_capture
    if capture is None:
        why = f"legacy capture not found ({LEGACY_CAPTURE}; envelope bench --legacy-capture PATH)"
        return Stage(
            key="migrate",
            title="migrate: legacy XML capture (not found)",
            input_bytes=0,
            measure=_unbounded_measure,
            candidates=[
                Candidate("ours: XmlMigrator", "ours", None, missing=why),
                Candidate("stdlib html.parser tokenizer", "baseline", None, missing=why),
                Candidate("UTF-8 decode", "limit", None, missing=why),
            ],
        )
    data = legacy_input(capture, sizes.read_bytes)
    records = data.count(b"\n\ndata: ") + 1

    def make(reader: Callable[[Iterable[bytes]], int]) -> Callable[[], int]:
        return lambda: reader(_pieces(data))

    def measure(out: Any) -> Measured:
        del out  # events: the capture's SSE records, the same input for both
        return Measured(records, len(data), None)

    return Stage(
        key="migrate",
        title=f"migrate: the legacy XML capture ({len(capture) / 1024:.1f} KiB) repeated to "
        f"{_amount(len(data))}, 64 KiB reads",
        input_bytes=len(data),
        measure=measure,
        candidates=[
            Candidate("ours: XmlMigrator", "ours", make(migrate_ours), note="raw SSE capture -> envelope lines"),
            Candidate(
                "stdlib html.parser tokenizer",
                "baseline",
                make(migrate_stdlib_tokenizer),
                note="SSE records split at blank lines, each data payload fed to html.parser; tokens counted",
            ),
            Candidate("UTF-8 decode", "limit", make(_decode_reads), note="each 64 KiB read decoded, nothing else"),
        ],
    )


# --------------------------------------------------------------------------- stages


def _stage_emit_small(sizes: Sizes) -> Stage:
    items = deltas(sizes.small_count, 20)
    return _emit_stream_stage("emit_small", f"emit: {len(items)} streamed deltas of ~20 bytes", items)


def _stage_emit_typical(sizes: Sizes) -> Stage:
    items = deltas(sizes.typical_count, 200)
    return _emit_stream_stage("emit_typical", f"emit: {len(items)} streamed deltas of ~200 bytes", items)


def _amount(n: int) -> str:
    """A size for a title, readable at any ``--size-mb``: ``100.2 MiB``, ``20 KiB``."""
    return f"{n / MB:.1f} MiB" if n >= MB else f"{n / 1024:.0f} KiB"


def _size_label(n: int) -> str:
    return f"{n / MB:.0f} MiB" if n >= MB else f"{n / 1024:.0f} KiB"


def _buffered(key: str, kind: str, which: str) -> Callable[[Sizes], Stage]:
    def factory(sizes: Sizes) -> Stage:
        n = sizes.big_bytes if which == "big" else sizes.mid_bytes
        payload = ascii_payload(n) if kind == "ascii" else escape_payload(n)
        label = "plain ASCII" if kind == "ascii" else "escape-heavy"
        return _emit_buffered_stage(key, f"emit: buffered {_size_label(n)} {label} tool_result", payload)

    return factory


#: The stages, in report order, as ``(key, factory)``. Issue 4 (validate) and issue 5
#: (migrate) append theirs here: a key and a function ``(Sizes) -> Stage`` whose first
#: candidate is ours (e.g. ``("validate", _validate_stage)``: SSE 64 KiB reads -> the
#: validator; ``("migrate", _migrate_stage)``: the legacy capture repeated to the read
#: size -> the migrator), plus any targets in ``TARGETS``. A stage whose code has not
#: landed is simply not in the list.
STAGES: list[tuple[str, Callable[[Sizes], Stage]]] = [
    ("emit_small", _stage_emit_small),
    ("emit_typical", _stage_emit_typical),
    ("emit_100k_ascii", _buffered("emit_100k_ascii", "ascii", "mid")),
    ("emit_100k_escape", _buffered("emit_100k_escape", "escape", "mid")),
    ("emit_10m_ascii", _buffered("emit_10m_ascii", "ascii", "big")),
    ("emit_10m_escape", _buffered("emit_10m_escape", "escape", "big")),
    ("read", _read_stage),
    ("validate", _validate_stage),
    ("migrate", _migrate_stage),
]


def build_stage(key: str, sizes: Sizes) -> Stage:
    """Build the stage ``key`` of ``STAGES`` at ``sizes``.

    Raises:
        KeyError: no such stage.
    """
    for name, factory in STAGES:
        if name == key:
            return factory(sizes)
    raise KeyError(key)


# --------------------------------------------------------------------------- running


def _time_stage(stage: Stage, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """``{candidate: [(wall, cpu) per round]}``: every round runs every candidate once.

    Round ``r`` runs them in an order rotated by ``r`` (A B C, B C A, ...), so the
    candidates of one round are timed within a pass of each other and a per-round ratio
    compares two passes made under the same load.
    """
    available = [c for c in stage.candidates if c.run is not None]
    times: dict[str, list[tuple[float, float]]] = {c.name: [] for c in available}
    if not available:
        return times
    for r in range(rounds):
        shift = r % len(available)
        for cand in available[shift:] + available[:shift]:
            assert cand.run is not None
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            cand.run()
            times[cand.name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return times


def spread(values: Sequence[float]) -> tuple[float, float]:
    """The quartiles ``(q1, q3)`` of ``values``; the min and max when there are fewer than 4."""
    if len(values) < 4:
        return min(values), max(values)
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q3


def paired_ratios(
    mine: Sequence[tuple[float, float]], ref: Sequence[tuple[float, float]]
) -> tuple[list[float], list[float]]:
    """Per-round ratios ``mine / ref`` of wall times and of CPU times (rounds of one stage)."""
    wall = [a[0] / b[0] for a, b in zip(mine, ref, strict=True) if b[0] > 0]
    cpu = [a[1] / b[1] if b[1] > 0 else a[0] / b[0] for a, b in zip(mine, ref, strict=True) if b[0] > 0]
    return wall, cpu


def _tracemalloc_peak(run: Callable[[], Any]) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del out
    return peak


def run_stage(
    stage: Stage,
    rounds: int,
    *,
    memory: bool = True,
    rss: Callable[[str, int], int | None] | None = None,
) -> list[Row]:
    """Time every candidate of ``stage`` and return its rows (ours first).

    Args:
        stage: the stage.
        rounds: passes per candidate; the median is kept.
        memory: also measure peak memory (one more pass per candidate).
        rss: for a stage measured by RSS, ``rss(rss_key, size)`` runs ``run_reader`` in a
            child process and returns its peak RSS (``benchmarks.command`` passes one; without it
            that stage's memory is not measured).

    Returns:
        One row per candidate.
    """
    times = _time_stage(stage, rounds)
    ours_times = times.get(stage.candidates[0].name)
    rows: list[Row] = []
    for cand in stage.candidates:
        if cand.run is None:
            rows.append(Row(stage.key, cand.name, cand.role, missing=cand.missing, note=cand.note))
            continue
        measured = stage.measure(cand.run())
        peak: int | None = None
        if memory:
            if stage.memory != "rss":
                peak = _tracemalloc_peak(cand.run)
            elif rss is not None and cand.rss_key:
                peak = rss(cand.rss_key, stage.rss_size)
        rows.append(_row(stage, cand, times[cand.name], ours_times, measured, peak))
    return rows


def _row(
    stage: Stage,
    cand: Candidate,
    mine: list[tuple[float, float]],
    ours_times: list[tuple[float, float]] | None,
    measured: Measured,
    peak: int | None,
) -> Row:
    """One candidate's row: medians of its rounds, its per-round ratios to ours, what its output holds."""
    seconds = statistics.median(t[0] for t in mine)
    cpu_seconds = statistics.median(t[1] for t in mine)
    ratio = ratio_cpu = None
    band = None
    cpu_ratios: list[float] = []
    if ours_times:
        wall_ratios, cpu_ratios = paired_ratios(mine, ours_times)
        ratio, ratio_cpu = statistics.median(wall_ratios), statistics.median(cpu_ratios)
        band = spread(cpu_ratios)
    return Row(
        stage=stage.key,
        candidate=cand.name,
        role=cand.role,
        seconds=seconds,
        events=measured.events,
        events_per_s=measured.events / seconds,
        mb_per_s=stage.input_bytes / 1e6 / seconds,
        peak_bytes=peak,
        ratio=ratio,
        violations=measured.violations if cand.role != "limit" else None,
        note=cand.note,
        cpu_seconds=cpu_seconds,
        ratio_cpu=ratio_cpu,
        spread_cpu=band,
        cpu_ratios=cpu_ratios,
    )


@dataclass(frozen=True)
class TargetResult:
    """One target of the issue, checked against this run's rows.

    Attributes:
        name: what is measured.
        goal: the target, in words.
        measured: the value found, in words.
        met: whether the target holds; ``None`` when it could not be measured, or when
            the spread of the per-round ratios straddles the goal (``noisy``).
        noisy: the run cannot decide: some rounds meet the goal and others miss it
            (the goal lies between the quartiles of the per-round ratios). Run again on a
            quieter machine, or with more ``--rounds``.
    """

    name: str
    goal: str
    measured: str
    met: bool | None
    noisy: bool = False


@dataclass
class Report:
    """A whole run: rows per stage, targets, the machine, the settings."""

    stages: list[StageInfo] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    targets: list[TargetResult] = field(default_factory=list)
    machine: dict[str, str] = field(default_factory=dict)
    size_mb: float = 0.0
    rounds: int = 0
    isolated: bool = False  #: each stage ran in its own process
    only: tuple[str, ...] = ()  #: the stages asked for (``--stage``); empty: all

    def command(self) -> str:
        """The ``envelope bench`` command line that reproduces this run."""
        stages = "".join(f" --stage {key}" for key in self.only)
        where = "" if self.isolated else " --in-process"
        return f"envelope bench --size-mb {self.size_mb:g} --rounds {self.rounds}{stages}{where}"

    def row(self, stage: str, role: str, index: int = 0) -> Row | None:
        """The ``index``-th row of ``role`` in ``stage``, if measured."""
        found = [r for r in self.rows if r.stage == stage and r.role == role and r.seconds is not None]
        return found[index] if len(found) > index else None

    def named(self, stage: str, prefix: str) -> Row | None:
        """The row of ``stage`` whose candidate name starts with ``prefix``, if measured."""
        for r in self.rows:
            if r.stage == stage and r.candidate.startswith(prefix) and r.seconds is not None:
                return r
        return None


def _ratio(report: Report, stage: str, ref: str, goal: float, label: str, *, faster: bool) -> TargetResult:
    """A timing target: ours against ``ref``, both timed in the rounds of ``stage``.

    Judged on CPU time, round by round: each round's ratio compares two passes made within
    a pass of each other (the timing protocol above). The figure is the median of the
    per-round ratios, the spread their quartiles. ``faster``: the goal is ``ref / ours >=
    goal``; otherwise ``ours / ref <= goal``. Met when the whole spread is on the goal's
    side, missed when it is all on the other side, and *too noisy* when it straddles it.
    """
    word = f">= {goal:g}x faster" if faster else f"<= {goal:g}x its time"
    ours = report.row(stage, "ours")
    them = report.named(stage, ref)
    if ours is None or them is None or not them.cpu_ratios:
        missing = next((r.missing for r in report.rows if r.stage == stage and r.missing), "")
        return TargetResult(label, word, missing or "not measured", None)
    # them.cpu_ratios are ref / ours per round
    per_round = list(them.cpu_ratios) if faster else [1 / x for x in them.cpu_ratios if x > 0]
    x = statistics.median(per_round)
    low, high = spread(per_round)
    wall = them.ratio if faster else (1 / them.ratio if them.ratio else None)
    unit = "x faster" if faster else "x its time"
    measured = f"{x:.2f}{unit} (CPU; rounds {low:.2f}-{high:.2f}" + (f"; wall {wall:.2f})" if wall else ")")
    if faster:
        met: bool | None = True if low >= goal else False if high < goal else None
    else:
        met = True if high <= goal else False if low > goal else None
    noisy = met is None
    if noisy:
        measured += ": too noisy to judge, the spread straddles the goal"
    return TargetResult(label, word, measured, met, noisy)


def _targets_emit(report: Report) -> list[TargetResult]:
    big = _size_label(Sizes.from_mb(report.size_mb).big_bytes)  # labels follow --size-mb
    out = [
        _ratio(report, "emit_small", "stdlib", 4, "emit 20 B deltas vs stdlib seed-literal", faster=True),
        # 1.15x since issue 31 (was 2x)
        _ratio(report, "emit_small", "msgspec", 1.15, "emit 20 B deltas vs bare msgspec Struct", faster=False),
        _ratio(report, "emit_10m_escape", "stdlib", 3, f"emit {big} escape-heavy vs stdlib seed-literal", faster=True),
        # issue 31: a ratio to msgspec's one-shot encode of the same text (was >= 300 MB/s)
        _ratio(
            report, "emit_10m_escape", "msgspec", 1.5, f"emit {big} escape-heavy vs bare msgspec Struct", faster=False
        ),
    ]
    label = f"emit {big} escape-heavy: lines over 2048 bytes"
    ours = report.row("emit_10m_escape", "ours")
    if ours is None:
        out.append(TargetResult(label, "0 (baseline counted)", "not measured", None))
    else:
        base = report.named("emit_10m_escape", "stdlib")
        base_v = "not measured" if base is None else f"{base.violations} of {base.events} lines"
        out.append(
            TargetResult(
                label,
                "0 (baseline counted)",
                f"ours {ours.violations} of {ours.events} lines; baseline {base_v}",
                ours.violations == 0,
            )
        )
    return out


def _rss_target(label: str, row: Row | None) -> TargetResult:
    if row is None or row.peak_bytes is None:
        return TargetResult(label, "< 100 MiB", "not measured", None)
    mib = row.peak_bytes / MB
    return TargetResult(label, "< 100 MiB", f"{mib:.0f} MiB", mib < 100)


def _targets_read(report: Report) -> list[TargetResult]:
    return [
        # Issue 43 §1: 3.5x and 1.2x (were 3x and 1.5x since issue 17 §3).
        _ratio(report, "read", "json.loads", 3.5, "read + reconstruct vs json.loads + dicts", faster=True),
        _ratio(report, "read", "msgspec", 1.2, "read + reconstruct vs bare msgspec decode", faster=False),
        _rss_target(
            f"read {report.size_mb:g} MiB streaming: peak RSS", report.named("read", "ours: SSEReader + decode")
        ),
    ]


def _targets_validate(report: Report) -> list[TargetResult]:
    """Validate within 1.2x of read + reconstruct (issue 43 §2; was 1.5x), alternated in the validate stage."""
    return [
        _ratio(
            report,
            "validate",
            "ours: StreamReader + Reconstructor",
            1.2,
            "validate vs read + reconstruct",
            faster=False,
        ),
        _rss_target(
            f"validate {report.size_mb:g} MiB streaming: peak RSS", report.named("validate", "ours: StreamValidator")
        ),
    ]


def _targets_migrate(report: Report) -> list[TargetResult]:
    """Migrate against the stdlib tokenizer on the same bytes (issue 31: was >= 50 MB/s)."""
    out = [
        _ratio(
            report,
            "migrate",
            "stdlib html.parser",
            1.5,
            "migrate the legacy capture, repeated, vs stdlib html.parser tokenizer",
            faster=True,
        )
    ]
    ours = report.named("migrate", "ours: XmlMigrator")
    label = f"migrate {report.size_mb:g} MiB: peak memory (tracemalloc, input excluded)"
    if ours is None or ours.peak_bytes is None:
        out.append(TargetResult(label, "< 100 MiB", "not measured", None))
    else:
        mib = ours.peak_bytes / MB
        out.append(TargetResult(label, "< 100 MiB", f"{mib:.1f} MiB", mib < 100))
    return out


#: Target checkers, run after every stage: each reads the report and returns results,
#: the same names and goals whatever was measured (``planned_targets``).
TARGETS: list[Callable[[Report], list[TargetResult]]] = [
    _targets_emit,
    _targets_read,
    _targets_validate,
    _targets_migrate,
]


def planned_targets(size_mb: float) -> list[tuple[str, str]]:
    """``(name, goal)`` of every target ``envelope bench --size-mb size_mb`` checks.

    The README's target table is compared with this (``tests/bench_smoke``).
    """
    empty = Report(size_mb=size_mb)
    return [(t.name, t.goal) for check in TARGETS for t in check(empty)]


def machine(cpuinfo: str = "") -> dict[str, str]:
    """The machine a run happened on: CPUs, CPU model, Python, msgspec, platform, codec build.

    ``codec`` is ``compiled`` when the hot modules run compiled by mypyc, ``pure`` when
    they run from source (``ENVELOPE_PURE=1``, no compiler at install time, a stale build).

    Args:
        cpuinfo: the text of ``/proc/cpuinfo`` where there is one (the caller reads it);
            its first ``model name`` is the CPU model.
    """
    model = platform.processor() or "unknown"
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {
        "cpus": str(os.cpu_count()),
        "cpu": model,
        "python": platform.python_version(),
        "msgspec": msgspec.__version__,
        "platform": platform.platform(terse=True),
        "codec": _speedups.loaded(),
    }


def run(
    size_mb: float = 100.0,
    rounds: int = 5,
    *,
    memory: bool = True,
    only: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
    rss: Callable[[str, int], int | None] | None = None,
    cpuinfo: str = "",
    legacy_capture: bytes | None = None,
    runner: Callable[[str], tuple[StageInfo, list[Row]]] | None = None,
) -> Report:
    """Run every stage in ``STAGES`` and check ``TARGETS``.

    Args:
        size_mb: size of the read stream in MiB (other inputs scale down below 10).
        rounds: passes per candidate; medians are reported.
        memory: measure peak memory too.
        only: run only the stages with these keys (all when empty).
        progress: called with a line of text as each stage starts.
        rss: measures a read candidate's peak RSS in a child process (see ``run_stage``).
        cpuinfo: the text of ``/proc/cpuinfo``, for the machine line.
        legacy_capture: the legacy XML capture's bytes for the migrate stage (the caller
            reads ``LEGACY_CAPTURE``); ``None`` marks that stage's rows "not found".
        runner: runs one stage by key and returns what it measured, elsewhere (``envelope
            bench`` runs each in a fresh process); ``None`` runs them here, one after
            another, each built, timed and dropped before the next.

    Returns:
        The report.
    """
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    sizes = Sizes.from_mb(size_mb, legacy_capture)
    report = Report(
        machine=machine(cpuinfo), size_mb=size_mb, rounds=rounds, isolated=runner is not None, only=tuple(only)
    )
    keys = [key for key, _ in STAGES if not only or key in only]
    for number, key in enumerate(keys, start=1):
        if progress is not None:
            progress(f"stage {number} of {len(keys)}: {key}")
        info, rows = run_one(key, sizes, rounds, memory=memory, rss=rss) if runner is None else runner(key)
        report.stages.append(info)
        report.rows.extend(rows)
    for check in TARGETS:
        report.targets.extend(check(report))
    return report


def run_one(
    key: str,
    sizes: Sizes,
    rounds: int,
    *,
    memory: bool = True,
    rss: Callable[[str, int], int | None] | None = None,
) -> tuple[StageInfo, list[Row]]:
    """Build stage ``key`` at ``sizes``, time it (``run_stage``), and drop its input.

    Returns:
        What the report keeps of the stage, and its rows.
    """
    stage = build_stage(key, sizes)
    rows = run_stage(stage, rounds, memory=memory, rss=rss)
    info = StageInfo(stage.key, stage.title, stage.memory)
    del stage
    gc.collect()  # the input and every candidate's closure go before the next stage
    return info, rows


# --------------------------------------------------------------------------- rendering


def _fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


def _fmt_mem(n: int | None, method: str) -> str:
    if n is None:
        return "-"
    return f"{n / MB:.1f} MiB" + (" RSS" if method == "rss" else "")


def _table_rows(report: Report) -> list[tuple[str, list[list[str]]]]:
    out: list[tuple[str, list[list[str]]]] = []
    for stage in report.stages:
        rows: list[list[str]] = []
        for r in report.rows:
            if r.stage != stage.key:
                continue
            if r.seconds is None:
                rows.append([r.candidate, r.missing, *([""] * (len(HEADER) - 2))])
                continue
            over = "-" if r.violations is None else str(r.violations)
            band = "-" if r.spread_cpu is None else f"{r.spread_cpu[0]:.2f}-{r.spread_cpu[1]:.2f}"
            rows.append(
                [
                    r.candidate,
                    _fmt_rate(r.events_per_s),
                    f"{r.mb_per_s:.1f}",
                    _fmt_mem(r.peak_bytes, stage.memory),
                    f"{r.ratio:.2f}" if r.ratio is not None else "-",
                    f"{r.ratio_cpu:.2f}" if r.ratio_cpu is not None else "-",
                    band,
                    over,
                    f"{r.seconds * 1000:.1f}",
                ]
            )
        out.append((stage.title, rows))
    return out


HEADER: Final = [
    "candidate",
    "events/s",
    "MB/s",
    "peak mem",
    "wall / ours",
    "CPU / ours",
    "CPU spread",
    "lines > 2048",
    "median ms",
]


def render_table(report: Report) -> str:
    """The plain-text table ``envelope bench`` prints."""
    lines: list[str] = []
    for title, rows in _table_rows(report):
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(HEADER)]
        lines.append(title)
        lines.append("  " + "  ".join(h.ljust(w) for h, w in zip(HEADER, widths, strict=True)))
        for r in rows:
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)))
        lines.append("")
    lines.append(f"targets (codec build: {report.machine.get('codec', '?')}; {report.command()}):")
    for t in report.targets:
        mark = "too noisy" if t.noisy else {True: "met", False: "MISSED", None: "n/a"}[t.met]
        lines.append(f"  [{mark}] {t.name}: {t.measured} (target {t.goal})")
    return "\n".join(lines)


def _where_run(report: Report) -> str:
    return "each stage in its own process" if report.isolated else "every stage in one process (--in-process)"


def render_markdown(report: Report) -> str:
    """The report as Markdown: machine, settings, one table per stage, the targets."""
    m = report.machine
    out = [
        "# envelope bench",
        "",
        f"Machine: {m.get('cpus')} CPUs ({m.get('cpu')}), Python {m.get('python')}, "
        f"msgspec {m.get('msgspec')}, {m.get('platform')}; codec build: {m.get('codec')}.",
        f"Command: `{report.command()}`; {_where_run(report)}. Every round runs every candidate of a "
        "stage once, in an order rotated round by round; `wall / ours` and `CPU / ours` are the "
        "medians of the per-round ratios (wall time, and this process's CPU time), `CPU spread` "
        "their quartiles (min-max below 4 rounds). Above 1 means slower than ours. Targets are "
        "judged on the CPU ratios: met when the whole spread meets the goal, missed when none of "
        "it does, too noisy when the goal lies inside it. MB/s and median ms are indicative only. "
        "MB/s counts input bytes (10^6). "
        "Peak memory: emit and migrate stages, tracemalloc peak of one untimed pass (Python "
        "allocations, output included, input excluded); read and validate stages, peak RSS "
        "(VmHWM) of a child process running only that candidate over the stream generated on the fly.",
        "",
    ]
    for title, rows in _table_rows(report):
        out.append(f"### {title}")
        out.append("")
        out.append("| " + " | ".join(HEADER) + " |")
        out.append("|" + "|".join("---" for _ in HEADER) + "|")
        out.extend("| " + " | ".join(r) + " |" for r in rows)
        out.append("")
    out.append("### Targets")
    out.append("")
    out.append("| target | goal | measured | met |")
    out.append("|---|---|---|---|")
    for t in report.targets:
        mark = "too noisy" if t.noisy else {True: "yes", False: "**no**", None: "n/a"}[t.met]
        out.append(f"| {t.name} | {t.goal} | {t.measured} | {mark} |")
    out.append("")
    return "\n".join(out)


def _stage_panel(
    ax: Any, stage: StageInfo, rows: list[Row], colour: dict[str, Any], limits: tuple[float, float]
) -> None:
    """One stage's bars: ``CPU time / ours`` per candidate on a log axis, ours on top.

    A bar is the candidate's ``ratio_cpu`` (the median of its per-round CPU ratios, what
    the targets judge); a thin line across its end spans their quartiles (``spread_cpu``).
    """
    import textwrap

    ys = list(range(len(rows)))[::-1]  # ours on top, bars centred on their ticks
    values = [r.ratio_cpu or 0.0 for r in rows]
    ax.barh(ys, values, height=0.7, color=[colour[r.candidate] for r in rows], left=0)
    for y, value, row in zip(ys, values, rows, strict=True):
        if row.spread_cpu is not None and row.spread_cpu != (value, value):
            ax.plot(row.spread_cpu, (y, y), color="black", linewidth=1.0)
        right = max(value, row.spread_cpu[1] if row.spread_cpu else value)
        ax.text(right * 1.08, y, f"{value:.2f}" if value >= 0.1 else f"{value:.2g}", va="center", fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlim(*limits)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_yticks([])
    ax.set_title("\n".join(textwrap.wrap(stage.title, 46)), fontsize=9)
    ax.tick_params(axis="x", labelsize=8)


def render_png(report: Report, path: str) -> None:
    """The chart: one panel per stage, ``CPU time / ours`` per candidate (log scale), to ``path``.

    The ratios plotted are the CPU ones the targets judge (``Row.ratio_cpu``, with their
    quartiles), never the wall ones: on a loaded machine other jobs stretch wall time, so
    a wall ratio of 26.76 once stood beside a judged CPU ratio of 0.61. Each candidate
    keeps one colour in every panel (the legend, below the panels, names them once); bars
    are centred in their panel; the panel titles are the stages' titles.

    Raises:
        ImportError: matplotlib is not installed (it is in the ``bench`` extra).
    """
    import matplotlib  # bench-only dependency

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    measured = [r for r in report.rows if r.ratio_cpu is not None and r.seconds is not None]
    stages = [s for s in report.stages if any(r.stage == s.key for r in measured)]
    names: list[str] = []
    for r in measured:
        if r.candidate not in names:
            names.append(r.candidate)
    palette = [plt.get_cmap("tab10")(i) for i in range(10)] + [plt.get_cmap("Dark2")(i) for i in range(8)]
    colour = {name: palette[i % len(palette)] for i, name in enumerate(names)}
    cols = min(3, max(1, len(stages)))
    rows_n = max(1, -(-len(stages) // cols))
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.2 * cols, 2.9 * rows_n + 1.4), squeeze=False)
    ratios = [r.ratio_cpu for r in measured if r.ratio_cpu]
    ratios += [q for r in measured if r.spread_cpu for q in r.spread_cpu if q > 0]
    limits = (min([0.5, *ratios]) / 1.6, max([2.0, *ratios]) * 2.2)
    for ax, stage in zip(axes.flat, stages, strict=False):
        _stage_panel(ax, stage, [r for r in measured if r.stage == stage.key], colour, limits)
    for ax in list(axes.flat)[len(stages) :]:
        ax.axis("off")
    fig.legend(
        handles=[Patch(color=colour[n], label=n) for n in names],
        loc="lower center",
        ncol=min(4, len(names)),
        fontsize=8,
        frameon=False,
    )
    fig.suptitle(
        f"envelope bench: CPU time / ours, the ratio the targets judge (median of the rounds, "
        f"line: quartiles; log scale; right of 1 = slower than ours)\n"
        f"--size-mb {report.size_mb:g}, {report.rounds} rounds, {_where_run(report)}, "
        f"{report.machine.get('cpus')} CPUs",
        fontsize=10,
    )
    legend_rows = -(-len(names) // 4)
    fig.tight_layout(rect=(0, 0.01 + 0.024 * legend_rows, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
