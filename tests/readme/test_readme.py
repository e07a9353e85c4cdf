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
  runs the commands, checks their status and streams, and leaves the output alone;
  ``*Run by the README test against a fresh `agent-ref serve` …*`` runs them against a
  server started on a free port, its URL put where the block says
  ``http://127.0.0.1:8000``, and compares the output but for the numbers of its timing
  line (issue 25 §6: the ``envelope check`` example's byte count had gone stale).

The machinery is shared with the documentation site's test: ``tests/doc_blocks.py``.
"""

from __future__ import annotations

import re
import subprocess
import time
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from doc_blocks import (
    BIN,
    ROOT,
    Block,
    check_console_block,
    commands,
    env,
    ignored_by_git,
    make_root_like,
    parse,
    pattern,
    reasons,
    run_block,
    run_python_block,
    same_ids,
    written_files,
)

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

README = ROOT / "README.md"
NAME = "README"  # the markers read "*Not run by the README test: ...*"
#: The marker of a block run against a fresh ``agent-ref serve`` (this test's own).
SERVED = "*Run by the README test against a fresh `agent-ref serve` "
#: Where a served block says the server is.
SHOWN_URL = "http://127.0.0.1:8000"


def blocks() -> list[Block]:
    return parse(README.read_text(encoding="utf-8"), NAME)


def _served(block: Block) -> bool:
    """Whether the line above the block (blank lines aside) is the served marker."""
    lines = README.read_text(encoding="utf-8").split("\n")[: block.line - 1]
    above = next((line for line in reversed(lines) if line.strip()), "")
    return above.startswith(SERVED)


BLOCKS = blocks()
PYTHON = [b for b in BLOCKS if b.kind == "python"]
SERVED_BLOCKS = [b for b in BLOCKS if b.kind == "console" and _served(b)]
CONSOLE = [b for b in BLOCKS if b.kind == "console" and b.marker != "not run" and b not in SERVED_BLOCKS]


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


@pytest.fixture
def served_url(root_like: Path) -> Iterator[str]:
    """``agent-ref serve`` on a free loopback port with a fresh database; its URL without the last ``/``."""
    proc = subprocess.Popen(
        [str(BIN / "agent-ref"), "serve", "--port", "0", "--db", "served.db"],
        cwd=root_like,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    try:
        deadline = time.monotonic() + 60
        url = None
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            if "serving on " in line:
                url = line.split("serving on ", 1)[1].split()[0].rstrip("/")
        assert url is not None, f"agent-ref serve did not start (exit {proc.poll()})"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        proc.stderr.close()


def _timings_as_words(line: str) -> str:
    """A timing line with each number left out (``…``): they differ from run to run."""
    if line.lstrip().startswith("time to first byte"):
        return re.sub(r"\d+(?:\.\d+)?", "…", line)
    return line


def test_the_readme_has_served_blocks() -> None:
    """The envelope check example is run against a real server, not left out."""
    assert any("$ envelope check " in b.text for b in SERVED_BLOCKS)


@pytest.mark.parametrize("block", SERVED_BLOCKS, ids=lambda b: b.id)
def test_served_block_runs_as_shown(block: Block, root_like: Path, served_url: str) -> None:
    assert SHOWN_URL in block.text, f"{block.id}: a served block says where the server is"
    ran = run_block(replace(block, text=block.text.replace(SHOWN_URL, served_url)), root_like)
    for (command, shown), (_, status, out) in zip(commands(block), ran, strict=True):
        assert status == 0, f"{command}: status {status}: {out}"
        expected = [_timings_as_words(line.replace(SHOWN_URL, served_url)) for line in shown]
        want = pattern([same_ids(line) for line in expected])
        got = "\n".join(_timings_as_words(line) for line in out.split("\n"))
        assert want.fullmatch(same_ids(got)), f"{block.id}: `{command}` printed:\n{out}\nshown:\n" + "\n".join(shown)
