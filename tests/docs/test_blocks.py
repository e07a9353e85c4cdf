"""Every shell and Python block of the documentation site runs as written (issue 28 §4).

The same rules as the README's (``tests/doc_blocks.py``), for every page of ``docs/``
and every spec file the site renders: python blocks run and exit 0; console blocks run
command by command and print what they show; a block the test does not run says why
right above it, ``*Not run by the docs test: REASON.*``; a block marked
``*Run by the docs test against a fresh `agent-ref serve` …*`` runs against a server
started on a free port (the ``envelope check`` example, moved here from the README).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import pytest

from doc_blocks import (
    FENCE,
    ROOT,
    Block,
    agent_serve,
    check_console_block,
    check_served_block,
    ignored_by_git,
    make_root_like,
    parse,
    reasons,
    run_python_block,
    written_files,
)

if TYPE_CHECKING:
    from pathlib import Path

NAME = "docs"  # the markers read "*Not run by the docs test: ...*"
PAGES = sorted([*(ROOT / "docs").rglob("*.md"), *(ROOT / "spec").rglob("*.md")])
#: Kinds that show code to read, not to run.
SHOWN_ONLY = {"", "json", "text", "js", "javascript", "http", "yaml", "toml"}


def _page_id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


BLOCKS = [b for page in PAGES for b in parse(page.read_text(encoding="utf-8"), NAME, _page_id(page))]
PYTHON = [b for b in BLOCKS if b.kind == "python"]
CONSOLE = [b for b in BLOCKS if b.kind == "console" and b.marker not in {"not run", "served"}]
SERVED = [b for b in BLOCKS if b.marker == "served"]


@pytest.fixture
def root_like(tmp_path: Path) -> Path:
    """A scratch folder that looks like the repository's root to the examples."""
    return make_root_like(tmp_path)


def test_the_docs_have_what_the_test_expects() -> None:
    """The parse finds the blocks; every block is of a kind this test knows; sh is never run silently."""
    assert len(PYTHON) >= 15
    assert len(CONSOLE) >= 14
    assert {b.kind for b in BLOCKS} <= {"python", "console", "sh"} | SHOWN_ONLY
    unmarked_sh = [b.id for b in BLOCKS if b.kind == "sh" and b.marker != "not run"]
    assert unmarked_sh == [], "a sh block is either a console block (run) or marked not run"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_fence_is_seen(page: Path) -> None:
    """No block hides from the test: each fence opens at the start of a line, where the parse looks."""
    text = page.read_text(encoding="utf-8")
    fences = re.findall(r"^\s*```", text, re.M)
    assert len(fences) == 2 * len(FENCE.findall(text)), "an indented or unclosed fence"


def test_blocks_not_run_say_why() -> None:
    """Each block the test leaves out carries its reason on its page, for the reader."""
    found = [r for page in PAGES for r in reasons(page.read_text(encoding="utf-8"), NAME)]
    assert len(found) == sum(b.marker == "not run" for b in BLOCKS)
    assert all(len(reason) > 20 for reason in found)


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.id)
def test_python_block_runs(block: Block, root_like: Path) -> None:
    run_python_block(block, root_like)


@pytest.mark.parametrize("block", CONSOLE, ids=lambda b: b.id)
def test_console_block_runs_as_shown(block: Block, root_like: Path) -> None:
    check_console_block(block, root_like)


def test_files_the_commands_write_are_ignored_by_git() -> None:
    """A reader runs the pages' commands from the repository's root: what they write is ignored."""
    written = written_files(BLOCKS)
    if any("agent-ref run" in b.text for b in BLOCKS):
        written.add("agent-ref.db")  # agent-ref's default --db, in the current folder
    assert sorted(w for w in written if w.strip("/") not in ignored_by_git()) == []


def test_the_check_example_is_served() -> None:
    """The ``envelope check`` example runs against a real server, not left out."""
    assert [b.page for b in SERVED if b.kind == "console" and "$ envelope check " in b.text] == ["docs/check.md"]


@pytest.mark.parametrize("block", SERVED, ids=lambda b: b.id)
def test_served_block_runs_as_shown(block: Block, root_like: Path) -> None:
    with agent_serve(root_like) as url:
        check_served_block(block, root_like, url)
