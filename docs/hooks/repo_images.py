"""MkDocs hook: pictures kept beside what makes them become files of the site, under ``images/``.

The page's screenshot is written by the browser test that checks it
(``src/agent_ref/server/web/screenshot.png``) and the bench's charts by the bench
(``benchmarks/*.png``); they stay where they are made, and the README shows them from
there. The site cannot link outside ``docs/``, so each is added at build time, never copied
into ``docs/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mkdocs.structure.files import File

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files

#: ``images/NAME`` in the site: the file in the repository it is read from.
IMAGES = {
    "screenshot.png": "src/agent_ref/server/web/screenshot.png",
    "bench.png": "benchmarks/bench.png",
    "scaling.png": "benchmarks/scaling.png",
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add each picture as ``images/NAME``; a missing one fails the build, naming it."""
    root = Path(config.config_file_path).parent
    for name, source in IMAGES.items():
        path = root / source
        if not path.is_file():
            raise FileNotFoundError(f"{source}: the picture the site shows as images/{name} is missing")
        files.append(File.generated(config, f"images/{name}", abs_src_path=str(path)))
    return files
