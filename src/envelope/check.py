"""``envelope check URL``: validate a live server's stream as it arrives (``spec/check.md``).

Owns: the I/O shell around ``_check.ResponseCheck``: the HTTP client (``httpx2``, the
``check`` extra; this is the only module of the package that imports it, and only when
a check runs), the clock, ``--save``, printing, the
frontend-tool round trip (``--follow-frontend-tools``) and the exit status; and
``add_check_command``, which puts the ``check`` subcommand into the ``envelope``
command line. ``python -m envelope.check URL ...`` runs it alone.

Does not own: any judgement (``_check`` and ``_validator`` judge; this module only
reports the bytes and the times it saw), the rest of the command line (``cli``).
``import envelope`` does not import this module.

Exit status: 0 every response valid (warnings allowed unless ``--strict``); 1 some
error (or warning with ``--strict``); 2 unusable: bad arguments, no connection, a
non-2xx status or a timeout (one message, no traceback).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

import msgspec

from ._check import DEFAULT_GAP_SECONDS, ERROR_BODY_BYTES, CheckSummary, PendingTools, ResponseCheck
from ._cli_shared import add_max_line_bytes, code_advice, discard
from ._extras import missing, needs
from ._limits import DEFAULT_MAX_BYTES

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import httpx2

    from ._validator import Violation

__all__ = ["add_check_command", "main", "run"]

#: Default wait, in seconds, for the connection, the response head and each next piece of body.
DEFAULT_TIMEOUT: Final = 60.0

#: Most responses one run follows (the first and its resumptions): a server that pauses
#: forever must not keep the check going forever.
MAX_RESPONSES: Final = 32

#: Path of the resume endpoint on the checked URL's origin (issue 15, spec server §1).
DEFAULT_RESUME_PATH: Final = "/agent/tool_results"

#: The answer given to a frontend tool with no ``--answer`` entry: a plain "ok", which
#: the reference agent's scripted model reads as a yes.
DEFAULT_ANSWER: Final = "ok"


class UsageError(Exception):
    """An argument the check cannot use (exit 2); the message says which and why."""


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", metavar="URL", help="the SSE endpoint, e.g. http://127.0.0.1:8000/agent/run")
    parser.add_argument(
        "--data",
        metavar="JSON",
        help="send this JSON body with POST (or @FILE to read it from a file) (default: none, a GET)",
    )
    parser.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="add a request header (repeatable), e.g. -H 'Authorization: Bearer TOKEN' (default: none; "
        "Accept: text/event-stream and Accept-Encoding: identity are sent unless given)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"seconds to wait for the connection, the headers and each next piece of body "
        f"(default: {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--max-gap",
        type=_positive_float,
        default=DEFAULT_GAP_SECONDS,
        metavar="S",
        help=f"warn (W208) on a silence longer than this without an event or keep-alive "
        f"(default: {DEFAULT_GAP_SECONDS:g})",
    )
    parser.add_argument(
        "--save", metavar="FILE", help="record the body bytes exactly as received (default: not recorded)"
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help='output: one line per diagnostic, or one JSON object {"violations": [...], "responses": [...]} '
        "(default: text)",
    )
    parser.add_argument(
        "--max-bytes",
        type=_positive_int,
        default=DEFAULT_MAX_BYTES,
        metavar="N",
        help=f"the bound on one envelope line in bytes (default: {DEFAULT_MAX_BYTES})",
    )
    add_max_line_bytes(parser)
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors, exit 1 (default: off)")
    _add_frontend_arguments(parser)


def _add_frontend_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that answer a pause on frontend tools and check the continuation."""
    parser.add_argument(
        "--follow-frontend-tools",
        action="store_true",
        help="when a response pauses on awaiting_frontend_tools, post answers to the resume "
        "endpoint and check the continuation too (default: off, stop at the pause)",
    )
    parser.add_argument(
        "--resume-url",
        metavar="URL",
        help=f"the resume endpoint (default: {DEFAULT_RESUME_PATH} on the URL's origin)",
    )
    parser.add_argument(
        "--answer",
        metavar="JSON",
        help="answers to frontend tools: an object from tool_use_id or tool name to the result "
        'content (a string or content blocks, or {"content": ..., "is_error": true}), or @FILE '
        f"(default: {DEFAULT_ANSWER!r} for each)",
    )


