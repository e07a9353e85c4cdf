"""The interop package's boundaries: loaded only on demand, msgspec only, sans-I/O API shape."""

from __future__ import annotations

import subprocess
import sys

import pytest

from envelope.interop import InteropError
from envelope.interop.agui import AguiToEnvelope, EnvelopeToAgui
from envelope.interop.vercel import EnvelopeToVercel, VercelToEnvelope


def _loaded(code: str) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.split()


def test_import_envelope_loads_no_interop_module() -> None:
    """[I1-b] ``import envelope`` loads no converter."""
    assert not [m for m in _loaded("import envelope") if m.startswith("envelope.interop")]


def test_the_command_line_loads_no_converter_until_one_runs() -> None:
    loaded = _loaded("import envelope.cli; envelope.cli._parser()")
    assert "envelope.interop.agui" not in loaded
    assert "envelope.interop.vercel" not in loaded


def test_the_converters_load_no_pydantic() -> None:
    """[I1-b] msgspec only: the pydantic models are for the tests."""
    loaded = _loaded("import envelope.interop.agui, envelope.interop.vercel")
    assert not [m for m in loaded if m.split(".")[0] in ("pydantic", "ag_ui", "pydantic_core")]


@pytest.mark.parametrize("make", [EnvelopeToAgui, EnvelopeToVercel, AguiToEnvelope, VercelToEnvelope])
def test_close_ends_the_converter(make: type) -> None:
    """[I1-a] ``feed``/``close``: nothing fed, nothing owed; a closed converter refuses more (I206)."""
    conv = make()
    assert conv.close() == []  # nothing fed: nothing open, nothing to say
    with pytest.raises(InteropError) as caught:
        conv.close()
    assert caught.value.code == "I206"
    with pytest.raises(InteropError) as caught:
        conv.feed("[DONE]")
    assert caught.value.code == "I206"


@pytest.mark.parametrize("make", [AguiToEnvelope, VercelToEnvelope])
@pytest.mark.parametrize("bad", [b"\xff", "[1]", "{}", '{"type": 7}'])
def test_bad_events_are_coded_errors(make: type, bad: bytes | str) -> None:
    with pytest.raises(InteropError) as caught:
        make().feed(bad)
    assert caught.value.code in ("I201", "I202")
    assert caught.value.position.line == 1


def test_the_converters_are_sans_io() -> None:
    """[I1-a] No interop module but the command-line edge (``_cli.py``) prints, opens files or imports I/O."""
    import ast
    import re

    from interop.cases import ROOT

    forbidden = {"socket", "asyncio", "urllib", "http", "subprocess", "threading", "requests", "httpx"}
    paths = sorted((ROOT / "src" / "envelope" / "interop").glob("*.py"))
    assert len(paths) >= 5
    for path in paths:
        if path.name == "_cli.py":
            continue
        source = path.read_text()
        tree = ast.parse(source)
        assert ast.get_docstring(tree), f"{path.name} has no module docstring"
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {
            n.module.split(".")[0]
            for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.module and n.level == 0
        }
        assert not imported & forbidden, f"{path.name} imports {imported & forbidden}"
        assert "print(" not in source, f"{path.name} prints"
        assert not re.search(r"(?<![\w.])open\(", source), f"{path.name} opens files"
