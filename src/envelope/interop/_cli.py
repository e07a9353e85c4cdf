"""``envelope convert`` and ``envelope validate --from agui|vercel`` (spec/interop.md §6).

Owns: reading a recording of any of the three dialects (SSE or JSON lines, in chunks, so
memory stays bounded by the converters' open blocks), chaining the converters, writing
the output as it is produced, and reporting errors as ``FILE:LINE: error: CODE what``
with the line of the *original* file.
Does not own: the rest of the command line (``envelope.cli``, which registers these
commands with two lines and keeps its exit statuses, spec/cli.md C1).
"""

from __future__ import annotations

import argparse
import sys
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from envelope._structs import RawLine

__all__ = ["add_interop_commands"]

DIALECTS = ("envelope", "agui", "vercel")
_CHUNK = 1 << 16
EXIT_OK, EXIT_FOUND, EXIT_UNUSABLE = 0, 1, 2


class _Failed(Exception):
    """An error already formatted as ``WHERE: error: WHAT``."""


def add_interop_commands(commands: Any, validate: argparse.ArgumentParser) -> None:
    """Register ``convert`` and ``validate --from`` on the ``envelope`` parser (called by ``envelope.cli``)."""
    conv = commands.add_parser(
        "convert",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="convert a recording between envelope, AG-UI and Vercel UI message streams",
        description="Convert a recorded stream between the envelope protocol, AG-UI events and the AI SDK's\n"
        "UI message stream (spec/interop.md), streaming: output is written as input is read.\n"
        "Input: SSE or JSON lines (detected). Errors: FILE:LINE: error: CODE message, exit 2.",
        epilog="examples:\n"
        "  envelope convert --from envelope --to agui fixtures/golden/seed_thinking/input.sse\n"
        "  envelope convert --from vercel --to envelope --output-format jsonl chat.sse -o run.jsonl",
    )
    conv.add_argument("file", metavar="FILE", help="the recording, or - for standard input")
    conv.add_argument(
        "--from", dest="source", choices=DIALECTS, required=True, help="the input's dialect (required; no default)"
    )
    conv.add_argument(
        "--to", dest="target", choices=DIALECTS, required=True, help="the output's dialect (required; no default)"
    )
    conv.add_argument("--output-format", choices=("sse", "jsonl"), default="sse", help="output framing (default: sse)")
    conv.add_argument("-o", "--output", metavar="PATH", help="write here (default: standard output)")
    conv.set_defaults(handler=_convert)

    validate.add_argument(
        "--from",
        dest="dialect",
        choices=DIALECTS,
        default="envelope",
        help="the recording's dialect: agui or vercel recordings are converted and the envelopes judged, "
        "positions given in the original file (default: envelope)",
    )
    for action in validate._actions:  # --format agui|vercel: the spelling issue 27 asks for
        if action.dest == "format" and action.choices is not None:
            action.choices = (*action.choices, "agui", "vercel")
            action.help = (action.help or "") + "; agui or vercel: the same as --from"
    plain = validate.get_default("handler")

    def handler(args: argparse.Namespace) -> int:
        if args.format in ("agui", "vercel"):
            args.dialect, args.format = args.format, "text"
        if args.dialect == "envelope" or args.explain:
            return int(plain(args))
        return _validate(args)

    validate.set_defaults(handler=handler)


# --- reading ----------------------------------------------------------------------------


def _open(path: str) -> IO[bytes]:
    if path == "-":
        return sys.stdin.buffer
    try:
        return open(path, "rb")
    except OSError as exc:
        raise _Failed(f"{path}: error: cannot read ({exc.strerror or exc})") from None


def _records(path: str, dialect: str) -> Iterator[tuple[Any, int]]:
    """The input's records with their 1-based line: envelope lines (``RawLine``) or events' data (str)."""
    from envelope import DecodeError, SSEReader, StreamReader

    stream = _open(path)
    try:
        first = b""
        while not first.strip():
            more = stream.read(_CHUNK)
            if not more:
                break
            first += more
        if not first.strip():
            raise _Failed(f"{'<stdin>' if path == '-' else path}: error: the input is empty; give a recorded stream")
        lead = first.lstrip()[:1]
        sse = lead not in (b"{", b"[")
        env_reader = StreamReader("sse" if sse else "jsonl") if dialect == "envelope" else None
        sse_reader = SSEReader() if dialect != "envelope" and sse else None
        lines = _Lines() if dialect != "envelope" and not sse else None
        chunk = first
        while True:
            try:
                if env_reader is not None:
                    got: list[Any] = env_reader.feed(chunk) if chunk else env_reader.close()
                    yield from ((r, r.line) for r in got)
                elif sse_reader is not None:
                    events = sse_reader.feed(chunk) if chunk else sse_reader.close()
                    yield from ((e.data, e.line) for e in events)
                else:
                    assert lines is not None
                    yield from lines.feed(chunk) if chunk else lines.close()
            except DecodeError:
                raise
            if not chunk:
                return
            chunk = stream.read(_CHUNK)
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


