"""The JS package's fixtures: node, the test tools from ``npm ci``, a real ``agent-ref serve``.

Node and npm are required: missing in CI (``CI=true``) is a failure; elsewhere the tests
skip saying so. ``npm ci`` installs ``tests/js/package-lock.json`` (fast-check,
typescript: test tools only, the package itself has no dependencies), bounded in time.
"""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

import pytest

from browser.agent_server import agent_serve
from js.js_support import HERE, NPM_CI_TIMEOUT, TOKEN, tool, unavailable

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture(scope="session")
def node() -> str:
    """The node binary."""
    return tool("node")


@pytest.fixture(scope="session")
def npm_modules() -> Path:
    """``tests/js/node_modules`` as ``npm ci`` makes it from the committed lock file."""
    npm = tool("npm")
    try:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"],
            cwd=HERE,
            capture_output=True,
            text=True,
            timeout=NPM_CI_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        unavailable(f"npm ci took more than {NPM_CI_TIMEOUT} s")
    if done.returncode != 0:
        unavailable(f"npm ci failed: {done.stderr[-2000:]}")
    return HERE / "node_modules"


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``agent-ref serve`` (SQLite store, file journal, demo subagents) with a token; its base URL."""
    db = tmp_path_factory.mktemp("js-live") / "agents.db"
    with agent_serve(db, "--token", TOKEN) as base:
        yield base
