"""Build script: compile the codec's hot modules with mypyc when a C compiler works.

Everything else about the project is in ``pyproject.toml``; this file only adds the
compiled modules (issue 17 §3: the read and migrate speed targets).

What it does:

* ``HOT`` (below) lists the modules mypyc compiles, all or none. Each compiled module
  is a ``.so`` beside its ``.py``; the ``.py`` stays the reference (``ENVELOPE_PURE=1``
  makes ``import envelope`` load it instead, see ``src/envelope/_speedups.py``).
* No compiler, no Python headers, no mypyc, or ``ENVELOPE_PURE=1`` at build time: no
  extension is declared, and the wheel is pure Python (``py3-none-any``). The probe
  compiles a one-line C file that includes ``Python.h`` with ``$CC`` (or Python's own
  compiler), so ``CC=false pip wheel .`` builds the pure wheel.
  ``ENVELOPE_REQUIRE_COMPILED=1`` (CI) turns a failed probe or compile into an error.
* ``C_EXTENSIONS`` (below) are hand-written C extensions (``src/envelope/<name>.c``),
  built with the mypyc group and loaded with it, all or none; they have no ``.py`` of their
  own, the pure path calls the Python code they stand in for.
* The probe passes but a module fails to compile: the build goes on, pure Python (or
  fails, with ``ENVELOPE_REQUIRE_COMPILED=1``).
* Next to the compiled modules it writes ``_speedups.json``: the SHA-256 of each ``.py``
  and ``.c`` source it compiled. ``envelope._speedups`` compares it with the ``.py`` files at import.

Stale builds. An editable install (``pip install -e .``, what ``scripts/test`` runs)
puts the ``.so`` files *in the source tree*, beside the ``.py`` files (setuptools runs
``build_ext --inplace`` for editable wheels), and Python's importer prefers an extension
module to a source file. So after an edit to a hot module, the old ``.so`` would run
instead of the edited source. Two guards: ``scripts/test`` reinstalls (and so
recompiles) at each run; and ``import envelope`` compares each hot source with the hash
recorded at build time, and on any difference loads every hot module from its ``.py``
and warns (``EnvelopeSpeedupsWarning``) that the compiled modules are stale: never a
silent shadow. Rebuild with ``pip install -e .``, or delete ``src/envelope/*.so``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, ExecError, PlatformError

ROOT = Path(__file__).resolve().parent
#: The modules compiled together (one mypyc group): the read path and the migrator.
HOT = (
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
#: Hand-written C extensions built beside the mypyc group, all or none with it: each is
#: ``src/envelope/<name>.c``. ``_cescape`` escapes a payload straight into its lines (issue 31);
#: ``_cread`` appends the continuation lines of open blocks on the read path (issue 43);
#: ``_cvalid`` checks and counts the validator's ordinary line (issue 43, spec VF1).
C_EXTENSIONS = ("_cescape", "_cread", "_cvalid")
MANIFEST = "_speedups.json"


def _say(message: str) -> None:
    print(f"envelope setup.py: {message}", file=sys.stderr)


def _required() -> bool:
    return os.environ.get("ENVELOPE_REQUIRE_COMPILED") == "1"


def _compiler_works() -> bool:
    """Whether ``$CC`` (or Python's compiler) compiles a file that includes ``Python.h``."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    include = sysconfig.get_paths()["include"]
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp, "probe.c")
        source.write_text("#include <Python.h>\nint envelope_probe(void) { return 0; }\n", encoding="ascii")
        try:
            done = subprocess.run(
                [*cc, f"-I{include}", "-c", str(source), "-o", str(Path(tmp, "probe.o"))],
                capture_output=True,
                check=False,
            )
        except OSError:
            return False
    return done.returncode == 0


def _ext_modules() -> list[Any]:
    """The compiled modules, or ``[]`` for a pure-Python build (with the reason said)."""
    if os.environ.get("ENVELOPE_PURE") == "1":
        _say("ENVELOPE_PURE=1: pure-Python build")
        return []
    reason = None
    try:
        from mypyc.build import mypycify
    except ImportError:
        reason = "mypyc is not installed"
    if reason is None and not _compiler_works():
        reason = "no working C compiler with Python headers"
    if reason is not None:
        if _required():
            raise SystemExit(f"envelope setup.py: ENVELOPE_REQUIRE_COMPILED=1 but {reason}")
        _say(f"{reason}: pure-Python build")
        return []
    paths = [f"src/envelope/{name}.py" for name in HOT]
    hand_written = [Extension(f"envelope.{name}", [f"src/envelope/{name}.c"]) for name in C_EXTENSIONS]
    try:
        # The C extensions first: one that does not compile fails the build before mypyc's
        # (BuildExt.run), so a pure build leaves no half of a compiled one behind.
        return [*hand_written, *mypycify(paths, opt_level="3", group_name="envelope_speedups")]
    except (Exception, SystemExit) as exc:  # mypyc reports type errors by SystemExit
        if _required():
            raise
        _say(f"mypyc failed ({exc}): pure-Python build")
        return []


class BuildExt(build_ext):
    """``build_ext`` that records, beside the compiled modules, the hash of each source."""

    def run(self) -> None:
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError) as exc:
            if _required():
                raise
            # The probe passed but a module did not compile: pure, as when the probe fails.
            # No manifest is written: a compiled module already there from an earlier
            # build is then stale, and `import envelope` says so and runs the sources.
            _say(f"compiling failed ({exc}): pure-Python build")
            return
        if not self.extensions:
            return
        source = ROOT / "src" / "envelope"
        hashes = {name: hashlib.sha256((source / f"{name}.py").read_bytes()).hexdigest() for name in HOT}
        hashes.update({name: hashlib.sha256((source / f"{name}.c").read_bytes()).hexdigest() for name in C_EXTENSIONS})
        out = Path(self.get_ext_fullpath("envelope._sse")).parent  # in place or in build/lib
        (out / MANIFEST).write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n", encoding="ascii")


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": BuildExt})
