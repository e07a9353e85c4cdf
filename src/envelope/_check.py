"""Judging a live SSE response: the sans-I/O core of ``envelope check`` (``spec/check.md``).

Owns: ``ResponseCheck``, which is given what an HTTP client saw of one response (the
status line and headers, then the body's byte chunks, each with the time it arrived)
and returns coded diagnostics as soon as they are known: the envelope findings of the
same ``StreamValidator`` that ``envelope validate`` runs, and the transport judgements of
``spec/check.md`` (status, ``Content-Type``, caching and proxy-buffering headers, ``id:``
presence, silences without keep-alive, how the stream ended). It also keeps the figures of
the summary (``CheckSummary``) and notices a pause on ``awaiting_frontend_tools``, so
that the shell can answer it (``PendingTools``). The transport codes live in
``CHECK_CODES``; ``spec/check.md`` has the same table with the reasons. The order of
``id:`` values is the validator's (``W118``, envelope-v1 §2.1-d), not judged twice.

Does not own: the network, clocks and files (``check``, the I/O shell, passes the times
in: nothing here reads a clock, opens a socket or a file, or imports an HTTP client),
the envelope rules themselves (``_validator``), printing (``check``).

Memory: the validator's (bounded, see ``_validator``), plus the current SSE line and
event data (at most ``max_line_bytes`` each, the reader's cap, spec §2.3), the last
``id:`` (at most ``MAX_ID_CHARS``), the set of agent ids seen, and the deltas of open
``awaiting_frontend_tools`` blocks (at most ``max_line_bytes`` per agent).
"""

from __future__ import annotations

import html
import math
import re
from typing import TYPE_CHECKING, Final, Literal

import msgspec

from ._decoder import DONE_DATA
from ._depth import too_deep
from ._limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINE_BYTES, MAX_NESTING_DEPTH
from ._quote import excerpt, quote
from ._validator import Severity, StreamValidator, Violation

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "CHECK_CODES",
    "DEFAULT_GAP_SECONDS",
    "ERROR_BODY_BYTES",
    "MAX_ID_CHARS",
    "CheckSummary",
    "PendingTools",
    "ResponseCheck",
    "seconds_over",
]

#: Every transport code: ``code -> (severity, spec section, one-line meaning)``. The
#: section is ``envelope-v1.md``'s where the rule rests on it, else ``check.md``'s
#: (written ``check §n``). ``spec/check.md`` has the same table; a test compares them.
CHECK_CODES: Final[dict[str, tuple[Severity, str, str]]] = {
    "E200": ("error", "check §2.1", "response status is not 2xx"),
    "E201": ("error", "check §2.1", "request failed before a response (connection, name, TLS, URL)"),
    "E202": ("error", "check §2.1", "timed out waiting for the server"),
    "E203": ("error", "2.1", "Content-Type is not text/event-stream"),
    "W204": ("warning", "2.1", "Cache-Control has neither no-cache nor no-store"),
    "W205": ("warning", "check §2.3", "X-Accel-Buffering: no is missing"),
    "W207": ("warning", "check §2.4", "event without an id after events with ids"),
    "W208": ("warning", "check §2.5", "silence longer than the keep-alive threshold"),
    "E209": ("error", "8.2", "connection closed before [DONE]"),
    "W210": ("warning", "8.2", "connection left open after [DONE]"),
}

#: Longest silence (no complete SSE line) before W208, in seconds (spec check §2.5-a).
#: Common proxies and load balancers close idle connections after 30-60 s. Servers
#: commonly send a keep-alive every 15 s (ours, spec server §4.2-a; sse-starlette's
#: default ping), so a silence measures 15 s plus scheduling delay: 15 would flag them
#: for milliseconds. 20 s spares them and still warns well before a proxy closes.
DEFAULT_GAP_SECONDS: Final = 20.0

#: Longest ``id:`` value kept (to name it in ``W207``).
MAX_ID_CHARS: Final = 1024

_DONE: Final = DONE_DATA.encode()
_CR: Final = 0x0D
_LF: Final = 0x0A


class _Head(msgspec.Struct, gc=False):
    """The fields of an envelope the summary and the pause detection read; others ignored."""

    type: str
    agent: str
    final: bool
    delta: str = ""


