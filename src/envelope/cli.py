"""The ``envelope`` command line: the only module of the package that prints or opens files.

Subcommands:
    reconstruct FILE   rebuild a recorded stream (SSE capture or JSON lines, ``-`` for stdin)
                       and print its transcript as JSON.
    migrate FILE       convert a legacy XML stream (raw SSE capture or tag text) to envelopes
                       (``spec/legacy-xml.md``); warnings go to stderr.
    bench              compare ours with the stdlib baseline, peers and the practical
                       limits (``_bench``); print the table, write ``bench.md`` and ``bench.png``.
    validate FILE...   check recorded streams against the protocol and print each
                       violation as ``path:line:col: CODE message`` (or JSON).

Exit status: 0 success (``validate``: no violations, warnings allowed unless
``--strict``); 1 ``validate`` found violations, or ``migrate`` converted but
``--lenient`` recovered from broken input (each recovery a warning on stderr);
2 unusable input or arguments (the error, with its position, goes to stderr).

argparse (the standard library) is the CLI framework: the codec keeps msgspec as its
only runtime dependency for encoding and decoding, and these subcommands need nothing
argparse lacks.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Literal

import msgspec

from ._decoder import RawLine, StreamReader
from ._errors import EnvelopeError
from ._limits import DEFAULT_MAX_BYTES
from ._reconstruct import Reconstructor
from ._sse import DONE, frame
from ._validator import StreamValidator, Violation
from ._xml_migrate import DONE_LINE, MigrationWarning, XmlMigrator

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["main"]

_READ_SIZE = 64 * 1024


def _open_input(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    return open(path, "rb")  # closed by the caller's with-block


def iter_lines(stream: BinaryIO, format: Literal["auto", "sse", "jsonl"] = "auto") -> Iterator[RawLine]:
    """Read a recorded stream in 64 KiB pieces and yield its envelope lines."""
    reader = StreamReader(format)
    while chunk := stream.read(_READ_SIZE):
        yield from reader.feed(chunk)
    yield from reader.close()


def _reconstruct(args: argparse.Namespace) -> int:
    rebuilder = Reconstructor()
    reader = StreamReader(args.input_format)
    with _open_input(args.file) as stream:
        # The batch pair: the same lines, errors and positions as feed() per line, faster.
        while chunk := stream.read(_READ_SIZE):
            rebuilder.feed_many(reader.feed_batch(chunk))
        rebuilder.feed_many(reader.close())
    rebuilder.close()
    out = msgspec.json.format(msgspec.json.encode(rebuilder.transcript().to_dict()), indent=2)
    sys.stdout.buffer.write(out + b"\n")
    return 0


def _migrate(args: argparse.Namespace) -> int:
    shown = "<stdin>" if args.file == "-" else args.file
    recovered = 0

    def warn(warning: MigrationWarning) -> None:
        nonlocal recovered
        recovered += warning.recovered
        print(f"{shown}: warning: {warning}", file=sys.stderr)

    migrator = XmlMigrator(
        agent=args.agent,
        max_bytes=args.max_bytes,
        input=args.input,
        era=args.era,
        keep_labels=args.keep_labels,
        lenient=args.lenient,
        on_warning=warn,
    )
    sse = args.format == "sse"

    def write(out: BinaryIO, lines: list[bytes]) -> None:
        for line in lines:
            if sse:
                out.write(DONE if line == DONE_LINE else frame(line))
            else:
                out.write(line + b"\n")

    target = args.output
    tmp = f"{target}.partial" if target else None
    out: BinaryIO = open(tmp, "wb") if tmp else sys.stdout.buffer  # noqa: SIM115  # closed below
    try:
        with _open_input(args.file) as stream:
            while chunk := stream.read(_READ_SIZE):
                write(out, migrator.feed(chunk))
        write(out, migrator.close())
        out.flush()
    except BaseException:
        if tmp:
            out.close()
            os.unlink(tmp)
        raise
    if tmp and target:
        out.close()
        os.replace(tmp, target)  # all or nothing: a failed migration leaves no half file
    return 1 if recovered else 0


def _rss_of(key: str, size: int) -> int | None:
    """Peak RSS of a child process running one read candidate of ``envelope bench``."""
    import subprocess  # only for the benchmark's memory check

    package_root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "envelope", "bench", "--rss-child", f"{key}:{size}"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        print(f"envelope bench: warning: RSS check of {key} failed: {proc.stderr.strip()}", file=sys.stderr)
        return None
    return int(proc.stdout.strip())


def _peak_rss() -> int:
    """This process's peak RSS in bytes: ``VmHWM`` (reset by exec, unlike ``ru_maxrss``)."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource  # macOS and others: ru_maxrss, in bytes there

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _rss_child(spec: str) -> int:
    from . import _bench as bench

    key, _, size = spec.partition(":")
    bench.run_reader(key, int(size))
    print(_peak_rss())
    return 0


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _legacy_capture(path: str | None, relative: str) -> bytes | None:
    """The migrate stage's input: ``path``, else ``relative`` from here or from the source tree."""
    if path is not None:
        return Path(path).read_bytes()  # unreadable: an OSError, reported by main() (exit 2)
    places = [Path(relative), Path(__file__).resolve().parents[2] / relative]
    for place in places:
        if place.is_file():
            return place.read_bytes()
    tried = ", ".join(str(x) for x in places)
    print(f"envelope bench: warning: legacy capture not found (tried {tried}); no migrate figures", file=sys.stderr)
    return None


