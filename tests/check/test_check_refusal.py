"""A refused request (non-2xx) is one ``E200`` on one line, with a bounded excerpt of the body [C2.1-a]."""

from __future__ import annotations

import os
import subprocess
import sys

from envelope._check import ERROR_BODY_BYTES, ResponseCheck
from envelope._quote import EXCERPT_CHARS

from ._servers import Script, ScriptServer, head

#: A framework's 404 page: a head with a style sheet, then the text, over many lines.
NOT_FOUND_PAGE = (
    b"<!DOCTYPE html>\n<html lang='en'>\n<head>\n  <meta charset='utf-8'>\n"
    b"  <title>404 &ndash; Page Not Found</title>\n  <style>\n    body { font-family: sans-serif; }\n"
    b"  </style>\n</head>\n<body>\n  <h1>Not Found</h1>\n"
    + b"  <p>The requested URL was not found on this server.</p>\n" * 200
    + b"</body>\n</html>\n"
)


def _e200(status: int, reason: str, body: bytes, content_type: str | None = "text/html; charset=utf-8") -> str:
    """The one message ``head`` gives for a refusal."""
    check = ResponseCheck("http://t/")
    headers = [] if content_type is None else [("Content-Type", content_type)]
    found = check.head(status, reason, headers, 0.0, body)
    assert [v.code for v in found] == ["E200"]
    assert check.close(0.0) == []
    return found[0].message


def test_an_html_page_is_shown_by_its_title() -> None:
    assert _e200(404, "Not Found", NOT_FOUND_PAGE) == "HTTP 404 Not Found: '404 \u2013 Page Not Found'"


def test_an_html_page_without_a_title_is_its_text_on_one_line_and_bounded() -> None:
    page = NOT_FOUND_PAGE.replace(b"<title>404 &ndash; Page Not Found</title>", b"")
    message = _e200(404, "Not Found", page)
    assert "\n" not in message
    assert "font-family" not in message  # the style sheet is no text
    assert message.startswith("HTTP 404 Not Found: 'Not Found The requested URL was not found on this server. The")
    quoted = message.removeprefix("HTTP 404 Not Found: ")
    assert quoted.endswith("'…")  # cut; no size: only the first bytes were read
    assert len(quoted) == 1 + EXCERPT_CHARS + 2  # the quotes around EXCERPT_CHARS characters, then the ellipsis


def test_a_json_error_is_quoted_whole_when_short() -> None:
    body = b'{"detail": "Not Found"}\n'
    assert _e200(404, "Not Found", body, "application/json") == 'HTTP 404 Not Found: \'{"detail": "Not Found"}\''


def test_control_characters_of_the_body_are_escaped() -> None:
    body = b"\x1b[2J\x1b[Hfake: E100 line\roverwritten\x07"
    message = _e200(500, "Internal Server Error", body, "text/plain")
    assert message == "HTTP 500 Internal Server Error: '\\x1b[2J\\x1b[Hfake: E100 line overwritten\\x07'"
    assert message.isprintable()


def test_an_empty_body_leaves_the_status_alone() -> None:
    assert _e200(503, "Service Unavailable", b"  \r\n ") == "HTTP 503 Service Unavailable"
    assert _e200(404, "", b"<html><body></body></html>") == "HTTP 404"


def test_only_the_first_bytes_are_read() -> None:
    """What the shell passes is bounded too: past ``ERROR_BODY_BYTES`` the core reads nothing."""
    body = b"a" * ERROR_BODY_BYTES + b"<title>late</title>"
    assert "late" not in _e200(404, "Not Found", body, "text/plain")


def test_envelope_check_on_a_404_page_prints_one_line() -> None:
    """[C2.1-a] The command line: exit 2, one E200 line naming the status and the page's title."""
    script = Script(head=head("404 Not Found", Content_Type="text/html"), steps=[NOT_FOUND_PAGE])
    with ScriptServer({"*": script}) as server:
        env = {**os.environ, "NO_COLOR": "1"}
        done = subprocess.run(
            [sys.executable, "-m", "envelope", "check", server.url()],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert done.stdout == f"{server.url()}:1:1: E200 HTTP 404 Not Found: '404 \u2013 Page Not Found'\n"
    assert "Traceback" not in done.stderr
    assert "found on this server" not in done.stdout + done.stderr
