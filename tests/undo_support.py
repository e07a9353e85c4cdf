"""Helpers of the workspace undo tests (spec agent-ref §WU1): a tree's exact state, links not followed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

#: Relative path -> (kind, permission bits, bytes or a link's target).
Tree = dict[str, tuple[str, int, bytes]]


def tree(root: Path) -> Tree:
    """Every entry under ``root``: kind, permission bits and bytes (a link's target), links not followed."""
    out: Tree = {}
    for here, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = Path(here, name)
            info = path.lstat()
            rel = str(path.relative_to(root))
            if stat.S_ISLNK(info.st_mode):
                out[rel] = ("link", 0, os.readlink(path).encode())
            elif stat.S_ISDIR(info.st_mode):
                out[rel] = ("dir", stat.S_IMODE(info.st_mode), b"")
            elif stat.S_ISREG(info.st_mode):
                out[rel] = ("file", stat.S_IMODE(info.st_mode), path.read_bytes())
            else:
                out[rel] = ("other", stat.S_IMODE(info.st_mode), b"")
    return out
