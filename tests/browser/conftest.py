"""The browser tests' fixtures: Debian's chromium under Playwright, and a page that fails on console errors.

No browser is downloaded: Playwright launches ``/usr/bin/chromium`` (``scripts/system-deps``
installs it). Without chromium or Playwright the tests skip with a loud reason, except in
CI (``CI=true``), where they must run.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pg_support import root_conftest

if TYPE_CHECKING:
    from collections.abc import Iterator

_root = root_conftest()


def __getattr__(name: str) -> Any:
    """``from conftest import X`` elsewhere in the suite: the root conftest's ``X`` (see ``root_conftest``)."""
    return getattr(_root, name)


CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}; CI must run the browser tests (scripts/system-deps, the dev extra)")
    pytest.skip(f"BROWSER TESTS DID NOT RUN: {reason}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium under Playwright, one per module."""
    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if executable is None:
        _unavailable("chromium is not installed (apt-get install -y chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install playwright; never `playwright install`)")
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=executable, args=ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def allowed_errors() -> list[str]:
    """Console messages a test expects (a test that drops the connection expects the browser to say so)."""
    return []


@pytest.fixture
def page(browser: Any, allowed_errors: list[str]) -> Iterator[Any]:
    """A fresh page; console errors and page errors fail the test, unless the test allowed them."""
    context = browser.new_context(viewport={"width": 1100, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(f"pageerror: {exc}"))
    page.on("console", lambda msg: errors.append(f"console.error: {msg.text}") if msg.type == "error" else None)
    page.set_default_timeout(30_000)
    yield page
    context.close()
    unexpected = [e for e in errors if not any(a in e for a in allowed_errors)]
    assert not unexpected, "\n".join(unexpected)
