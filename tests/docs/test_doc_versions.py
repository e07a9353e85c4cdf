"""The pages say what the package and its tests say: the node version, the example's FastAPI."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from doc_blocks import ROOT


def test_the_javascript_page_names_the_node_version_of_engines() -> None:
    """docs/javascript.md's "node (N or newer)" is js/package.json's ``engines``, ``>=N``."""
    engines = json.loads((ROOT / "js" / "package.json").read_text(encoding="utf-8"))["engines"]["node"]
    page = (ROOT / "docs" / "javascript.md").read_text(encoding="utf-8")
    said = re.findall(r"node \((\d+) or newer", page)
    assert said, "the page names no node version"
    assert {f">={n}" for n in said} == {engines}


def test_the_tests_run_on_a_node_the_engines_allow() -> None:
    """The node the JavaScript tests run on is one ``engines`` allows (what is promised is what is tested)."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: bash scripts/system-deps")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=True).stdout
    engines = json.loads((ROOT / "js" / "package.json").read_text(encoding="utf-8"))["engines"]["node"]
    assert int(version.lstrip("v").split(".")[0]) >= int(engines.removeprefix(">="))


def test_the_delivery_page_says_the_example_needs_fastapi() -> None:
    page = (ROOT / "docs" / "delivery.md").read_text(encoding="utf-8")
    assert "examples/fastapi_app.py" in page
    assert "pip install 'envelope-stream[asgi]' fastapi" in page
