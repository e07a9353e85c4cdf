"""Options and shared inputs of the benchmark suites.

``--bench-size-mb N`` sets the read stream (default 100 MiB, the issue's size); the
other inputs keep their issue sizes (20- and 200-byte deltas, 100 KiB and 10 MiB
payloads) and shrink only below 10 MiB, so the smoke test can run every benchmark once
on tiny inputs with ``--bench-size-mb 0.02 --benchmark-disable``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from benchmarks.data import Sizes, write_sse

if TYPE_CHECKING:
    from pathlib import Path


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """Collect ``bench_*.py`` here (the project's ``python_files`` is for ``tests/``)."""
    if file_path.suffix == ".py" and file_path.name.startswith("bench_"):
        module: pytest.Module = pytest.Module.from_parent(parent, path=file_path)
        return module
    return None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--bench-size-mb",
        type=float,
        default=100.0,
        help="size of the read stream in MiB (default 100); below 10 the emit inputs shrink too",
    )


@pytest.fixture(scope="session")
def sizes(request: pytest.FixtureRequest) -> Sizes:
    """The input sizes for this run."""
    size_mb: float = request.config.getoption("--bench-size-mb")
    return Sizes.from_mb(size_mb)


@pytest.fixture(scope="session")
def sse_file(sizes: Sizes, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 4-agent SSE stream written to a file once, never held in memory whole."""
    path = tmp_path_factory.mktemp("bench") / "stream.sse"
    with path.open("wb") as out:
        write_sse(out, sizes.read_bytes)
    return path
