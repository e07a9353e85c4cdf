"""A library module behind an extra, imported without it, fails in one line naming the extra (spec cli [C10-c]).

Each case runs in a fresh interpreter of this venv whose ``sys.meta_path`` refuses the
extra's modules, as an interpreter without them would: nothing is uninstalled.
"""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys

import pytest

import envelope
from envelope import _extras

#: Run before anything else in the child: the named top-level modules cannot be found.
_BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Blocker())
"""

#: The modules of ``envelope`` whose imports need an extra, and that extra.
BEHIND_AN_EXTRA = {"envelope.delivery.asgi": "asgi", "envelope.delivery.postgres": "postgres"}


def _child(blocked: set[str], code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", _BLOCKER + code, ",".join(sorted(blocked))],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def _line(module: str, extra: str) -> str:
    return f"{module} needs the {extra!r} extra: pip install 'envelope-stream[{extra}]'"


@pytest.mark.parametrize(("module", "extra"), sorted(BEHIND_AN_EXTRA.items()))
def test_the_import_names_the_extra(module: str, extra: str) -> None:
    """[C10-c]: uncaught, the import ends in the one line; no chained traceback names the module instead."""
    done = _child(set(_extras.EXTRAS[extra]), f"import {module}")
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == f"envelope._extras.MissingExtraError: {_line(module, extra)}"
    assert "During handling" not in done.stderr
    assert "No module named" not in done.stderr


@pytest.mark.parametrize(("module", "extra"), sorted(BEHIND_AN_EXTRA.items()))
def test_the_error_is_a_module_not_found_error_with_the_name(module: str, extra: str) -> None:
    """A guard written ``except ModuleNotFoundError`` (or ``ImportError``) still catches it."""
    code = (
        f"try:\n    import {module}\n"
        "except ModuleNotFoundError as exc:\n    print(type(exc).__name__, exc.name, exc, sep='|')\n"
    )
    done = _child(set(_extras.EXTRAS[extra]), code)
    assert done.returncode == 0, done.stderr
    name, missing, message = done.stdout.rstrip("\n").split("|")
    assert name == "MissingExtraError"
    assert missing.partition(".")[0] in _extras.EXTRAS[extra]
    assert message == _line(module, extra)


def test_every_module_of_envelope_imports_or_names_its_extra() -> None:
    """With every extra missing, each module imports, or says which extra it needs: no bare error."""
    modules = sorted(
        info.name
        for info in pkgutil.walk_packages(envelope.__path__, "envelope.")
        if not info.name.endswith("__main__")  # runs the command line
    )
    assert "envelope.delivery.asgi" in modules  # the walk found the package's modules
    code = (
        "import importlib\n"
        f"for name in {modules!r}:\n"
        "    try:\n        importlib.import_module(name)\n"
        "    except BaseException as exc:\n        print(name, type(exc).__name__, exc, sep='|')\n"
        "    else:\n        print(name, 'ok', '', sep='|')\n"
    )
    blocked = {m for ms in _extras.EXTRAS.values() for m in ms}
    done = _child(blocked, code)
    assert done.returncode == 0, done.stderr
    outcome = {name: (kind, text) for name, kind, text in (row.split("|", 2) for row in done.stdout.splitlines())}
    assert set(outcome) == set(modules)
    failed = {name: got for name, got in outcome.items() if got[0] != "ok"}
    assert failed == {m: ("MissingExtraError", _line(m, extra)) for m, extra in BEHIND_AN_EXTRA.items()}


def test_a_broken_dependency_is_not_called_a_missing_extra() -> None:
    """Only a module the extra brings makes the extra's line; any other keeps its own error."""
    other = ModuleNotFoundError("No module named 'anyio'", name="anyio")
    assert _extras.import_failed(other, "envelope.delivery.asgi", "asgi") is other
    inside = ModuleNotFoundError("No module named 'starlette.routing'", name="starlette.routing")
    got = _extras.import_failed(inside, "envelope.delivery.asgi", "asgi")
    assert isinstance(got, _extras.MissingExtraError)
    assert got.name == "starlette.routing"
    assert str(got) == _line("envelope.delivery.asgi", "asgi")
