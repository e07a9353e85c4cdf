"""Each optional part names its extra in one line when it is missing (issue 28 §1).

Here, in the full venv, the extra is made missing by replacing ``missing`` where each
caller looks it up; ``test_base_install`` checks the same lines where the extras are
really absent.
"""

from __future__ import annotations

import io
import sys
import types
from typing import TYPE_CHECKING

import pytest

import agent_ref.cli.commands
import envelope.check
import envelope.cli
from envelope import _extras

if TYPE_CHECKING:
    from collections.abc import Callable


def _without(*extras: str) -> Callable[[str], list[str]]:
    def missing(extra: str) -> list[str]:
        return list(_extras.EXTRAS[extra]) if extra in extras else []

    return missing


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_every_extra_is_installed_here() -> None:
    """The full venv (scripts/test installs `all`) has every extra: the other tests mean something."""
    assert {extra: _extras.missing(extra) for extra in _extras.EXTRAS if _extras.missing(extra)} == {}


def test_the_line_names_the_extra_and_the_install() -> None:
    assert _extras.needs("the agent", "agent") == (
        "the agent needs the 'agent' extra: pip install 'envelope-stream[agent]'"
    )
    assert _extras.missing("agent") == []


@pytest.mark.parametrize(
    ("argv", "gone", "extra"),
    [
        (["--version"], ("agent",), "agent"),
        (["log", "x"], ("agent",), "agent"),
        (["serve"], ("server",), "server"),
        (["runs", "--db", "postgresql://localhost/x"], ("postgres",), "postgres"),
    ],
)
def test_agent_ref_says_which_extra(
    argv: list[str],
    gone: tuple[str, ...],
    extra: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(agent_ref.cli.commands, "missing", _without(*gone))
    assert agent_ref.cli.commands.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("agent-ref: error: ")
    assert err.endswith(f"needs the '{extra}' extra: pip install 'envelope-stream[{extra}]'\n")
    assert err.count("\n") == 1


def test_envelope_check_says_check(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(envelope.check, "missing", _without("check"))
    assert envelope.cli.main(["check", "http://127.0.0.1:9/"]) == 2
    err = capsys.readouterr().err
    assert err == (
        "envelope check: error: checking a live server needs the 'check' extra: pip install 'envelope-stream[check]'\n"
    )


def test_envelope_bench_says_bench(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(envelope.cli, "missing", _without("bench"))
    assert envelope.cli.main(["bench", "--size-mb", "1"]) == 2
    err = capsys.readouterr().err
    assert err == "envelope bench: error: the benchmark needs the 'bench' extra; pip install -e '.[bench]'\n"


def test_no_progress_bar_without_rich_and_one_line_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.setattr(envelope.cli, "missing", _without("progress"))
    source = types.SimpleNamespace(name="big.sse", size=None, seen=0)
    with envelope.cli._progress(source, "reading") as update:  # type: ignore[arg-type]  # the fields it reads
        for seen in range(0, 3 * envelope.cli.PROGRESS_MIN_BYTES, envelope.cli.PROGRESS_MIN_BYTES // 2):
            source.seen = seen
            update()
    assert terminal.getvalue() == (
        "envelope: no progress bar: a progress bar needs the 'progress' extra: "
        "pip install 'envelope-stream[progress]'\n"
    )
