"""``envelope.cli`` and the benchmark engine do not import each other (issue 28 §3).

``envelope bench`` imports ``benchmarks.command`` lazily from the checkout; the engine
raises the command line's error, ``CliError``, which lives in ``envelope._cli_errors`` so
that it need not import ``envelope.cli`` back.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported(path: Path) -> set[str]:
    """Every module a file names in an import statement (at any depth)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_engine_does_not_import_the_command_line() -> None:
    assert "envelope.cli" not in _imported(ROOT / "benchmarks" / "command.py")
    assert "envelope._cli_errors" in _imported(ROOT / "benchmarks" / "command.py")


def test_the_command_line_names_no_benchmark_module_in_an_import_statement() -> None:
    """Only ``envelope bench`` reaches the engine, by ``importlib`` when it runs."""
    assert not [name for name in _imported(ROOT / "src" / "envelope" / "cli.py") if name.startswith("benchmarks")]


def test_loading_the_engine_leaves_the_command_line_unloaded() -> None:
    code = "import sys, benchmarks.command; print('envelope.cli' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_error_is_the_one_the_command_line_prints() -> None:
    from envelope import cli
    from envelope._cli_errors import CliError

    assert cli.CliError is CliError
    assert str(CliError("x.sse", "gone", "look")) == "x.sse: error: gone; look"
