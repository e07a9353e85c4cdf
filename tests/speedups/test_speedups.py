"""The compiled (mypyc) and pure-Python builds of the hot modules: which one loads, and when.

``scripts/test`` runs the whole suite on the build ``pip install -e .`` made (compiled
where a C compiler works) and the codec suites again with ``ENVELOPE_PURE=1``. These
tests pin the switch itself: the mode each module's file shows, ``ENVELOPE_PURE=1``, a
stale build, the pure wheel built without a compiler, and the things mypyc changes about
a class (annotations msgspec reads, ABC caches, pickling), which decided what is compiled.
"""

from __future__ import annotations

import ast
import collections.abc
import copy
import importlib.machinery
import os
import pickle
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import msgspec

import envelope
from envelope import _speedups
from envelope._structs import _LineBatch

ROOT = Path(__file__).resolve().parent.parent.parent
SRC = ROOT / "src" / "envelope"


def _run(code: str, *, env: dict[str, str] | None = None, path: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter; ``path`` first on ``sys.path``; ``env`` added to ours."""
    full = dict(os.environ)
    full.pop("ENVELOPE_PURE", None)
    full.update(env or {})
    if path is not None:
        full["PYTHONPATH"] = str(path)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, check=False)


def test_each_hot_module_is_the_build_the_mode_names() -> None:
    """``loaded()`` says compiled iff every hot module was loaded from an extension module."""
    suffix = ".py" if _speedups.loaded() == "pure" else ".so"
    for name in _speedups.HOT:
        module = sys.modules[f"envelope.{name}"]
        assert module.__file__ is not None
        assert module.__file__.endswith(suffix), (name, module.__file__, _speedups.loaded())


def test_the_mode_is_the_one_this_run_asked_for() -> None:
    """``ENVELOPE_PURE=1`` gives pure; CI (``ENVELOPE_REQUIRE_COMPILED=1``) must run compiled."""
    if os.environ.get("ENVELOPE_PURE") == "1":
        assert _speedups.loaded() == "pure"
    elif os.environ.get("ENVELOPE_REQUIRE_COMPILED") == "1":
        assert _speedups.loaded() == "compiled"
    else:  # a machine without a compiler builds pure; with one, the editable install compiles
        assert _speedups.loaded() == ("compiled" if _speedups._compiled_present() else "pure")


def test_envelope_pure_loads_every_hot_module_from_its_source() -> None:
    code = (
        "import sys, envelope\nfrom envelope import _speedups\n"
        "print(_speedups.loaded(), *(sys.modules['envelope.' + n].__file__ for n in _speedups.HOT))"
    )
    done = _run(code, env={"ENVELOPE_PURE": "1"})
    assert done.returncode == 0, done.stderr
    mode, *files = done.stdout.split()
    assert mode == "pure"
    assert [Path(f).name for f in files] == [f"{n}.py" for n in _speedups.HOT]
    assert (
        "envelope_speedups__mypyc"
        not in _run("import sys, envelope; print(*sys.modules)", env={"ENVELOPE_PURE": "1"}).stdout
    )


def test_setup_py_compiles_the_modules_the_loader_switches() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text())
    hot = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "HOT" for t in node.targets)
    )
    assert ast.literal_eval(hot) == _speedups.HOT


def _copy_package(to: Path) -> Path:
    """The package's sources (no build output) under ``to``; returns the package folder."""
    shutil.copytree(SRC, to / "envelope", ignore=shutil.ignore_patterns("*.so", "_speedups.json", "__pycache__"))
    return to / "envelope"


def test_a_stale_build_warns_and_runs_the_sources(tmp_path: Path) -> None:
    """An edited source with an old ``.so`` beside it: a warning, and the source runs, not the ``.so``.

    The ``.so`` files here are not loadable at all, so importing one would fail: the import
    succeeding proves that none was tried.
    """
    package = _copy_package(tmp_path)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for name in _speedups.HOT:
        (package / f"{name}{suffix}").write_bytes(b"not a shared object")
    hashes = {name: "0" * 64 for name in _speedups.HOT}  # built from other sources
    (package / "_speedups.json").write_text(msgspec.json.encode(hashes).decode())
    code = "import envelope, envelope._xml_migrate; from envelope import _speedups; print(_speedups.loaded())"
    done = _run(code, path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pure"]
    assert "EnvelopeSpeedupsWarning" in done.stderr
    assert "compiled modules are stale" in done.stderr
    assert "_sse" in done.stderr


def test_no_manifest_is_stale_too(tmp_path: Path) -> None:
    package = _copy_package(tmp_path)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for name in _speedups.HOT:
        (package / f"{name}{suffix}").write_bytes(b"not a shared object")
    done = _run("import envelope; from envelope import _speedups; print(_speedups.loaded())", path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pure"]
    assert "stale" in done.stderr


def test_a_wheel_built_without_a_compiler_is_pure_and_imports(tmp_path: Path) -> None:
    """``CC=false``: setup.py's probe fails, the wheel is ``py3-none-any``, and it imports as pure.

    Built offline from a copy of the sources (``--no-build-isolation``: the dev extra
    brings setuptools, and mypy and msgspec are there), installed with ``--target``.
    """
    source = tmp_path / "src-tree"
    for name in ("pyproject.toml", "setup.py", "README.md", "LICENSE"):
        source.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src",
        source / "src",
        ignore=shutil.ignore_patterns("*.so", "_speedups.json", "__pycache__", "*.egg-info"),
    )
    env = {**os.environ, "CC": "false", "PIP_NO_INDEX": "1"}
    env.pop("ENVELOPE_REQUIRE_COMPILED", None)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = subprocess.run(
        [*pip, "wheel", "--no-build-isolation", "--no-deps", "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "envelope/_decoder.py" in names
    assert not [n for n in names if n.endswith(".so") or n.endswith("_speedups.json")]
    target = tmp_path / "site"
    done = subprocess.run([*pip, "install", "--no-deps", "--target", str(target), str(wheel)], env=env, check=False)
    assert done.returncode == 0
    code = "import envelope; from envelope import _speedups; print(_speedups.loaded(), envelope.__file__)"
    ran = _run(code, path=target)
    assert ran.returncode == 0, ran.stderr
    mode, where = ran.stdout.split()
    assert mode == "pure"
    assert Path(where).is_relative_to(target)


def test_no_msgspec_struct_or_abc_subclass_is_compiled() -> None:
    """mypyc replaces a union annotation with ``type`` (msgspec then expects a type object),
    and a compiled subclass of an ABC shares the ABC's instance cache: such classes live in
    ``_structs`` (never compiled)."""
    for name in _speedups.HOT:
        module = sys.modules[f"envelope.{name}"]
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == module.__name__:
                assert not issubclass(value, msgspec.Struct), value
                assert not issubclass(value, collections.abc.Sized), value


def test_an_isinstance_on_the_line_batch_leaves_sequence_alone() -> None:
    """Found when ``_LineBatch`` was compiled: after this, ``isinstance([], Sequence)`` was False."""
    assert not isinstance([], _LineBatch)
    assert isinstance([], collections.abc.Sequence)
    assert not isinstance((), _LineBatch)
    assert isinstance((), collections.abc.Sequence)


def test_the_reading_structs_decode_their_unions() -> None:
    """The lenient form reads ``id`` as the ``str | Unset`` its annotation names (compiled: ``type``)."""
    wire = envelope._decoder.decode_lenient(b'{"type":"text","agent":"a","final":true,"delta":"","id":"x"}')
    assert wire.id == "x"


def test_values_a_user_keeps_pickle_and_copy() -> None:
    """Transcripts, blocks, warnings, errors and eras round-trip through pickle and copy (both builds)."""
    transcript = envelope.reconstruct(
        [
            b'{"type":"text","agent":"a","final":true,"delta":"hi"}',
            b'{"type":"tool_call","agent":"a","final":true,"delta":"{}","id":"t","name":"n"}',
        ]
    )
    warnings: list[envelope.MigrationWarning] = []
    migrator = envelope.XmlMigrator(agent="a", on_warning=warnings.append)
    migrator.feed((ROOT / "fixtures" / "corpus" / "legacy_xml_sse_capture.txt").read_bytes())
    migrator.close()
    assert warnings
    values: list[object] = [transcript, transcript.agents["a"][0], envelope.Position(line=3, offset=9)]
    values += [envelope.DecodeError("bad", position=envelope.Position(line=1)), *warnings]
    # what the (compiled) emitter takes and reports: kept in _emit_structs, never compiled
    values += [
        envelope.OversizeLine(type="text", agent="a", size=9, max_bytes=8, reason="r"),
        envelope.ImageRef(src="data:,", media_type="image/png"),
        envelope.CitationData(cited_text="c", citation_type="char_location", start_char_index=1),
    ]
    for value in values:
        for again in (pickle.loads(pickle.dumps(value)), copy.copy(value), copy.deepcopy(value)):
            assert type(again) is type(value)
            assert repr(again) == repr(value)


def test_compiled_and_pure_give_the_same_bytes_on_every_input() -> None:
    """Every stream and legacy input we have, cut three ways, through both builds (``outputs.py``).

    On a machine without a compiler both runs are pure and this compares a build with
    itself; CI requires the compiled build (``test_the_mode_is_the_one_this_run_asked_for``).
    """
    script = str(Path(__file__).with_name("outputs.py"))
    runs = {}
    for pure in ("0", "1"):
        full = {**os.environ, "ENVELOPE_PURE": pure}
        done = subprocess.run([sys.executable, script], capture_output=True, text=True, env=full, check=False)
        assert done.returncode == 0, done.stderr
        runs[pure] = msgspec.json.decode(done.stdout)
    assert len(runs["1"]) > 1000
    assert runs["0"] == runs["1"]