def add_check_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``check`` on the ``envelope`` command line's subcommands.

    The handler is set as ``handler`` (``args.handler(args) -> int``), as the other
    subcommands of ``envelope.cli`` are dispatched. It imports the HTTP client only
    when it runs.

    Args:
        subparsers: the object ``ArgumentParser.add_subparsers()`` returned.
    """
    parser = subparsers.add_parser(
        "check",
        help="validate a live server's SSE stream as it arrives",
        description="Request URL (GET, or POST with --data) and check the SSE response as it "
        "streams: every envelope rule of 'envelope validate' and the transport rules of "
        "spec/check.md. Prints each diagnostic as URL:line:col: CODE message, then a summary "
        "on stderr. Exit status: 0 valid, 1 violations, 2 unusable (bad arguments, no "
        "connection, a non-2xx status, a timeout).",
        epilog="examples:\n"
        '  envelope check http://127.0.0.1:8000/agent/run --data \'{"prompt": "What is 5 + (10 * 2)?"}\'\n'
        "  envelope check https://example.test/stream -H 'Authorization: Bearer T' --save run.sse",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(handler=run)


def _load(text: str, what: str) -> object:
    """``text`` as JSON, or the JSON of the file ``@PATH`` names."""
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageError(f"{what}: cannot read {text[1:]}: {reason}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except RecursionError:  # the reader's own limit, near 1,000 levels: an error, never a traceback
        raise UsageError(f"{what} nests arrays and objects too deeply to read") from None


def _headers(items: Sequence[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in items:
        name, colon, value = item.partition(":")
        if not colon or not name.strip() or name != name.strip() or any(c in name for c in " \t\r\n"):
            raise UsageError(f"-H {item!r}: expected 'Name: value'")
        if "\r" in value or "\n" in value:
            raise UsageError(f"-H {item!r}: a header value cannot hold a line break")
        out.append((name, value.strip()))
    return out


class _Output:
    """Prints diagnostics as they come (text or streamed JSON) and the summaries at the end.

    A stream that cannot be written (a full disk) is remembered, not raised: the check
    goes on to the end (the capture of ``--save`` stays whole), and ``run`` reports the
    failure and exits 2 (spec/cli.md C3-c, check §5-a). A broken pipe still propagates
    (spec/cli.md C4).
    """

    def __init__(self, as_json: bool, follow: bool, out: IO[str], err: IO[str], max_line_bytes: int) -> None:
        self.as_json = as_json
        self.max_line_bytes = max_line_bytes
        self.follow = follow
        self.out = out
        self.err = err
        self.first = True
        #: The streams that failed: ``(name, the system's reason, errno)``, in order.
        self.failures: list[tuple[str, str, int | None]] = []
        if as_json:
            self._put(out, '{"violations": [\n')

    def _put(self, stream: IO[str], text: str) -> None:
        name = "<stdout>" if stream is self.out else "<stderr>"
        if any(failed == name for failed, _, _ in self.failures):
            return
        try:
            stream.write(text)
            stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            self.failures.append((name, exc.strerror or str(exc), exc.errno))
            discard(stream)
        except (AttributeError, ValueError):  # closed: started with `2>&-` (None), or closed since
            self.failures.append((name, "the stream is closed", None))

    def error(self, text: str) -> None:
        """One error line on stderr, when stderr can still be written."""
        self._put(self.err, text + "\n")

    def diagnostic(self, url: str, index: int, v: Violation) -> None:
        if self.as_json:
            item: dict[str, object] = v.to_dict()
            if self.follow:
                item = {"response": index, "url": url, **item}
            self._put(self.out, ("" if self.first else ",\n") + "    " + msgspec.json.encode(item).decode())
            self.first = False
        else:
            advice = code_advice(v.code, self.max_line_bytes)
            self._put(self.out, f"{url}:{v.line}:{v.column}: {v.code} {v.message}{advice}\n")

    def finish(self, summaries: list[CheckSummary]) -> None:
        if self.as_json:
            items = ",\n".join("    " + msgspec.json.encode(s.to_dict()).decode() for s in summaries)
            self._put(self.out, ("" if self.first else "\n") + '], "responses": [\n' + items + "\n]}\n")
        text = "".join(_render(s) for s in summaries)
        errors = sum(s.errors for s in summaries)
        warnings = sum(s.warnings for s in summaries)
        n = len(summaries)
        text += f"{errors} error(s), {warnings} warning(s) in {n} response{'' if n == 1 else 's'}\n"
        self._put(self.err, text)
        for name, reason, errno in self.failures:
            advice = "; free some space or write somewhere else" if errno == 28 else ""
            self.error(f"{name}: error: {reason}{advice} (the report is incomplete)")


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} s"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _render(s: CheckSummary) -> str:
    """The human summary of one response (stderr)."""
    status = "no response" if s.status is None else f"HTTP {s.status}, {s.content_type or 'no Content-Type'}"
    rate = "-" if s.lines_per_second is None else f"{s.lines_per_second:,.0f} lines/s"
    where = f"before line {s.longest_gap_line}" if s.longest_gap_line else "before the end"
    verdict = "unusable" if s.unusable else ("valid" if not s.errors else "invalid")
    ending = "[DONE]" if s.done else "no [DONE]"
    if s.continuation:
        ending += ", a continuation (Last-Event-ID)"
        if s.status == 204:
            ending = "nothing after Last-Event-ID: the stream had ended (HTTP 204)"
    return (
        f"summary of {s.url} ({status})\n"
        f"  {_n(s.lines, 'envelope line')}, {_n(s.agents, 'agent')}, {_n(s.blocks, 'block')}, {_n(s.bytes, 'byte')}, "
        f"{_n(s.comments, 'keep-alive comment')}, {_n(s.ids, 'event id')}, {ending}"
        f"{', paused on awaiting_frontend_tools' if s.paused else ''}\n"
        f"  {_n(s.errors_sent, 'error envelope')}, {_n(s.statuses, 'status signal')}\n"
        f"  time to first byte {_seconds(s.time_to_first_byte)}, to [DONE] {_seconds(s.time_to_done)}, "
        f"{rate}, longest gap {s.longest_gap:.3f} s ({where})\n"
        f"  {s.errors} error(s), {s.warnings} warning(s): {verdict}\n"
    )


def _resume_body(pending: PendingTools, answers: object) -> dict[str, object]:
    """The resume request (issue 15): one result per pending call, from ``--answer`` or the default."""
    table = answers if isinstance(answers, dict) else {}
    results: list[dict[str, object]] = []
    for tool_use_id, name in pending.calls:
        answer = table.get(tool_use_id, table.get(name, DEFAULT_ANSWER))
        result: dict[str, object] = {"tool_use_id": tool_use_id, "content": answer}
        if isinstance(answer, dict) and "content" in answer:
            # {"content": ..., "is_error": true}: an answer that reports the tool failed.
            result = {"tool_use_id": tool_use_id, **answer}
        results.append(result)
    return {"agent_uuid": pending.agent, "tool_results": results}


def run(args: argparse.Namespace, *, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Run ``envelope check`` with parsed arguments; return the exit status.

    Args:
        args: the namespace of ``add_check_command``'s parser.
        out: where diagnostics go (default: standard output).
        err: where the summary and errors go (default: standard error).
    """
    if out is None and sys.stdout is None:  # spec/cli.md C3-b: started with `>&-`
        with contextlib.suppress(OSError, AttributeError, ValueError):
            sys.stderr.write("<stdout>: error: standard output is closed; redirect it to a file\n")
        return 2
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        return _run(args, out, err)
    except UsageError as exc:
        with contextlib.suppress(OSError, AttributeError, ValueError):  # no stderr: the status still says it
            err.write(f"envelope check: error: {exc}\n")
            err.flush()
        return 2


