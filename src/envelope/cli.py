"""The ``envelope`` command line: the only module of the package that prints or opens files.

Owns: argument parsing, opening and reading the inputs, writing the outputs, the one
error style (``WHERE: error: WHAT; WHAT TO DO``), exit statuses, quiet exit on a
broken pipe, and progress on a terminal. Its behaviour is specified in ``spec/cli.md``
(ids ``[C…]``), cited beside each rule below.
Does not own: any protocol rule (the codec modules), or the benchmark engine, which
lives outside the library (``envelope bench`` imports it lazily from the checkout).

Subcommands:
    reconstruct FILE   rebuild a recorded stream (SSE capture or JSON lines, ``-`` for stdin)
                       and print its transcript as JSON.
    migrate FILE       convert a legacy XML stream (raw SSE capture or tag text) to envelopes
                       (``spec/legacy-xml.md``); warnings go to stderr.
    validate FILE...   check recorded streams against the protocol and print each
                       violation as ``path:line:col: CODE message`` (or JSON).
    bench              compare ours with the stdlib baseline, peers and the practical
                       limits; print the table, write ``bench.md`` and ``bench.png``.

argparse (the standard library) is the CLI framework: these subcommands need nothing it
lacks. ``rich`` draws progress bars, imported only when stderr is a terminal and the
work is long (spec/cli.md C6).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Final, Literal

import msgspec

from ._cli_errors import CliError
from ._cli_shared import _positive, add_max_line_bytes, code_advice, discard
from ._decoder import RawLine, StreamReader
from ._errors import EnvelopeError
from ._extras import missing, needs
from ._limits import DEFAULT_MAX_BYTES
from ._reconstruct import Reconstructor
from ._sse import DONE, frame
from ._tree import tree
from ._validator import StreamValidator, Violation, explain
from ._xml_migrate import DONE_LINE, MigrationWarning, XmlMigrator

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = ["CliError", "main"]

_READ_SIZE: Final = 64 * 1024
#: Exit statuses (spec/cli.md C1).
EXIT_OK: Final = 0
EXIT_FOUND: Final = 1
EXIT_UNUSABLE: Final = 2
#: 128 + SIGPIPE: what a shell reports for a Unix tool stopped by a closed pipe (C4).
EXIT_BROKEN_PIPE: Final = 141
EXIT_INTERRUPTED: Final = 130
#: Inputs at least this large show a progress bar when stderr is a terminal (C6).
PROGRESS_MIN_BYTES: Final = 4 * 1024 * 1024
STDIN_NAME: Final = "<stdin>"
STDOUT_NAME: Final = "<stdout>"
#: What to do about an error of the library, by its spec section: the library's messages
#: name no CLI flag (spec/cli.md C2), so the flag that helps is named here.
_SECTION_ADVICE: Final = {
    "M5.1": "give the agent with --agent UUID",
}
#: The benchmark's stages, listed by ``envelope bench --help`` (a test compares this with
#: the engine's own list, which is not imported until ``bench`` runs).
BENCH_STAGES: Final = (
    ("emit_small", "emit 20-byte streamed deltas"),
    ("emit_typical", "emit 200-byte streamed deltas"),
    ("emit_100k_ascii", "emit a buffered 100 KiB plain ASCII tool_result"),
    ("emit_100k_escape", "emit a buffered 100 KiB escape-heavy tool_result"),
    ("emit_10m_ascii", "emit a buffered 10 MiB plain ASCII tool_result"),
    ("emit_10m_escape", "emit a buffered 10 MiB escape-heavy tool_result"),
    ("read", "read + reconstruct the SSE stream (--size-mb), 4 interleaved agents"),
    ("validate", "validate the same stream"),
    ("migrate", "migrate the legacy XML capture, repeated to --size-mb"),
)


def _os_error(where: str, exc: OSError, *, reading: bool) -> CliError:
    """An ``OSError`` as a ``CliError``: the system's words, and what usually fixes it."""
    what = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        todo = "check the path (- reads standard input)" if reading else "check that the folder exists"
    elif isinstance(exc, IsADirectoryError):
        todo = "give a file, not a folder"
    elif isinstance(exc, PermissionError):
        todo = "check the file's permissions"
    elif not reading:
        todo = "free some space or write somewhere else" if exc.errno == 28 else ""
    else:
        todo = ""
    return CliError(where, what, todo)


