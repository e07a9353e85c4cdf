"""``envelope check`` against small broken servers on loopback: each gets its coded diagnostic.

Every server here is a ``ScriptServer`` (``_servers``): it listens on 127.0.0.1, port
0, and stops by itself. What a server sends is validated too (``assert_valid``) when
the test means it to be a valid stream, so a "good" server is good by the validator's
own word, not by ours.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest

from envelope import DONE, frame
from envelope._quote import EXCERPT_CHARS
from envelope.check import add_check_command, main, run
from envelope.cli import main as cli_main
from validating import assert_valid

from ._servers import (
    AGENT,
    Script,
    ScriptServer,
    chunks,
    head,
    paused_lines,
    resumed_lines,
    sse,
    valid_lines,
)

if TYPE_CHECKING:
    from pathlib import Path


def check(argv: list[str]) -> tuple[int, list[str], str]:
    """Run the check; return (status, stdout lines, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    parser = argparse.ArgumentParser()
    add_check_command(parser.add_subparsers(dest="command"))
    status = run(parser.parse_args(["check", *argv]), out=out, err=err)
    return status, out.getvalue().splitlines(), err.getvalue()


def codes(lines: list[str]) -> list[str]:
    """The codes of ``path:line:col: CODE message`` lines."""
    return [line.split(": ", 1)[1].split(" ", 1)[0] for line in lines]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


GOOD = sse(valid_lines())


def test_good_server_exits_0_with_its_summary() -> None:
    """A valid stream with the headers a browser stream wants: no diagnostic, exit 0 (spec check §5)."""
    assert_valid(GOOD)
    with ScriptServer({"*": Script(steps=[*chunks(GOOD, 100)])}) as server:
        status, out, err = check([server.url(), "--data", '{"prompt": "What is 5 + (10 * 2)?"}', "--strict"])
        assert server.requests[0].method == "POST"
        assert server.requests[0].json() == {"prompt": "What is 5 + (10 * 2)?"}
        assert server.requests[0].headers["accept"] == "text/event-stream"
    assert (status, out) == (0, [])
    assert "4 envelope lines, 1 agent, 3 blocks" in err
    assert "[DONE]" in err
    assert err.endswith("0 error(s), 0 warning(s) in 1 response\n")


def test_golden_stream_exits_0() -> None:
    """A golden fixture served as is: warnings only (its own), exit 0."""
    from conftest import FIXTURES

    data = (FIXTURES / "golden" / "two_agents_lifecycle" / "input.sse").read_bytes()
    with ScriptServer({"*": Script(steps=[data])}) as server:
        status, out, err = check([server.url()])
        assert server.requests[0].method == "GET"
    assert status == 0
    assert codes(out) == ["W165"]  # the fixture's own warning, as `envelope validate` gives
    assert "2 agents" in err


def test_line_over_the_bound() -> None:
    """A line over --max-bytes is the validator's E107, printed with the URL as the path."""
    lines = valid_lines(text="x" * 300)
    with ScriptServer({"*": Script(steps=[sse(lines)])}) as server:
        status, out, _ = check([server.url(), "--max-bytes", "400"])
        assert (status, codes(out)) == (0, [])
        big = [*lines[:1], b'{"type":"text","agent":"%s","final":false,"delta":"%s"}' % (AGENT.encode(), b"y" * 500)]
        big += [lines[-2], lines[-1]]
        server.routes["*"] = Script(steps=[sse(big)])
        status, out, _ = check([server.url(), "--max-bytes", "400"])
    assert status == 1
    assert codes(out) == ["E107"]
    assert out[0].startswith(f"{server.url()}:3:1: E107 ")


def test_missing_done() -> None:
    """[C2.6-a] A stream the server closes without [DONE]: E209 (and the validator's W161)."""
    with ScriptServer({"*": Script(steps=[sse(valid_lines(), done=False)])}) as server:
        status, out, err = check([server.url()])
    assert status == 1
    assert codes(out) == ["W161", "E209"]
    assert "no [DONE]" in err


def test_closes_mid_line() -> None:
    """A connection that ends inside a line: E110 at that line, and E209."""
    body = sse(valid_lines(), done=False) + b'data: {"type":"text","ag'
    with ScriptServer({"*": Script(steps=[body])}) as server:
        status, out, _ = check([server.url()])
    assert status == 1
    assert codes(out) == ["E110", "W161", "E209"]
    assert out[0].startswith(f"{server.url()}:9:1: E110 ")


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [("application/json", ["E203"]), (None, ["E203"]), ("text/event-stream;charset=UTF-8", [])],
)
def test_content_type(content_type: str | None, expected: list[str]) -> None:
    """[C2.2-a] Content-Type must be text/event-stream (parameters allowed)."""
    extra = {"Content_Type": content_type} if content_type else {}
    with ScriptServer(
        {"*": Script(head=head(**extra, Cache_Control="no-cache", X_Accel_Buffering="no"), steps=[GOOD])}
    ) as server:
        status, out, _ = check([server.url()])
    assert codes(out) == expected
    assert status == (1 if expected else 0)


