"""The public surface: the API reference page's list and ``__all__`` agree, the core is sans-I/O, README examples run."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import envelope
from conftest import ROOT
from validating import assert_valid

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

SRC = ROOT / "src" / "envelope"
README = ROOT / "README.md"
#: The page that lists the public names (issue 28 §4 moved the list there from the README).
API_PAGE = ROOT / "docs" / "reference" / "envelope.md"
#: Modules the codec core must never import: it does no I/O and needs no client (STYLE §1).
FORBIDDEN = {
    "asyncio",
    "socket",
    "httpx",
    "httpx2",
    "starlette",
    "anthropic",
    "urllib",
    "http",
    "subprocess",
    "threading",
}
#: The edge modules that may print and open files.
EDGES = {"cli.py", "__main__.py", "check.py", "client.py"}


def _listed_api_names() -> set[str]:
    """The names in the first cell of each row of the page's table of public names."""
    text = API_PAGE.read_text(encoding="utf-8")
    section = text[text.index("## The names at a glance") :]
    section = section[: section.index("\n## ", 5)]
    names: set[str] = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            first_cell = row.split("|")[1]
            names |= {re.split(r"[(\s]", n)[0] for n in re.findall(r"`([^`]+)`", first_cell)}
    return names


def test_the_reference_page_lists_exactly_the_public_api() -> None:
    assert _listed_api_names() == set(envelope.__all__)


def test_all_names_resolve() -> None:
    for name in envelope.__all__:
        assert hasattr(envelope, name), name


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_core_is_sans_io() -> None:
    """No module of the codec but the CLI edge imports I/O or network libraries, or prints."""
    for path in SRC.glob("*.py"):
        if path.name in EDGES:
            continue
        bad = _imports(path) & FORBIDDEN
        assert not bad, f"{path.name} imports {bad}"
        source = path.read_text()
        assert "print(" not in source, f"{path.name} prints"
        assert not re.search(r"(?<![\w.])open\(", source), f"{path.name} opens files"


def test_every_module_says_what_it_owns() -> None:
    for path in SRC.glob("*.py"):
        doc = ast.get_docstring(ast.parse(path.read_text()))
        assert doc, f"{path.name} has no module docstring"


def test_readme_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The two codec snippets: the server one produces a valid stream that rebuilds as meant;
    the reader one rebuilds the golden stream it reads (``tests/readme/`` runs every block)."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    scope: dict[str, Any] = {"print": lambda *_: None}
    exec(blocks[0], scope)  # the README's own example
    data = b"".join(scope["agent_stream"]("agent-7"))
    assert_valid(data)
    out = envelope.reconstruct(line for line in envelope.StreamReader().feed(data)).to_dict()
    assert out["done"] is True
    text = out["agents"]["agent-7"]["blocks"][1]
    assert text["content"] == 'Hello, "world"\n'
    assert text["citations"] == [{"cited_text": "Hello", "citation_type": "char_location"}]
    assert out["agents"]["agent-7"]["blocks"][2]["input"] == {"q": "x"}
    monkeypatch.chdir(ROOT)  # the README's commands and snippets run from the root
    reading: dict[str, Any] = {"print": lambda *a: reading.setdefault("out", a)}
    exec(blocks[1], reading)
    want = json.loads((ROOT / "fixtures" / "golden" / "seed_thinking" / "blocks.json").read_text())
    assert reading["out"][0] == want
    assert reading["left_open"] == []


def test_import_envelope_loads_only_the_codec() -> None:
    """``import envelope`` loads the codec and what it needs: no benchmark engine, no chart,
    no HTTP client or SDK, no asyncio, no CLI (issue 17 §1); checked in a fresh interpreter."""
    code = "import sys, envelope; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "envelope" in loaded
    assert "msgspec" in loaded
    outside = {"benchmarks", "matplotlib", "httpx", "httpx2", "anthropic", "asyncio", "rich", "agent_ref", "ag_ui"}
    tops = {name.split(".")[0] for name in loaded}
    assert sorted(tops & outside) == []
    ours = sorted(name for name in loaded if name.startswith("envelope."))
    assert not [name for name in ours if "bench" in name or name == "envelope.cli"], ours
    assert not list(SRC.glob("*bench*")), "the benchmark engine lives in benchmarks/, not in the package"
