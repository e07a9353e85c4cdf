"""The check's layering: a sans-I/O core, one I/O shell, and ``import envelope`` without either's client."""

from __future__ import annotations

import ast
import subprocess
import sys

from conftest import ROOT

SRC = ROOT / "src" / "envelope"


def _imports(name: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse((SRC / name).read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def test_core_does_no_io() -> None:
    """_check.py reads no clock, opens no socket or file, imports no client, prints nothing."""
    assert not _imports("_check.py") & {"httpx", "httpx2", "asyncio", "socket", "time", "http", "urllib", "sys"}
    source = (SRC / "_check.py").read_text()
    assert "print(" not in source
    assert "open(" not in source


def test_only_the_http_edges_import_the_client() -> None:
    """httpx2 is imported by check.py and client.py (the Python client, spec/client.md) and by no other module."""
    importers = {p.name for p in SRC.glob("*.py") if {"httpx", "httpx2"} & _imports(p.name)}
    assert importers == {"check.py", "client.py"}


def test_import_envelope_loads_neither_the_check_nor_the_client() -> None:
    """`import envelope` (and the envelope CLI module) load no HTTP client and not envelope.check."""
    code = (
        "import sys, envelope, envelope.cli\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('httpx', 'httpx2') or m == 'envelope.check')\n"
        "print(bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.strip() == "[]"


def test_check_module_imports_the_client_only_when_run() -> None:
    """Importing envelope.check (as the CLI does to register the subcommand) loads no client."""
    code = "import sys, envelope.check\nprint(sorted(m for m in sys.modules if m.startswith('httpx')))\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert proc.stdout.strip() == "[]"
