"""The ``envelope`` command line: the only module of the package that prints or opens files.

Subcommands:
    reconstruct FILE   rebuild a recorded stream (SSE capture or JSON lines, ``-`` for stdin)
                       and print its transcript as JSON.
    validate FILE...   check recorded streams against the protocol and print each
                       violation as ``path:line:col: CODE message`` (or JSON).

Exit status: 0 success (``validate``: no violations; warnings allowed unless
``--strict``); 1 ``validate`` found violations; 2 unusable input or arguments (the
error, with its position, goes to stderr).

argparse (the standard library) is the CLI framework: the codec keeps msgspec as its
only runtime dependency for encoding and decoding, and these subcommands need nothing
argparse lacks.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, BinaryIO, Literal

import msgspec

from ._decoder import RawLine, StreamReader
from ._errors import EnvelopeError
from ._limits import DEFAULT_MAX_BYTES
from ._reconstruct import Reconstructor
from ._validator import StreamValidator, Violation

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
    with _open_input(args.file) as stream:
        for raw in iter_lines(stream, args.input_format):
            rebuilder.feed(raw)
    rebuilder.close()
    out = msgspec.json.format(msgspec.json.encode(rebuilder.transcript().to_dict()), indent=2)
    sys.stdout.buffer.write(out + b"\n")
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