def test_caching_and_buffering_headers() -> None:
    """[C2.3-a] [C2.3-b] No Cache-Control no-cache/no-store: W204; no X-Accel-Buffering: no: W205."""
    with ScriptServer(
        {"*": Script(head=head(Content_Type="text/event-stream", Cache_Control="max-age=60"), steps=[GOOD])}
    ) as server:
        status, out, _ = check([server.url()])
        assert (status, codes(out)) == (0, ["W204", "W205"])
        assert "'max-age=60'" in out[0]
        status, out, _ = check([server.url(), "--strict"])
        assert status == 1
        server.routes["*"] = Script(
            head=head(Content_Type="text/event-stream", Cache_Control="private, no-store", X_Accel_Buffering="No"),
            steps=[GOOD],
        )
        status, out, _ = check([server.url(), "--strict"])
    assert (status, out) == (0, [])


def test_non_2xx_is_unusable() -> None:
    """[C2.1-a] A 4xx answer is E200, with its body quoted; exit 2, no traceback."""
    answer = b'{"error": {"type": "invalid_request", "message": "prompt is required"}}'
    script = Script(head=head("422 Unprocessable Entity", Content_Type="application/json"), steps=[answer])
    with ScriptServer({"*": script}) as server:
        status, out, err = check([server.url(), "--data", "{}"])
    assert status == 2
    assert codes(out) == ["E200"]
    assert "HTTP 422 Unprocessable Entity: " in out[0]
    assert "prompt is required" in out[0]
    assert "unusable" in err
    assert "Traceback" not in err


def test_connection_refused_is_unusable() -> None:
    """[C2.1-b] Nothing listening: E201 with the system's reason; exit 2."""
    url = f"http://127.0.0.1:{closed_port()}/agent/run"
    status, out, err = check([url])
    assert status == 2
    assert codes(out) == ["E201"]
    assert "refused" in out[0].lower()
    assert "Traceback" not in err


def test_no_headers_in_time_is_unusable() -> None:
    """[C2.1-b] A server that accepts and never answers: E202 after --timeout; exit 2."""
    with ScriptServer({"*": Script(head=b"", hold=3.0)}) as server:
        status, out, _ = check([server.url(), "--timeout", "0.3"])
    assert status == 2
    assert codes(out) == ["E202"]


def test_stalling_server() -> None:
    """[C2.5-a] A server that stops sending: W208 for the silence, then E202 at --timeout; exit 2."""
    lines = valid_lines()
    script = Script(steps=[sse(lines[:2], done=False)], hold=3.0)
    with ScriptServer({"*": script}) as server:
        status, out, err = check([server.url(), "--timeout", "0.6", "--max-gap", "0.2"])
    assert status == 2
    assert codes(out) == ["E120", "W161", "W208", "E202"]
    assert "without an event or keep-alive comment before the response ended" in out[2]
    assert "longest gap 0.6" in err