def _run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    if missing("check"):  # issue 28: the codec installs alone; the HTTP client is the 'check' extra
        raise UsageError(needs("checking a live server", "check"))
    import httpx2  # only here: `import envelope` and the other subcommands never load a client

    headers = _headers(args.header)
    body = None if args.data is None else _load(args.data, "--data")
    answers = None if args.answer is None else _load(args.answer, "--answer")
    if answers is not None and not isinstance(answers, dict):
        raise UsageError("--answer must be a JSON object from tool_use_id or tool name to content")
    try:
        url = httpx2.URL(args.url)
        resume_url = httpx2.URL(args.resume_url) if args.resume_url else url.copy_with(path=DEFAULT_RESUME_PATH)
    except httpx2.InvalidURL as exc:
        raise UsageError(f"not a URL: {exc}") from None
    for shown in (url, resume_url):
        if shown.scheme not in ("http", "https") or not shown.host:
            raise UsageError(f"{str(shown)!r} is not an http or https URL")
    given = {k.lower() for k, _ in headers}
    if "accept" not in given:
        headers.append(("Accept", "text/event-stream"))  # as EventSource sends it
    if "accept-encoding" not in given:
        headers.append(("Accept-Encoding", "identity"))  # spec check §3.2-a: the bytes as sent
    save = None
    if args.save:
        try:
            save = open(args.save, "wb")  # noqa: SIM115  # closed in the finally below
        except OSError as exc:
            raise UsageError(f"--save: cannot write {args.save}: {exc.strerror or exc}") from None
    printer = _Output(args.format == "json", args.follow_frontend_tools, out, err, args.max_line_bytes)
    summaries: list[CheckSummary] = []
    try:
        with httpx2.Client(timeout=httpx2.Timeout(args.timeout), follow_redirects=False) as client:
            target = url
            while True:
                check = _one(client, target, headers, body, args, save, printer, len(summaries))
                summaries.append(check.summary)
                pending = check.pending
                if not (args.follow_frontend_tools and pending and not check.summary.unusable):
                    break
                if len(summaries) >= MAX_RESPONSES:
                    printer.error(f"envelope check: stopped after {MAX_RESPONSES} responses, the run still pausing")
                    break
                # spec check §4-a [C4-a]: the answers go to the resume endpoint; its response is checked too.
                target, body = resume_url, _resume_body(pending, answers)
    finally:
        if save is not None:
            save.close()
    printer.finish(summaries)
    # spec check §5-a [C5-a]: unusable (or an output not written) before violations, violations before warnings.
    if printer.failures or any(s.unusable for s in summaries):
        return 2
    if any(s.errors for s in summaries) or (args.strict and any(s.warnings for s in summaries)):
        return 1
    return 0


