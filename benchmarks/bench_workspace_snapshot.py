"""Benchmark: the per-step workspace snapshot (spec agent-ref [WU1-b]) on a 10,000-file tree.

Owns: timing, in one ``group``, a plain tree walk (``os.walk`` and an ``lstat`` of each
entry: the least any snapshot must do), ``cp -r`` of the tree (copying everything each
step), the first snapshot (an empty cache: every file read, hashed and kept), a step's
snapshot of an unchanged tree (the stat shortcut: no file read) and of a tree where 10
files changed. Compare the means: the unchanged step near the walk, far under ``cp -r``,
is what makes a snapshot per step affordable. Not a test: no assertion on time.

Run: ``PYTHONPATH=src python -m pytest benchmarks/bench_workspace_snapshot.py --benchmark-only``
or ``PYTHONPATH=src python -m benchmarks.bench_workspace_snapshot`` (the ratios printed).
The tree has 10,000 files (100 directories of 100, 200 bytes each) at the default
``--bench-size-mb``; fewer below 10 (the smoke run's tiny inputs).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from agent_ref.tools.workspace_history import BlobCache, Manifest, scan

if TYPE_CHECKING:
    from collections.abc import Callable

    from pytest_benchmark.fixture import BenchmarkFixture

FILES = 10_000
PER_DIR = 100


def make_tree(root: Path, files: int) -> None:
    """``files`` files of 200 bytes, ``PER_DIR`` to a directory."""
    for i in range(files):
        d = root / f"d{i // PER_DIR:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:05d}.txt").write_bytes(f"{i:08d}".encode() * 25)


def plain_walk(root: Path) -> int:
    """Every entry listed and ``lstat``-ed: the floor of any snapshot."""
    n = 0
    for here, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            os.lstat(os.path.join(here, name))
            n += 1
    return n


def copy_tree(root: Path, into: Path) -> None:
    """``cp -r`` of the tree (removed first): a full copy per step."""
    shutil.rmtree(into, ignore_errors=True)
    subprocess.run(["cp", "-r", str(root), str(into)], check=True)


def touch_ten(root: Path, round_: int) -> None:
    """Ten files changed (new bytes, same size)."""
    for i in range(10):
        (root / "d000" / f"f{i:05d}.txt").write_bytes(f"{round_:08d}".encode() * 25)


def changed_step(root: Path, blobs: BlobCache, manifest: Manifest, round_: int) -> Manifest:
    """A step's snapshot after ten files changed."""
    touch_ten(root, round_)
    return scan(str(root), blobs, manifest)


@pytest.fixture(scope="module")
def tree_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    size_mb: float = request.config.getoption("--bench-size-mb")
    root = tmp_path_factory.mktemp("workspace")
    make_tree(root, FILES if size_mb >= 10 else max(PER_DIR, int(size_mb * FILES)))
    return root


@pytest.fixture
def warm(tree_root: Path, tmp_path: Path) -> tuple[BlobCache, Manifest]:
    blobs = BlobCache(str(tmp_path / "cache"))
    return blobs, scan(str(tree_root), blobs, {})


def test_walk(benchmark: BenchmarkFixture, tree_root: Path) -> None:
    benchmark.group = "workspace-snapshot"
    assert benchmark(plain_walk, tree_root) > 0


def test_cp_r(benchmark: BenchmarkFixture, tree_root: Path, tmp_path: Path) -> None:
    benchmark.group = "workspace-snapshot"
    benchmark(copy_tree, tree_root, tmp_path / "copy")


def test_first_snapshot(benchmark: BenchmarkFixture, tree_root: Path, tmp_path: Path) -> None:
    benchmark.group = "workspace-snapshot"
    caches = iter(range(1_000_000))
    benchmark(lambda: scan(str(tree_root), BlobCache(str(tmp_path / f"c{next(caches)}")), {}))


def test_step_unchanged(benchmark: BenchmarkFixture, tree_root: Path, warm: tuple[BlobCache, Manifest]) -> None:
    benchmark.group = "workspace-snapshot"
    blobs, manifest = warm
    assert benchmark(scan, str(tree_root), blobs, manifest) == manifest


def test_step_ten_changed(benchmark: BenchmarkFixture, tree_root: Path, warm: tuple[BlobCache, Manifest]) -> None:
    benchmark.group = "workspace-snapshot"
    blobs, manifest = warm
    rounds = iter(range(1_000_000))
    benchmark(lambda: changed_step(tree_root, blobs, manifest, next(rounds)))


def _median_ms(fn: Callable[[], object], rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def measure(files: int = FILES) -> int:
    """Print each measurement's median (ms) and its ratio to the walk and to ``cp -r``."""
    with tempfile.TemporaryDirectory() as tmp:
        root, cache = Path(tmp, "ws"), Path(tmp, "cache")
        make_tree(root, files)
        blobs = BlobCache(str(cache))
        manifest = scan(str(root), blobs, {})
        counter = iter(range(1_000_000))
        results = {
            "plain walk (os.walk + lstat)": _median_ms(lambda: plain_walk(root)),
            "cp -r": _median_ms(lambda: copy_tree(root, Path(tmp, "copy"))),
            "first snapshot (empty cache)": _median_ms(
                lambda: scan(str(root), BlobCache(str(Path(tmp, f"c{next(counter)}"))), {})
            ),
            "step snapshot, unchanged": _median_ms(lambda: scan(str(root), blobs, manifest)),
            "step snapshot, 10 files changed": _median_ms(lambda: changed_step(root, blobs, manifest, next(counter))),
        }
    walk, cp = results["plain walk (os.walk + lstat)"], results["cp -r"]
    print(f"{files:,} files; median of 5 (ms), ratio to the walk and to cp -r")
    for name, ms in results.items():
        print(f"  {name:34} {ms:9.1f}  {ms / walk:5.2f}x walk  {ms / cp:5.2f}x cp -r")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.bench_workspace_snapshot [--files N]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_workspace_snapshot",
        description="What a workspace snapshot per step costs, against a plain walk and cp -r, in one run.",
    )
    parser.add_argument("--files", type=int, default=FILES, help=f"files in the tree (default {FILES:,})")
    return measure(parser.parse_args(argv).files)


if __name__ == "__main__":
    sys.exit(main())