def test_keepalive_comments_bridge_silences() -> None:
    """[C2.5-a] Keep-alive comments during a long silence: no W208, and they are counted."""
    lines = valid_lines()
    steps: list[bytes | float] = [sse(lines[:2], done=False)]
    for _ in range(5):
        steps += [0.15, b": keep-alive\n\n"]
    steps += [sse(lines[2:])]
    with ScriptServer({"*": Script(steps=steps)}) as server:
        status, out, err = check([server.url(), "--max-gap", "0.6", "--strict"])
        assert (status, out) == (0, [])
        assert "5 keep-alive comments" in err
        # The same silence without the comments: a warning.
        server.routes["*"] = Script(steps=[sse(lines[:2], done=False), 0.9, sse(lines[2:])])
        status, out, _ = check([server.url(), "--max-gap", "0.6"])
    assert (status, codes(out)) == (0, ["W208"])
    assert out[0].startswith(f"{server.url()}:5:1: W208 ")


def test_ids_order_and_presence() -> None:
    """[C2.4-b] Event ids: increasing is fine; a repeat is the validator's W118 (once, not doubled); an
    event without one after ids is W207."""

    def with_ids(ids: list[str | None]) -> bytes:
        events = [*valid_lines(), b"[DONE]"]
        assert len(ids) == len(events)
        out = b""
        for i, line in zip(ids, events, strict=True):
            out += (f"id: {i}\n".encode() if i is not None else b"") + (DONE if line == b"[DONE]" else frame(line))
        return out

    with ScriptServer({"*": Script(steps=[with_ids([f"run:0:{n}" for n in (0, 1, 2, 9, 10)])])}) as server:
        status, out, err = check([server.url(), "--strict"])
        assert (status, out) == (0, [])
        assert "5 event ids" in err
        server.routes["*"] = Script(steps=[with_ids(["run:0:0", "run:0:1", "run:0:1", "run:0:0", "run:0:4"])])
        status, out, _ = check([server.url()])
        assert (status, codes(out)) == (0, ["W118"])
        assert out[0].startswith(f"{server.url()}:7:1: W118 ")
        server.routes["*"] = Script(steps=[with_ids(["a", "b", None, None, None])])
        status, out, _ = check([server.url()])
    assert (status, codes(out)) == (0, ["W207"])
    assert out[0].startswith(f"{server.url()}:7:1: W207 event without an id after id 'b'")


def test_connection_left_open_after_done() -> None:
    """[C2.6-b] [DONE] then no close: W210 when --timeout passes, not unusable (exit 0)."""
    with ScriptServer({"*": Script(steps=[GOOD], hold=3.0)}) as server:
        status, out, _ = check([server.url(), "--timeout", "0.4"])
    assert (status, codes(out)) == (0, ["W210"])


