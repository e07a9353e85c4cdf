"""``ResponseCheck``, the sans-I/O core of ``envelope check``: examples and properties.

No sockets here: the tests give the core a head, chunks and times, as the shell does.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, seed, settings
from hypothesis import strategies as st

from conftest import ROOT
from envelope import DONE, Emitter, StreamValidator, frame
from envelope._check import CHECK_CODES, ResponseCheck, seconds_over
from envelope._validator import CODES, Violation
from validating import assert_valid

from ._servers import AGENT, paused_lines, sse, valid_lines

OK_HEADERS = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("X-Accel-Buffering", "no")]


def run(body_chunks: list[bytes], times: list[float] | None = None, **kw: float) -> tuple[ResponseCheck, list[str]]:
    """Feed ``body_chunks`` (at ``times``, else all at 0) and close; return the check and its codes."""
    check = ResponseCheck("http://t/", **kw)  # type: ignore[arg-type]  # test keywords are the int/float options
    found = check.head(200, "OK", OK_HEADERS, 0.0)
    times = times or [0.0] * (len(body_chunks) + 1)
    for chunk, at in zip(body_chunks, times, strict=False):
        found += check.feed(chunk, at)
    found += check.close(times[-1])
    return check, [v.code for v in found]


def test_codes_table_matches_the_spec() -> None:
    """spec/check.md §6 lists exactly CHECK_CODES, with the same severity, section and meaning."""
    text = (ROOT / "spec" / "check.md").read_text()
    rows = re.findall(r"^\| `([EW]\d{3})` \| (\w+) \| ([^|]+) \| ([^|]+) \|$", text, re.MULTILINE)
    table = {code: (sev, sec.strip().removeprefix("§"), meaning.strip()) for code, sev, sec, meaning in rows}
    assert table == CHECK_CODES
    assert not set(CHECK_CODES) & set(CODES), "transport codes must not reuse validator codes"
    assert all(200 <= int(code[1:]) < 230 for code in CHECK_CODES)


def test_good_response_has_no_diagnostic_and_its_figures() -> None:
    """[C3.1-a] [C5-a] The body goes to the validator; the summary counts lines, agents, blocks, times."""
    body = sse(valid_lines())
    assert_valid(body)
    check, codes = run([body[:50], body[50:300], body[300:]], [0.5, 1.0, 2.0, 2.5])
    s = check.summary
    assert codes == []
    assert (s.lines, s.agents, s.blocks, s.bytes, s.done) == (4, 1, 3, len(body), True)
    assert (s.time_to_headers, s.time_to_first_byte, s.time_to_done, s.time_total) == (0.0, 0.5, 2.0, 2.5)
    assert s.lines_per_second == pytest.approx(4 / 2.0)
    assert s.longest_gap == 1.0
    assert s.longest_gap_line == 1  # the first line, completed by the chunk at 1.0 s
    assert not s.unusable
    assert check.validator.validator.open_blocks() == []


def test_pause_is_found_even_when_chunked() -> None:
    """[C4-a] awaiting_frontend_tools, cut into several lines by a small bound, is reassembled."""
    lines = paused_lines()
    check, codes = run([sse(lines)])
    assert codes == []
    assert check.pending is not None
    assert check.pending.agent == AGENT
    assert check.pending.calls == (("toolu_c", "confirm"),)
    assert check.summary.paused
    em = Emitter(AGENT, max_bytes=120)
    chunked = [
        *lines[:2],
        *em.buffered(
            "awaiting_frontend_tools",
            '[{"tool_use_id":"toolu_c","name":"confirm","input":{"question":"Go, really, now?"}}]',
        ),
    ]
    assert len(chunked) > 3
    check, _ = run([sse(chunked)], max_bytes=120)
    assert check.pending is not None
    assert check.pending.calls == (("toolu_c", "confirm"),)


@pytest.mark.parametrize(
    "payload",
    ["not json", "[]", '[{"name": "x"}]', '{"tool_use_id": "a"}'],
)
def test_unusable_pause_payload_is_not_followed(payload: str) -> None:
    """A pause whose payload names no call is not answered (the validator reports the payload)."""
    line = b'{"type":"awaiting_frontend_tools","agent":"a","final":true,"delta":%s}' % (
        payload.replace('"', '\\"').join('""').encode()
    )
    check, _ = run([sse([line])])
    assert check.pending is None


def test_pause_payload_over_the_cap_is_not_held() -> None:
    """The deltas of an open awaiting block are held up to max_line_bytes only."""
    head = b'{"type":"awaiting_frontend_tools","agent":"a","final":false,"delta":"[{\\"tool_use_id\\":\\"t\\",\\"name\\":\\"n\\"}"}'
    pad = b'{"type":"awaiting_frontend_tools","agent":"a","final":false,"delta":"%s"}' % (b" " * 90)
    end = b'{"type":"awaiting_frontend_tools","agent":"a","final":true,"delta":"]"}'
    check, _ = run([sse([head, pad, pad, end])], max_line_bytes=200)
    assert check.pending is None  # each line fits, the payload (over 200 bytes) is not held
    check, _ = run([sse([head, pad, pad, end])], max_line_bytes=2000)
    assert check.pending is not None
    lines = [
        b'{"type":"awaiting_frontend_tools","agent":"a","final":false,"delta":"[{\\"tool_use_id\\":\\"t\\",\\"name\\":\\"n\\"}"}',
        b'{"type":"awaiting_frontend_tools","agent":"a","final":true,"delta":"%s]"}' % (b" " * 300),
    ]
    check, _ = run([sse(lines)], max_line_bytes=200)
    assert check.pending is None
    check, _ = run([sse(lines)], max_line_bytes=2000)
    assert check.pending is not None


def test_headers_repeated_and_case() -> None:
    """[C2.3-a] Repeated headers join (RFC 9110); names and values are case-insensitive."""
    check = ResponseCheck("u")
    found = check.head(
        200,
        "OK",
        [
            ("content-type", "TEXT/EVENT-STREAM"),
            ("cache-control", "private"),
            ("Cache-Control", "No-Cache"),
            ("x-accel-buffering", " NO "),
        ],
        0.0,
    )
    assert found == []
    check = ResponseCheck("u")
    found = check.head(301, "Moved Permanently", OK_HEADERS, 0.0)
    assert [v.code for v in found] == ["E200"]
    assert found[0].message == "HTTP 301 Moved Permanently"
    assert check.close(1.0) == []
    assert check.summary.unusable


def test_fail_before_a_response() -> None:
    """[C2.1-b] A failed or timed-out request is one unusable diagnostic."""
    check = ResponseCheck("u")
    (v,) = check.fail("timeout", "no response within 3 s", 3.0)
    assert (v.code, v.severity, v.line) == ("E202", "error", 1)
    assert check.summary.unusable
    assert check.summary.errors == 1
    check = ResponseCheck("u")
    assert [v.code for v in check.fail("connect", "refused", 0.1)] == ["E201"]


def test_caller_mistakes_raise() -> None:
    """Out-of-order calls are the caller's bug: RuntimeError, never a diagnostic."""
    check = ResponseCheck("u")
    with pytest.raises(RuntimeError):
        check.feed(b"x", 0)
    with pytest.raises(RuntimeError):
        check.close(0)
    check.head(200, "OK", OK_HEADERS, 0)
    with pytest.raises(RuntimeError):
        check.head(200, "OK", OK_HEADERS, 0)
    with pytest.raises(RuntimeError):
        check.fail("connect", "x", 0)
    assert check.feed(b"", 0) == []
    check.close(0)
    with pytest.raises(RuntimeError):
        check.close(0)


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (["1", "2", "10"], []),
        (["a", "a"], []),  # order is the validator's W118, not judged here
        (["1", "\x00bad", "2"], ["W207"]),  # an id with NUL is ignored (WHATWG): that event has none
        (["1", None, None, "2"], ["W207"]),  # reported once
        ([None, "1", "2"], []),  # ids may start late
    ],
)
def test_id_presence(ids: list[str | None], expected: list[str]) -> None:
    """[C2.4-b] An event without an id after events with ids."""
    body = b""
    for i in ids:
        body += (b"id: " + i.encode() + b"\n" if i is not None else b"") + frame(
            b'{"type":"text","agent":"a","final":true,"delta":""}'
        )
    check, codes = run([body])  # no [DONE]: its E209 is not what this test looks at
    assert [c for c in codes if c in CHECK_CODES and c != "E209"] == expected
    assert check.summary.ids == sum(i is not None and "\x00" not in i for i in ids)