def _shown(path: str) -> str:
    return STDIN_NAME if path == "-" else path


class _Input:
    """One input file (or stdin), read in 64 KiB pieces; read failures name the input (C3).

    Attributes:
        name: the input as shown in messages (``<stdin>`` for ``-``).
        size: its size in bytes when known (a regular file), else ``None``.
        seen: bytes read so far.
        blank: every byte so far was ASCII whitespace (C5: empty input).
    """

    def __init__(self, path: str) -> None:
        self.name = _shown(path)
        self.seen = 0
        self.blank = True
        if path == "-":
            stdin = sys.stdin
            if stdin is None:  # started with stdin closed (`<&-`): Python sets it to None
                raise CliError(STDIN_NAME, "standard input is closed", "pipe the recording in, or give its path")
            self.stream: BinaryIO = stdin.buffer
            self.size: int | None = None
            return
        try:
            self.stream = open(path, "rb")  # noqa: SIM115  # closed by close()
            size = os.fstat(self.stream.fileno()).st_size
        except OSError as exc:
            raise _os_error(self.name, exc, reading=True) from None
        self.size = size if os.path.isfile(path) else None

    def read(self) -> bytes:
        """The next piece, ``b""`` at the end."""
        try:
            chunk = self.stream.read(_READ_SIZE)
        except OSError as exc:
            raise _os_error(self.name, exc, reading=True) from None
        except ValueError:  # a closed stdin descriptor
            raise CliError(self.name, "standard input is closed", "pipe the recording in, or give its path") from None
        if chunk is None:  # a non-blocking descriptor with nothing ready
            raise CliError(self.name, "the input is non-blocking and had no data", "read from a file or a pipe")
        self.seen += len(chunk)
        if self.blank and chunk.strip(b" \t\r\n"):
            self.blank = False
        return chunk

    def close(self) -> None:
        """Close the file (never stdin)."""
        if self.stream is not getattr(sys.stdin, "buffer", None):
            self.stream.close()

    def empty_error(self, command: str) -> CliError:
        """The one answer to empty input, for every subcommand (spec/cli.md C5)."""
        what = "the input is empty" if self.seen == 0 else f"the input holds only whitespace ({self.seen} bytes)"
        return CliError(self.name, f"{what}: nothing to {command}", "check that the recording was written")


class _Stderr:
    """Standard error for messages: a stream that cannot be written (``2> /dev/full``) is
    remembered, not raised, so the exit status still tells (spec/cli.md C3-d)."""

    failed = False

    @classmethod
    def say(cls, text: str) -> None:
        """Write one message line, unless stderr has already failed."""
        if cls.failed:
            return
        try:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):  # a full disk, a closed or missing stderr
            cls.failed = True
            discard(sys.stderr)


def _stdout() -> BinaryIO:
    if sys.stdout is None:  # started with stdout closed (`>&-`)
        raise CliError(STDOUT_NAME, "standard output is closed", "redirect it to a file, or use -o where offered")
    return sys.stdout.buffer


class _Output:
    """An output; write failures name it, never the input (C3). Broken pipes propagate (C4).

    With ``keep_going``, a failed write is remembered instead of raised, so the caller
    can finish counting (``validate``'s summary tells what was found, C3).
    """

    def __init__(self, stream: BinaryIO, name: str, *, keep_going: bool = False) -> None:
        self.stream = stream
        self.name = name
        self.keep_going = keep_going
        self.failure: CliError | None = None

    def write(self, data: bytes) -> None:
        """Write ``data``, unless an earlier write failed.

        Large data goes in 64 KiB slices: one big ``write`` into a pipe whose reader has
        gone can return after a partial write with no error at all (seen on Linux with
        a 4 MB transcript), which would hide the broken pipe (C4).
        """
        for start in range(0, len(data), _READ_SIZE):
            if self.failure is not None:
                return
            self._guard(self.stream.write, data[start : start + _READ_SIZE])

    def flush(self) -> None:
        """Flush, reporting a failure as ``write`` does."""
        if self.failure is None:
            self._guard(lambda _: self.stream.flush(), b"")

    def _guard(self, call: Callable[[bytes], object], data: bytes) -> None:
        try:
            call(data)
        except BrokenPipeError:
            raise
        except OSError as exc:
            self.failure = _os_error(self.name, exc, reading=False)
            if not self.keep_going:
                raise self.failure from None