def test_save_records_the_bytes_and_replays_to_the_same_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[C3.2-a] --save holds the body exactly as received; `envelope validate` on it gives the same findings."""
    bad = sse(valid_lines(), done=False) + b'data: {"type":"text","agent":"x","final":true,"delta":"?"}\n\ndata: [DO'
    for body in (GOOD, bad):
        capture = tmp_path / "capture.sse"
        with ScriptServer({"*": Script(steps=[*chunks(body, 37)])}) as server:
            status, out, _ = check([server.url(), "--save", str(capture)])
        assert capture.read_bytes() == body
        envelope_codes = [c for c in codes(out) if int(c[1:]) < 200]  # the transport codes are 2xx
        capsys.readouterr()
        replay_status = cli_main(["validate", str(capture)])
        replayed = capsys.readouterr().out.splitlines()
        assert codes(replayed) == envelope_codes
        assert replay_status == (1 if any(c.startswith("E") for c in envelope_codes) else 0)
        assert status == (0 if body == GOOD else 1)


def test_json_format() -> None:
    """--format json: one object, the violations as `envelope validate` gives them, and the summaries."""
    with ScriptServer({"*": Script(steps=[sse(valid_lines(), done=False)])}) as server:
        status, out, _ = check([server.url(), "--format", "json"])
    doc = json.loads("\n".join(out))
    assert status == 1
    assert [v["code"] for v in doc["violations"]] == ["W161", "E209"]
    assert set(doc["violations"][0]) == {"code", "severity", "line", "offset", "agent", "type", "message"}
    (summary,) = doc["responses"]
    assert summary["lines"] == 4
    assert summary["done"] is False
    assert summary["errors"] == 1
    assert summary["url"] == server.url()


def test_follow_frontend_tools(tmp_path: Path) -> None:
    """[C4-a] A pause is answered at the resume endpoint and the continuation is checked in the same run."""
    routes = {
        "/agent/run": Script(steps=[sse(paused_lines())]),
        "/agent/tool_results": Script(steps=[sse(resumed_lines())]),
    }
    assert_valid(sse(paused_lines()))
    assert_valid(sse(resumed_lines()))
    with ScriptServer(routes) as server:
        capture = tmp_path / "run.sse"
        status, out, err = check(
            [
                server.url("/agent/run"),
                "--data",
                '{"prompt": "please confirm"}',
                "--follow-frontend-tools",
                "--strict",
                "--save",
                str(capture),
            ]
        )
        # [C3.2-a] The capture of both responses, back to back, is a valid recording (spec §8.5).
        assert capture.read_bytes() == sse(paused_lines()) + sse(resumed_lines())
        assert_valid(capture.read_bytes())
        assert [r.path for r in server.requests] == ["/agent/run", "/agent/tool_results"]
        assert server.requests[1].json() == {
            "agent_uuid": AGENT,
            "tool_results": [{"tool_use_id": "toolu_c", "content": "ok"}],
        }
        # Without the flag the check stops at the pause.
        status_alone, _, err_alone = check([server.url("/agent/run"), "--data", "{}"])
        assert "paused on awaiting_frontend_tools" in err_alone
        assert status_alone == 0
        # --answer by tool name, and an explicit --resume-url.
        check(
            [
                server.url("/agent/run"),
                "--data",
                "{}",
                "--follow-frontend-tools",
                "--answer",
                '{"confirm": "no"}',
                "--resume-url",
                server.url("/agent/tool_results"),
            ]
        )
        assert server.requests[-1].json() == {
            "agent_uuid": AGENT,
            "tool_results": [{"tool_use_id": "toolu_c", "content": "no"}],
        }
        # An answer object with is_error, by id, from a file.
        answers = tmp_path / "answers.json"
        answers.write_text('{"toolu_c": {"content": "user closed the dialog", "is_error": true}}')
        check([server.url("/agent/run"), "--follow-frontend-tools", "--answer", f"@{answers}"])
        assert server.requests[-1].json() == {
            "agent_uuid": AGENT,
            "tool_results": [{"tool_use_id": "toolu_c", "content": "user closed the dialog", "is_error": True}],
        }
    assert (status, out) == (0, [])
    assert "in 2 responses" in err
    assert f"summary of {server.url('/agent/tool_results')}" in err


def test_follow_reports_a_refused_resume() -> None:
    """[C4-a] A resume the server refuses is E200 on the resume URL; exit 2."""
    routes = {
        "/agent/run": Script(steps=[sse(paused_lines())]),
        "/agent/tool_results": Script(head=head("409 Conflict", Content_Type="application/json"), steps=[b"{}"]),
    }
    with ScriptServer(routes) as server:
        status, out, _ = check([server.url("/agent/run"), "--follow-frontend-tools", "--format", "json"])
    doc = json.loads("\n".join(out))
    assert status == 2
    assert [(v["response"], v["code"]) for v in doc["violations"]] == [(1, "E200")]
    assert doc["violations"][0]["url"] == server.url("/agent/tool_results")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["http://127.0.0.1:9/x", "--data", "{nope"], "--data is not JSON"),
        (["http://127.0.0.1:9/x", "--data", "@/nonexistent/body.json"], "--data: cannot read"),
        (["http://127.0.0.1:9/x", "-H", "NoColon"], "expected 'Name: value'"),
        (["ftp://127.0.0.1/x"], "is not an http or https URL"),
        (["http://[::1"], "not a URL"),
        (["http://127.0.0.1:9/x", "--answer", "[1]"], "--answer must be a JSON object"),
        (["http://127.0.0.1:9/x", "--save", "/nonexistent/dir/x.sse"], "--save: cannot write"),
    ],
)
def test_bad_arguments_exit_2(argv: list[str], message: str) -> None:
    """Arguments the check cannot use: one message on stderr, exit 2, no request sent."""
    status, out, err = check(argv)
    assert status == 2
    assert out == []
    assert message in err
    assert err.startswith("envelope check: error: ")


def test_entry_point_in_a_subprocess() -> None:
    """`python -m envelope.check URL` runs the check: diagnostics on stdout, summary on stderr."""
    with ScriptServer({"*": Script(steps=[sse(valid_lines(), done=False)])}) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "envelope.check", server.url()],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 1
    assert codes(proc.stdout.splitlines()) == ["W161", "E209"]
    assert "1 error(s), 1 warning(s) in 1 response" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_main_and_subcommand_wiring(capsys: pytest.CaptureFixture[str]) -> None:
    """`main(argv)` and the `check` subcommand a parser gets from add_check_command run the same check."""
    with ScriptServer({"*": Script(steps=[GOOD])}) as server:
        assert main([server.url()]) == 0
        parser = argparse.ArgumentParser()
        add_check_command(parser.add_subparsers(dest="command"))
        args = parser.parse_args(["check", server.url(), "--strict"])
        assert args.handler(args) == 0
    assert "0 error(s), 0 warning(s) in 1 response" in capsys.readouterr().err


def test_mid_body_reset_is_a_dropped_stream() -> None:
    """A chunked body cut short (the server dies mid-chunk): E209, not a traceback."""
    script = Script(
        head=b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"X-Accel-Buffering: no\r\nTransfer-Encoding: chunked\r\n\r\n",
        steps=[b"%x\r\n%s\r\n" % (len(GOOD[:200]), GOOD[:200]), b"ff\r\nda"],
    )
    with ScriptServer({"*": script}) as server:
        status, out, _ = check([server.url()])
    assert status == 1
    assert "E209" in codes(out)


def test_header_value_with_a_line_break_is_refused() -> None:
    """-H cannot smuggle a second header (a CR or LF in the value)."""
    status, _, err = check(["http://127.0.0.1:9/x", "-H", "X-A: b\r\nX-B: c"])
    assert status == 2
    assert "cannot hold a line break" in err


@pytest.mark.parametrize(
    "argv", [["--timeout", "0"], ["--max-gap", "soon"], ["--max-bytes", "0"], ["--max-bytes", "x"]]
)
def test_bad_numbers_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Numeric options are checked by the parser: exit 2 with argparse's message."""
    with pytest.raises(SystemExit) as exc:
        main(["http://127.0.0.1:9/x", *argv])
    assert exc.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_given_headers_are_sent_as_given() -> None:
    """-H replaces the defaults of Accept, Accept-Encoding and Content-Type, and adds any other."""
    with ScriptServer({"*": Script(steps=[GOOD])}) as server:
        check([server.url(), "--data", "{}"])
        check(
            [
                server.url(),
                "--data",
                "{}",
                "-H",
                "Accept: */*",
                "-H",
                "accept-encoding: gzip",
                "-H",
                "Content-Type: application/json; charset=utf-8",
                "-H",
                "Authorization: Bearer abc",
            ]
        )
    default, given = (r.headers for r in server.requests)
    assert (default["accept"], default["accept-encoding"], default["content-type"]) == (
        "text/event-stream",
        "identity",
        "application/json",
    )
    assert (given["accept"], given["accept-encoding"], given["content-type"], given["authorization"]) == (
        "*/*",
        "gzip",
        "application/json; charset=utf-8",
        "Bearer abc",
    )


