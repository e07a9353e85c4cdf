"""A file named after a credential is a path, not a key: refusals keep their reason (spec agent-ref [WM1-d])."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from agent_ref.cli.commands import main
from agent_ref.policy import scrub
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    "text",
    [
        "/etc/passwd: outside the workspace /srv/ws",
        "/etc/app/token: permission denied",
        "/run/secrets/api_key: no such file",
        "C:\\app\\password: access is denied",
    ],
)
def test_spec_WM1_d_a_path_ending_in_a_key_word_is_kept(text: str) -> None:
    """[WM1-d] A key word right after `/` or `\\` is a file's name: the message after it is not a value."""
    assert scrub.public(text) == text


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("password: hunter22", "password: [redacted]"),
        ("/etc/passwd: password=hunter22", "/etc/passwd: password=[redacted]"),
        ("db_password=hunter22 next", "db_password=[redacted] next"),
        ("config.passwd: hunter22", "config.passwd: [redacted]"),
        ('{"token": "abc.def"}', '{"token": "[redacted]"}'),
        ("Authorization: Bearer abcdefgh123", "Authorization: Bearer [redacted]"),
    ],
)
def test_spec_WM1_d_keys_are_still_redacted(text: str, redacted: str) -> None:
    """[WM1-d] The key forms beside a path, dotted, underscored or quoted are caught as before."""
    assert scrub.public(text) == redacted


def test_spec_WM1_d_the_workspace_refusal_of_etc_passwd_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """[WM1-d] `tools call Read` of /etc/passwd is refused naming the path and `outside the workspace`."""
    argv = ["tools", "call", "Read", "--workspace", str(tmp_path), "--input", '{"file_path": "/etc/passwd"}']
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert_valid(out)
    lines = [event.removeprefix("data: ").encode() for event in out.split("\n\n") if event]
    assert_valid(lines)
    (result,) = [json.loads(x) for x in lines if b'"tool_result"' in x]
    assert "/etc/passwd: outside the workspace" in result["delta"]
    assert "[redacted]" not in result["delta"]
