"""The README's benchmark figures are one ``envelope bench`` run, and its targets are the bench's.

Issue 31 §2: the target table the README shows must be the targets ``envelope bench``
checks (same names, same goals), for the ``--size-mb`` of the command printed beside it;
and the run shown must say how to reproduce it (the command, the machine line) and how
noisy it was (each target's spread). No timing is asserted.
"""

from __future__ import annotations

import re

from benchmarks.engine import planned_targets

from conftest import ROOT

README = ROOT / "README.md"


def _section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("\n## Benchmarks\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


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


def test_the_readme_target_table_is_the_bench_targets() -> None:
    section = _section()
    command = re.search(r"Command: `(envelope bench [^`]*)`", section)
    assert command, "the README's bench run must print the command that made it"
    size = re.search(r"--size-mb ([0-9.]+)", command.group(1))
    assert size
    shown = [(row[0], row[1]) for row in _table_after(section, "#### Targets")]
    assert shown == planned_targets(float(size.group(1)))


def test_the_readme_run_says_where_and_how_noisy() -> None:
    section = _section()
    assert re.search(r"^Machine: \d+ CPUs \(.+\), Python [0-9.]+, msgspec [0-9.]+", section, re.M)
    rows = _table_after(section, "#### Targets")
    timed = [row for row in rows if "x " in row[1]]  # the ratio targets
    assert timed
    for row in timed:
        assert re.search(r"\(CPU; rounds [0-9.]+-[0-9.]+", row[2]), row  # each with its spread