class _Lines:
    """JSON lines of events, split in bounded memory."""

    def __init__(self) -> None:
        from envelope import DEFAULT_MAX_LINE_BYTES

        self.buf = b""
        self.line = 0
        self.cap = DEFAULT_MAX_LINE_BYTES

    def feed(self, chunk: bytes) -> list[tuple[str, int]]:
        from envelope import DecodeError, Position

        self.buf += chunk
        out: list[tuple[str, int]] = []
        *whole, self.buf = self.buf.split(b"\n")
        for raw in whole:
            self.line += 1
            if raw.strip():
                out.append((self._text(raw), self.line))
        if len(self.buf) > self.cap:
            raise DecodeError(f"line longer than {self.cap} bytes", position=Position(line=self.line + 1))
        return out

    def close(self) -> list[tuple[str, int]]:
        rest, self.buf = self.buf, b""
        self.line += 1
        return [(self._text(rest), self.line)] if rest.strip() else []

    def _text(self, raw: bytes) -> str:
        from envelope import DecodeError, Position

        try:
            return raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"invalid UTF-8 ({exc.reason})", position=Position(line=self.line)) from None


def _envelope_lines(path: str, dialect: str) -> Iterator[tuple[bytes, int]]:
    """Envelope lines, each with the line of the original record it came from."""
    from envelope import Position
    from envelope.interop import InteropError

    if dialect == "envelope":
        for record, line in _records(path, dialect):
            data = record.data
            yield (data.encode() if isinstance(data, str) else bytes(data)), line
        return
    conv: Any
    if dialect == "agui":
        from .agui import AguiToEnvelope

        conv = AguiToEnvelope()
    else:
        from .vercel import VercelToEnvelope

        conv = VercelToEnvelope()
    last = 0
    for record, line in _records(path, dialect):
        last = line
        try:
            out = conv.feed(record)
        except InteropError as exc:
            raise exc.at(Position(line=line)) from None
        for env in out:
            yield env, line
    try:
        out = conv.close()
    except InteropError as exc:
        raise exc.at(Position(line=last + 1)) from None
    for env in out:
        yield env, last + 1


# --- convert ------------------------------------------------------------------------------


def _convert(args: argparse.Namespace) -> int:
    from envelope import EnvelopeError, Position
    from envelope.interop import InteropError

    shown = "<stdin>" if args.file == "-" else args.file
    out: IO[bytes]
    if args.output is None:
        out = sys.stdout.buffer
    else:
        try:
            out = open(args.output, "wb")  # noqa: SIM115 - closed below
        except OSError as exc:
            print(f"{args.output}: error: cannot write ({exc.strerror or exc})", file=sys.stderr)
            return EXIT_UNUSABLE
    write = _writer(out, args.output_format)
    target: Any = None
    if args.target == "agui":
        from .agui import EnvelopeToAgui

        target = EnvelopeToAgui()
    elif args.target == "vercel":
        from .vercel import EnvelopeToVercel

        target = EnvelopeToVercel()
    try:
        last = 0
        for env, line in _envelope_lines(args.file, args.source):
            last = line
            if target is None:
                write(env)
                continue
            try:
                produced = target.feed(env)
            except InteropError as exc:
                raise _Failed(f"{shown}: error: {exc.at(Position(line=line))}") from None
            for item in produced:
                write(item)
        if target is not None:
            try:
                for item in target.close():
                    write(item)
            except InteropError as exc:
                raise _Failed(f"{shown}: error: {exc.at(Position(line=last + 1))}") from None
    except _Failed as exc:
        print(exc, file=sys.stderr)
        return EXIT_UNUSABLE
    except EnvelopeError as exc:
        print(f"{shown}: error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE
    finally:
        out.flush()
        if out is not sys.stdout.buffer:
            out.close()
    return EXIT_OK


def _writer(out: IO[bytes], framing: str) -> Callable[[Any], None]:
    import msgspec

    def write(item: Any) -> None:
        data = (
            item if isinstance(item, bytes) else item.encode() if isinstance(item, str) else msgspec.json.encode(item)
        )
        out.write(b"data: " + data + b"\n\n" if framing == "sse" else data + b"\n")

    return write


# --- validate --from ------------------------------------------------------------------------


def _validate(args: argparse.Namespace) -> int:
    from envelope import EnvelopeError, Validator
    from envelope._structs import RawLine
    from envelope.interop import InteropError

    if not args.files:
        print("envelope validate: error: no file given; name a recording, or - for standard input", file=sys.stderr)
        return EXIT_UNUSABLE
    errors = warnings = unusable = 0
    for path in args.files:
        shown = "<stdin>" if path == "-" else path
        checker = Validator(max_bytes=args.max_bytes, profile=args.profile)
        found: list[Any] = []
        try:
            for env, line in _envelope_lines(path, args.dialect):
                found += checker.feed(_raw(RawLine, env, line))
                errors, warnings = _report(shown, found, errors, warnings)
                found = []
            found += checker.close()
        except InteropError as exc:
            # the conversion stopped: what it refused is a finding about the recording
            print(f"{shown}:{exc.position.line}:1: {exc.code} {exc.message}")
            errors += 1
        except (_Failed, EnvelopeError) as exc:
            print(exc if isinstance(exc, _Failed) else f"{shown}: error: {exc}", file=sys.stderr)
            unusable += 1
        errors, warnings = _report(shown, found, errors, warnings)
    files = len(args.files)
    print(f"{errors} error(s), {warnings} warning(s) in {files} file{'' if files == 1 else 's'}", file=sys.stderr)
    if unusable:
        return EXIT_UNUSABLE
    if errors or (args.strict and warnings):
        return EXIT_FOUND
    return EXIT_OK


def _raw(cls: type[RawLine], data: bytes, line: int) -> RawLine:
    return cls(data=data.decode(), line=line, offset=0)


def _report(shown: str, found: list[Any], errors: int, warnings: int) -> tuple[int, int]:
    for v in found:
        if v.severity == "error":
            errors += 1
        else:
            warnings += 1
        print(f"{shown}:{v.line}:{v.column}: {v.code} {v.message}")
    return errors, warnings
