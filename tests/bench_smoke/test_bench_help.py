"""Every benchmark's command line explains itself: ``--help`` works, each option says what it does.

Each module of ``benchmarks/`` that runs as ``python -m benchmarks.NAME`` is found by
its ``if __name__ == "__main__":`` line (none found is a failure). Its parser is caught
where ``main`` parses its arguments, and read: a description, a help text for every
option (or an option hidden on purpose, for the children a benchmark starts), and no
issue number, which means nothing to a reader of the help. ``--help`` itself then runs
in a child, as a user types it.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
import subprocess
import sys
from typing import Any

import pytest

from conftest import ROOT

BENCHMARKS = ROOT / "benchmarks"
MODULES = sorted(p.stem for p in BENCHMARKS.glob("*.py") if 'if __name__ == "__main__":' in p.read_text())
#: What a reader of the help cannot look up: a tracker's number.
ISSUE = re.compile(r"\bissues?\s*#?\d", re.IGNORECASE)


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__(parser.prog)
        self.parser = parser


def _parser_of(name: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The parser ``benchmarks.NAME``'s ``main`` builds, caught as it is about to parse."""

    def caught(self: argparse.ArgumentParser, *_: Any, **__: Any) -> Any:
        raise _Parsed(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", caught)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", caught)
    monkeypatch.setattr(sys, "argv", [f"benchmarks.{name}", "--help"])
    module = importlib.import_module(f"benchmarks.{name}")
    main = module.main
    with pytest.raises(_Parsed) as got:
        main(["--help"]) if inspect.signature(main).parameters else main()
    return got.value.parser


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and its subcommands' parsers."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _parsers(sub)
    return found


def test_the_benchmark_commands_were_found() -> None:
    assert {"delivery", "scaling", "compare", "rss_1gb"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_option_says_what_it_does(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    undocumented: list[str] = []
    numbered: list[str] = []
    for parser in _parsers(_parser_of(name, monkeypatch)):
        if not parser.description:
            undocumented.append(f"{parser.prog}: no description")
        for text in (parser.description, parser.epilog):
            if text and ISSUE.search(text):
                numbered.append(f"{parser.prog}: {text}")
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            shown = "/".join(action.option_strings) or action.dest
            if action.help is None or not action.help.strip():
                undocumented.append(f"{parser.prog} {shown}")
            elif action.help != argparse.SUPPRESS and ISSUE.search(action.help):
                numbered.append(f"{parser.prog} {shown}: {action.help}")
    assert undocumented == []
    assert numbered == []


@pytest.mark.parametrize("name", MODULES)
def test_help_runs_and_exits_0(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{name}", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: "), done.stdout
    assert not ISSUE.search(done.stdout), done.stdout
