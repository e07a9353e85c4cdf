"""``--files-dir DIR``: the file backend from the command line (spec cli-agent-ref [RCF1-a])."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import TYPE_CHECKING

import httpx2

from browser.agent_server import serving
from cli_support import clean_env

if TYPE_CHECKING:
    from pathlib import Path


def test_rcf1_a_serve_answers_files_from_the_directory_it_is_given(tmp_path: Path) -> None:
    """``serve --files-dir`` serves a stored file with its real name; without the flag there is no route [RCF1-a]."""
    from agent_ref.store.files import DirectoryFiles

    stored = tmp_path / "files"
    # the single-user server's principal is "local" (spec server [FS2-a]: a file is served to its owner)
    asyncio.run(DirectoryFiles(stored).put("file_abc", "chart.png", b"\x89PNG-bytes", principal="local"))
    command = [sys.executable, "-m", "agent_ref", "serve", "--port", "0", "--files-dir", str(stored)]
    with serving(command, env=clean_env()) as base, httpx2.Client(timeout=30) as client:
        got = client.get(f"{base}/files/file_abc")
        assert got.status_code == 200, got.text
        assert got.content == b"\x89PNG-bytes"
        assert 'filename="chart.png"' in got.headers["content-disposition"]
        missing = client.get(f"{base}/files/file_none")
        assert missing.status_code == 404
        assert missing.json()["error"]["type"] == "unknown_file"
    without = [sys.executable, "-m", "agent_ref", "serve", "--port", "0"]
    with serving(without, env=clean_env()) as base, httpx2.Client(timeout=30) as client:
        none = client.get(f"{base}/files/file_abc")
        assert none.status_code == 404
        assert "unknown_file" not in none.text  # no backend, no route: the page's not-found


def test_rcf1_a_a_files_dir_that_is_a_file_is_a_one_line_error(tmp_path: Path) -> None:
    """A path that exists and is not a directory is refused before any run, in one line (exit 2) [RCF1-a]."""
    plain = tmp_path / "plain"
    plain.write_text("x")
    done = subprocess.run(
        [sys.executable, "-m", "agent_ref", "run", "--files-dir", str(plain), "hello"],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().count("\n") == 0
    assert "is not a directory" in done.stderr
    assert "--files-dir" in done.stderr