def _bench(args: argparse.Namespace) -> int:
    from . import _bench as bench  # tooling: not loaded by the other subcommands

    if args.rss_child:
        return _rss_child(args.rss_child)
    if not args.size_mb > 0:
        print(f"envelope bench: error: --size-mb must be positive, got {args.size_mb:g}", file=sys.stderr)
        return 2
    if args.rounds < 1:
        print(f"envelope bench: error: --rounds must be at least 1, got {args.rounds}", file=sys.stderr)
        return 2
    unknown = sorted(set(args.stage or ()) - {key for key, _ in bench.STAGES})
    if unknown:
        known = ", ".join(key for key, _ in bench.STAGES)
        print(f"envelope bench: error: unknown stage {', '.join(unknown)} (known: {known})", file=sys.stderr)
        return 2
    capture = None
    if not args.stage or "migrate" in args.stage:
        capture = _legacy_capture(args.legacy_capture, bench.LEGACY_CAPTURE)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    report = bench.run(
        args.size_mb,
        args.rounds,
        memory=not args.no_memory,
        only=tuple(args.stage or ()),
        progress=lambda text: print(text, file=sys.stderr, flush=True),
        rss=_rss_of,
        cpuinfo=_cpuinfo(),
        legacy_capture=capture,
    )
    print(bench.render_table(report))
    md = out_dir / "bench.md"
    md.write_text(bench.render_markdown(report), encoding="utf-8")
    print(f"\nwrote {md}")
    png = out_dir / "bench.png"
    try:
        bench.render_png(report, str(png))
    except ImportError:
        print(
            "envelope bench: warning: matplotlib is not installed, no bench.png (install the bench extra)",
            file=sys.stderr,
        )
    else:
        print(f"wrote {png}")
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _validate_one(path: str, args: argparse.Namespace, emit: Callable[[str, Violation], None]) -> tuple[int, int]:
    """Validate one file, passing each violation to ``emit``; return (errors, warnings).

    Raises:
        OSError: the file cannot be opened or read.
    """
    checker = StreamValidator(args.input_format, max_bytes=args.max_bytes)
    errors = warnings = 0
    with _open_input(path) as stream:
        while True:
            chunk = stream.read(_READ_SIZE)
            found = checker.feed(chunk) if chunk else checker.close()
            for violation in found:
                if violation.severity == "error":
                    errors += 1
                else:
                    warnings += 1
                emit(path, violation)
            if not chunk:
                return errors, warnings


