"""The README's code blocks run as written (issue 13 §2), so they cannot rot; the README stays short.

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
* Issue 28 §4: the README is the pitch, the two commands, three short examples, the
  delivery example, the target table and links; under 200 lines. The reference moved
  to the documentation site (``docs/``, tested by ``tests/docs/``), and every link the
  README makes into it names a page that exists.

The machinery is shared with the documentation site's test: ``tests/doc_blocks.py``.
"""

from __future__ import annotations

import re
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
#: The README's length limit (issue 28 §4): the rest is on the documentation site.
MAX_LINES = 200


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
    assert len(PYTHON) >= 2  # emit, read
    assert len(CONSOLE) >= 2  # the venv's envelope --version, validate
    assert {b.kind for b in BLOCKS} <= {"python", "console", "sh", ""}
    assert {b.marker for b in BLOCKS} <= {"", "not run"}, "served blocks live on the docs pages (tests/docs/)"
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
    if "agent-ref run" in text:
        written.add("agent-ref.db")  # agent-ref's default --db, in the current folder
    ignored = ignored_by_git()
    assert sorted(w for w in written if w.strip("/") not in ignored) == []


def test_the_readme_is_short() -> None:
    """Issue 28 §4: under 200 lines; the reference lives on the documentation site."""
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < MAX_LINES, f"README.md has {lines} lines; move the detail to docs/"


def test_the_readme_keeps_what_it_promises() -> None:
    """The two commands, the three examples (emit, read, validate), the delivery example, the target table."""
    text = README.read_text(encoding="utf-8")
    sh = [b.text for b in BLOCKS if b.kind == "sh"]
    assert any(t.startswith("./scripts/demo ") and "\n./scripts/test " in t for t in sh)
    assert "Emitter(" in PYTHON[0].text
    assert "StreamReader(" in PYTHON[1].text
    assert any("$ envelope validate " in b.text for b in CONSOLE)
    assert "\n## Resumable delivery for your server\n" in text
    assert "\n#### Targets\n" in text


def _links(text: str) -> list[str]:
    return [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t]


def test_the_readme_links_into_the_docs_site() -> None:
    """Every relative link names a file of the repository (anchors aside), and every guide page is linked."""
    text = README.read_text(encoding="utf-8")
    links = _links(text)
    missing = [link for link in links if not (ROOT / link.split("#", 1)[0]).is_file()]
    assert missing == []
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")} - {"docs/index.md"}
    assert sorted(pages - {link.split("#", 1)[0] for link in links}) == []


def test_the_readme_anchors_exist() -> None:
    """A link to ``docs/PAGE.md#anchor`` names a heading of that page (MkDocs' own slugs)."""
    for link in _links(README.read_text(encoding="utf-8")):
        if "#" not in link:
            continue
        page, anchor = link.split("#", 1)
        headings = re.findall(r"^#+ (.+)$", (ROOT / page).read_text(encoding="utf-8"), re.M)
        slugs = {re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", h.replace("`", "")).strip().lower()) for h in headings}
        assert anchor in slugs, f"{link}: no heading with that anchor"
