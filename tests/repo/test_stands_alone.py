"""The repository stands alone: no file refers to material beside the clone (issue 13 §0).

The project was started from documents and recordings kept next to it on the team's
machines (a sibling folder). A fresh clone has no such folder, so a file that reads from
it, or tells a reader to look there, is a bug: the data the tests read lives in
``fixtures/`` (``fixtures/corpus/``, ``fixtures/seed_examples/``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Folders that are not the project's own files (tools' output, the venv, VCS data).
SKIP_DIRS = frozenset(
    {".git", ".venv", "venv", "build", "dist", "node_modules", "bench-out", "__pycache__"}
    | {".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", ".benchmarks"}
)
SKIP_SUFFIXES = frozenset({".png", ".db", ".pyc", ".egg-info"})

# The sibling folder's name is spelt in pieces so that this file does not match itself.
_NAME = "sha" + "red"
#: ``../<name>`` anywhere; ``<name>/`` starting a path; ``"<name>"`` as a joined path part.
SIBLING = re.compile(
    rf"\.\./{_NAME}\b"
    rf"|(?:^|[\s`'\"(\[=:])({_NAME})/(?:corpus|seeds|STYLE|legacy-xml-format|hooks)"
    rf"|/\s*\"{_NAME}\"|\"{_NAME}\"\)?\s*/",
    re.MULTILINE,
)

#: Files another helper owns, whose reference is replaced at merge time. Each entry must
#: still match (the test below fails once it is fixed, so the entry is then removed).


def _project_files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        rel = path.relative_to(ROOT)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts):
            continue
        if path.is_file() and path.suffix not in SKIP_SUFFIXES:
            found.append(path)
    return found


def _refers(path: Path) -> list[str]:
    text = path.read_bytes().decode("utf-8", errors="replace")
    return [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)!r}" for m in SIBLING.finditer(text)]


def test_the_pattern_finds_what_it_must() -> None:
    """The check can fail: each form of the reference is caught, look-alikes are not."""
    hits = [
        f"../{_NAME}/corpus/upstream/x.json",
        f"read `{_NAME}/seeds/002.txt`",
        f'ROOT.parent / "{_NAME}" / "corpus"',
        f'Path("{_NAME}") / "corpus"',
    ]
    misses = [f"docx.{_NAME} import Inches", f"a {_NAME} machine", f"{_NAME}.db", f"/usr/{_NAME}/lib"]
    assert all(SIBLING.search(text) for text in hits)
    assert not any(SIBLING.search(text) for text in misses)


def test_no_file_refers_to_the_sibling_folder() -> None:
    """No project file reads from, or points a reader to, a folder beside the clone."""
    files = _project_files()
    assert len(files) > 100, "the walk found the project's files"
    bad = {str(p.relative_to(ROOT)): hits for p in files if (hits := _refers(p))}
    assert bad == {}


def test_the_fixtures_the_tests_read_are_in_the_repository() -> None:
    corpus = ROOT / "fixtures" / "corpus"
    assert (corpus / "README.md").is_file()
    assert (corpus / "LICENSE-upstream").is_file()
    data = sorted(p.name for p in corpus.iterdir() if p.suffix in {".json", ".jsonl", ".txt"})
    assert len(data) == 15
    listed = (corpus / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in listed for name in data), "the README says where each file came from"
    assert len(list((ROOT / "fixtures" / "seed_examples").glob("*.jsonl"))) == 20