@contextmanager
def _progress(source: _Input, label: str, *, shown: bool = True) -> Iterator[Callable[[], None]]:
    """Yield a callable that updates a progress bar with ``source.seen`` (spec/cli.md C6).

    The bar appears only when stderr is a terminal and the input is large (its size is
    known and at least ``PROGRESS_MIN_BYTES``, or that much has been read from a stream);
    it is transient, so nothing of it stays in the terminal. Otherwise (or when not
    ``shown``: ``--quiet``) nothing is drawn.
    """
    if not shown or not sys.stderr or not sys.stderr.isatty():
        yield lambda: None
        return
    bar: list[object] = []

    def start() -> None:
        if missing("progress"):  # issue 28: no bar without rich, and one line saying why
            with suppress(OSError, ValueError):
                sys.stderr.write(f"envelope: no progress bar: {needs('a progress bar', 'progress')}\n")
            bar[:] = [None, None]
            return
        from rich.console import Console
        from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

        progress = Progress(
            TextColumn(f"{label} {source.name}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        progress.start()
        bar[:] = [progress, progress.add_task(label, total=source.size)]

    def update() -> None:
        if not bar and (source.seen >= PROGRESS_MIN_BYTES or (source.size or 0) >= PROGRESS_MIN_BYTES):
            start()
        if bar and bar[0] is not None:
            progress, task = bar
            progress.update(task, completed=source.seen)  # type: ignore[attr-defined]  # rich's Progress

    try:
        yield update
    finally:
        if bar and bar[0] is not None:
            bar[0].stop()  # type: ignore[attr-defined]  # rich's Progress


@contextmanager
def _destination(target: str | None) -> Iterator[_Output]:
    """The output of a command: standard output, or the file ``-o`` names, written all or nothing.

    A file is written as ``TARGET.partial`` beside it and renamed over ``TARGET`` only when
    the block ends without an exception, so a failed command leaves no half file and an
    existing ``TARGET`` untouched (spec/cli.md C3-e). A ``TARGET`` that exists and is not
    a regular file (a device, a pipe) is written in place. Failures name ``TARGET``.
    """
    if not target:
        out = _Output(_stdout(), STDOUT_NAME)
        yield out
        out.flush()
        return
    if os.path.isdir(target):
        raise _os_error(target, IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR)), reading=False)
    # A device or a pipe (/dev/full, /dev/stdout, a FIFO) is written in place: renaming a
    # file over it would replace the device itself.
    in_place = os.path.exists(target) and not os.path.isfile(target)
    # A symbolic link keeps pointing where it did: the file it names is the one replaced.
    final = os.path.realpath(target) if os.path.islink(target) else target
    path = target if in_place else f"{final}.partial"
    try:
        out = _Output(open(path, "wb"), target)  # noqa: SIM115  # closed below
    except OSError as exc:
        raise _os_error(target, exc, reading=False) from None
    try:
        yield out
        out.flush()
        out.stream.close()
    except BaseException:
        with suppress(OSError):  # closing flushes again, and would fail as the write did
            out.stream.close()
        if not in_place:
            os.unlink(path)
        raise
    if in_place:
        return
    try:
        os.replace(path, final)
    except OSError as exc:
        os.unlink(path)
        raise _os_error(target, exc, reading=False) from None


def iter_lines(stream: BinaryIO, format: Literal["auto", "sse", "jsonl"] = "auto") -> Iterator[RawLine]:
    """Read a recorded stream in 64 KiB pieces and yield its envelope lines."""
    reader = StreamReader(format)
    while chunk := stream.read(_READ_SIZE):
        yield from reader.feed(chunk)
    yield from reader.close()


