"""MkDocs hook: the spec files become pages of the site, read from ``spec/`` at each build.

The spec stays the single source: nothing is copied into ``docs/``. Each ``spec/**/*.md``
becomes the page ``spec/...`` with its text as it is, but for two things MkDocs' Markdown
reads otherwise than GitHub's, where the spec is also read:

* two requirement ids side by side (``[V6.5-a] [V6.6-a]``) look like a reference link,
  and MkDocs warns that the second is an unknown target: its bracket is escaped
  (``\\[``), which renders the very same text;
* a list nested by two spaces would be flattened into its parent list: it is indented
  by four, as Python-Markdown expects.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from mkdocs.structure.files import File

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

#: A requirement id in brackets right after another bracket: ``] [V6.6-a]``.
ADJACENT_ID = re.compile(r"(?<=\])(\s?)\[(?=[A-Z]?[\d.]+-[a-z]\])")
#: An item of a list nested by two spaces.
NESTED_ITEM = re.compile(r"^  (?=[-*] )", re.M)


def spec_text(path: Path) -> str:
    """The spec file's Markdown as the site renders it."""
    text = ADJACENT_ID.sub(r"\1\\[", path.read_text(encoding="utf-8"))
    return NESTED_ITEM.sub("    ", text)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add a page for every spec file (``spec/conformance/README.md`` becomes its folder's index)."""
    spec = Path(config.config_file_path).parent / "spec"
    for path in sorted(spec.rglob("*.md")):
        uri = "spec/" + path.relative_to(spec).as_posix()
        files.append(File.generated(config, uri, content=spec_text(path)))
    return files
