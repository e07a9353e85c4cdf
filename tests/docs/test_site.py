"""The documentation site builds strictly, and renders what it promises (issue 28 §4).

``mkdocs build --strict`` (the configuration says ``strict: true`` too) fails on any
warning: a broken link or anchor, a page outside the navigation, a reference
mkdocstrings cannot resolve, a docstring it cannot parse. The build goes to a temporary
folder, never to ``site/``. Without the ``docs`` extra the build test skips, saying so,
except under ``CI=true`` where a missing tool is a failure.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from docs.hooks.repo_images import IMAGES
from docs.hooks.spec_pages import spec_text

import agent_ref
import envelope
import envelope.anthropic
from doc_blocks import ROOT

if TYPE_CHECKING:
    from pathlib import Path

DOCS = ROOT / "docs"
SPEC = ROOT / "spec"
#: The reference pages and the modules whose ``__all__`` each renders.
REFERENCE = {
    "reference/envelope": envelope,
    "reference/anthropic": envelope.anthropic,
    "reference/agent_ref": agent_ref,
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module with ``mkdocs build --strict``."""
    if importlib.util.find_spec("mkdocs") is None:
        message = "mkdocs is not installed: pip install -e '.[docs]'"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml")]
    done = subprocess.run(
        [*command, "--site-dir", str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert not re.search(r"^(WARNING|ERROR)\b", log, re.M), log
    return out


def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "architecture" / "index.html").is_file()


@pytest.mark.parametrize("page", sorted(REFERENCE))
def test_the_reference_renders_every_public_name(site: Path, page: str) -> None:
    """Each name of the module's ``__all__`` has its entry (an anchor) on its reference page."""
    module = REFERENCE[page]
    html = (site / page / "index.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'id="([\w.]+)"', html))
    public: list[str] = module.__all__
    assert public, module.__name__
    missing = [name for name in public if f"{module.__name__}.{name}" not in anchors]
    assert missing == []


def test_the_pictures_are_in_the_site_and_shown(site: Path) -> None:
    """The pictures made beside their makers are added under ``images/`` (never copied into
    ``docs/``), byte for byte, and every ``images/`` picture a page shows is there."""
    for name, source in IMAGES.items():
        assert (site / "images" / name).read_bytes() == (ROOT / source).read_bytes(), name
    assert not (DOCS / "images").exists()
    shown = {m for page in DOCS.glob("*.md") for m in re.findall(r"\]\(images/([\w.-]+)\)", page.read_text("utf-8"))}
    assert shown == set(IMAGES)


def test_the_guide_pages_are_in_the_navigation() -> None:
    """Every page of ``docs/`` is reachable from the navigation (the build warns only when it is missing)."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s+- [^:]+: ((?!spec/)\S+\.md)$", config, re.M))
    assert listed == {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}


def test_private_modules_stay_out_of_the_reference(site: Path) -> None:
    html = "".join((site / page / "index.html").read_text(encoding="utf-8") for page in REFERENCE)
    assert re.findall(r'id="(envelope\._\w+|agent_ref\.\w+\._\w+)', html) == []


def _spec_pages() -> dict[Path, str]:
    """Each spec file and its page in the site (``README.md`` is its folder's index)."""
    pages = {}
    for path in sorted(SPEC.rglob("*.md")):
        rel = path.relative_to(SPEC).with_suffix("")
        pages[path] = "spec/" + (rel.parent if rel.name == "README" else rel).as_posix()
    return pages


def test_the_spec_is_not_copied_into_the_docs() -> None:
    """The spec's pages are made from ``spec/`` at each build: no spec text lives in ``docs/``."""
    specs = {path.read_text(encoding="utf-8") for path in SPEC.rglob("*.md")}
    copies = [p for p in DOCS.rglob("*.md") if p.read_text(encoding="utf-8") in specs]
    assert copies == []
    assert not (DOCS / "spec").exists()


def test_every_spec_file_is_in_the_navigation() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s+- [^:]+: (spec/\S+\.md)$", config, re.M))
    assert listed == {"spec/" + p.relative_to(SPEC).as_posix() for p in SPEC.rglob("*.md")}


def test_the_spec_text_is_changed_only_where_markdown_would_misread_it() -> None:
    """Line by line: the same text, but for an escaped bracket between adjacent ids and
    two-space nested items indented by four."""
    for path in SPEC.rglob("*.md"):
        for before, after in zip(
            path.read_text(encoding="utf-8").split("\n"), spec_text(path).split("\n"), strict=True
        ):
            nested = re.match(r"  [-*] ", before) is not None
            assert after.replace("\\[", "[") == ("  " + before if nested else before), before


def test_what_the_spec_hook_changes(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("- **[X1.1-a]** [X1.1-b] [X2-c] rule\n  - nested\n    - deeper\n[link] [ref]\n", encoding="utf-8")
    assert spec_text(page) == "- **[X1.1-a]** [X1.1-b] \\[X2-c] rule\n    - nested\n    - deeper\n[link] [ref]\n"


@pytest.mark.parametrize("spec", sorted(_spec_pages()), ids=lambda p: p.relative_to(SPEC).as_posix())
def test_the_spec_pages_show_the_spec(site: Path, spec: Path) -> None:
    """The rendered spec page carries the spec's text: its title and every requirement id."""
    text = spec.read_text(encoding="utf-8")
    html = (site / _spec_pages()[spec] / "index.html").read_text(encoding="utf-8")
    ids = re.findall(r"\[([A-Z]?\d+(?:\.\d+)*-[a-z])\]", text)
    assert [i for i in ids if f"[{i}]" not in html] == []
    title = text.split("\n", 1)[0].lstrip("# ")
    assert title.split("`")[0].strip() in html


#: What makes a browser fetch a URL as it shows a page (not a link the reader follows).
_FETCHED_BY_HTML = re.compile(
    r"<(?:link|script|img|iframe|source|video|audio|embed|object|track|input)\b[^>]*?"
    r"\b(?:href|src|srcset|data|poster)\s*=\s*[\"']?([^\"'\s>]+)",
    re.IGNORECASE,
)
_FETCHED_BY_CSS = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"'])([^\"')\s]+)", re.IGNORECASE)


def test_no_page_fetches_anything_from_another_host(site: Path) -> None:
    """Every stylesheet, script, font and picture a page loads is the site's own (no web fonts).

    A page that loads from another host fails offline and tells that host who reads it.
    The theme's script fetches two things of its own accord, both only when asked: the
    repository's figures from the GitHub API (``repo_url``, not set) and mermaid from a CDN
    (a ``mermaid`` block, none): both are held off here too.
    """
    fetched: dict[str, set[str]] = {}
    for path in sorted(site.rglob("*")):
        if path.suffix not in (".html", ".css"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        found = set(_FETCHED_BY_CSS.findall(text))
        if path.suffix == ".html":
            found |= set(_FETCHED_BY_HTML.findall(text))
        remote = {url for url in found if re.match(r"(?:https?:)?//", url, re.IGNORECASE)}
        if remote:
            fetched[str(path.relative_to(site))] = remote
    pages = sum(1 for _ in site.rglob("*.html"))
    assert pages > 10  # the pages were there to be read
    assert fetched == {}
    every_file = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in site.rglob("*.html"))
    assert "fonts.googleapis.com" not in every_file
    assert "fonts.gstatic.com" not in every_file
    assert 'class="mermaid"' not in every_file
    assert "repo_url" not in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
