"""The published benchmark figures are one ``envelope bench`` run, and their targets are the bench's.

Issue 31 §2: the target table shown must be the targets ``envelope bench`` checks (same
names, same goals), for the ``--size-mb`` of the command printed beside it; and the run
shown must say how to reproduce it (the command, the machine line) and how noisy it was
(each target's spread). Issue 28 §4 moved the full run (every stage's table) to the
documentation site, ``docs/benchmarks.md``, and kept the target table, with its command
and machine line, in the README (issues 26/31): both are checked, and must show the same
run. No timing is asserted.
"""

from __future__ import annotations

import re

import pytest
from benchmarks.engine import planned_targets

from conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs" / "benchmarks.md"


def _readme_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Benchmarks\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def _docs_run() -> str:
    """The docs page's latest run: from its heading to the next ``## `` heading."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("\n## The latest run\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


SHOWN = {"README": _readme_section, "docs": _docs_run}


def _table_after(text: str, heading: str) -> list[list[str]]:
    rows: list[list[str]] = []
    for line in text[text.index(heading) :].splitlines()[1:]:
        if not line.strip():
            if rows:
                break
            continue
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows[2:]  # past the header and the rule


def _command(section: str) -> str:
    command = re.search(r"^Command: `(envelope bench [^`]*)`", section, re.M)
    assert command, "the bench run shown must print the command that made it"
    return command.group(1)


@pytest.mark.parametrize("where", sorted(SHOWN))
def test_the_target_table_is_the_bench_targets(where: str) -> None:
    section = SHOWN[where]()
    size = re.search(r"--size-mb ([0-9.]+)", _command(section))
    assert size
    shown = [(row[0], row[1]) for row in _table_after(section, "#### Targets")]
    assert shown == planned_targets(float(size.group(1)))


@pytest.mark.parametrize("where", sorted(SHOWN))
def test_the_run_says_where_and_how_noisy(where: str) -> None:
    section = SHOWN[where]()
    assert re.search(r"^Machine: \d+ CPUs \(.+\), Python [0-9.]+, msgspec [0-9.]+", section, re.M)
    rows = _table_after(section, "#### Targets")
    timed = [row for row in rows if "x " in row[1]]  # the ratio targets
    assert timed
    for row in timed:
        assert re.search(r"\(CPU; rounds [0-9.]+-[0-9.]+", row[2]), row  # each with its spread


def test_the_readme_and_the_docs_show_the_same_run() -> None:
    """One run, two places: the same machine, command and target rows (a refresh updates both)."""
    readme, docs = _readme_section(), _docs_run()
    machine = re.compile(r"^Machine: .*$", re.M)
    assert machine.findall(readme) == machine.findall(docs)
    assert _command(readme) == _command(docs)
    assert _table_after(readme, "#### Targets") == _table_after(docs, "#### Targets")


def test_the_docs_show_every_stage_of_the_run() -> None:
    """The docs page carries the full run: a table per stage before the targets."""
    run = _docs_run()
    stages = re.findall(r"^#### (?!Targets$)(.+)$", run, re.M)
    assert len(stages) >= 5
    for stage in stages:
        rows = _table_after(run, f"#### {stage}\n")
        assert rows, stage
        assert rows[0][0].startswith("ours"), stage
