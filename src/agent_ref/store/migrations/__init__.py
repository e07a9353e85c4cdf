"""The PostgreSQL schema, as numbered SQL migrations (``NNNN_name.sql``) applied in order.

Owns: the SQL files beside this module and the order they run in. ``store/postgres.py``
applies the ones a database has not recorded in ``schema_migrations`` (spec
``spec/scaleout.md`` §1). A file, once released, is never edited: a change is a new file.
Does not own: applying them (``store_pg.migrate``).
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Final

__all__ = ["MIGRATION_NAME", "migrations"]

#: ``0001_initial.sql``: a four-digit version, an underscore, a name.
MIGRATION_NAME: Final = re.compile(r"(\d{4})_([a-z0-9_]+)\.sql")


def migrations() -> list[tuple[int, str, str]]:
    """Every migration as ``(version, name, sql)``, in version order.

    Raises:
        ValueError: two files share a version, or the versions have a gap.
    """
    found: list[tuple[int, str, str]] = []
    for entry in resources.files(__name__).iterdir():
        match = MIGRATION_NAME.fullmatch(entry.name)
        if match is not None:
            found.append((int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(found) + 1)):
        raise ValueError(f"migration versions must run 1, 2, 3... without gaps or repeats; found {versions}")
    return found