def _reconstruct(args: argparse.Namespace) -> int:
    rebuilder = Reconstructor()
    reader = StreamReader(args.input_format, max_line_bytes=args.max_line_bytes)
    source = _Input(args.file)
    try:
        with _progress(source, "reconstructing") as tick:
            # The batch pair: the same lines, errors and positions as feed() per line, faster.
            while chunk := source.read():
                rebuilder.feed_many(reader.feed_batch(chunk))
                tick()
            if source.blank:  # spec/cli.md C5
                raise source.empty_error("reconstruct")
            rebuilder.feed_many(reader.close())
    finally:
        source.close()
    rebuilder.close()
    transcript = rebuilder.transcript()
    data = tree(transcript).to_dict() if args.tree else transcript.to_dict()
    with _destination(args.output) as out:
        out.write(msgspec.json.format(msgspec.json.encode(data), indent=2) + b"\n")
    return EXIT_OK


def _warnings_mode(args: argparse.Namespace) -> str:
    """``all``, ``summary`` or ``none`` (spec/cli.md C9-a): as asked, else by where stderr goes."""
    if args.quiet:
        return "none"
    if args.warnings:
        return str(args.warnings)
    return "summary" if sys.stderr is not None and sys.stderr.isatty() else "all"


class _WarningTally:
    """The warnings of one migration, counted per code (the spec section), in order of first sight.

    Memory: one entry per code, whatever the number of warnings.
    """

    def __init__(self) -> None:
        self.codes: dict[str, tuple[int, MigrationWarning]] = {}
        self.total = 0

    def add(self, warning: MigrationWarning) -> None:
        """Count one warning."""
        self.total += 1
        code = warning.section or "-"
        count, first = self.codes.get(code, (0, warning))
        self.codes[code] = (count + 1, first)

    def lines(self, where: str) -> list[str]:
        """The summary: one line per code (its count and its first warning), then the total."""
        out = []
        for code, (count, first) in self.codes.items():
            label = f"spec §{code}" if code != "-" else "no spec section"
            text = f"{first.position}: {first.message}" if str(first.position) else first.message
            out.append(f"{where}: warning: {count} × {label}, the first at {text}")
        kinds = _plural(len(self.codes), "code")
        out.append(f"{where}: {_plural(self.total, 'warning')} ({kinds}); --warnings all prints each")
        return out


def _migrate(args: argparse.Namespace) -> int:
    source = _Input(args.file)
    recovered = 0
    mode = _warnings_mode(args)
    tally = _WarningTally()

    def warn(warning: MigrationWarning) -> None:
        nonlocal recovered
        recovered += warning.recovered
        if mode == "all":
            _Stderr.say(f"{source.name}: warning: {warning}")
        elif mode == "summary":  # spec/cli.md C9-a: counted, said once at the end
            tally.add(warning)

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
    try:
        with _destination(args.output) as out:

            def write(lines: list[bytes]) -> None:
                for line in lines:
                    out.write((DONE if line == DONE_LINE else frame(line)) if sse else line + b"\n")

            with _progress(source, "migrating", shown=not args.quiet) as tick:
                while chunk := source.read():
                    write(migrator.feed(chunk))
                    tick()
            if source.blank:  # spec/cli.md C5
                raise source.empty_error("migrate")
            write(migrator.close())
    finally:
        source.close()
        if tally.total:  # also when the migration stopped: what was seen before the error
            for line in tally.lines(source.name):
                _Stderr.say(line)
    return EXIT_FOUND if recovered else EXIT_OK


# --- bench: a thin shim over the benchmark engine ---------------------------------------


def _bench(args: argparse.Namespace) -> int:
    """``envelope bench``: the engine lives in the checkout's ``benchmarks/``, outside this
    package (issue 17 §1), and is imported only here, when the command runs."""
    root = Path(__file__).resolve().parents[2]
    if not (root / "benchmarks" / "command.py").is_file():
        raise CliError(
            "envelope bench",
            "the benchmarks are not part of the installed package",
            "run it from a clone of the repository, installed with pip install -e '.[bench]'",
        )
    if missing("bench"):  # issue 28: its peers, chart and status line are the 'bench' extra
        raise CliError("envelope bench", "the benchmark needs the 'bench' extra", "pip install -e '.[bench]'")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    import importlib

    command = importlib.import_module("benchmarks.command")
    return int(command.run(args))


# --- validate -----------------------------------------------------------------------------


