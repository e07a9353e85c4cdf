"""Which build of the hot modules ``import envelope`` loads: compiled (mypyc) or pure Python.

Owns: the choice, made once, before ``envelope/__init__.py`` imports any hot module
(``HOT``): the compiled ``.so`` files that ``setup.py`` builds with mypyc when a C
compiler works, or their ``.py`` sources. The ``.py`` sources are the reference; the
compiled modules are the same code, faster (issue 17 §3).
Does not own: building (``setup.py``), or anything the modules do.

The pure path is taken, for every hot module at once, when:

* ``ENVELOPE_PURE=1`` is in the environment (CI runs the codec tests so as well);
* no compiled module is installed (no compiler at build time, or a pure wheel);
* the compiled modules are stale: a ``.py`` source (or the ``.c`` source of a C extension,
  ``C_EXTENSIONS``) differs from the one they were built from (``_speedups.json``, the
  SHA-256 of each source, written by ``setup.py``), or a C extension is missing. An
  editable install keeps the ``.so`` beside the ``.py`` and Python's importer would load
  the old ``.so``; this check turns that into a warning (``EnvelopeSpeedupsWarning``)
  and the edited source runs. Rebuild with ``pip install -e .`` (``scripts/test`` does).

All or none: the compiled modules call each other natively (``XmlMigrator`` derives
from the compiled ``_Translator``), so a mix of compiled and pure is never loaded. The
check reads the six sources once per process (about 150 KB, hashed in about a
millisecond), only when compiled modules are there.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

__all__ = ["C_EXTENSIONS", "HOT", "EnvelopeSpeedupsWarning", "loaded"]

#: The modules ``setup.py`` compiles (its ``HOT``; a test compares the two).
HOT: Final = (
    "_sse",
    "_decoder",
    "_reconstruct",
    "_xml_tokens",
    "_xml_scan",
    "_xml_streamed",
    "_xml_translate",
    "_xml_migrate",
    "_chunker",
    "_encoder",
)
#: Hand-written C extensions (``setup.py``'s ``C_EXTENSIONS``), loaded with the hot modules,
#: all or none: ``_cescape``, ``_cread`` and ``_cvalid`` (``<name>.c`` beside them; no ``.py``: in
#: the pure build the Python code they stand in for runs instead, see ``_chunker.fused_lines``,
#: ``Reconstructor._feed_run`` and ``Validator._run``).
C_EXTENSIONS: Final = ("_cescape", "_cread", "_cvalid")
_HERE: Final = Path(__file__).resolve().parent
_MANIFEST: Final = _HERE / "_speedups.json"

Mode = Literal["compiled", "pure"]


class EnvelopeSpeedupsWarning(UserWarning):
    """The compiled modules are there but were built from other sources: pure Python runs."""


class _PureFinder:
    """Finds each hot module as its ``.py`` source, ahead of the ``.so`` beside it."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        """The source file's spec for a hot module of this package; ``None`` for any other."""
        del path, target
        package, _, name = fullname.rpartition(".")
        if package != __package__ or name not in HOT:
            return None
        source = _HERE / f"{name}.py"
        loader = importlib.machinery.SourceFileLoader(fullname, str(source))
        return importlib.util.spec_from_file_location(fullname, source, loader=loader)


def _compiled_present() -> bool:
    """Whether a compiled module of each hot module sits in the package."""
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    return all(any((_HERE / f"{name}{suffix}").exists() for suffix in suffixes) for name in HOT)


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _stale() -> list[str]:
    """The hot modules and C extensions whose source is not the one they were built from.

    A C extension whose compiled module is missing counts as stale too: the build is all
    or none.
    """
    try:
        built = json.loads(_MANIFEST.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return [*HOT, *C_EXTENSIONS]
    stale = [name for name in HOT if built.get(name) != _digest(_HERE / f"{name}.py")]
    suffixes = importlib.machinery.EXTENSION_SUFFIXES
    for name in C_EXTENSIONS:
        present = any((_HERE / f"{name}{suffix}").exists() for suffix in suffixes)
        if not present or built.get(name) != _digest(_HERE / f"{name}.c"):
            stale.append(name)
    return stale


def _choose() -> Mode:
    if os.environ.get("ENVELOPE_PURE") == "1" or not _compiled_present():
        return "pure"
    stale = _stale()
    if not stale:
        return "compiled"
    warnings.warn(
        f"envelope: the compiled modules are stale ({', '.join(stale)} changed since they were built);"
        " running the pure-Python sources. Rebuild with `pip install -e .`, or set ENVELOPE_PURE=1.",
        EnvelopeSpeedupsWarning,
        stacklevel=2,
    )
    return "pure"


_MODE: Final[Mode] = _choose()
if _MODE == "pure" and not any(isinstance(f, _PureFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _PureFinder())


def loaded() -> Mode:
    """``"compiled"`` when the hot modules run compiled by mypyc, else ``"pure"`` (their sources)."""
    return _MODE
