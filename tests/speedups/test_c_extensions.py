"""The hand-written C extensions (``_cescape``) in the build: declared, shipped, all or none.

``setup.py`` builds ``C_EXTENSIONS`` beside the mypyc group and records their ``.c``
sources' hashes in ``_speedups.json``; ``_speedups`` loads the compiled build only when
every one of them is there and built from the ``.c`` beside it. The sdist carries the
``.c`` source and the ``.pyi`` stub, so a build from it compiles the same extension.
"""

from __future__ import annotations

import ast
import importlib.machinery
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import msgspec

from envelope import _speedups
from source_tree import copy_source_tree

ROOT = Path(__file__).resolve().parent.parent.parent
SRC = ROOT / "src" / "envelope"


def _setup_constant(name: str) -> object:
    tree = ast.parse((ROOT / "setup.py").read_text())
    node = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    )
    return ast.literal_eval(node)


def test_setup_py_builds_the_c_extensions_the_loader_requires() -> None:
    assert _setup_constant("C_EXTENSIONS") == _speedups.C_EXTENSIONS == ("_cescape", "_cread", "_cvalid")
    for name in _speedups.C_EXTENSIONS:
        assert (SRC / f"{name}.c").is_file()
        assert (SRC / f"{name}.pyi").is_file()


def test_the_compiled_build_records_the_c_source_it_was_built_from() -> None:
    if _speedups.loaded() != "compiled":
        assert os.environ.get("ENVELOPE_PURE") == "1" or not _speedups._compiled_present()
        return
    import hashlib

    built = msgspec.json.decode((SRC / "_speedups.json").read_bytes())
    for name in _speedups.C_EXTENSIONS:
        assert built[name] == hashlib.sha256((SRC / f"{name}.c").read_bytes()).hexdigest()


def _fake_build(package: Path, *, with_c: bool, c_hash: str | None = None) -> None:
    """Unloadable ``.so`` files and a manifest that matches every source (``c_hash`` aside)."""
    import hashlib

    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    names = [*_speedups.HOT, *(_speedups.C_EXTENSIONS if with_c else ())]
    for name in names:
        (package / f"{name}{suffix}").write_bytes(b"not a shared object")
    hashes = {name: hashlib.sha256((package / f"{name}.py").read_bytes()).hexdigest() for name in _speedups.HOT}
    for name in _speedups.C_EXTENSIONS:
        hashes[name] = c_hash or hashlib.sha256((package / f"{name}.c").read_bytes()).hexdigest()
    (package / "_speedups.json").write_text(msgspec.json.encode(hashes).decode())


def _mode(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("ENVELOPE_PURE", None)
    code = (
        "import envelope; from envelope import _speedups, _chunker; print(_speedups.loaded(), _chunker._escape_lines)"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)


def _copy_package(to: Path) -> Path:
    shutil.copytree(SRC, to / "envelope", ignore=shutil.ignore_patterns("*.so", "_speedups.json", "__pycache__"))
    return to / "envelope"


def test_a_missing_c_extension_makes_the_build_stale_and_pure(tmp_path: Path) -> None:
    """Hot modules compiled but no C extension: a warning naming each, and the pure sources run.

    The fake ``.so`` files are not loadable, so the import succeeding proves none was tried.
    """
    _fake_build(_copy_package(tmp_path), with_c=False)
    done = _mode(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pure", "None"]
    assert "compiled modules are stale (_cescape, _cread, _cvalid changed" in done.stderr


def test_an_edited_c_source_makes_the_build_stale_and_pure(tmp_path: Path) -> None:
    _fake_build(_copy_package(tmp_path), with_c=True, c_hash="0" * 64)
    done = _mode(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pure", "None"]
    assert "EnvelopeSpeedupsWarning" in done.stderr
    assert "(_cescape, _cread, _cvalid changed" in done.stderr


def test_the_sdist_carries_the_c_source_and_its_stub(tmp_path: Path) -> None:
    """Built offline from a copy of the sources with setuptools' own backend (no compile)."""
    source = copy_source_tree(tmp_path / "src-tree")
    code = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    env = {**os.environ, "ENVELOPE_PURE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "dist")],
        cwd=source,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    name = done.stdout.split()[-1]
    with tarfile.open(tmp_path / "dist" / name) as sdist:
        members = {m.split("/", 1)[1] for m in sdist.getnames() if "/" in m}
    for ext in _speedups.C_EXTENSIONS:
        assert f"src/envelope/{ext}.c" in members, sorted(members)
        assert f"src/envelope/{ext}.pyi" in members
    assert "setup.py" in members


def test_a_c_extension_that_does_not_compile_gives_a_pure_build_or_an_error_when_required(tmp_path: Path) -> None:
    """The probe passes but ``_cescape.c`` fails: pure (no module built), or, required, a failed build.

    The C extensions are built first, so mypyc's modules are never compiled here (seconds).
    """
    source = copy_source_tree(tmp_path / "src-tree")
    broken = source / "src" / "envelope" / "_cescape.c"
    broken.write_text("#error deliberately broken\n" + broken.read_text())
    runs = {}
    for required in ("0", "1"):
        env = {**os.environ, "ENVELOPE_REQUIRE_COMPILED": required}
        env.pop("ENVELOPE_PURE", None)
        out = tmp_path / f"out{required}"
        runs[required] = subprocess.run(
            [sys.executable, "setup.py", "-q", "build_ext", "-b", str(out), "-t", str(tmp_path / f"tmp{required}")],
            cwd=source,
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert not (out.exists() and list(out.rglob("*.so")))
    assert runs["0"].returncode == 0, runs["0"].stderr
    assert "envelope setup.py: compiling failed" in runs["0"].stderr
    assert "pure-Python build" in runs["0"].stderr
    assert runs["1"].returncode != 0
    assert "deliberately broken" in runs["1"].stderr
