"""Helpers of the proxy tests: Debian's nginx in front of ``examples/fastapi_app.py``, both started as a user would.

nginx runs from a configuration this file writes into a tmp dir: nginx's default
buffering settings plus the location block ``docs/deployment.md`` documents, read from
the page itself (the upstream's port replaced), so the page and the test cannot drift.
``nginx -p DIR -c FILE -e FILE -g 'daemon off;'`` on a free loopback port, as the user
running the tests (root too: then the workers stay root, since the tmp dir is root's).
Without nginx the tests skip with a loud reason, except with ``CI=true``, where they fail
(``scripts/system-deps`` installs it). Issue 39 item 6.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import httpx2
import pytest

from fault_support import wait_until

if TYPE_CHECKING:
    from collections.abc import Callable

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "fastapi_app.py"
DEPLOYMENT = ROOT / "docs" / "deployment.md"
DOCUMENTED_UPSTREAM = "http://127.0.0.1:8000"


def nginx_binary() -> str:
    """Debian's nginx, or the skip (or, in CI, the failure) that says it is missing."""
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)), None)
    if found is None:
        reason = "nginx is not installed (apt-get install -y nginx; scripts/system-deps does)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI must run the proxy tests")
        pytest.skip(f"PROXY TESTS DID NOT RUN: {reason}")
    return found


def documented_location() -> str:
    """The nginx ``location`` block of ``docs/deployment.md``, as written there."""
    page = DEPLOYMENT.read_text(encoding="utf-8")
    section = page[page.index("\n## nginx\n") :]
    found = re.search(r"\n```text\n(location / \{\n.*?\n\})\n```\n", section, re.S)
    assert found is not None, "docs/deployment.md has no nginx location block under '## nginx'"
    block = found.group(1)
    assert DOCUMENTED_UPSTREAM in block
    return block


def free_port() -> int:
    """A port free on loopback now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(proc: subprocess.Popen[bytes], url: str, what: str) -> Callable[[], bool]:
    def check() -> bool:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            pytest.fail(f"{what} exited ({proc.returncode}) before answering: {err[-2000:]}")
        try:
            httpx2.get(url, timeout=2)
        except httpx2.TransportError:
            return False
        return True

    return check


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(20)
    if proc.stderr is not None:
        proc.stderr.close()


@dataclass
class Example:
    """The example app, its own process on loopback."""

    base: str
    journal_dir: Path
    proc: subprocess.Popen[bytes]


@dataclass
class Proxy:
    """nginx in front of an ``Example``."""

    base: str
    port: int
    config: str
    proc: subprocess.Popen[bytes]


def start_example(tmp: Path, *, hold_until: Path | None = None) -> Example:
    """``python examples/fastapi_app.py --port P --journal-dir DIR [--hold-until FILE]``, answering."""
    port, journal_dir = free_port(), tmp / "journal"
    args = [sys.executable, str(EXAMPLE), "--port", str(port), "--pace", "0.005", "--journal-dir", str(journal_dir)]
    if hold_until is not None:
        args += ["--hold-until", str(hold_until)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    example = Example(f"http://127.0.0.1:{port}", journal_dir, proc)
    try:
        wait_until(_answers(proc, example.base + "/streams/none", "the example"), "the example's start", timeout=60)
    except BaseException:
        stop(proc)
        raise
    return example


def nginx_config(tmp: Path, port: int, upstream: str, location: str) -> str:
    """A whole nginx configuration: defaults (buffering on), all paths in ``tmp``, the given location block."""
    user = "user root;\n" if os.geteuid() == 0 else ""  # the workers must reach tmp, which is root's then
    temp = "\n".join(
        f"    {kind}_temp_path {tmp / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    block = location.replace(DOCUMENTED_UPSTREAM, upstream)
    server = "\n".join(f"        {line}" for line in block.splitlines())
    return (
        f"{user}worker_processes 1;\npid {tmp / 'nginx.pid'};\nerror_log {tmp / 'error.log'} warn;\n"
        "events { worker_connections 64; }\n"
        f"http {{\n    access_log {tmp / 'access.log'};\n{temp}\n"
        f"    server {{\n        listen 127.0.0.1:{port};\n        server_name _;\n{server}\n    }}\n}}\n"
    )


def start_nginx(tmp: Path, upstream: str, location: str) -> Proxy:
    """nginx on a free loopback port, in the foreground, with ``nginx_config``; answering."""
    binary = nginx_binary()
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    config = nginx_config(tmp, port, upstream, location)
    (tmp / "nginx.conf").write_text(config, encoding="utf-8")
    test = subprocess.run(
        [binary, "-t", "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(tmp / "error.log")],
        capture_output=True,
        check=False,
        timeout=30,
    )
    assert test.returncode == 0, f"nginx refused the configuration: {test.stderr.decode(errors='replace')}"
    proc = subprocess.Popen(
        [binary, "-p", str(tmp), "-c", str(tmp / "nginx.conf"), "-e", str(tmp / "error.log"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    proxy = Proxy(f"http://127.0.0.1:{port}", port, config, proc)
    try:
        wait_until(_answers(proc, proxy.base + "/streams/none", "nginx"), "nginx's start", timeout=30)
    except BaseException:
        stop(proc)
        raise
    return proxy