def _one(
    client: httpx2.Client,
    url: httpx2.URL,
    headers: list[tuple[str, str]],
    body: object,
    args: argparse.Namespace,
    save: IO[bytes] | None,
    printer: _Output,
    index: int,
) -> ResponseCheck:
    """Request one response (POST when there is a body, else GET) and check it as it streams."""
    import httpx2

    shown = str(url)
    # spec check §3.3-a [C3.3-a]: a request with Last-Event-ID asks for what follows that
    # event, so its response starts mid-stream (only the first request: a resume answer
    # starts a response of its own, spec §8.4).
    resumed = index == 0 and any(k.lower() == "last-event-id" and v for k, v in headers)
    check = ResponseCheck(
        shown,
        max_bytes=args.max_bytes,
        gap_seconds=args.max_gap,
        max_line_bytes=args.max_line_bytes,
        continuation=resumed,
    )
    send = list(headers)
    content = None
    if body is not None:
        content = json.dumps(body).encode()
        if not any(k.lower() == "content-type" for k, _ in send):
            send.append(("Content-Type", "application/json"))
    start = time.monotonic()

    def now() -> float:
        return time.monotonic() - start

    def report(found: list[Violation]) -> None:
        for v in found:
            printer.diagnostic(shown, index, v)

    method = "GET" if body is None else "POST"
    try:
        with client.stream(method, url, headers=send, content=content) as response:
            refused = not 200 <= response.status_code < 300
            snippet = _first_bytes(response) if refused else b""
            items = response.headers.multi_items()
            report(check.head(response.status_code, response.reason_phrase, items, now(), snippet))
            if not check.wants_body:
                report(check.close(now()))
                return check
            timed_out = _read_body(response, check, save, now, report, args.timeout)
            report(check.close(now(), timed_out=timed_out))
    except httpx2.TimeoutException:
        # Before the head: the connection or the headers did not come in time.
        report(check.fail("timeout", f"no response within {args.timeout:g} s", now()))
    except httpx2.TransportError as exc:
        report(check.fail("connect", f"request failed: {_reason(exc)}", now()))
    return check


def _reason(exc: Exception) -> str:
    """The most specific message of an HTTP client error (the OS's, when it gives one)."""
    inner: BaseException | None = exc
    while inner is not None:
        if isinstance(inner, OSError) and inner.strerror:
            return inner.strerror
        inner = inner.__cause__ or inner.__context__
    return str(exc) or type(exc).__name__


def _first_bytes(response: httpx2.Response) -> bytes:
    """Up to ``ERROR_BODY_BYTES`` of a refusal's body, for its message; nothing on a read error."""
    import httpx2

    got = b""
    try:
        for chunk in response.iter_bytes():
            got += chunk
            if len(got) >= ERROR_BODY_BYTES:
                break
    except httpx2.HTTPError:
        pass
    return got[:ERROR_BODY_BYTES]


def _read_body(
    response: httpx2.Response,
    check: ResponseCheck,
    save: IO[bytes] | None,
    now: Callable[[], float],
    report: Callable[[list[Violation]], None],
    timeout: float,
) -> float | None:
    """Feed the body to ``check`` as it arrives; return the timeout if it stopped coming, else ``None``."""
    import httpx2

    try:
        # The body as a browser's reader gets it: content coding undone (spec check §3.2).
        for chunk in response.iter_bytes():
            at = now()
            if save is not None:  # spec check §3.2-a [C3.2-a]: the bytes as received, before any judgement
                save.write(chunk)
                save.flush()
            report(check.feed(chunk, at))
    except httpx2.TimeoutException:
        return timeout
    except httpx2.TransportError:
        # A connection reset, or a chunked body cut short: the stream was dropped; close()
        # says how it ended (E209; E110 from the validator when inside a line or event).
        return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``envelope check`` alone (``python -m envelope.check URL ...``); return the exit status."""
    parser = argparse.ArgumentParser(
        prog="envelope check", description="Validate a live server's SSE stream (spec/check.md)."
    )
    _add_arguments(parser)
    try:
        return run(parser.parse_args(argv))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader of the output went away (`... | head -1`): not an error
        # Later writes (the interpreter's flush at exit) would fail again: send them nowhere.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":  # pragma: no cover  # run in a subprocess by tests/check (coverage does not follow it)
    sys.exit(main())