def test_silences_measured_on_complete_lines() -> None:
    """[C2.5-a] A partial line is no sign of life; a comment is; the end counts too."""
    body = sse(valid_lines())
    cut = body.index(b"\n\n") + 2
    first, rest = body[:cut], body[cut:]
    _, codes = run([first[:60], first[60:], rest], [0.0, 5.0, 5.5, 6.0], gap_seconds=4.0)
    assert codes == ["W208"]  # head at 0, the first complete line at 5: the bytes at 0 do not count
    _, codes = run([b": ka\n", first, rest], [3.0, 6.0, 9.0, 9.5], gap_seconds=4.0)
    assert codes == []
    check, codes = run([body], [1.0, 20.0], gap_seconds=4.0)
    assert codes == ["W208"]
    assert check.summary.longest_gap_line == 0  # the silence before the end


def test_line_endings_cr_and_crlf_split_anywhere() -> None:
    """Lines end in CR, LF or CRLF (spec §2.3-a); a CRLF split across chunks is one line end."""
    lf = sse(valid_lines())
    crlf = lf.replace(b"\n", b"\r\n")
    cr = lf.replace(b"\n", b"\r")
    reference, _ = run([lf])
    for body in (crlf, cr):
        for cut in range(len(body)):
            check, codes = run([body[:cut], body[cut:]])
            assert codes == []
            assert check.summary.lines == reference.summary.lines
            assert check.summary.blocks == reference.summary.blocks
            assert check.summary.done