def test_follow_stops_after_max_responses(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that pauses again and again is followed MAX_RESPONSES times, then the check stops."""
    import envelope.check as check_module

    monkeypatch.setattr(check_module, "MAX_RESPONSES", 3)
    with ScriptServer({"*": Script(steps=[sse(paused_lines())])}) as server:
        status, _, err = check([server.url("/agent/run"), "--follow-frontend-tools"])
    assert len(server.requests) == 3
    assert "stopped after 3 responses" in err
    assert status == 0


def test_server_that_does_not_speak_http() -> None:
    """[C2.1-b] A reply that is not HTTP: E201 with the client's reason; exit 2."""
    with ScriptServer({"*": Script(head=b"SSH-2.0-OpenSSH_9.2\r\n\r\n")}) as server:
        status, out, err = check([server.url()])
    assert status == 2
    assert codes(out) == ["E201"]
    assert "request failed: " in out[0]
    assert "Traceback" not in err


def test_refusal_bodies_long_or_cut() -> None:
    """[C2.1-a] A long refusal body is quoted in part; a cut one does not break the report."""
    long = Script(head=head("500 Internal Server Error", Content_Type="text/plain"), steps=[b"z" * 5000])
    cut = Script(head=head("503 Service Unavailable", Content_Length="100"), steps=[b"overloaded"])
    with ScriptServer({"/long": long, "/cut": cut}) as server:
        status, out, _ = check([server.url("/long")])
        assert (status, codes(out)) == (2, ["E200"])
        assert out[0].endswith(": '" + "z" * EXCERPT_CHARS + "'…")
        status, out, _ = check([server.url("/cut")])
    assert (status, codes(out)) == (2, ["E200"])
    assert out[0].endswith("HTTP 503 Service Unavailable: 'overloaded'")


def test_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C during a check: exit 130, no traceback."""
    import envelope.check as check_module

    def interrupted(_: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(check_module, "run", interrupted)
    assert main(["http://127.0.0.1:9/x"]) == 130


def test_help_says_what_defaults_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    """`envelope check --help` as the CLI's other subcommands: what it does, each option's default, examples."""
    parser = argparse.ArgumentParser(prog="envelope")
    add_check_command(parser.add_subparsers(dest="command"))
    with pytest.raises(SystemExit):
        parser.parse_args(["check", "--help"])
    text = capsys.readouterr().out
    assert "examples:" in text
    assert "Exit status: 0 valid, 1 violations, 2 unusable" in " ".join(text.split())
    entries = re.split(r"\n  (?=-)", text.split("options:", 1)[1].split("examples:", 1)[0])[1:]
    assert len(entries) == 13  # -h and the twelve options
    for entry in entries:
        if not entry.startswith("-h, --help"):
            assert "default" in entry, f"{entry.split()[0]} does not say its default"


def test_broken_pipe_exits_quietly() -> None:
    """`python -m envelope.check URL | head -1`: the reader goes away; exit 141, no traceback."""
    bad = sse([b'{"type":"nope","agent":"a","final":true,"delta":""}'] * 3000)
    with ScriptServer({"*": Script(steps=[bad])}) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "envelope.check", server.url()],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None
        assert b"E104" in proc.stdout.readline()
        proc.stdout.close()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 141
    assert b"Traceback" not in err


def test_broken_pipe_in_process(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The same, in this process: main() turns BrokenPipeError into 141 (stdout here has no descriptor)."""
    import envelope.check as check_module

    def gone(_: argparse.Namespace) -> int:
        raise BrokenPipeError

    monkeypatch.setattr(check_module, "run", gone)
    assert main(["http://127.0.0.1:9/x"]) == 141
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("full", ["stdout", "stderr", "both"])
def test_outputs_on_a_full_disk_exit_2(full: str) -> None:
    """spec/cli.md [C3-c] [C3-d], check §5-a: an output that cannot be written is exit 2, whatever the
    stream's verdict (issue 24 §6: both on /dev/full gave 1); the other output says which."""
    cut = sse(valid_lines(), done=False)  # W161 and E209: exit 1 when the outputs work
    with ScriptServer({"*": Script(steps=[cut])}) as server, open("/dev/full", "w") as dev_full:
        out = dev_full if full in ("stdout", "both") else subprocess.PIPE
        err = dev_full if full in ("stderr", "both") else subprocess.PIPE
        proc = subprocess.run(
            [sys.executable, "-m", "envelope", "check", server.url()],
            stdout=out,
            stderr=err,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 2
    if full == "stdout":
        assert "Traceback" not in proc.stderr
        last = proc.stderr.splitlines()[-1]
        assert last.startswith("<stdout>: error: No space left on device; free some space")
        assert "1 error(s), 1 warning(s) in 1 response" in proc.stderr  # the judging went on
    if full == "stderr":
        assert codes(proc.stdout.splitlines()) == ["W161", "E209"]


def test_a_last_event_id_continuation_is_judged_as_one(tmp_path: Path) -> None:
    """check §3.3-a [C3.3-a]: with ``Last-Event-ID`` the response starts mid-stream: no W163 (issue 25 §4).

    The same body without the header is a stream that should start with meta_init (W163),
    and ``envelope validate --continuation`` on the saved body agrees with the check.
    """
    lines = valid_lines()
    tail = sse(lines[2:])  # after the meta_init and the first text chunk (server S2.3-a replays from there)
    assert_valid(sse(lines))
    saved = tmp_path / "tail.sse"
    with ScriptServer({"*": Script(steps=[tail])}) as server:
        status, out, err = check([server.url(), "-H", "Last-Event-ID: run-1:0:2", "--save", str(saved)])
        plain_status, plain_out, _ = check([server.url()])
        assert server.requests[0].headers["last-event-id"] == "run-1:0:2"
    assert (status, out) == (0, [])
    assert "a continuation (Last-Event-ID)" in err
    assert (plain_status, codes(plain_out)) == (0, ["W163"])
    assert saved.read_bytes() == tail
    assert cli_main(["validate", "--continuation", str(saved)]) == 0
    assert cli_main(["validate", "--strict", str(saved)]) == 1


def test_a_204_to_a_continuation_is_a_stream_that_had_ended() -> None:
    """check §3.3-b [C3.3-b]: ``Last-Event-ID`` of the [DONE] event gets 204 (server S2.3-c): complete, exit 0."""
    with ScriptServer({"*": Script(head=head("204 No Content"))}) as server:
        status, out, err = check([server.url(), "-H", "Last-Event-ID: run-1:0:9"])
        refused_status, refused_out, _ = check([server.url()])
    assert (status, out) == (0, [])
    assert "nothing after Last-Event-ID: the stream had ended (HTTP 204)" in err
    assert refused_status == 1  # without the header a 204 is no event stream at all
    assert "E203" in codes(refused_out)


def test_data_nested_too_deep_is_a_usage_error(tmp_path: Path) -> None:
    """[C3.1-b] ``--data @FILE`` nested past the JSON reader's limit: one message, exit 2, no traceback."""
    body = tmp_path / "deep.json"
    body.write_text("[" * 100_000 + "]" * 100_000)
    status, out, err = check(["http://127.0.0.1:9/x", "--data", f"@{body}"])
    assert (status, out) == (2, [])
    assert err == "envelope check: error: --data nests arrays and objects too deeply to read\n"


def test_e109_in_the_check_names_the_flag_that_raises_the_cap() -> None:
    """spec/cli.md C2-c: the check prints E109 with ``--max-line-bytes`` as the remedy, and the flag reads the line."""
    lines = valid_lines(text="z" * 3000)
    body = sse(lines)
    with ScriptServer({"*": Script(steps=[body])}) as server:
        capped_status, capped, _ = check([server.url(), "--max-bytes", "8192", "--max-line-bytes", "1000"])
        raised_status, raised, _ = check([server.url(), "--max-bytes", "8192", "--max-line-bytes", "10000"])
    assert capped_status == 1
    e109 = [line for line in capped if " E109 " in line]
    assert e109
    assert all(line.endswith("; the cap is --max-line-bytes N (now 1000)") for line in e109)
    assert (raised_status, raised) == (0, [])


@pytest.mark.parametrize("closed", [">&-", "2>&-"])
def test_closed_outputs_exit_2_without_a_traceback(closed: str) -> None:
    """spec/cli.md [C3-b] [C3-d]: started with stdout or stderr closed, the check exits 2 (it raised
    AttributeError on the missing stream); a closed stdout is named before any request."""
    with ScriptServer({"*": Script(steps=[sse(valid_lines(), done=False)])}) as server:
        proc = subprocess.run(
            f'exec "{sys.executable}" -m envelope check "{server.url()}" {closed}',
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        requests = len(server.requests)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    if closed == ">&-":
        assert proc.stderr == "<stdout>: error: standard output is closed; redirect it to a file\n"
        assert requests == 0
    else:
        assert codes(proc.stdout.splitlines()) == ["W161", "E209"]