def _validate(args: argparse.Namespace) -> int:
    out = sys.stdout
    several = len(args.files) > 1
    as_json = args.format == "json"
    first = True

    def emit(path: str, violation: Violation) -> None:
        nonlocal first
        shown = "<stdin>" if path == "-" else path
        if as_json:
            item: dict[str, object] = violation.to_dict()
            if several:
                item = {"file": shown, **item}
            out.write(("" if first else ",\n") + "    " + msgspec.json.encode(item).decode())
            first = False
        else:
            out.write(f"{shown}:{violation.line}:{violation.column}: {violation.code} {violation.message}\n")

    if as_json:
        out.write('{"violations": [\n')
    errors = warnings = 0
    unusable = False
    for path in args.files:
        shown = "<stdin>" if path == "-" else path
        try:
            e, w = _validate_one(path, args, emit)
        except OSError as exc:
            print(f"{shown}: error: {exc.strerror or exc}", file=sys.stderr)
            unusable = True
            continue
        errors += e
        warnings += w
    if as_json:
        out.write(("" if first else "\n") + "]}\n")
    out.flush()
    files = len(args.files)
    plural = "" if files == 1 else "s"
    print(f"{errors} error(s), {warnings} warning(s) in {files} file{plural}", file=sys.stderr)
    if unusable:
        return 2
    if errors or (args.strict and warnings):
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envelope",
        description="Tools for the JSON envelope streaming protocol (spec/envelope-v1.md).",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rec = commands.add_parser(
        "reconstruct",
        help="rebuild a recorded stream and print its blocks as JSON",
        description="Rebuild a recorded stream (an SSE capture or one JSON envelope per line) "
        "and print {done, agents: {agent: {blocks}}} as JSON.",
    )
    rec.add_argument("file", metavar="FILE", help="the recording, or - for standard input")
    rec.add_argument(
        "--input-format",
        choices=("auto", "sse", "jsonl"),
        default="auto",
        help="the input format (default: detected from the first byte)",
    )
    rec.set_defaults(handler=_reconstruct)
    mig = commands.add_parser(
        "migrate",
        help="convert a legacy XML stream (raw SSE capture or tag text) to JSON envelopes",
        description="Convert a legacy XML tag stream to JSON envelopes (spec/legacy-xml.md). "
        "Writes SSE to stdout by default; warnings and errors (with line and byte) go to stderr. "
        "Exit 0: converted; 1: converted, but --lenient recovered from broken input; 2: not converted.",
    )
    mig.add_argument("file", metavar="FILE", help="the legacy stream, or - for standard input")
    mig.add_argument("--format", choices=("sse", "jsonl"), default="sse", help="output framing (default: sse)")
    mig.add_argument("--agent", metavar="UUID", help="agent for a capture without meta_init")
    mig.add_argument("-o", "--output", metavar="PATH", help="write here instead of stdout (only on success)")
    mig.add_argument(
        "--input",
        choices=("auto", "raw-sse", "tags"),
        default="auto",
        help="raw SSE capture of the old server, or decoded tag text (default: detected)",
    )
    mig.add_argument(
        "--era", choices=("auto", "early", "later"), default="auto", help="escaping era (default: detected)"
    )
    mig.add_argument(
        "--keep-labels",
        action="store_true",
        help="keep older server-tool labels (tool_call/tool_result) instead of mapping them",
    )
    mig.add_argument(
        "--lenient", action="store_true", help="turn recoverable errors into warnings, keeping the content"
    )
    mig.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="bound on each line (default: 2048)")
    mig.set_defaults(handler=_migrate)
    bench = commands.add_parser(
        "bench",
        help="compare speed and memory with the stdlib baseline, peers and msgspec",
        description="Run every benchmark stage in this process, candidates alternated, medians of "
        "--rounds passes; print events/s, MB/s, peak memory and time relative to ours, check the "
        "targets, and write DIR/bench.md and DIR/bench.png.",
    )
    bench.add_argument("--size-mb", type=float, default=100.0, help="read stream size in MiB (default 100)")
    bench.add_argument("--rounds", type=int, default=5, help="timed passes per candidate (default 5)")
    bench.add_argument("--out", default="bench-out", metavar="DIR", help="where to write bench.md, bench.png")
    bench.add_argument("--no-memory", action="store_true", help="skip the peak memory passes")
    bench.add_argument(
        "--stage", action="append", metavar="KEY", help="run only this stage (repeatable), e.g. emit_small, read"
    )
    bench.add_argument(
        "--legacy-capture",
        metavar="PATH",
        help="the legacy XML capture the migrate stage repeats "
        "(default: fixtures/corpus/legacy_xml_sse_capture.txt of the checkout)",
    )
    bench.add_argument("--rss-child", metavar="KEY:SIZE", help=argparse.SUPPRESS)  # the RSS check's child
    bench.set_defaults(handler=_bench, file="envelope bench")  # the label of errors in main()
    val = commands.add_parser(
        "validate",
        help="check recorded streams against the protocol",
        description="Check recorded streams (SSE captures or JSON lines) against the protocol and "
        "print each violation as path:line:col: CODE message. Codes: spec/validation.md. "
        "Exit status: 0 valid, 1 violations, 2 unusable input or arguments.",
    )
    val.add_argument("files", nargs="+", metavar="FILE", help="recordings, or - for standard input")
    val.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help='output: one line per violation (default), or one JSON object {"violations": [...]}',
    )
    val.add_argument(
        "--max-bytes",
        type=_positive,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"the bound on one envelope line in bytes (default {DEFAULT_MAX_BYTES})",
    )
    val.add_argument("--strict", action="store_true", help="treat warnings as errors (exit 1)")
    val.add_argument(
        "--input-format",
        choices=("auto", "sse", "jsonl"),
        default="auto",
        help="the input format (default: detected from the first byte)",
    )
    val.set_defaults(handler=_validate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    name = getattr(args, "file", "-")
    shown = "<stdin>" if name == "-" else name
    try:
        status: int = args.handler(args)
    except EnvelopeError as exc:
        print(f"{shown}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{shown}: error: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return status
