"""A copy of the checkout's build inputs, for tests that build or install the project from scratch.

Owns: which files a build needs (``pyproject.toml``, ``setup.py``, the README, the licence and
``src/`` without compiled modules, their manifest, caches or egg-info), copied once per test.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md", "LICENSE")


def copy_source_tree(dest: Path) -> Path:
    """Copy what a build of the project reads into ``dest`` (created) and return it.

    Compiled modules (``*.so``), their manifest (``_speedups.json``), ``__pycache__`` and
    ``*.egg-info`` are left out, so a build from the copy starts as a fresh clone's would.
    """
    dest.mkdir()
    for name in BUILD_FILES:
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(
        ROOT / "src",
        dest / "src",
        ignore=shutil.ignore_patterns("*.so", "_speedups.json", "__pycache__", "*.egg-info"),
    )
    return dest
