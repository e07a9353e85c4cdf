"""``benchmarks.publish`` writes one bench run into the README and the docs page, and nothing else."""

from __future__ import annotations

import re

import pytest
from benchmarks.publish import PublishError, _run_body, docs_section, readme_section

from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")


def _published_run_as_bench_md() -> str:
    """The docs page's run, as ``envelope bench`` wrote it (stage headings at ``###``)."""
    start = DOCS.index("\nMachine: ") + 1
    end = DOCS.index("\n## ", start)
    run = DOCS[start:end].rstrip("\n")
    cut = run.find("\n\n", run.index("\n|", run.index("\n#### Targets\n")))
    run = run[:cut] if cut != -1 else run  # the run ends with its target table
    return "# envelope bench\n\n" + re.sub(r"^#### ", "### ", run, flags=re.M) + "\n"


def test_publishing_the_published_run_changes_nothing() -> None:
    body = _run_body(_published_run_as_bench_md())
    assert readme_section(README, body) == README
    assert docs_section(DOCS, body) == DOCS


def test_a_new_run_reaches_both_places_and_only_the_run() -> None:
    bench_md = _published_run_as_bench_md().replace("| yes |", "| YES-NEW |")
    bench_md = re.sub(
        r"^Machine: .*$",
        "Machine: 2 CPUs (a new machine), Python 3.11.7, msgspec 0.22.0",
        bench_md,
        count=1,
        flags=re.M,
    )
    body = _run_body(bench_md)
    readme, docs = readme_section(README, body), docs_section(DOCS, body)
    for new in (readme, docs):
        assert "YES-NEW" in new
        assert "Machine: 2 CPUs (a new machine)" in new
    # Outside the run, not a byte changed: the text before the machine line and after the target table.
    for old, new in ((README, readme), (DOCS, docs)):
        assert new[: old.index("\nMachine: ")] == old[: old.index("\nMachine: ")]
        tail = old[old.index("\n\n", old.index("\n|", old.index("#### Targets"))) :]
        assert new.endswith(tail)


@pytest.mark.parametrize(
    ("bench_md", "says"),
    [
        ("# envelope bench\n\nno run here\n", "no 'Machine:' line"),
        ("Machine: 2 CPUs (x)\nCommand: `envelope bench --stage emit_small`\n\n### emit\n", "no '### Targets'"),
    ],
)
def test_a_bench_md_of_another_shape_is_refused_with_what_is_missing(bench_md: str, says: str) -> None:
    with pytest.raises(PublishError, match=re.escape(says)):
        _run_body(bench_md)