def _validate_one(path: str, args: argparse.Namespace, emit: Callable[[str, Violation], None]) -> tuple[int, int]:
    """Validate one file, passing each violation to ``emit``; return (errors, warnings).

    Raises:
        CliError: the file cannot be opened or read, or it is empty (spec/cli.md C5).
    """
    checker = StreamValidator(
        args.input_format,
        max_bytes=args.max_bytes,
        profile=args.profile,
        max_line_bytes=args.max_line_bytes,
        continuation=args.continuation,
    )
    errors = warnings = 0
    source = _Input(path)
    try:
        with _progress(source, "validating") as tick:
            while True:
                chunk = source.read()
                if not chunk and source.blank:
                    raise source.empty_error("validate")
                found = checker.feed(chunk) if chunk else checker.close()
                for violation in found:
                    if violation.severity == "error":
                        errors += 1
                    else:
                        warnings += 1
                    emit(path, violation)
                if not chunk:
                    return errors, warnings
                tick()
    finally:
        source.close()


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _summary(errors: int, warnings: int, files: int, unusable: int) -> str:
    """``validate``'s last line: what was found, whatever happened to the report (C3-c).

    A file that could not be checked leads the line (C3-a): ``0 error(s) in 1 file`` for a
    file that was never read would look clean to a person and to a script.
    """
    counts = f"{errors} error(s), {warnings} warning(s)"
    if not unusable:
        return f"{counts} in {_plural(files, 'file')}"
    failed = f"could not check {unusable} of {_plural(files, 'file')}"
    if unusable == files:
        return f"{failed}: nothing was validated"
    return f"{failed}; {counts} in the {files - unusable} checked"


def _validate(args: argparse.Namespace) -> int:
    if args.explain:
        try:
            text = explain(args.explain)
        except KeyError:
            raise CliError(
                "envelope validate", f"no code {args.explain!r}", "the codes are listed in spec/validation.md"
            ) from None
        _stdout().write((text + "\n").encode())
        return 0
    if not args.files:
        raise CliError("envelope validate", "no file given", "name a recording, or - for standard input")
    out = _Output(_stdout(), STDOUT_NAME, keep_going=True)
    several = len(args.files) > 1
    as_json = args.format == "json"
    first = True

    def emit(path: str, violation: Violation) -> None:
        nonlocal first
        if as_json:
            item: dict[str, object] = violation.to_dict()
            if several:
                item = {"file": _shown(path), **item}
            out.write((b"" if first else b",\n") + b"    " + msgspec.json.encode(item))
            first = False
        else:
            advice = code_advice(violation.code, args.max_line_bytes)
            text = f"{_shown(path)}:{violation.line}:{violation.column}: {violation.code} {violation.message}{advice}\n"
            out.write(text.encode("utf-8", "backslashreplace"))

    if as_json:
        out.write(b'{"violations": [\n')
    errors = warnings = unusable = 0
    for path in args.files:
        try:
            e, w = _validate_one(path, args, emit)
        except CliError as exc:
            _Stderr.say(str(exc))
            unusable += 1
            continue
        errors += e
        warnings += w
    if as_json:
        out.write((b"" if first else b"\n") + b"]}\n")
    out.flush()
    if out.failure is not None:
        _Stderr.say(f"{out.failure} (the report is incomplete)")
    _Stderr.say(_summary(errors, warnings, len(args.files), unusable))
    if unusable or out.failure is not None:
        return EXIT_UNUSABLE
    if errors or (args.strict and warnings):
        return EXIT_FOUND
    return EXIT_OK


# --- the parser -----------------------------------------------------------------------------


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("envelope-stream")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Keep the descriptions' line breaks (examples are laid out by hand)."""


def _add_input_format(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input-format",
        choices=("auto", "sse", "jsonl"),
        default="auto",
        help="the input format (default: auto, detected from the first byte that is not whitespace)",
    )
    add_max_line_bytes(parser)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="envelope",
        formatter_class=_Formatter,
        description="Tools for the JSON envelope streaming protocol (spec/envelope-v1.md): rebuild, "
        "validate and\nconvert recorded streams, and benchmark the codec.",
        epilog="examples:\n"
        "  envelope reconstruct fixtures/golden/seed_thinking/input.sse\n"
        "  envelope validate --strict capture.sse\n"
        "  envelope migrate old-log.txt --format jsonl -o new-log.jsonl\n\n"
        "Exit status: 0 done, 1 violations found (validate) or input recovered (migrate --lenient),\n"
        "2 unusable input or arguments. Behaviour: spec/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_reconstruct(commands)
    _add_migrate(commands)
    _add_bench(commands)
    val = _add_validate(commands)
    from .check import add_check_command  # loads no HTTP client until a check runs

    add_check_command(commands)
    from .interop._cli import add_interop_commands  # convert; validate --from agui|vercel (spec/interop.md §6)

    add_interop_commands(commands, val)
    _add_openai_sources(commands)  # convert --from openai-chat|openai-responses (spec/openai-adapter.md O10)
    return parser


