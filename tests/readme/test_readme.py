"""The README's code blocks run as written (issue 13 §2), so they cannot rot.

* Every ```python block runs in a fresh interpreter, in a scratch folder that sees the
  repository's ``fixtures/`` and ``spec/`` (as the README's root does), and must exit 0.
* Every ```console block runs command by command (``$ ...`` lines) in bash, with the
  venv's ``bin`` first on ``PATH`` (what ``source .venv/bin/activate`` does); the
  output it shows must match what the commands print (stdout and stderr together),
  where ``…`` (or ``...``) alone on a line stands for any lines, and inside a line for
  any text. Each stream an ``envelope``/``agent-ref`` command prints goes through the
  strict validator.
* A block right below a line ``*Not run by the README test: REASON.*`` is skipped, and
  says so to the reader; ``*Run by the README test, output not compared: REASON.*``
  runs the commands, checks their status and streams, and leaves the output alone.

The machinery is shared with the documentation site's test: ``tests/doc_blocks.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from doc_blocks import (
    ROOT,
    Block,
    check_console_block,
    ignored_by_git,
    make_root_like,
    parse,
    reasons,
    run_python_block,
    written_files,
)

if TYPE_CHECKING:
    from pathlib import Path

README = ROOT / "README.md"
NAME = "README"  # the markers read "*Not run by the README test: ...*"


def blocks() -> list[Block]:
    return parse(README.read_text(encoding="utf-8"), NAME)


BLOCKS = blocks()
PYTHON = [b for b in BLOCKS if b.kind == "python"]
CONSOLE = [b for b in BLOCKS if b.kind == "console" and b.marker != "not run"]


@pytest.fixture
def root_like(tmp_path: Path) -> Path:
    """A scratch folder that looks like the repository's root to the examples."""
    return make_root_like(tmp_path)


def test_the_readme_has_what_the_test_expects() -> None:
    """The parse finds the blocks; every block is of a kind this test knows."""
    assert len(PYTHON) >= 4
    assert len(CONSOLE) >= 5
    assert {b.kind for b in BLOCKS} <= {"python", "console", "sh", ""}
    unmarked_sh = [b.id for b in BLOCKS if b.kind == "sh" and b.marker != "not run"]
    assert unmarked_sh == [], "a sh block is either a console block (run) or marked not run"


def test_blocks_not_run_say_why() -> None:
    """Each block the test leaves out carries its reason in the README, for the reader."""
    found = reasons(README.read_text(encoding="utf-8"), NAME)
    assert len(found) == sum(b.marker == "not run" for b in BLOCKS)
    assert all(len(reason) > 20 for reason in found)


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.id)
def test_python_block_runs(block: Block, root_like: Path) -> None:
    run_python_block(block, root_like)


@pytest.mark.parametrize("block", CONSOLE, ids=lambda b: b.id)
def test_console_block_runs_as_shown(block: Block, root_like: Path) -> None:
    check_console_block(block, root_like)


def test_files_the_commands_write_are_ignored_by_git() -> None:
    """Every file a README command writes (``-o``, ``>``, ``--out``, the agent's default db) is in .gitignore."""
    text = README.read_text(encoding="utf-8")
    written = written_files(BLOCKS)
    assert {"capture.jsonl", "results.json", "bench-out"} <= written, "the parse found the README's outputs"
    if "agent-ref run" in text:
        written.add("agent-ref.db")  # agent-ref's default --db, in the current folder
    ignored = ignored_by_git()
    assert sorted(w for w in written if w.strip("/") not in ignored) == []
