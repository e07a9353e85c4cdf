"""What the JS package's tests share: where things are, the live server's token, node and npm or a failure."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
#: The token of the live server: every client test sends it (spec server §5.2-a).
TOKEN = "js-client-test-token"
#: How long ``npm ci`` may take (seconds): a fresh CI machine downloads the tools.
NPM_CI_TIMEOUT = 300


def unavailable(reason: str) -> NoReturn:
    """Fail in CI, skip loudly elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the JS package tests (scripts/system-deps installs node and npm)")
    pytest.skip(f"JS PACKAGE TESTS DID NOT RUN: {reason}")


def tool(name: str) -> str:
    """The path of ``node`` or ``npm``, or a failure (CI) / skip (elsewhere)."""
    found = shutil.which(name)
    if found is None:
        unavailable(f"{name} is not installed")
    return found