class _Call(msgspec.Struct, gc=False):
    """One pending frontend call of an ``awaiting_frontend_tools`` payload (spec §4.11)."""

    tool_use_id: str
    name: str = ""


_decode_head = msgspec.json.Decoder(_Head).decode
_decode_calls = msgspec.json.Decoder(list[_Call]).decode


class PendingTools(msgspec.Struct, frozen=True, kw_only=True):
    """A response that paused on ``awaiting_frontend_tools`` (spec §4.11, §8.1).

    Attributes:
        agent: the agent that paused (the ``agent_uuid`` a resume request names).
        calls: ``(tool_use_id, name)`` of each pending call, in payload order.
    """

    agent: str
    calls: tuple[tuple[str, str], ...]


class CheckSummary(msgspec.Struct, kw_only=True):
    """The figures of one checked response. Times are seconds from the request's start.

    Attributes:
        url: the URL requested.
        status: the HTTP status, or ``None`` when no response came.
        content_type: the ``Content-Type`` header as sent (``None`` if absent).
        bytes: body bytes received.
        lines: envelope lines (SSE events with data other than ``[DONE]``).
        agents: distinct ``agent`` values among those lines.
        blocks: blocks closed (lines with ``final: true``, images excepted: spec §7.3).
        errors_sent: of those, ``error`` blocks: failures the server reported (spec §4.13).
        statuses: of those, ``meta_status`` blocks: routine signals (spec §4.16; check [C5-b]).
        comments: SSE comment lines (keep-alives).
        ids: events that carried an ``id:`` field.
        done: whether ``[DONE]`` arrived.
        time_to_headers: when the status line and headers arrived.
        time_to_first_byte: when the first body byte arrived.
        time_to_done: when ``[DONE]`` arrived.
        time_total: when the response ended (closed, timed out, or stopped).
        lines_per_second: envelope lines over the time from the request to ``[DONE]`` (or the end).
        longest_gap: the longest silence, in seconds: no complete SSE line (event,
            comment or blank) between the headers, each line and the end.
        longest_gap_line: the line that ended that silence (0: the end of the response).
        errors: error diagnostics, envelope and transport.
        warnings: warning diagnostics.
        unusable: a status, connection or timeout failure (``envelope check`` exits 2).
        paused: the response ended on ``awaiting_frontend_tools``.
        continuation: the request carried ``Last-Event-ID`` (spec check §3.3): the response
            resumes a stream mid-way; with status 204 the stream had already ended.
    """

    url: str
    status: int | None = None
    content_type: str | None = None
    bytes: int = 0
    lines: int = 0
    agents: int = 0
    blocks: int = 0
    errors_sent: int = 0
    statuses: int = 0
    comments: int = 0
    ids: int = 0
    done: bool = False
    time_to_headers: float | None = None
    time_to_first_byte: float | None = None
    time_to_done: float | None = None
    time_total: float | None = None
    lines_per_second: float | None = None
    longest_gap: float = 0.0
    longest_gap_line: int = 0
    errors: int = 0
    warnings: int = 0
    unusable: bool = False
    paused: bool = False
    continuation: bool = False

    def to_dict(self) -> dict[str, object]:
        """The summary as plain JSON-ready values, field order kept."""
        return {f: getattr(self, f) for f in self.__struct_fields__}


def _diag(code: str, message: str, line: int = 1, offset: int = 0, column: int = 1) -> Violation:
    severity, section, _ = CHECK_CODES[code]
    return Violation(
        code=code,
        severity=severity,
        line=line,
        offset=offset,
        agent=None,
        type=None,
        message=message,
        section=section,
        column=column,
    )


#: Bytes of a refused body that ``E200`` reads for its excerpt (spec check §2.1-a).
ERROR_BODY_BYTES: Final = 4096

