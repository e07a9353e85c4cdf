"""A module of ``agent_ref`` imported without its extra fails in one line naming the extra (spec cli [C10-d]).

The package root and the command lines said so already; a submodule imported directly
(``import agent_ref.store.postgres`` without psycopg, the server's modules without starlette,
any of the agent without the Claude SDK) gave a bare ``ModuleNotFoundError`` (issue 37).
Each case runs in a fresh interpreter of this venv whose ``sys.meta_path`` refuses the
hidden modules, as an interpreter without them would: nothing is uninstalled. The modules
are found by walking the package, so a module moved into a subpackage is still checked.
"""

from __future__ import annotations

import functools
import os
import pkgutil
import re
import subprocess
import sys

import pytest

import agent_ref
from envelope import _extras

#: Run before anything else in the child: the named modules (and what is inside them) cannot be found.
_BLOCKER = """
import importlib.abc, sys
BLOCKED = sys.argv[1].split(",")
class _Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Blocker())
"""

#: Imports each module named in argv[2], printing ``name|ok|`` or ``name|ErrorType|message``.
_IMPORT_EACH = """
import importlib
for name in sys.argv[2].split(","):
    try:
        importlib.import_module(name)
    except BaseException as exc:
        print(name, type(exc).__name__, exc, sep="|")
    else:
        print(name, "ok", "", sep="|")
"""

#: What the agent extra brings. The Claude SDK depends on ``opentelemetry-api`` itself, so
#: an install with the agent has ``opentelemetry``; the ``otel`` extra adds the SDK and the
#: exporter, which is what is hidden for it.
_AGENT = set(_extras.EXTRAS["agent"])
_HIDDEN_FOR = {
    extra: {"opentelemetry.sdk", "opentelemetry.exporter"} if extra == "otel" else set(modules) - _AGENT
    for extra, modules in _extras.EXTRAS.items()
}
_HIDDEN_FOR["agent"] = _AGENT

#: Every module of the package (``__main__`` runs the command line).
MODULES = sorted(
    info.name for info in pkgutil.walk_packages(agent_ref.__path__, "agent_ref.") if not info.name.endswith("__main__")
)


def _child(hidden: set[str], code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", _BLOCKER + code, ",".join(sorted(hidden)), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        check=False,
    )


def _line(module: str, extra: str) -> str:
    return f"{module} needs the {extra!r} extra: pip install 'envelope-stream[{extra}]'"


@functools.cache
def _outcomes_of(hidden: frozenset[str]) -> dict[str, tuple[str, str]]:
    done = _child(set(hidden), _IMPORT_EACH, ",".join(MODULES))
    assert done.returncode == 0, done.stderr
    rows = [row.split("|", 2) for row in done.stdout.splitlines()]
    outcome = {name: (kind, text) for name, kind, text in rows}
    assert set(outcome) == set(MODULES), done.stdout
    return outcome


def _outcomes(hidden: set[str]) -> dict[str, tuple[str, str]]:
    """Each module's import with ``hidden`` hidden (one child per set, shared by the tests that ask)."""
    return dict(_outcomes_of(frozenset(hidden)))


def test_the_walk_finds_the_package() -> None:
    assert len(MODULES) > 20
    assert "agent_ref.tracing" in MODULES


#: The extras whose modules agent_ref imports (``asgi`` is the codec's: its modules are the server's too).
AGENT_REF_EXTRAS = ["server", "postgres", "mcp", "otel", "openai", "progress", "bench"]


@pytest.mark.parametrize("extra", AGENT_REF_EXTRAS)
def test_without_one_extra_each_module_imports_or_names_it(extra: str) -> None:
    """The agent installed, one extra's modules hidden: a module imports, or names *itself* and that extra."""
    outcome = _outcomes(_HIDDEN_FOR[extra])
    failed = {name: got for name, got in outcome.items() if got[0] != "ok"}
    assert failed == {name: ("MissingExtraError", _line(name, extra)) for name in failed}
    if extra in ("server", "postgres"):  # the server's modules, the PostgreSQL store: imported at the top
        assert failed, f"no module of agent_ref needs the {extra!r} extra at import: was it hidden?"
    else:  # MCP, tracing, ...: imported where used, so the module imports (and its use names the extra)
        assert failed == {}


def test_without_the_agent_extra_each_module_imports_or_names_it() -> None:
    """The codec alone: a module of the agent names the 'agent' extra (the module whose import needs it)."""
    outcome = _outcomes(_HIDDEN_FOR["agent"])
    failed = {name: got for name, got in outcome.items() if got[0] != "ok"}
    assert failed, "no module of agent_ref needs the agent extra at import: was it hidden?"
    pattern = re.compile(r"agent_ref\.[\w.]+ needs the 'agent' extra: pip install 'envelope-stream\[agent\]'")
    assert {name: kind for name, (kind, _) in failed.items()} == dict.fromkeys(failed, "MissingExtraError")
    assert [text for _, text in failed.values() if not pattern.fullmatch(text)] == []


@pytest.mark.parametrize("extra", ["server", "postgres", "agent"])
def test_the_uncaught_import_ends_in_the_one_line(extra: str) -> None:
    """[C10-c]: the last line of the traceback is the extra's line; no chained error names a module instead."""
    outcome = _outcomes(_HIDDEN_FOR[extra])
    # the modules that need the extra themselves (the others fail the same way, through one of these)
    failing = sorted(name for name, (kind, text) in outcome.items() if kind != "ok" and text.startswith(f"{name} "))
    assert failing
    for module in failing:
        done = _child(_HIDDEN_FOR[extra], f"import {module}")
        assert done.returncode == 1, done.stderr
        last = done.stderr.splitlines()[-1]
        assert last == f"envelope._extras.MissingExtraError: {outcome[module][1]}", done.stderr
        assert f"pip install 'envelope-stream[{extra}]'" in last
        assert "During handling" not in done.stderr
        assert "No module named" not in done.stderr