def _add_openai_sources(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the two OpenAI captures to ``envelope convert --from`` [O10-a]: to envelopes only."""
    from ._openai_convert import OPENAI_SOURCES

    conv = commands.choices["convert"]
    for action in conv._actions:
        if action.dest == "source" and action.choices is not None:
            action.choices = (*action.choices, *OPENAI_SOURCES)
            action.help = (action.help or "") + "; openai-chat, openai-responses: OpenAI captures (--to envelope)"
    plain = conv.get_default("handler")

    def handler(args: argparse.Namespace) -> int:
        return _convert_openai(args) if args.source in OPENAI_SOURCES else int(plain(args))

    conv.set_defaults(handler=handler)


def _convert_openai(args: argparse.Namespace) -> int:
    """``envelope convert --from openai-*``: a capture's SSE or JSON lines to an envelope stream [O10-a]."""
    from ._openai_convert import convert_records
    from .interop._cli import _Failed, _records, _writer

    shown = "<stdin>" if args.file == "-" else args.file
    if args.target != "envelope":
        what = f"--from {args.source} converts to envelopes only (--to envelope)"
        print(f"envelope convert: error: {what}", file=sys.stderr)
        return 2
    try:
        out: BinaryIO = sys.stdout.buffer if args.output is None else open(args.output, "wb")  # noqa: SIM115
    except OSError as exc:
        print(f"{args.output}: error: cannot write ({exc.strerror or exc})", file=sys.stderr)
        return 2
    write = _writer(out, args.output_format)
    try:
        for env, _line in convert_records(_records(args.file, "openai"), args.source):
            write(env)
        write(b"[DONE]")
    except _Failed as exc:
        print(exc, file=sys.stderr)
        return 2
    except EnvelopeError as exc:
        print(f"{shown}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        out.flush()
        if out is not sys.stdout.buffer:
            out.close()
    return 0


def _add_reconstruct(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``envelope reconstruct``: its arguments (spec/cli.md)."""
    rec = commands.add_parser(
        "reconstruct",
        formatter_class=_Formatter,
        help="rebuild a recorded stream and print its blocks as JSON",
        description="Rebuild a recorded stream (an SSE capture, or one JSON envelope per line) and print\n"
        'its transcript as JSON: {"done": bool, "agents": {agent: {"blocks": [...]}}}.\n'
        "Errors name the line and byte, and exit with status 2.",
        epilog="examples:\n"
        "  envelope reconstruct fixtures/golden/seed_tool_result_multimodal/input.sse\n"
        "  curl -sN https://example.test/stream | envelope reconstruct -\n"
        "  envelope reconstruct --tree capture.sse -o transcript.json",
    )
    rec.add_argument("file", metavar="FILE", help="the recording, or - for standard input")
    rec.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="write the transcript here, only on success (default: standard output)",
    )
    rec.add_argument(
        "--tree",
        action="store_true",
        help="nest each subagent under the tool_call that spawned it (spec §8.3.1; default: agents side by side)",
    )
    _add_input_format(rec)
    rec.set_defaults(handler=_reconstruct)


def _add_migrate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``envelope migrate``: its arguments (spec/cli.md, spec/legacy-xml.md)."""
    mig = commands.add_parser(
        "migrate",
        formatter_class=_Formatter,
        help="convert a legacy XML stream (raw SSE capture or tag text) to JSON envelopes",
        description="Convert a legacy XML tag stream to JSON envelopes (spec/legacy-xml.md). Writes SSE\n"
        "to standard output by default; errors and warnings (with line and byte offset) go to\n"
        "stderr: each warning, or on a terminal one line per warning code with its count (--warnings).\n"
        "Exit 0: converted; 1: converted, but --lenient recovered from broken input; 2: not converted.",
        epilog="examples:\n"
        "  envelope migrate fixtures/corpus/legacy_xml_sse_capture.txt --format jsonl -o capture.jsonl\n"
        "  printf '<content-block-text>hi</content-block-text>' | envelope migrate - --agent UUID\n"
        "  envelope migrate big-log.txt --warnings summary -o big-log.sse",
    )
    mig.add_argument("file", metavar="FILE", help="the legacy stream, or - for standard input")
    mig.add_argument("--format", choices=("sse", "jsonl"), default="sse", help="output framing (default: sse)")
    mig.add_argument("--agent", metavar="UUID", help="the agent, for a log without meta_init (default: from meta_init)")
    mig.add_argument("-o", "--output", metavar="PATH", help="write here, only on success (default: standard output)")
    mig.add_argument(
        "--input",
        choices=("auto", "raw-sse", "tags"),
        default="auto",
        help="raw SSE capture of the old server, or decoded tag text (default: auto, detected)",
    )
    mig.add_argument(
        "--era", choices=("auto", "early", "later"), default="auto", help="escaping era (default: auto, detected)"
    )
    mig.add_argument(
        "--keep-labels",
        action="store_true",
        help="keep older server-tool labels (tool_call/tool_result) instead of mapping them (default: map)",
    )
    mig.add_argument(
        "--lenient",
        action="store_true",
        help="turn recoverable errors into warnings, keeping the content (default: stop at the first)",
    )
    mig.add_argument(
        "--max-bytes",
        type=_positive,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"the bound on each line in bytes (default: {DEFAULT_MAX_BYTES})",
    )
    _add_migrate_output(mig)
    mig.set_defaults(handler=_migrate)


def _add_migrate_output(mig: argparse.ArgumentParser) -> None:
    """``envelope migrate``'s warnings: each, a summary, none, or quiet (spec/cli.md C6)."""
    loud = mig.add_mutually_exclusive_group()
    loud.add_argument(
        "--warnings",
        choices=("all", "summary", "none"),
        help="each warning as it comes, one line per warning code with its count at the end, or none "
        "(default: summary when stderr is a terminal, all otherwise)",
    )
    loud.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no warnings and no progress bar; errors are still shown (default: off)",
    )


def _add_bench(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``envelope bench``: its arguments; the engine is imported only when it runs."""
    stages = "\n".join(f"  {key:<27} {about}" for key, about in BENCH_STAGES)
    bench = commands.add_parser(
        "bench",
        formatter_class=_Formatter,
        help="compare speed and memory with the stdlib baseline, peers and msgspec",
        description="Compare the codec's speed and memory with a stdlib baseline, peers and the practical\n"
        "limits; print the table, check the targets, and write DIR/bench.md and DIR/bench.png.\n"
        "Each stage runs in a fresh process; in a stage every round runs every candidate once, and\n"
        "each target is the median of the per-round CPU-time ratios, its spread printed beside it\n"
        "(a spread across the goal is reported as too noisy, neither met nor missed).\n"
        "Needs the checkout's benchmarks/ and the bench extra (pip install -e '.[bench]').\n\n"
        f"stages (--stage KEY):\n{stages}",
        epilog="examples:\n"
        "  envelope bench                        # every stage, 100 MiB, 5 rounds (several minutes)\n"
        "  envelope bench --size-mb 10 --stage read --stage validate\n"
        "  envelope bench --stage emit_small --stage emit_10m_escape --rounds 11   # the emitter's targets",
    )
    bench.add_argument("--size-mb", type=float, default=100.0, help="read stream size in MiB (default: 100)")
    bench.add_argument(
        "--rounds", type=int, default=5, help="rounds: timed passes per candidate, alternated (default: 5)"
    )
    bench.add_argument(
        "--out", default="bench-out", metavar="DIR", help="where to write bench.md, bench.png (default: bench-out)"
    )
    bench.add_argument("--no-memory", action="store_true", help="skip the peak memory passes (default: measure)")
    bench.add_argument(
        "--stage", action="append", metavar="KEY", help="run only this stage (repeatable; default: all, listed above)"
    )
    bench.add_argument(
        "--legacy-capture",
        metavar="PATH",
        help="the legacy XML capture the migrate stage repeats "
        "(default: fixtures/corpus/legacy_xml_sse_capture.txt of the checkout)",
    )
    bench.add_argument(
        "--in-process",
        action="store_true",
        help="run every stage in this process, one after another (default: each in a fresh process, "
        "so no stage's figures depend on the stages before it)",
    )
    bench.set_defaults(handler=_bench)


def _add_validate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """``envelope validate``: its arguments; the parser, for ``--from`` (spec/interop.md §6)."""
    val = commands.add_parser(
        "validate",
        formatter_class=_Formatter,
        help="check recorded streams against the protocol",
        description="Check recorded streams (SSE captures or JSON lines) against the protocol and print\n"
        "each violation as path:line:col: CODE message (codes: spec/validation.md), then a\n"
        "summary on stderr. Exit status: 0 valid (warnings allowed unless --strict), 1 violations,\n"
        "2 unusable input or arguments.",
        epilog="examples:\n"
        "  envelope validate fixtures/golden/seed_thinking/input.sse\n"
        "  envelope validate --strict --format json recording.jsonl other.sse",
    )
    val.add_argument("files", nargs="*", metavar="FILE", help="recordings, or - for standard input")
    val.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help='output: one line per violation (default: text), or one JSON object {"violations": [...]} '
        "(spec/cli.md C7)",
    )
    val.add_argument(
        "--max-bytes",
        type=_positive,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"the bound on one envelope line in bytes (default: {DEFAULT_MAX_BYTES})",
    )
    val.add_argument("--strict", action="store_true", help="treat warnings as errors, exit 1 (default: off)")
    val.add_argument(
        "--profile",
        choices=("default", "seed"),
        default="default",
        help="the producer's profile (spec §10): seed sends control envelopes whole, exempt from the bound "
        "(default: default)",
    )
    val.add_argument(
        "--continuation",
        action="store_true",
        help='the recording resumes a stream after a Last-Event-ID (as \'envelope check -H "Last-Event-ID: ID" '
        "--save FILE' records it): agents and blocks may have begun before its first line "
        "(default: off, the recording holds each response from its start)",
    )
    val.add_argument(
        "--explain", metavar="CODE", help="print what a code means (e.g. E107) and exit (default: validate files)"
    )
    _add_input_format(val)
    val.set_defaults(handler=_validate)
    return val


def _library_error(args: argparse.Namespace, exc: EnvelopeError) -> CliError:
    where = _shown(getattr(args, "file", None) or "-") if args.command != "bench" else "envelope bench"
    advice = _SECTION_ADVICE.get(getattr(exc, "section", None) or "", "")
    if "longer than max_line_bytes=" in exc.message and hasattr(args, "max_line_bytes"):
        # the reader's cap (spec §2.3): the library's message names its parameter, not the flag (C2-b)
        advice = f"give one envelope per line, or raise the cap with --max-line-bytes N (now {args.max_line_bytes})"
    return CliError(where, str(exc), advice)


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null, so the interpreter's last flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, AttributeError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (spec/cli.md C1).

    Args:
        argv: the arguments after the program name (default: ``sys.argv[1:]``).

    Returns:
        0 done; 1 violations found (``validate``) or input recovered (``migrate
        --lenient``); 2 unusable input, output or arguments; 141 the reader of the
        output went away (a broken pipe); 130 interrupted.
    """
    args = _parser().parse_args(argv)
    _Stderr.failed = False  # per run: main() may be called more than once in a process
    try:
        status: int = args.handler(args)
    except BrokenPipeError:  # spec/cli.md C4: the reader stopped reading; not an error
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except CliError as exc:
        _Stderr.say(str(exc))
        return EXIT_UNUSABLE
    except EnvelopeError as exc:
        _Stderr.say(str(_library_error(args, exc)))
        return EXIT_UNUSABLE
    except OSError as exc:  # anything the handlers did not name: the file the system names
        where = exc.filename if isinstance(exc.filename, str) else f"envelope {args.command}"
        _Stderr.say(str(_os_error(where, exc, reading=False)))
        return EXIT_UNUSABLE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    # spec/cli.md C3-c: a message that could not be written is an output that failed.
    return EXIT_UNUSABLE if _Stderr.failed else status
