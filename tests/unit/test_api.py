"""The public surface: README and ``__all__`` agree, the core is sans-I/O, README examples run."""

from __future__ import annotations

import ast
import re
from typing import TYPE_CHECKING, Any

import envelope
from conftest import ROOT

if TYPE_CHECKING:
    from pathlib import Path

SRC = ROOT / "src" / "envelope"
README = ROOT / "README.md"
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
EDGES = {"cli.py", "__main__.py"}


def _readme_api_names() -> set[str]:
    text = README.read_text()
    section = text[text.index("## Public API") :]
    section = section[: section.index("\n## ", 5)]
    names: set[str] = set()
    for row in section.splitlines():
        if row.startswith("| `"):
            first_cell = row.split("|")[1]
            names |= {re.split(r"[(\s]", n)[0] for n in re.findall(r"`([^`]+)`", first_cell)}
    return names


def test_readme_lists_exactly_the_public_api() -> None:
    assert _readme_api_names() == set(envelope.__all__)


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


def test_readme_examples_run() -> None:
    """The two README snippets: the server one produces bytes, the reader one rebuilds them."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    scope: dict[str, Any] = {}
    exec(blocks[0], scope)  # the README's own example
    data = b"".join(scope["agent_stream"]("agent-7"))
    chunks = [data[i : i + 7] for i in range(0, len(data), 7)]
    reading: dict[str, Any] = {"response_byte_chunks": chunks, "print": lambda *a: reading.setdefault("out", a)}
    exec(blocks[1], reading)
    out = reading["out"][0]
    assert out["done"] is True
    text = out["agents"]["agent-7"]["blocks"][1]
    assert text["content"] == 'Hello, "world"\n'
    assert text["citations"] == [{"cited_text": "Hello", "citation_type": "char_location"}]
    assert out["agents"]["agent-7"]["blocks"][2]["input"] == {"q": "x"}