def test_long_line_is_capped_not_held() -> None:
    """A line over max_line_bytes is kept only up to the cap (memory bounded), and still counted."""
    big = b'{"type":"text","agent":"a","final":true,"delta":"' + b"x" * 5000 + b'"}'
    body = frame(big) + DONE
    check, codes = run([body[i : i + 7] for i in range(0, len(body), 7)], max_line_bytes=1000)
    assert "E109" in codes  # the validator's own report of the line
    assert check.summary.done
    assert len(check._partial) == 0
    # An event of several data lines whose data passes the cap: counted, not held.
    body = b"data: " + b"y" * 600 + b"\ndata: " + b"y" * 600 + b"\n\n" + DONE
    check, codes = run([body], max_line_bytes=1000)
    assert check.summary.lines == 1
    assert "E109" in codes  # the validator: event data over the reader's cap


_EVENTS = st.lists(
    st.sampled_from(
        [
            *(frame(line) for line in valid_lines()),
            b": keep-alive\n\n",
            b"id: run:0:1\n",
            b"id: run:0:1\n",
            b"id: 7\n",
            b"event: x\n",
            b"retry: 10\n",
            b"data: [DONE]\n\n",
            b'data: {"type\n',
            b"\r\n",
            b"\r",
            b"\n",
            b"\xff",
        ]
    ),
    max_size=25,
)


def _transport(found: list[Violation]) -> list[tuple[str, int, int]]:
    return [(v.code, v.line, v.offset) for v in found if v.code in CHECK_CODES]


def _figures(check: ResponseCheck) -> dict[str, object]:
    """The summary without the diagnostic counts (those include the validator's findings)."""
    return {k: v for k, v in check.summary.to_dict().items() if k not in ("errors", "warnings")}


def _same_for_split(body: bytes, pieces: list[bytes]) -> None:
    """The transport findings and the figures are the same for ``body`` whole and in ``pieces``;
    the envelope findings are exactly the validator's for the same pieces (the validator's own
    independence of chunking is its property, tests/validator)."""
    whole, split = ResponseCheck("u"), ResponseCheck("u")
    a = whole.head(200, "OK", OK_HEADERS, 0) + whole.feed(body, 0) + whole.close(0)
    b = split.head(200, "OK", OK_HEADERS, 0)
    alone = StreamValidator("sse")
    expected: list[Violation] = []
    for piece in pieces:
        b += split.feed(piece, 0)
        expected += alone.feed(piece)
    b += split.close(0)
    expected += alone.close()
    assert _transport(a) == _transport(b)
    assert _figures(whole) == _figures(split)
    assert [v for v in b if v.code not in CHECK_CODES] == expected
    assert (split.summary.errors, split.summary.warnings) == (
        sum(v.severity == "error" for v in b),
        sum(v.severity == "warning" for v in b),
    )


def _check_split(events: list[bytes], data: st.DataObject) -> None:
    body = b"".join(events)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    _same_for_split(body, [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)])


@given(_EVENTS, st.data())
def test_findings_do_not_depend_on_chunking(events: list[bytes], data: st.DataObject) -> None:
    """Diagnostics, positions and figures are the same however the body is split (times equal)."""
    _check_split(events, data)


