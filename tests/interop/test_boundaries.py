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