_TITLE: Final = re.compile(r"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)
_HIDDEN: Final = re.compile(r"<(script|style)\b.*?(</\1\s*>|$)|<!--.*?(-->|$)", re.IGNORECASE | re.DOTALL)
_TAG: Final = re.compile(r"<[^>]*>?")


def _body_excerpt(body: bytes, content_type: str | None) -> str:
    """What ``E200`` quotes of a refused body: one line of at most ``EXCERPT_CHARS`` characters.

    An HTML page (by its type, or a body that starts with ``<``) is shown by its
    ``<title>``, else by its text without markup, scripts or styles; any other body as
    its text. Whitespace runs become one space; ``quote`` escapes and bounds the rest.
    Empty when nothing is left.
    """
    text = body[:ERROR_BODY_BYTES].decode("utf-8", "replace")
    media = _media_type(content_type or "")
    if media in ("text/html", "application/xhtml+xml") or text.lstrip().startswith("<"):
        title = _TITLE.search(text)
        text = title.group(1) if title else _TAG.sub(" ", _HIDDEN.sub(" ", text))
        text = html.unescape(text)
    if not text.strip():
        return ""
    return excerpt(text)


def seconds_over(value: float, threshold: float) -> str:
    """``value`` (seconds, over ``threshold``) with the fewest decimals, 1 to 3, that show it over ``threshold``.

    spec check §2.5-a: a silence of 1.001 s over a threshold of 1 s reads ``1.001``, not
    ``1.0``. Past milliseconds the value is rounded up to the next one, so what is shown
    is never at or under the threshold ``{threshold:g}`` prints.
    """
    for decimals in (1, 2, 3):
        shown = f"{value:.{decimals}f}"
        if float(shown) > threshold:
            return shown
    return f"{math.ceil(value * 1000) / 1000:.3f}"


def _media_type(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


def _header(headers: Iterable[tuple[str, str]], name: str) -> str | None:
    """The values of header ``name`` joined with ``, `` (RFC 9110 §5.3), or ``None``."""
    found = [v for k, v in headers if k.lower() == name]
    return ", ".join(found) if found else None


class ResponseCheck:
    """Checks one SSE response as it arrives: ``head()``, then ``feed()`` per chunk, then ``close()``.

    Every method returns the diagnostics it reveals (``Violation`` objects: the envelope
    codes of ``_validator.CODES`` and the transport codes of ``CHECK_CODES``), so a
    caller can print them at once. Times are seconds from the request's start, as the
    caller measured them; nothing here reads a clock.

    Attributes:
        summary: the figures so far (final after ``close()``).
        pending: the pause to answer, when the response ended on ``awaiting_frontend_tools``.
        validator: the envelope validator the body goes to (SSE input, the bound given).
    """

    def __init__(
        self,
        url: str,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        gap_seconds: float = DEFAULT_GAP_SECONDS,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        continuation: bool = False,
    ) -> None:
        """Create the check of one response.

        Args:
            url: the URL requested (for the summary).
            max_bytes: the bound on one envelope line (spec §6.1), as ``envelope validate --max-bytes``.
            gap_seconds: the longest silence allowed before ``W208``.
            max_line_bytes: the cap on one SSE line and one event's data (spec §2.3).
            continuation: the request carried ``Last-Event-ID``: the response resumes a
                stream after that event, so it starts mid-stream (spec check §3.3).
        """
        self.summary: Final = CheckSummary(url=url, continuation=continuation)
        self.pending: PendingTools | None = None
        # spec check §3.1-a [C3.1-a]: the same validator as `envelope validate`, the input read as
        # SSE (it is a text/event-stream response, whatever its first byte). spec check §3.3-a
        # [C3.3-a]: a continuation is judged as one (validation.md [V2.1-e]), not as a whole stream.
        self.validator: Final = StreamValidator(
            "sse", max_bytes=max_bytes, max_line_bytes=max_line_bytes, continuation=continuation
        )
        self._gap = gap_seconds
        self._cap = max_line_bytes
        self._state: Literal["new", "body", "refused", "complete", "closed"] = "new"
        # The SSE line being read: its first bytes (up to the cap).
        self._partial = bytearray()
        self._skip_lf = False  # the last chunk ended in CR: an LF opening the next is its pair
        self._offset = 0  # input offset of the next byte
        self._line_no = 1  # number of the line starting at self._line_start
        self._line_start = 0
        # The SSE event being read (spec §2.3-b): its data lines and whether it set an id.
        self._data: list[bytes] = []
        self._data_len = 0
        self._event_line = 0  # 0: no field of the current event seen yet
        self._event_offset = 0
        self._event_id: str | None = None
        self._last_id: str | None = None
        self._missing_id_reported = False
        self._last_life = 0.0  # when the last complete line (or the headers) arrived
        self._agents: set[str] = set()
        self._awaiting: dict[str, list[str]] = {}  # agent -> deltas of its open awaiting block
        self._awaiting_size: dict[str, int] = {}

    # -- the head --------------------------------------------------------------------

    def head(
        self, status: int, reason: str, headers: Iterable[tuple[str, str]], at: float, body: bytes = b""
    ) -> list[Violation]:
        """Judge the status line and headers (spec check §2.1-§2.3).

        Args:
            status: the HTTP status code.
            reason: its reason phrase (may be empty).
            headers: the response headers as ``(name, value)`` pairs, in any case.
            at: when they arrived.
            body: for a non-2xx status, the first bytes of its body (shown in the message).

        Returns:
            The diagnostics. A non-2xx status (``E200``) ends the check: call ``close()``
            next, without feeding the body.

        Raises:
            RuntimeError: ``head()`` called twice, or after ``close()`` (a caller's bug).
        """
        if self._state != "new":
            raise RuntimeError("head() called twice or after close()")
        headers = list(headers)
        self._state = "body"
        self._last_life = at
        s = self.summary
        s.status = status
        s.time_to_headers = at
        s.content_type = _header(headers, "content-type")
        if status == 204 and s.continuation:
            # spec check §3.3-b [C3.3-b]: the id named the [DONE] event (server S2.3-c): nothing
            # follows it, and a browser's EventSource stops reconnecting. Complete, not a fault.
            self._state = "complete"
            return []
        if not 200 <= status < 300:
            # spec check §2.1-a [C2.1-a]: anything but 2xx is no stream at all.
            self._state = "refused"
            s.unusable = True
            shown = _body_excerpt(body, s.content_type)
            tail = f": {shown}" if shown else ""
            return self._count([_diag("E200", f"HTTP {status} {reason}".rstrip() + tail)])
        out: list[Violation] = []
        media = _media_type(s.content_type or "")
        if media != "text/event-stream":
            # spec check §2.2-a [C2.2-a]: EventSource fails the connection on any other type.
            shown = quote(s.content_type) if s.content_type is not None else "absent"
            out.append(_diag("E203", f"Content-Type is {shown}, not text/event-stream"))
        cache = _header(headers, "cache-control")
        tokens = {t.strip().split("=", 1)[0].lower() for t in (cache or "").split(",")}
        if not tokens & {"no-cache", "no-store"}:
            # spec check §2.3-a [C2.3-a]: a cache may hold the response back or serve it again.
            shown = quote(cache) if cache is not None else "absent"
            out.append(_diag("W204", f"Cache-Control is {shown}; a stream should say no-cache"))
        accel = _header(headers, "x-accel-buffering")
        if (accel or "").strip().lower() != "no":
            # spec check §2.3-b [C2.3-b]: a buffering proxy (nginx) holds lines back.
            shown = quote(accel) if accel is not None else "absent"
            out.append(_diag("W205", f"X-Accel-Buffering is {shown}; 'no' stops proxies buffering the stream"))
        return self._count(out)

    def fail(self, kind: Literal["connect", "timeout"], message: str, at: float) -> list[Violation]:
        """No response came: the request failed (``E201``) or timed out (``E202``), spec check §2.1-b.

        Args:
            kind: ``"connect"`` for a connection, name, TLS or protocol failure before the
                head; ``"timeout"`` when the server did not answer in time.
            message: what happened, in one sentence.
            at: when the caller gave up.

        Returns:
            The one diagnostic. The check is then closed.

        Raises:
            RuntimeError: ``fail()`` after ``head()`` (a caller's bug: a failure inside the
                body is ``close()``'s business).
        """
        if self._state != "new":
            raise RuntimeError(f"fail() in state {self._state}")
        self._state = "closed"
        # spec check §2.1-b [C2.1-b]: no response is unusable, never a traceback.
        self.summary.unusable = True
        self.summary.time_total = at
        return self._count([_diag("E201" if kind == "connect" else "E202", message)])

    @property
    def wants_body(self) -> bool:
        """``head()`` accepted the response: feed its body, then ``close()``. Otherwise
        (``E200``, or a 204 to a continuation) go straight to ``close()``."""
        return self._state == "body"

    # -- the body --------------------------------------------------------------------

    def feed(self, chunk: bytes, at: float) -> list[Violation]:
        """Consume body bytes that arrived at time ``at``; return the diagnostics they reveal.

        Raises:
            RuntimeError: ``feed()`` before ``head()`` or after ``close()`` (a caller's bug).
        """
        if self._state != "body":
            raise RuntimeError(f"feed() in state {self._state}")
        if not chunk:
            return []
        s = self.summary
        if s.time_to_first_byte is None:
            s.time_to_first_byte = at
        s.bytes += len(chunk)
        out = self.validator.feed(chunk)
        self._scan(chunk, at, out)
        return self._count(out)

    def close(self, at: float, *, timed_out: float | None = None) -> list[Violation]:
        """The response ended at ``at``: closed by the server, or given up after a silence.

        Args:
            at: when it ended.
            timed_out: ``None`` when the server closed the connection; else the silence,
                in seconds, after which the caller stopped waiting (``--timeout``).

        Returns:
            The last diagnostics: the validator's end-of-stream findings, and how the
            stream ended (spec check §2.6).

        Raises:
            RuntimeError: ``close()`` twice, or before ``head()`` (a caller's bug).
        """
        if self._state in ("new", "closed"):
            raise RuntimeError(f"close() in state {self._state}")
        s = self.summary
        s.time_total = at
        refused = self._state in ("refused", "complete")
        self._state = "closed"
        if refused:  # after E200, or a 204 to a continuation: nothing was read
            return []
        out = self.validator.close()
        self._life(at, 0, out, ended=True)
        last_line = self._line_no
        if timed_out is not None:
            if s.done:
                # spec check §2.6-b [C2.6-b]: a client that does not stop at [DONE] waits.
                out.append(
                    _diag("W210", f"the server kept the connection open {timed_out:g} s after [DONE]", last_line)
                )
            else:
                s.unusable = True
                out.append(_diag("E202", f"no bytes for {timed_out:g} s; gave up before [DONE]", last_line))
        elif not s.done:
            # spec check §2.6-a [C2.6-a]: only [DONE] tells a client the response is complete.
            # (A close inside a line or an event is also the validator's E110.)
            out.append(_diag("E209", "the connection closed before [DONE] (a dropped or crashed stream)", last_line))
        # Over the whole wait a client sees, from the request to [DONE] (or the end): a
        # rate from the first byte alone is meaningless when the body comes in one piece.
        end = s.time_to_done if s.time_to_done is not None else at
        if s.lines and end > 0:
            s.lines_per_second = s.lines / end
        return self._count(out)

    # -- internals -------------------------------------------------------------------

    def _count(self, found: list[Violation]) -> list[Violation]:
        for v in found:
            if v.severity == "error":
                self.summary.errors += 1
            else:
                self.summary.warnings += 1
        return found

    def _life(self, at: float, line: int, out: list[Violation], *, ended: bool = False) -> None:
        """A sign of life at ``at`` (a complete line, or the end): measure the silence before it."""
        gap = at - self._last_life
        self._last_life = at
        s = self.summary
        if gap > s.longest_gap:
            s.longest_gap = gap
            s.longest_gap_line = line
        if gap > self._gap:
            # spec check §2.5-a [C2.5-a]: proxies close connections idle for 30-60 s.
            what = "before the response ended" if ended else f"before line {line}"
            out.append(
                _diag(
                    "W208",
                    f"{seconds_over(gap, self._gap)} s without an event or keep-alive comment {what} "
                    f"(threshold {self._gap:g} s)",
                    line or self._line_no,
                    self._line_start,
                )
            )

    def _scan(self, chunk: bytes, at: float, out: list[Violation]) -> None:
        """Split ``chunk`` into SSE lines (CR, LF or CRLF, spec §2.3-a) and read each."""
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == _LF:
                chunk = chunk[1:]
                self._offset += 1
                self._line_start += 1
        pieces = chunk.splitlines(keepends=True)
        for piece in pieces:
            ends = piece[-1] in (_LF, _CR)
            size = len(piece)
            self._offset += size
            if not ends:
                room = self._cap + 1 - len(self._partial)
                if room > 0:
                    self._partial += piece[:room]
                continue
            body = piece.rstrip(b"\r\n")
            line = bytes(self._partial) + body if self._partial else body
            self._partial.clear()
            self._life(at, self._line_no, out)
            self._line(line[: self._cap + 1], out)
            self._line_no += 1
            self._line_start = self._offset
        if pieces and pieces[-1][-1] == _CR:
            self._skip_lf = True

    def _line(self, raw: bytes, out: list[Violation]) -> None:
        """One complete SSE line (without its end), as WHATWG reads it (spec §2.3-b)."""
        if not raw:
            self._dispatch(out)
            return
        if raw[0] == 0x3A:  # ':' a comment: a keep-alive
            self.summary.comments += 1
            return
        if not self._event_line:
            self._event_line = self._line_no
            self._event_offset = self._line_start
        field, colon, value = raw.partition(b":")
        if colon and value.startswith(b" "):
            value = value[1:]
        if field == b"data":
            self._data_len += len(value) + 1
            if self._data_len <= self._cap:
                self._data.append(value)
        elif field == b"id" and b"\x00" not in value:
            self._event_id = value[:MAX_ID_CHARS].decode("utf-8", "replace")

    def _dispatch(self, out: list[Violation]) -> None:
        """A blank line: the event read so far is dispatched if it has data (WHATWG)."""
        line, offset = self._event_line, self._event_offset
        data, size, event_id = self._data, self._data_len, self._event_id
        self._event_line = 0
        self._data = []
        self._data_len = 0
        self._event_id = None
        if not size:
            return
        self._ids(event_id, line, offset, out)
        text = b"\n".join(data) if size <= self._cap else b""
        if text == _DONE:
            if not self.summary.done:
                self.summary.done = True
                self.summary.time_to_done = self._last_life
            return
        self._envelope(text)

    def _ids(self, event_id: str | None, line: int, offset: int, out: list[Violation]) -> None:
        """spec check §2.4: count ids; an event without one after ids is W207.

        Their order is the validator's rule (envelope-v1 §2.1-d, ``W118``), judged on the
        same bytes: not judged twice here.
        """
        if event_id is None:
            if self._last_id is not None and not self._missing_id_reported:
                # spec check §2.4-b [C2.4-b]: the last id stays in force (WHATWG), so a
                # client reconnecting after this event asks again for what it already has.
                self._missing_id_reported = True
                out.append(_diag("W207", f"event without an id after id {quote(self._last_id)}", line, offset))
            return
        self.summary.ids += 1
        self._last_id = event_id

    def _envelope(self, text: bytes) -> None:
        """Count one envelope line for the summary and follow ``awaiting_frontend_tools`` blocks."""
        s = self.summary
        s.lines += 1
        if too_deep(text, MAX_NESTING_DEPTH) is not None:
            return  # spec §6.7-a: never handed to a parser (it would recurse); the validator says E116
        try:
            env = _decode_head(text)
        except msgspec.DecodeError:
            return  # not an envelope: the validator has reported it
        if env.agent not in self._agents:
            self._agents.add(env.agent)
            s.agents = len(self._agents)
        if env.final and env.type != "tool_result_image":
            s.blocks += 1
            # check [C5-b]: failures and routine signals counted apart (spec §4.16-c)
            if env.type == "error":
                s.errors_sent += 1
            elif env.type == "meta_status":
                s.statuses += 1
        if env.type != "awaiting_frontend_tools":
            return
        # spec §4.11, §5.2: a buffered block, possibly in several lines; kept per agent.
        parts = self._awaiting.setdefault(env.agent, [])
        size = self._awaiting_size.get(env.agent, 0) + len(env.delta)
        self._awaiting_size[env.agent] = size
        if size <= self._cap:
            parts.append(env.delta)
        if not env.final:
            return
        del self._awaiting[env.agent], self._awaiting_size[env.agent]
        payload = "".join(parts) if size <= self._cap else ""
        try:
            # spec §6.7-a: a payload too deep is measured, not parsed (the validator reports E116)
            calls = _decode_calls(payload) if payload and too_deep(payload, MAX_NESTING_DEPTH) is None else None
        except msgspec.DecodeError:
            calls = None  # the validator reports the payload (E140/E141)
        if calls:
            self.pending = PendingTools(agent=env.agent, calls=tuple((c.tool_use_id, c.name) for c in calls))
            s.paused = True