@pytest.mark.parametrize(
    "body",
    [
        frame(b"{}") + b"\r\n" + DONE,  # a CRLF after an event, split between CR and LF
        b"data: [DONE]\r\r\n\r",
        b'data: {"type\n\r\xffdata: {}\n\n',  # found by the property: E100 then a line after it
        b"id: 1\r\ndata: x\r\n\r\nid: 1\r\ndata: y\r\n\r\n",
        b": ka\r" + frame(b"{}"),
    ],
)
def test_findings_do_not_depend_on_chunking_pinned(body: bytes) -> None:
    """Pinned bodies for the chunking property, split at every byte."""
    for cut in range(len(body) + 1):
        _same_for_split(body, [body[:cut], body[cut:]])


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_findings_do_not_depend_on_chunking_fixed_seeds(n: int) -> None:
    """The chunking property under four fixed seeds, so CI's derandomised run is not the only one."""

    @seed(n)
    @settings(derandomize=False, max_examples=60)
    @given(_EVENTS, st.data())
    def prop(events: list[bytes], data: st.DataObject) -> None:
        _check_split(events, data)

    prop()


def test_lines_and_pause_payloads_nested_too_deep_are_measured_not_parsed() -> None:
    """spec §6.7-a, check [C3.1-b]: the check's own readers (the summary's head, the pause's calls) met msgspec's
    recursion limit on a 100,000-deep member (RecursionError); now the validator's E116 is the verdict."""
    deep = "[" * 100_000 + "]" * 100_000
    line = b'{"type":"text","agent":"%s","final":true,"delta":"","x":%s}' % (AGENT.encode(), deep.encode())
    calls = '[{"tool_use_id":"t","name":"n","input":' + deep + "}]"
    em = Emitter(AGENT)
    body = sse([*valid_lines()[:-1], line]) + b"".join(frame(x) for x in em.buffered("awaiting_frontend_tools", calls))
    check, codes = run([body])
    assert codes.count("E116") == 2  # the line, and the reassembled pause payload
    assert check.pending is None  # a pause whose calls cannot be read is not answered
    assert check.summary.lines == len(valid_lines()) + len(em.buffered("awaiting_frontend_tools", calls))


def test_a_silence_just_over_the_threshold_reads_over_it() -> None:
    """[C2.5-a] 1.001 s over a threshold of 1 s says 1.001 s, never the "1.0 s" that looks equal."""
    body = sse(valid_lines())
    check = ResponseCheck("http://t/", gap_seconds=1.0)
    found = check.head(200, "OK", OK_HEADERS, 0.0) + check.feed(body, 1.001) + check.close(1.001)
    assert [v.message for v in found if v.code == "W208"] == [
        "1.001 s without an event or keep-alive comment before line 1 (threshold 1 s)"
    ]
    assert check.summary.longest_gap == 1.001


@given(
    st.integers(1, 100_000).map(lambda ms: ms / 1000),
    st.floats(min_value=1e-9, max_value=100.0, allow_nan=False),
)
@example(1.0, 0.001)
@example(1.0, 0.0004)
@example(0.25, 0.004)
def test_the_shown_silence_is_over_the_shown_threshold(threshold: float, over: float) -> None:
    """[C2.5-a] Whatever the silence, its figure exceeds the threshold's, and is the silence to a tenth at worst."""
    gap = threshold + over
    shown = float(seconds_over(gap, threshold))
    assert shown > float(f"{threshold:g}")
    assert abs(shown - gap) <= 0.05 + 1e-9


def test_C5_b_error_envelopes_and_statuses_are_counted_apart() -> None:
    """[C5-b] error blocks and meta_status blocks counted apart (a chunked one once), both printed ([4.16-c])."""
    from envelope import reconstruct
    from envelope.check import _render

    lines = (ROOT / "spec" / "conformance" / "valid" / "meta_status.jsonl").read_bytes().splitlines()
    blocks = reconstruct(lines).to_dict()["agents"]
    statuses = sum(1 for agent in blocks.values() for b in agent["blocks"] if b["type"] == "meta_status")
    status_lines = sum(1 for line in lines if b'"type":"meta_status"' in line)
    assert 10 < statuses < status_lines  # one is chunked: counted once
    body = sse([line for line in lines if line != b"[DONE]"])
    check, codes = run([body[i : i + 700] for i in range(0, len(body), 700)])
    assert codes == []
    assert (check.summary.statuses, check.summary.errors_sent) == (statuses, 0)
    assert f"0 error envelopes, {statuses} status signals" in _render(check.summary)
    error = Emitter(AGENT).buffered("error", '{"type": "api_error", "message": "boom"}')
    good = valid_lines()
    check, codes = run([sse([*good[:-1], *error, good[-1]])])
    assert codes == []
    assert (check.summary.statuses, check.summary.errors_sent) == (0, 1)
